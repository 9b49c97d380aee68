"""Issue 53, item 2, as a class: a verdict that depends on who joined is judged only among the nodes that joined, and
never outranks the node that never joined. The checks whose verdict depends on where the other nodes run
(checks.local.ONE_HOST_RECHECKED) are judged again when the world did not form: what passes with every node on
this host becomes a warning saying when it fails; what fails wherever the nodes run stays a failure."""

from __future__ import annotations

from ncclcheck.checks import run_local_checks
from ncclcheck.checks.local import ONE_HOST_RECHECKED, LocalInput, judged_among_joined
from ncclcheck.model import Report, Status, failed
from ncclcheck.preflight.decide import world_check
from tests.fakefacts import facts, iface

LOOPBACK_NAME = {"hostname": "vm", "resolves_to": ["127.0.0.1"], "loopback": True}


def _local(f: dict, node: int = 0) -> list:
    return run_local_checks(LocalInput.of(f, node_rank=node, multi_node=True, nproc_per_node=2, backend="gloo"))


def _missing_world(missing: list, nnodes: int = 2):
    v = {"ok": False, "complete": False, "nnodes": nnodes, "missing": missing, "duplicates": {}, "out_of_range": [],
         "nnodes_mismatch": [], "joined": [{"node_rank": 0, "hostname": "vm", "nnodes": nnodes, "pid": 1}]}
    return world_check(v, 20.0, 20.0)


def _by_id(checks: list, cid: str) -> list:
    return [c for c in checks if c.id == cid]


def test_a_hostname_on_loopback_does_not_outrank_the_node_that_never_joined():
    """The wrong-port case on fake facts: node 0 alone, its hostname on loopback (a stock VM), node 1 never joined."""
    f = facts(host=LOOPBACK_NAME)
    local = _local(f)
    assert _by_id(local, "host.hostname_resolves")[0].status is Status.FAIL  # as judged for nodes on other hosts
    world = _missing_world([1])
    judged = judged_among_joined(local, f, 0, [1])
    report = Report(command="preflight", version="0", started="", checks=judged + [world])
    assert report.root_cause() is world
    c = _by_id(judged, "host.hostname_resolves")[0]
    assert c.status is Status.WARN and c.node == 0, c
    assert "resolves to loopback" in c.summary and "node rank(s) 1 never joined" in c.summary, c.summary
    assert c.fix and c.evidence["judged_without"] == "1", c


def test_no_usable_interface_is_not_judged_without_the_mesh_either():
    f = facts(host=LOOPBACK_NAME, interfaces=[iface("lo", "loopback", "127.0.0.1")])
    local = _local(f)
    assert _by_id(local, "net.interfaces")[0].status is Status.FAIL
    judged = judged_among_joined(local, f, 0, [1, 2, 3])
    c = _by_id(judged, "net.interfaces")[0]
    assert c.status is Status.WARN and "node rank(s) 1-3 never joined" in c.summary, c
    assert not [x for x in judged if x.status is Status.FAIL], judged


def test_a_failure_that_stands_wherever_the_nodes_run_stays_a_failure():
    """GLOO_SOCKET_IFNAME naming no interface fails on one host too: judging it among the nodes that joined keeps it."""
    f = facts(host=LOOPBACK_NAME, env={"GLOO_SOCKET_IFNAME": "nope0"})
    judged = judged_among_joined(_local(f), f, 0, [1])
    gloo = [c for c in _by_id(judged, "net.socket_ifname") if "nope0" in c.summary]
    assert gloo and all(c.status is Status.FAIL for c in gloo), judged
    # ... while the loopback hostname (which GLOO_SOCKET_IFNAME set turns into a warning) is no failure
    assert _by_id(judged, "host.hostname_resolves")[0].status is Status.WARN


def test_other_nodes_results_and_other_checks_are_left_as_they_are():
    f = facts(host=LOOPBACK_NAME)
    other = failed("host.hostname_resolves", "hostname 'b' resolves to loopback (127.0.1.1)", node=1)
    shm = failed("host.shm", "/dev/shm is 64 MiB", node=0)
    judged = judged_among_joined([other, shm], f, 0, [2])
    assert judged == [other, shm]
    assert judged_among_joined([other], {}, 0, [1]) == [other]  # no facts: nothing to judge again


def test_every_check_judged_again_is_one_whose_verdict_depends_on_where_the_nodes_run():
    """The class the rule covers is the one the mesh probe re-judges (rejudge_one_host): a check that passes with
    every node on this host and fails with nodes elsewhere. A new such check joins ONE_HOST_RECHECKED and is
    covered here at once."""
    f = facts(host=LOOPBACK_NAME, interfaces=[iface("lo", "loopback", "127.0.0.1")], env={"NCCL_SOCKET_IFNAME": "lo"})
    local = _local(f)
    apart = {c.id for c in local if c.status is Status.FAIL and c.id in ONE_HOST_RECHECKED}
    assert apart == set(ONE_HOST_RECHECKED), apart  # each of them fails here, on a multi-host judgement
    judged = judged_among_joined(local, f, 0, [1])
    assert not [c for c in judged if c.status is Status.FAIL], [c for c in judged if c.status is Status.FAIL]
