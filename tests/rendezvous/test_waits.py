"""rendezvous/waits.py: a wait says what it waits for once it outlasts a healthy one, then once per interval, from a
pacing thread (the waiting thread may block in one store request); nothing runs without an observer that hears."""

from __future__ import annotations

import threading
import time

from ncclcheck.preflight.probe import probe_master_said
from ncclcheck.rendezvous.budget import Budget
from ncclcheck.rendezvous.waits import SILENT, Waits
from tests.conftest import free_port

FAST = Budget(wait_notice_s=0.2, wait_notice_every_s=0.3)


class Heard:
    def __init__(self) -> None:
        self.events: list = []
        self.lock = threading.Lock()

    def wait(self, event: dict) -> None:
        with self.lock:
            self.events.append((time.monotonic(), event))


def _pacers() -> list:
    return [t for t in threading.enumerate() if t.name == "ncclcheck-waits"]


def test_without_an_observer_that_hears_nothing_runs():
    for observer in (None, object()):
        waits = Waits(observer, FAST)
        assert not waits.heard and waits.wait("join", FAST.deadline(5)) is SILENT
        waits.close()
    assert not _pacers()


def test_a_healthy_wait_says_nothing_and_a_long_one_says_it_once_per_interval():
    heard = Heard()
    waits = Waits(heard, FAST, node_rank=1, host="b")
    try:
        with waits.wait("master", FAST.deadline(5), addr="10.0.0.1", port=29500):
            time.sleep(0.05)  # shorter than the quiet time: a healthy wait
        time.sleep(0.4)
        assert heard.events == []
        t0 = time.monotonic()
        with waits.wait("join", FAST.deadline(5), nnodes=2) as w:
            time.sleep(0.35)
            w.seen(joined=1)
            time.sleep(0.6)
        ended = time.monotonic()
        time.sleep(0.4)
    finally:
        waits.close()
    times = [t - t0 for t, _ in heard.events]
    events = [e for _, e in heard.events]
    assert times and times[0] >= 0.15, times  # not before the quiet time
    assert all(e["waited_s"] <= ended - t0 for e in events), events  # nothing made once the wait ended
    assert all(b["waited_s"] - a["waited_s"] >= 0.25 for a, b in zip(events, events[1:])), events  # one per interval
    assert 2 <= len(events) <= 4, events
    first = events[0]
    assert first["wait"] == "join" and first["node_rank"] == 1 and first["host"] == "b" and first["nnodes"] == 2
    assert first["again"] is False and first["changed"] is True and 0 < first["waited_s"] < first["bound_s"]
    assert events[1]["again"] is True and events[1]["changed"] is True and events[1]["joined"] == 1  # what changed
    if len(events) > 2:
        assert events[2]["changed"] is False  # nothing new: "still"
    assert not _pacers()  # close() ended the pacing thread: nothing stays behind (guard() leaves no thread)


def test_a_fault_the_first_try_proves_is_said_at_once():
    heard = Heard()
    waits = Waits(heard, Budget(wait_notice_s=30.0, wait_notice_every_s=30.0))
    try:
        t0 = time.monotonic()
        with waits.wait("master", FAST.deadline(10), addr="x", port=1) as w:
            w.seen(True, status="unresolvable", tries=1)
            while not heard.events and time.monotonic() - t0 < 10:
                time.sleep(0.02)
    finally:
        waits.close()
    assert len(heard.events) == 1 and heard.events[0][0] - t0 < 5.0, heard.events  # not after the 30 s quiet time
    assert heard.events[0][1]["status"] == "unresolvable"


def test_nothing_is_said_of_a_wait_past_its_bound():
    """Past its bound a wait is ending and its report names what it waited for: no "still waiting" after it."""
    heard = Heard()
    waits = Waits(heard, Budget(wait_notice_s=0.1, wait_notice_every_s=0.1))
    try:
        with waits.wait("join", FAST.deadline(0.5)):
            time.sleep(1.2)
    finally:
        waits.close()
    assert heard.events and all(e["waited_s"] <= e["bound_s"] for _, e in heard.events), heard.events


def test_what_a_wait_has_seen_is_read_when_it_is_said_and_a_broken_reader_stops_nothing():
    heard = Heard()
    ranks: set = {0}
    waits = Waits(heard, FAST)
    try:
        with waits.wait("join", FAST.deadline(5), facts=lambda: {"joined": len(ranks)}):
            time.sleep(0.3)
            ranks.add(1)
            time.sleep(0.35)
        with waits.wait("mesh", FAST.deadline(5), facts=lambda: 1 / 0):
            time.sleep(0.3)
    finally:
        waits.close()
    joined = [e["joined"] for _, e in heard.events if e["wait"] == "join"]
    assert joined[:2] == [1, 2], heard.events
    assert [e for _, e in heard.events if e["wait"] == "mesh"], heard.events  # said without what it could not read


def test_the_master_probe_says_each_refused_try_while_it_retries():

    port = free_port()
    heard = Heard()
    waits = Waits(heard, Budget(wait_notice_s=0.2, wait_notice_every_s=5.0, probe_retry_s=0.05))
    try:
        pr = probe_master_said("127.0.0.1", port, FAST.deadline(1.5), waits.budget, waits)
    finally:
        waits.close()
    assert pr.status == "refused"
    (_, e), = heard.events
    assert e["wait"] == "master" and e["status"] == "refused" and e["tries"] >= 2 and e["port"] == port, e
