"""The responder's protocol on real loopback sockets: what it answers, what it refuses (no torch: fake sources)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from ncclcheck.live import wire
from ncclcheck.live.auth import Session
from ncclcheck.live.fetch import Asker, ask
from ncclcheck.live.kept import Kept
from ncclcheck.live.responder import Responder, Sources, thread_stacks
from ncclcheck.rendezvous.budget import Budget
from ncclcheck.rendezvous.store import Guard

B = Budget(timeout_s=5.0, live_request_s=1.0)
RUN = "ab" * 16  # the job's live run (a registered responder reads it from the store's world record)


def asker(token=None, job: str = "nojob", run: str = RUN) -> Asker:
    """How watch asks: sealed with the token when it has one."""
    return Asker(Session("token" if token else "none", token, 1, B), job, run)
FR = {"version": "2.10", "entries": [], "pg_status": {"0": {"last_enqueued_collective": "7",
                                                            "last_started_collective": "-1",
                                                            "last_completed_collective": "6"}}}


class Fake(Sources):
    def flight(self, entries: bool = True) -> dict:
        return json.loads(json.dumps(FR))


@pytest.fixture
def responder(request):
    token = getattr(request, "param", None)
    r = Responder(3, 4, 3, ("127.0.0.1", 1), Guard(token=token), B, Fake(), bind="127.0.0.1").start(register=False,
                                                                                                    run=RUN)
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
        if header:
            return json.loads(wire.recv_frame(s, wire.MAX_REPLY, B.deadline(5), B))
        return json.loads(wire.recv_frame(s, wire.MAX_REPLY, B.deadline(5), B))


def test_answers_progress_from_the_flight_recorder(responder):
    a = ask(_rec(responder), "progress", asker(), B.deadline(5), B)
    assert a.why == "" and a.doc["progress"] == {"0": {"enqueued": 7, "started": -1, "completed": 6}}
    assert "flight" not in a.doc and "stacks" not in a.doc


def test_all_carries_flight_and_stacks_without_its_own_threads(responder):
    a = ask(_rec(responder), "all", asker(), B.deadline(5), B)
    assert a.doc["flight"]["pg_status"] == FR["pg_status"]
    names = [t["thread"] for t in a.doc["stacks"]]
    assert names[0] == "MainThread" and not any(n.startswith("ncclcheck-live") for n in names)


def test_unknown_request_refused(responder):
    out = _raw(responder, json.dumps({"kind": "exec", "cmd": "touch /tmp/x", "job": "nojob", "run": RUN}).encode())
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
    out = _raw(responder, json.dumps({"kind": "progress", "job": "nojob", "run": RUN}).encode())
    assert "not authenticated" in out["error"] and "progress" not in out
    a = ask(_rec(responder), "progress", asker(), B.deadline(5), B)  # a watcher without the token is told why
    assert a.doc is None and "job's key" in a.why and not a.garbage
    a = ask(_rec(responder), "progress", asker(b"another-token"), B.deadline(5), B)
    assert a.doc is None and "not authenticated" in a.why


@pytest.mark.parametrize("responder", [b"the-job-token"], indirect=True)
def test_with_the_token_a_sealed_request_is_answered_and_the_reply_is_sealed(responder):
    a = ask(_rec(responder), "progress", asker(b"the-job-token"), B.deadline(5), B)
    assert a.why == "" and a.doc["progress"]["0"]["completed"] == 6


def test_a_watcher_with_a_token_refuses_an_unsigned_reply(responder):
    a = ask(_rec(responder), "progress", asker(b"the-job-token"), B.deadline(5), B)
    assert a.doc is None and "answers without authentication" in a.why  # a responder without the key: named


def test_a_request_sealed_for_another_connection_is_refused():
    r = Responder(0, 1, 0, ("127.0.0.1", 1), Guard(token=b"k"), B, Fake(), bind="127.0.0.1").start(register=False,
                                                                                                    run=RUN)
    try:
        replayed = wire.seal(Guard(token=b"k"), wire.request_key("0" * 32), {"kind": "all", "job": "nojob",
                                                                              "run": RUN})
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


class Idlers:
    """A stranger's connections that never send a request, each opened again the moment the responder closes it
    (issue 45: 8 of these kept watch out of a healthy rank: 4 slots, each held 2 s before any authentication)."""

    def __init__(self, r: Responder, n: int) -> None:
        import threading

        self.r, self.stop, self.opened = r, threading.Event(), 0
        self.threads = [threading.Thread(target=self._one, daemon=True) for _ in range(n)]
        for t in self.threads:
            t.start()

    def _one(self) -> None:
        while not self.stop.is_set():
            try:
                with socket.create_connection((self.r.addr, self.r.port), timeout=5) as s:
                    self.opened += 1
                    while not self.stop.is_set() and s.recv(4096):  # held until the responder closes it
                        pass
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)


@pytest.mark.parametrize("responder", [b"the-job-token"], indirect=True)
@pytest.mark.parametrize("idlers", [8, 32])
def test_idle_reconnecting_connections_do_not_keep_watch_out(responder, idlers):
    """Slots go to requests, not idle sockets: with a stranger keeping 8 (and 32, twice one address's share) idle
    connections open and reopening each at once when it is closed, from watch's own address, every one of watch's
    looks is answered within its bound."""
    import time

    stranger = Idlers(responder, idlers)
    try:
        end = time.monotonic() + 10
        while stranger.opened < idlers and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(1.5)  # past the responder's request bound: the first idle ones were closed and came back
        got = [ask(_rec(responder), "progress", asker(b"the-job-token"), B.deadline(5), B) for _ in range(5)]
    finally:
        stranger.close()
    assert all(a.why == "" for a in got), [a.why for a in got]
    assert responder.loop.evicted > 0 or idlers < 16  # past one address's share, the oldest idle ones made room


@pytest.mark.parametrize("responder", [b"the-job-token"], indirect=True)
def test_with_a_token_nothing_is_worked_on_before_a_sealed_request(responder):
    """An unsealed request of every kind is refused by the connection loop itself: no worker is given work, none is
    started for it (the answer worker waits from the start), no reply is built (the flight recorder is never read for
    a stranger)."""
    calls = []
    responder.sources.flight = lambda entries=True: calls.append(entries) or FR
    for kind in wire.KINDS:
        out = _raw(responder, json.dumps({"kind": kind, "job": "nojob", "run": RUN, "ranks": [0]}).encode())
        assert "not authenticated" in out["error"], out
    workers = responder.loop.workers
    assert calls == [] and responder.served == 0 and all(w.served == 0 and w.cpu_used == 0 for w in workers.values())
    assert [name for name, w in workers.items() if w._thread is not None] == ["answer"]


def test_one_request_at_a_time_per_address_and_a_flood_of_one_kind_builds_few_replies(responder):
    """Without a key anyone may ask, so the work is bounded instead: a reply built once serves every request of its
    kind for Budget.live_answer_cache_s, and an address has one request waiting at most."""
    calls = []
    real = responder.sources.flight
    responder.sources.flight = lambda entries=True: calls.append(entries) or real(entries)
    got = [ask(_rec(responder), "all", asker(), B.deadline(5), B) for _ in range(20)]
    assert all(a.why == "" for a in got)
    assert len(calls) < 20, f"{len(calls)} flight-recorder reads for 20 requests"


def test_past_its_spend_a_reply_older_than_the_rebuild_age_is_built_again_once(responder, monkeypatch):
    """Issue 65: past the Spend the last reply built is served, but never older than Budget.live_stale_rebuild_s
    (watch judges no recorder older than its pause between looks): built again then, once, and served after.
    Judged on the builds' own times, so a loaded machine that stalls between asks (a later build then is due) cannot
    fail it, and a build per request still does."""
    import dataclasses

    builds = []  # when the recorder's entries were read: one per build (its status alone is read for every reply)
    real = responder.sources.flight
    responder.sources.flight = lambda entries=True: (entries and builds.append(time.monotonic())) or real(entries)
    first = ask(_rec(responder), "all", asker(), B.deadline(5), B)
    assert first.why == "" and len(builds) == 1
    cache_s, rebuild_s = responder.budget.live_answer_cache_s, 2.0
    monkeypatch.setattr(responder.spend, "allows", lambda credit=0.0: False)  # the Spend empty from now on
    monkeypatch.setattr(responder, "budget", dataclasses.replace(responder.budget, live_stale_rebuild_s=rebuild_s))
    time.sleep(cache_s + 0.05)  # past the cache, within the rebuild age: the last one served, its age said
    kept = ask(_rec(responder), "all", asker(), B.deadline(5), B)
    assert len(builds) == 1 and kept.doc["built_s"] >= cache_s, kept.doc.get("built_s")
    time.sleep(max(0.0, builds[0] + rebuild_s + 0.05 - time.monotonic()))  # past the rebuild age
    again = [ask(_rec(responder), "all", asker(), B.deadline(5), B) for _ in range(5)]
    assert len(builds) >= 2, "past the rebuild age, whatever the Spend says, it is built again"
    gaps = [b - a for a, b in zip(builds, builds[1:])]
    assert all(g >= rebuild_s for g in gaps), f"built again within the rebuild age: {gaps}"  # not once per request
    assert all(a.doc["built_s"] < rebuild_s for a in again), [a.doc["built_s"] for a in again]


from tests.rendezvous.test_trust import munged  # noqa: E402,F401 - the private munged fixture


def test_under_munge_only_a_credential_of_the_jobs_user_for_this_master_port_is_answered(munged):  # noqa: F811
    """A Slurm job without a token: watch's requests carry a munge credential only the job's user decodes, holding
    its session key, and the reply is sealed with that key. A request without one, with one made for another user
    or another job's master port, is refused; a watcher outside the job is told where to run."""
    import os

    from ncclcheck.facts import munge
    from ncclcheck.live.auth import PAYLOAD_TAG, choose

    assert choose(None, os.environ) == "munge" and choose(b"t", os.environ) == "token"
    r = Responder(3, 4, 3, ("127.0.0.1", 29411), Guard(), B, Fake(), bind="127.0.0.1", auth="munge")
    r.start(register=False, run=RUN)
    try:
        rec = _rec(r)
        watcher = Asker(Session("munge", None, 29411, B), "nojob", RUN)
        got = [ask(rec, "progress", watcher, B.deadline(10), B) for _ in range(3)]
        assert all(a.why == "" and a.doc["progress"]["0"]["completed"] == 6 for a in got), [a.why for a in got]
        assert len(r.keys._seen) == 1  # decoded once, then remembered
        outside = ask(rec, "progress", asker(), B.deadline(5), B)
        assert outside.doc is None and "srun --overlap" in outside.why and not outside.garbage
        unsealed = _raw(r, json.dumps({"kind": "all", "job": "nojob", "run": RUN}).encode())
        assert "not authenticated" in unsealed["error"] and "munge credential" in unsealed["error"]
        for uid, port in ((12345, 29411), (os.getuid(), 29999)):  # another user's, another job's master port
            other = Session("munge", None, port, B)
            other._cred = munge.encode(json.dumps({"v": PAYLOAD_TAG, "key": other._key.hex(), "port": port}).encode(),
                                       uid, 60, 5.0, munged)
            other._made = 1e18  # never remade
            a = ask(rec, "progress", Asker(other, "nojob", RUN), B.deadline(10), B)
            assert a.doc is None and "not authenticated (its munge credential" in a.why, a.why
        assert r.served == 3
    finally:
        r.close()


@pytest.mark.parametrize("responder", [b"the-job-token"], indirect=True)
def test_a_request_that_asks_to_keep_its_connection_is_greeted_again_and_the_next_one_answered(responder):
    """wire's "keep": after the reply, a fresh hello (a new challenge: a request sealed for the first is refused on
    the second), the next sealed request answered on the same connection; without "keep" the reply ends it; a kept
    connection nobody speaks on is closed at Budget.live_keep_s with nothing sent (a refusal there would be read as
    the next hello)."""
    token = b"the-job-token"
    me = asker(token)

    def request(s: socket.socket, kind: str, keep: bool) -> tuple:
        hello = json.loads(wire.recv_frame(s, wire.MAX_HELLO, B.deadline(5), B))
        doc = {"kind": kind, "job": "nojob", "run": RUN, **({"keep": True} if keep else {})}
        s.sendall(wire.frame(me.session.request(hello["challenge"], doc)))
        reply = wire.recv_frame(s, wire.MAX_REPLY, B.deadline(5), B)
        got, why = me.session.open_reply(hello["challenge"], reply)
        return hello["challenge"], got, why

    with socket.create_connection((responder.addr, responder.port), timeout=5) as s:
        ch1, got, why = request(s, "progress", keep=True)
        assert got and got["progress"], why
        ch2, got, why = request(s, "progress", keep=False)
        assert ch2 != ch1 and got and got["rank"] == responder.rank, why
        s.settimeout(5)
        assert s.recv(1) == b""  # no "keep": closed after the reply
    quick = Budget(timeout_s=5.0, live_request_s=1.0, live_keep_s=0.5)
    responder.loop.budget = quick
    with socket.create_connection((responder.addr, responder.port), timeout=5) as s:
        request(s, "progress", keep=True)
        wire.recv_frame(s, wire.MAX_HELLO, B.deadline(5), B)  # greeted again
        t0 = time.monotonic()
        s.settimeout(5)
        assert s.recv(1) == b"" and time.monotonic() - t0 < 3  # closed at live_keep_s, nothing said


@pytest.mark.parametrize("keeps", [True, False])
def test_a_second_look_asks_on_the_first_looks_connections(monkeypatch, keeps):
    """fetch_all with a Kept: the first look's answers leave their connections open and the second look asks on
    them, connecting to no one; against responders that close after each reply (one that does not know "keep"), the
    second look connects again at once and every rank still answers, none said closed or retried."""
    from ncclcheck.live import fetch
    from ncclcheck.live.loop import Loop

    if not keeps:
        monkeypatch.setattr(Loop, "_again", lambda self, c: self._close(c))
    connects = []

    class Counting(socket.socket):
        def connect_ex(self, address):
            connects.append(address)
            return super().connect_ex(address)

    rs = [Responder(r, 6, r, ("127.0.0.1", 1), Guard(), B, Fake(), bind="127.0.0.1").start(register=False, run=RUN)
          for r in range(6)]
    try:
        records = {r.rank: _rec(r) for r in rs}
        monkeypatch.setattr(fetch.socket, "socket", Counting)
        with Kept(64) as kept:
            first = fetch.fetch_all(records, "all", asker(), B, kept=kept)
            assert all(a.doc for a in first.values()) and len(connects) == 6
            assert len(kept.socks) == 6
            second = fetch.fetch_all(records, "progress", asker(), B, kept=kept)
        assert all(a.doc and a.doc["progress"] for a in second.values()), {r: a.why for r, a in second.items()}
        assert len(connects) == (6 if keeps else 12), connects
    finally:
        for r in rs:
            r.close()


def test_a_hosts_clock_tries_ask_on_one_connection(monkeypatch):
    """measure_clocks asks each host's rank up to CLOCK_TRIES times: on one kept connection, not one each (the
    clocks of 512 hosts were ~2,000 connections)."""
    from ncclcheck.live import pace, straggle

    monkeypatch.setattr(straggle, "CLOCK_ENOUGH_NS", -1)  # no round trip is short enough: every try is made
    connects = []

    class Counting(socket.socket):
        def connect(self, address):
            connects.append(address)
            return super().connect(address)

    rs = [Responder(r, 2, 0, ("127.0.0.1", 1), Guard(), B, Fake(), bind="127.0.0.1").start(register=False, run=RUN)
          for r in range(2)]
    try:
        records = {r.rank: {**_rec(r), "host": f"h{r.rank}"} for r in rs}
        monkeypatch.setattr(pace.socket, "socket", Counting)
        clocks = straggle.measure_clocks(records, [0, 1], asker(), B)
    finally:
        for r in rs:
            r.close()
    assert set(clocks) == {"h0", "h1"} and all(c["err_ns"] > 0 for c in clocks.values()), clocks
    assert len(connects) == 2, connects
