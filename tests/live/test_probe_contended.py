"""A stranger without the job's token floods one healthy host's responder while watch probes the links of a
token-protected job: each request is refused before any work, but the refusals, the connections parked and the
kernel's part of them share that host's cores with the probe's transfers (on the lab a healthy host flooded so lost
half its probe rate in two rounds of four: one round from a false "slow host"). A transfer an end of which turned a
stranger away while it ran is not its link's rate: the probe leaves it out, says it unmeasured with why, and keeps
its bound (live/pace.contended, live/straggle._measure)."""

from __future__ import annotations

import threading
import time

import pytest

from ncclcheck.live import pace, straggle
from ncclcheck.live.auth import Session
from ncclcheck.live.fetch import Asker, read_registry
from ncclcheck.rendezvous.budget import FIXED
from ncclcheck.rendezvous.store import Guard, JsonStore
from ncclcheck_lab import livesim
from ncclcheck_lab.loopstore import loopback_store
from ncclcheck_lab.slowsim import Job
from ncclcheck_lab.trust_round5 import flood_responder
from tests.conftest import free_port

pytestmark = pytest.mark.slow  # six simulated responders, a probe of up to six rounds

TOKEN = b"the-jobs-own-token"


@pytest.fixture
def store():
    port = free_port()
    st = loopback_store(port)
    yield port, st
    del st


def _probe(store: tuple, flood: bool) -> tuple:
    store, server = store
    job = Job(world=6, per_host=2, steps=300, step_us=1_000_000.0)
    rs = livesim.start(livesim.laid(job, 40), list(range(6)), store, token=TOKEN)
    stop, sent = threading.Event(), [0]
    try:
        assert all(r.registered.wait(30) for r in rs)
        # the registry read through the test's own server store: a second client's connect timed out once in CI's
        # two lanes (the responders had registered through theirs)
        reg = read_registry(JsonStore(server, guard=Guard(token=TOKEN)))
        h2 = reg.records[2]  # host h2's first rank: it probes and serves h2's transfers
        assert h2["host"] == "h2"
        threads = [threading.Thread(target=flood_responder, args=(h2["addr"], h2["port"], stop, sent), daemon=True)
                   for _ in range(4 if flood else 0)]
        for t in threads:
            t.start()
        time.sleep(0.3 if flood else 0)
        asker = Asker(Session("token", TOKEN, store, FIXED), reg.job, reg.run)
        t0 = time.monotonic()
        out = straggle.probe([0, 2, 4], set(), reg.records, asker, FIXED)
        took = time.monotonic() - t0
        stop.set()
        for t in threads:
            t.join(5)
        return out, took, sent[0], rs[2].loop.quiet_s()
    finally:
        stop.set()
        for r in rs:
            r.close()


def test_a_host_a_stranger_floods_is_left_out_of_the_probe_never_named(store):
    out, took, sent, quiet = _probe(store, flood=True)
    assert sent > 10 and quiet is not None, (sent, quiet)  # the stranger was turned away, many times
    assert "h2" not in out["hosts"] and not any("h2" in p for p in out["pairs"]), out
    contended = [u for u in out["unmeasured"] if u["why"].startswith("contended:")]
    assert contended, out
    assert all("h2" in (u["from"], u["to"]) and "h2" in u["why"] for u in contended), contended
    # every round is planned and bounded: at most PROBE_ATTEMPTS rounds of its turns, each within one rate wait
    turns = len(straggle.schedule(straggle.plan(["h1", "h2", "h3"], set())))
    assert out["rounds"] <= straggle.PROBE_ATTEMPTS
    assert took <= straggle.PROBE_ATTEMPTS * turns * (FIXED.live_rate_wait_s(1) + FIXED.thread_join_s), took
    assert "contended" in (out["said"] or "") and "h2 not measured" in out["said"], out["said"]
    assert out["unmeasured_hosts"] == ["h2"], out
    assert out["contended_mbps"] and all("h2" in d for d in out["contended_mbps"]), out  # read, said, not judged


def test_without_a_stranger_every_direction_is_measured(store):
    out, _took, _sent, quiet = _probe(store, flood=False)
    assert quiet is None
    # nothing contended (a download may still go unanswered on a loaded machine: said with its own why)
    assert not out["hosts"] and not [u for u in out["unmeasured"] if u["why"].startswith("contended")], out
    assert out["rounds"] >= 2 and out["matrix_mbps"].get("h2") and not out["unmeasured_hosts"], out
    assert "contended_mbps" not in out, out


def test_a_clock_reply_says_how_long_its_responder_has_been_quiet():
    class Me:
        rank, job, run, host = 0, "j", "r", "h1"

        class loop:  # noqa: N801 - the responder's attribute
            @staticmethod
            def quiet_s():
                return 0.25

    doc = pace.answer(Me(), "clock", {"kind": "clock"})
    assert doc["quiet_s"] == 0.25 and isinstance(doc["time_ns"], int)
    Me.loop.quiet_s = staticmethod(lambda: None)
    assert "quiet_s" not in pace.answer(Me(), "clock", {"kind": "clock"})


def test_a_refusal_is_said_as_one_not_as_a_forged_reply():
    """A responder's refusal is never sealed: to a watcher with the token it read "not signed with the job token"
    (a back-to-back probe's "busy" looked like a forgery)."""
    assert pace._refused(b'{"error": "busy: over its share of the CPU for blob requests"}').startswith("busy:")
    assert pace._refused(b'{"rank": 3}') == "" and pace._refused(b"ncclcheck-hmac2:...") == ""
