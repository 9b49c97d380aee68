"""What the store reads back is distrusted: bad records are dropped and named, sizes and counters are capped, and
with a job token only values signed with it are read (issue 21). Waits block, from many threads at once."""

from __future__ import annotations

import threading
from dataclasses import replace

from ncclcheck.rendezvous.budget import FIXED
from ncclcheck.rendezvous.journal import Journal
from ncclcheck.rendezvous.store import Guard, JsonStore, Limits, counter_cap

QUICK = replace(FIXED, wait_slice_s=0.2)


def test_values_round_trip_as_json(hash_store):
    st = JsonStore(hash_store, "run/")
    st.set("a", {"x": [1, 2.5, "three", None]})
    assert st.get_now("a") == {"x": [1, 2.5, "three", None]}
    assert st.get_now("missing") is None and st.rejected == []


def test_garbage_is_dropped_and_named(hash_store):
    st = JsonStore(hash_store, "run/")
    hash_store.set("run/notjson", b"\x80\x81{")
    hash_store.set("run/nan", b'{"gbps": NaN}')
    hash_store.set("run/list", b"[1, 2]")
    assert st.get_now("notjson") is None and st.get_now("nan") is None
    assert st.get_now("list", lambda v: None if isinstance(v, dict) else "not an object") is None
    assert st.rejected == ["notjson: not JSON", "nan: not JSON", "list: not an object"]


def test_an_oversized_value_and_the_run_total_are_capped(hash_store):
    st = JsonStore(hash_store, guard=Guard(limits=Limits(max_value_bytes=100, max_total_bytes=260)))
    st.set("big", "x" * 200)
    st.set("small", "y" * 50)
    assert st.get_now("big") is None and "over the 100-byte cap" in st.rejected[0]
    assert st.get_now("small") == "y" * 50  # 202 + 52 bytes read: a second read passes 260
    assert st.get_now("small") is None and "cap 260" in st.rejected[-1]


def test_a_counter_raised_by_a_stranger_is_read_capped(hash_store):
    st = JsonStore(hash_store)
    cap = counter_cap(3)
    assert cap == 22
    hash_store.add("join/count", 10**9)
    assert st.count("join/count", cap) == cap and "counter at 1,000,000,000" in st.rejected[0]


def test_a_journal_with_a_huge_counter_reads_at_most_its_cap_and_keeps_the_real_records(hash_store):
    st = JsonStore(hash_store)
    j = Journal(st, "join", cap=8, check=lambda v: None if isinstance(v, dict) else "not a record")
    hash_store.add("join/count", 3)  # a stranger counts three records and writes one garbage value
    hash_store.set("join/2", b"[]")
    j.append({"node": 0})  # index 4
    got = j.read_since()
    assert got == [(4, {"node": 0})] and j.pending == {1, 3}
    hash_store.set("join/3", b'{"late": true}')  # a counted record written later is still taken
    hash_store.add("join/count", 10**9)
    assert j.read_since() == [(3, {"late": True})]
    assert j.done == 8 and not j.wait_next(QUICK.deadline(1.0), QUICK)  # at its cap: nothing more is waited for


def test_signed_values_are_read_and_unsigned_or_mis_signed_ones_are_dropped(hash_store):
    ours = JsonStore(hash_store, "run/", guard=Guard(token=b"s3cret"))
    theirs = JsonStore(hash_store, "run/", guard=Guard(token=b"other"))
    plain = JsonStore(hash_store, "run/")
    ours.set("a", {"exit_code": 1})
    assert ours.get_now("a") == {"exit_code": 1}
    assert plain.get_now("a") == {"exit_code": 1}  # a node without the token can still read (unchecked)
    plain.set("b", {"exit_code": 0})
    theirs.set("c", {"exit_code": 0})
    assert ours.get_now("b") is None and ours.get_now("c") is None
    assert ours.rejected == ["b: not signed with the job token",
                             "c: signed with another token (or changed on the way)"]
    # a signature covers the key: a value copied under another key is refused
    hash_store.set("run/d", hash_store.get("run/a"))
    assert ours.get_now("d") is None


def test_a_blocking_wait_in_one_thread_does_not_stall_another_threads_calls(tcp_store):
    st = JsonStore(tcp_store, "t/")
    got = {}
    started = threading.Event()

    def waiter():
        started.set()
        got["ok"] = st.wait(["go"], FIXED.deadline(30.0), FIXED)  # this thread's own connection

    t = threading.Thread(target=waiter)
    t.start()
    started.wait()
    st.set("other", 1)  # on the same JsonStore: would queue behind the wait if the connection were shared
    st.set("go", True)
    t.join(60)
    assert got == {"ok": True} and st.get_now("other") == 1


def test_a_wait_ends_at_its_deadline_with_false(tcp_store):
    st = JsonStore(tcp_store, "t/")
    assert st.wait(["never"], QUICK.deadline(0.5), QUICK) is False
    assert st.wait_get("never", QUICK.deadline(0.3), QUICK) is None


def test_the_store_module_never_touches_fd_2_and_holds_no_process_lock():
    import inspect

    from ncclcheck.rendezvous import store

    src = inspect.getsource(store)
    assert "dup2" not in src and "os.dup(" not in src
    assert "threading.Lock()" not in src.replace("default_factory=threading.Lock", "")


def test_exactly_one_fd_2_redirect_in_the_package():
    import pathlib

    pkg = pathlib.Path(__file__).resolve().parents[2] / "ncclcheck"
    hits = [p.name for p in pkg.rglob("*.py") if "dup2(" in p.read_text(encoding="utf-8")]
    assert hits == ["cli.py"]



class _CountingCalls:
    """A HashStore that counts the requests a real store would get (HashStore has no clone: calls stay here)."""

    def __init__(self, raw):
        self.raw, self.calls = raw, 0

    def __getattr__(self, name):
        fn = getattr(self.raw, name)

        def call(*a):
            self.calls += 1
            return fn(*a)

        return call


def test_reading_many_present_keys_costs_two_requests_per_chunk_and_absent_keys_are_told_apart(hash_store):
    from ncclcheck.rendezvous import store as store_mod

    counted = _CountingCalls(hash_store)
    st = JsonStore(counted, "run/")
    n = store_mod.GET_CHUNK + 10
    for i in range(n):
        st.set(f"row/{i}", {"i": i})
    hash_store.set("run/row/bad", b"\x80")
    counted.calls = 0
    assert st.get_present([f"row/{i}" for i in range(n)]) == [{"i": i} for i in range(n)]
    assert counted.calls == 2 * 2  # two chunks: one check and one multi-get each, not n reads
    got = st.read_present(["row/0", "row/missing", "row/bad", "row/1"])
    assert got == [(True, {"i": 0}), (False, None), (True, None), (True, {"i": 1})]
    assert st.rejected == ["row/bad: not JSON"]


def test_a_chunk_with_one_missing_key_is_halved_not_read_key_by_key(hash_store):
    # node 0 reading joins as they stream in: the newest is counted, not yet written (bench_scale at 16,384 nodes:
    # every key of such a chunk read alone cost it ~4 requests per join)
    from ncclcheck.rendezvous import store as store_mod

    counted = _CountingCalls(hash_store)
    st = JsonStore(counted, "run/")
    n = store_mod.GET_CHUNK
    for i in range(n - 1):
        st.set(f"row/{i}", {"i": i})
    counted.calls = 0
    got = st.read_present([f"row/{i}" for i in range(n)])
    assert got == [(True, {"i": i}) for i in range(n - 1)] + [(False, None)]
    assert counted.calls < 4 * 10, counted.calls  # ~2 log2(512) checks and multi-gets, not 2 x 512 requests
    # the worst case (every key missing) stays near key by key
    counted.calls = 0
    assert st.read_present([f"none/{i}" for i in range(n)]) == [(False, None)] * n
    assert counted.calls <= 1.3 * n, counted.calls
    # ... and keys missing here and there (rows late at node 0's bound) cost a look each, not a look and a get each
    for i in range(n):
        st.set(f"late/{i}", {"i": i} if i % 7 else None)
        if i % 7 == 0:
            hash_store.delete_key(f"run/late/{i}")
    counted.calls = 0
    got = st.read_present([f"late/{i}" for i in range(n)])
    assert got == [(True, {"i": i}) if i % 7 else (False, None) for i in range(n)]
    assert counted.calls <= 1.4 * n, counted.calls  # a get per present key more was ~2 x n


def test_a_journal_reads_what_was_written_and_looks_again_for_a_counted_record_not_written_yet(hash_store):
    st = JsonStore(hash_store, "run/")
    j = Journal(st, "join", cap=10)
    j.append({"a": 1})
    st.add("join/count", 1)  # counted by a writer that has not written its record yet
    j.append({"a": 3})
    assert j.read_since() == [(1, {"a": 1}), (3, {"a": 3})]
    st.set("join/2", {"a": 2})
    assert j.read_since() == [(2, {"a": 2})]


def test_a_reader_waiting_on_a_counted_but_unwritten_last_record_sees_it_when_written_not_at_the_deadline(tcp_store):
    st = JsonStore(tcp_store, "run/")
    j = Journal(st, "join", cap=10)
    j.append({"a": 1})
    st.add("join/count", 1)  # the last writer counted its record, then was preempted before writing it
    assert j.read_since() == [(1, {"a": 1})]
    threading.Timer(0.3, lambda: st.set("join/2", {"a": 2})).start()
    deadline = QUICK.deadline(120)
    while not j.read_since():
        assert j.wait_next(deadline, QUICK)
    assert not QUICK.passed(deadline)  # seen once written; before the fix the wait slept to the deadline


def test_a_main_thread_wait_is_one_request_answered_by_a_signal_and_its_connection_is_not_reused(tcp_store):
    """Issue 32: c10d prints two `waitForInput ... timed out` lines for every request that times out, and the
    main thread's waits were cut into wait_slice_s requests for Ctrl-C. Now one request waits to the deadline (made
    by a helper thread), a signal still ends the wait at once, and the next call does not queue behind the helper
    that still holds its connection."""
    import signal
    import time

    st = JsonStore(tcp_store, "m/")
    calls = []
    real = type(tcp_store).wait

    class Counting:
        def __getattr__(self, name):
            return getattr(tcp_store, name)

        def wait(self, keys, timeout):
            calls.append(timeout.total_seconds())
            return real(tcp_store, keys, timeout)

    st.raw = Counting()
    assert st.wait(["late"], QUICK.deadline(1.0), QUICK) is False
    assert len(calls) == 1 and calls[0] > QUICK.wait_slice_s, calls  # one request, not one per 0.2 s slice

    class Stop(Exception):
        pass

    def stop(*_):
        raise Stop

    old = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        t0 = time.monotonic()
        try:
            st.wait(["never"], FIXED.deadline(20.0), FIXED)
        except Stop:
            pass
        # well under the 20 s the helper's request waits: the signal ended the wait, and the set below did not queue
        # behind it (10 s, not a speed: beside other tests on 2 cores a fresh connection once took over 2 s)
        assert time.monotonic() - t0 < 10.0
        t1 = time.monotonic()
        st.set("after", 1)  # a connection of its own: not behind the helper's 20 s wait
        assert st.get_now("after") == 1 and time.monotonic() - t1 < 10.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_client_connect_tries_a_share_of_its_bound_and_its_requests_keep_the_whole_timeout(monkeypatch):
    """torch's TCPStore tries its whole timeout twice with a growing backoff between (up to 3x it, measured): a
    connect bounded by X passes X / store_tries as torch's timeout, then gives the requests their own timeout."""
    import datetime

    import torch.distributed as dist

    from ncclcheck.rendezvous.store import open_store

    made = []

    class Fake:
        def __init__(self, host, port, world_size, is_server, timeout):
            made.append({"connect": timeout})

        def set_timeout(self, timeout):
            made[-1]["requests"] = timeout

    monkeypatch.setattr(dist, "TCPStore", Fake)
    open_store("198.18.0.1", 29500, False, 60.0, connect_s=6.0)
    open_store("198.18.0.1", 29500, False, 20.0)
    s = datetime.timedelta
    assert made == [{"connect": s(seconds=6.0 / FIXED.store_tries), "requests": s(seconds=60.0)},
                    {"connect": s(seconds=20.0 / FIXED.store_tries), "requests": s(seconds=20.0)}]
    assert FIXED.store_tries >= 3  # below it, torch's two tries and backoff outlast the bound (see budget.py)


def test_a_member_connects_through_the_one_client_seam_with_its_try_and_request_bounds(monkeypatch):
    """STORE_CLIENT (torch's client in the product) is the one place a member's client is made: the scale simulator
    puts its own there (ncclcheck_lab/sim_store.client). open_store gives it (host, port, try_s, timeout_s), wraps
    what it returns, and names a failed connect in one line with its bound."""
    import pytest

    from ncclcheck.rendezvous import store

    calls = []

    def fake(host, port, try_s, timeout_s):
        calls.append((host, port, try_s, timeout_s))
        if port == 1:
            raise RuntimeError("connect refused\n  C++ frames")
        return {"a client": host}

    monkeypatch.setattr(store, "STORE_CLIENT", fake)
    st = store.open_store("198.18.0.1", 29500, False, 60.0, "p/", connect_s=6.0)
    assert st.raw == {"a client": "198.18.0.1"} and st.prefix == "p/"
    with pytest.raises(ConnectionError) as e:
        store.open_store("198.18.0.1", 1, False, 20.0)
    assert str(e.value) == "RuntimeError: connect refused (connect bounded by 20.0 s)"
    assert calls == [("198.18.0.1", 29500, FIXED.store_try_s(6.0), 60.0),
                     ("198.18.0.1", 1, FIXED.store_try_s(20.0), 20.0)]
