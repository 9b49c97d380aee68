"""scripts/sim_store.py speaks c10d's TCPStore protocol: against a real torch TCPStore server it sets, reads, counts,
checks and waits as torch's own client does, and a wait past its bound raises what rendezvous.store reads as a
timeout (not a lost store)."""

from __future__ import annotations

import datetime as dt
import os
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
dist = pytest.importorskip("torch.distributed")

from ncclcheck.rendezvous.budget import Budget  # noqa: E402
from ncclcheck.rendezvous.store import JsonStore, StoreLost  # noqa: E402
from ncclcheck_lab import sim_store  # noqa: E402
from ncclcheck_lab.loopstore import loopback_store  # noqa: E402


@pytest.fixture()
def server():
    s = loopback_store(timeout_s=10)
    yield s


def _client(server, timeout_s=10.0):
    return sim_store.WireStore("127.0.0.1", server.port, dt.timedelta(seconds=timeout_s))


def test_values_counters_and_checks_match_torchs_own_client(server):
    c = _client(server)
    c.set("a", b"one")
    assert server.get("a") == b"one"  # torch's client reads what ours wrote, and the reverse
    server.set("b", b"two")
    assert c.get("b") == b"two"
    assert c.multi_get(["a", "b"]) == [b"one", b"two"]
    assert c.add("n", 3) == 3 and server.add("n", 2) == 5 and c.add("n", 0) == 5
    assert c.check(["a", "b"]) and not c.check(["a", "missing"])
    c.clone().set("c", b"three")
    assert server.get("c") == b"three"


def test_a_virtual_nodes_client_connects_from_its_own_address(server):
    # bench_scale gives each virtual node a loopback address of its own; the port is the connect's to choose
    a, b = (sim_store.WireStore("127.0.0.1", server.port, dt.timedelta(seconds=10), source="127.0.0.5")
            for _ in range(2))
    a.set("from-a", b"1")
    assert server.get("from-a") == b"1"
    (ha, pa), (hb, pb) = a._sock.getsockname(), b._sock.getsockname()
    assert ha == hb == "127.0.0.5" and pa != pb and pa > 0


def test_a_wait_ends_when_another_client_sets_the_key(server):
    c = _client(server)
    threading.Timer(0.3, lambda: server.set("late", b"x")).start()
    c.wait(["late"], dt.timedelta(seconds=5))
    assert c.get("late") == b"x"


def test_a_wait_past_its_bound_is_a_timeout_to_the_json_store_and_the_connection_stays_usable(server):
    c = _client(server)
    js = JsonStore(c)
    b = Budget()
    assert js.wait(["never"], b.deadline(0.3), b) is False  # a timeout, not StoreLost
    c.set("after", b"1")
    assert server.get("after") == b"1"


def test_a_store_that_went_away_is_a_lost_store():
    s = loopback_store(timeout_s=10)
    c = sim_store.WireStore("127.0.0.1", s.port, dt.timedelta(seconds=10))
    del s
    js = JsonStore(c)
    with pytest.raises(StoreLost):
        for _ in range(3):
            js.set("k", 1)
            js.get_now("k")


def test_the_simulators_client_fits_the_products_seam_and_serves_open_store(server, monkeypatch):
    """bench_scale puts sim_store.client in rendezvous.store.STORE_CLIENT (issue 44: a hand-copied signature of a
    private function drifted and every virtual node failed): same parameters as torch's, and open_store works
    through it against a real TCPStore server."""
    import inspect

    from ncclcheck.rendezvous import store

    params = inspect.signature(sim_store.client).parameters
    assert list(params) == list(inspect.signature(store.torch_client).parameters)
    monkeypatch.setattr(store, "STORE_CLIENT", sim_store.client)
    st = store.open_store("127.0.0.1", server.port, False, 10.0, "run/")
    assert isinstance(st.raw, sim_store.WireStore)
    st.set("a", {"x": 1})
    assert st.get_now("a") == {"x": 1}
