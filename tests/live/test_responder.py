"""The responder's protocol on real loopback sockets: what it answers, what it refuses (no torch: fake sources)."""

from __future__ import annotations

import json
import socket

import pytest

from ncclcheck.live import wire
from ncclcheck.live.responder import Responder, Sources, thread_stacks
from ncclcheck.live.watch import ask
from ncclcheck.rendezvous.budget import Budget
from ncclcheck.rendezvous.store import Guard

B = Budget(timeout_s=5.0, live_request_s=1.0)
FR = {"version": "2.10", "entries": [], "pg_status": {"0": {"last_enqueued_collective": "7",
                                                            "last_started_collective": "-1",
                                                            "last_completed_collective": "6"}}}


class Fake(Sources):
    def flight(self, entries: bool = True) -> dict:
        return json.loads(json.dumps(FR))


@pytest.fixture
def responder(request):
    token = getattr(request, "param", None)
    r = Responder(3, 4, 3, ("127.0.0.1", 1), Guard(token=token), B, Fake(), bind="127.0.0.1").start(register=False)
    yield r
    r.close()


def _rec(r: Responder) -> dict:
    return {"rank": r.rank, "addr": r.addr, "port": r.port}


def _raw(r: Responder, payload: bytes, header: bytes = b"") -> dict:
    """Send one frame of `payload` (or a bare header) after the hello; the responder's answer, parsed."""
    with socket.create_connection((r.addr, r.port), timeout=5) as s:
        hello = json.loads(wire.recv_frame(s, wire.MAX_HELLO, B.deadline(5), B))
        assert hello["rank"] == r.rank and len(hello["challenge"]) == wire.CHALLENGE_CHARS
        s.sendall(header or wire.HEADER.pack(len(payload)) + payload)
        return json.loads(wire.recv_frame(s, wire.MAX_REPLY, B.deadline(5), B))


def test_answers_progress_from_the_flight_recorder(responder):
    a = ask(_rec(responder), "progress", Guard(), B.deadline(5), B)
    assert a.why == "" and a.doc["progress"] == {"0": {"enqueued": 7, "started": -1, "completed": 6}}
    assert "flight" not in a.doc and "stacks" not in a.doc


def test_all_carries_flight_and_stacks_without_its_own_threads(responder):
    a = ask(_rec(responder), "all", Guard(), B.deadline(5), B)
    assert a.doc["flight"]["pg_status"] == FR["pg_status"]
    names = [t["thread"] for t in a.doc["stacks"]]
    assert names[0] == "MainThread" and not any(n.startswith("ncclcheck-live") for n in names)


def test_unknown_request_refused(responder):
    out = _raw(responder, json.dumps({"kind": "exec", "cmd": "touch /tmp/x"}).encode())
    assert "unknown request 'exec'" in out["error"] and "progress" not in out
    assert responder.served == 0


def test_oversized_request_refused_before_it_is_read(responder):
    out = _raw(responder, b"", header=wire.HEADER.pack(wire.MAX_REQUEST + 1))
    assert "over the 4,096-byte limit" in out["error"]


def test_request_that_never_comes_is_bounded(responder):
    with socket.create_connection((responder.addr, responder.port), timeout=5) as s:
        wire.recv_frame(s, wire.MAX_HELLO, B.deadline(5), B)
        out = json.loads(wire.recv_frame(s, wire.MAX_REPLY, B.deadline(5), B))  # sent nothing
    assert "within the bound" in out["error"]


@pytest.mark.parametrize("responder", [b"the-job-token"], indirect=True)
def test_with_a_token_an_unsealed_request_is_refused(responder):
    out = _raw(responder, json.dumps({"kind": "progress"}).encode())
    assert "not authenticated" in out["error"] and "progress" not in out
    a = ask(_rec(responder), "progress", Guard(), B.deadline(5), B)  # a watcher without the token is told why
    assert a.doc is None and "job's key" in a.why
    a = ask(_rec(responder), "progress", Guard(token=b"another-token"), B.deadline(5), B)
    assert a.doc is None and "not authenticated" in a.why


@pytest.mark.parametrize("responder", [b"the-job-token"], indirect=True)
def test_with_the_token_a_sealed_request_is_answered_and_the_reply_is_sealed(responder):
    a = ask(_rec(responder), "progress", Guard(token=b"the-job-token"), B.deadline(5), B)
    assert a.why == "" and a.doc["progress"]["0"]["completed"] == 6


def test_a_watcher_with_a_token_refuses_an_unsigned_reply(responder):
    a = ask(_rec(responder), "progress", Guard(token=b"the-job-token"), B.deadline(5), B)
    assert a.doc is None and "not signed with the job token" in a.why  # a responder without the key: named


def test_a_request_sealed_for_another_connection_is_refused():
    r = Responder(0, 1, 0, ("127.0.0.1", 1), Guard(token=b"k"), B, Fake(), bind="127.0.0.1").start(register=False)
    try:
        replayed = wire.seal(Guard(token=b"k"), wire.request_key("0" * 32), {"kind": "all"})
        out = _raw(r, replayed)
        assert "not authenticated" in out["error"]
    finally:
        r.close()


def test_stacks_show_a_thread_blocked_on_a_lock():
    import threading

    lock, started = threading.Lock(), threading.Event()
    lock.acquire()

    def blocked():
        started.set()
        with lock:
            pass

    t = threading.Thread(target=blocked, name="loader", daemon=True)
    t.start()
    started.wait(5)
    try:
        rows = [s for s in thread_stacks() if s["thread"] == "loader"]
        assert rows and "with lock" in rows[0]["frames"][-1]["code"]
    finally:
        lock.release()
        t.join(5)
