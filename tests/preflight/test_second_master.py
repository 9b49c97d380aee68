"""A second node rank 0 tells the real one (pf-duplicate-rank-0): it finds an ncclcheck store at MASTER_ADDR whose
host is another process and appends its join record there; the real node 0 reads join records that came after its
verdict before it publishes its result, so rendezvous.world names the duplicate on every node. The whole protocol
with real hosts is tests/lab/test_preflight_lab.py::test_duplicate_node_rank_names_both_hostnames; a second node 0
on node 0's own host is test_cluster_preflight.py::test_a_second_node_rank_0_on_node_0s_host_is_named_by_node_0."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ncclcheck.preflight import keys as K
from ncclcheck.preflight import second_master as sm
from ncclcheck.preflight.cluster import _join_record, _late_joins
from ncclcheck.preflight.decide import decide, world_check
from ncclcheck.rendezvous.budget import Budget
from ncclcheck.rendezvous.journal import Journal
from ncclcheck.rendezvous.store import Guard, JsonStore, open_store
from tests.conftest import free_port

B = Budget(timeout_s=5)
QUICK = Budget(timeout_s=5, second_master_tell_s=1.0)  # a store without node 0's record is waited on this long


@pytest.fixture
def hash_store():
    import torch.distributed as dist

    return dist.HashStore()


def _j(rank, host, pid, uuid):
    return {"node_rank": rank, "nnodes": 3, "hostname": host, "pid": pid, "uuid": uuid, "facts": {}, "checks": []}


def _world(hash_store):
    """Node 0's journal after an ok verdict over h1, h3, h4, as _host_decides leaves it."""
    st = JsonStore(hash_store, "p/")
    journal = Journal(st, K.JOIN, 64, _join_record)
    for j in (_j(0, "h1", 1, "a"), _j(1, "h3", 3, "c"), _j(2, "h4", 4, "d")):
        journal.append(j)
    joins = {}
    for i, v in journal.read_since():
        v["_key"], v["_index"] = K.JOIN_RECORD.format(i), i
        joins[i] = v
    verdict = dict(decide([joins[i] for i in sorted(joins)], 3, final=True), elapsed_s=1.5)
    assert verdict["ok"]
    return st, journal, joins, verdict


CTX = SimpleNamespace(placement=SimpleNamespace(nnodes=3), timeout_s=8.0, budget=B)


def test_a_node_rank_0_that_joined_after_the_world_formed_fails_it_naming_both(hash_store):
    st, journal, joins, verdict = _world(hash_store)
    ok = world_check(verdict, 1.5, 8.0)
    Journal(st, K.JOIN, 64).append(_j(0, "h2", 2, "b"))  # what second_master.look appends on h2
    c = _late_joins(CTX, journal, verdict, joins, ok)
    assert c.status.value == "fail" and c.id == "rendezvous.world"
    assert "node rank 0 claimed by 2 nodes: h1 (pid 1), h2 (pid 2)" in c.summary
    assert "h2 (pid 2, node rank 0) joined after the world had formed" in c.summary
    assert c.evidence["duplicates"] == {"0": ["h1 (pid 1)", "h2 (pid 2)"]} and "--node-rank" in c.fix


def test_no_late_join_keeps_the_verdict(hash_store):
    _, journal, joins, verdict = _world(hash_store)
    ok = world_check(verdict, 1.5, 8.0)
    assert _late_joins(CTX, journal, verdict, joins, ok) is ok


def test_a_late_record_that_is_not_a_join_is_dropped_not_believed(hash_store):
    st, journal, joins, verdict = _world(hash_store)
    ok = world_check(verdict, 1.5, 8.0)
    Journal(st, K.JOIN, 64).append({"node_rank": "0"})
    assert _late_joins(CTX, journal, verdict, joins, ok) is ok
    assert any("join/4" in r for r in st.rejected)
    st.add(K.JOIN_COUNT, 1)  # counted, never written (a stranger): one short look, then the verdict stands
    assert _late_joins(CTX, journal, verdict, joins, ok) is ok and journal.pending == {5}




def _member(node_id: str) -> sm.Member:
    return sm.Member("p/", node_id, "none", 64, 64, lambda: Guard())


def test_nothing_listening_is_nothing():
    port = free_port()
    got = sm.look("127.0.0.1", port, _member("b"), lambda: _j(0, "h2", 2, "b"), B)
    assert got.status == sm.NOTHING and not got.told


def test_a_rival_node_0_is_told_and_this_nodes_own_store_is_not_a_rival():
    port = free_port()
    real = open_store("127.0.0.1", port, True, 5, "p/", Guard())
    try:
        real.set(K.HOST, {"hostname": "h1", "pid": 1, "uuid": "a"})
        got = sm.look("127.0.0.1", port, _member("b"), lambda: _j(0, "h2", 2, "b"), B)
        assert got.status == sm.RIVAL and got.told and got.host == {"hostname": "h1", "pid": 1, "uuid": "a"}
        assert real.wait([K.JOIN_RECORD.format(1)], B.deadline(10), B)  # a c10d SET is not answered: may be late
        told = Journal(real, K.JOIN, 64, _join_record).read_since()
        assert [(v["node_rank"], v["hostname"]) for _, v in told] == [(0, "h2")]
        c = sm.duplicate_check(got, "h2", "198.18.0.1", 29500)
        assert c.status.value == "fail" and "this node (h2) is a duplicate of node rank 0" in c.summary
        assert "is h1 (pid 1)" in c.summary and "told it" in c.summary and c.evidence["duplicate_of_rank0"]
        # node 0 reached through a service address: its own store is not a rival, and nothing is appended
        me = sm.look("127.0.0.1", port, _member("a"), lambda: _j(0, "h1", 1, "a"), B)
        assert me.status == sm.SELF and not me.told
        assert Journal(real, K.JOIN, 64).count() == 1
    finally:
        del real


def test_a_store_without_node_0s_record_is_not_taken_for_a_rival():
    port = free_port()
    other = open_store("127.0.0.1", port, True, 5, "p/", Guard())
    try:
        got = sm.look("127.0.0.1", port, _member("b"), lambda: _j(0, "h2", 2, "b"), QUICK)
        assert got.status == sm.UNKNOWN and not got.told and Journal(other, K.JOIN, 64).count() == 0
    finally:
        del other


def test_the_check_says_when_the_real_node_0_could_not_be_told():
    got = sm.Look(sm.RIVAL, {"hostname": "h1", "pid": 1, "uuid": "a"}, False, "node 0 never answered")
    c = sm.duplicate_check(got, "h2", "h1", 29500)
    assert "could not tell it (node 0 never answered)" in c.summary and c.status.value == "fail"
