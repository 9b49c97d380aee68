"""A dead link between two nodes is named as that link, not as two nodes cut off (issue 27: a dropped link among 64
hosts): reachability's "cut_links" and net.peer_reachability's verdict, from probe attempts as nodes publish them."""

from __future__ import annotations

from ncclcheck.checks import CrossInput, run_cross_checks
from ncclcheck.model import Status
from ncclcheck.nccl.reachability import build_matrix, probe_targets
from tests.fakefacts import facts, iface

NO_ANSWER = "no_answer: the TCP connect was not answered within 2 s (and on a retry with 6 s)"


def _nodes(n):
    return [(r, f"h{r}", facts(interfaces=[iface("eth0", ipv4=f"10.0.{r // 200}.{r % 200 + 1}", speed=100000)]))
            for r in range(n)]


def _rec(dst, error=None):
    return {"peer": dst, "iface": "eth0", "addr": f"10.0.{dst // 200}.{dst % 200 + 1}", "port": 4000,
            "ok": error is None, "reached": dst if error is None else None, "reached_id": None, "expected_id": None,
            "error": error}


def _reach(n, dead, silent=()):
    """n nodes probing their planned targets; `dead`: the (src, dst) attempts that got no answer; `silent`: nodes
    that published no row. Returns (the eth0 matrix entry, the net.peer_reachability result)."""
    eps = {r: {"eth0": [[f"10.0.{r // 200}.{r % 200 + 1}", 4000]]} for r in range(n)}
    attempts = {s: [_rec(d, NO_ANSWER if (s, d) in dead else None) for d in probe_targets(n, s)]
                for s in range(n) if s not in silent}
    mesh = build_matrix(list(range(n)), eps, attempts)
    pr = next(c for c in run_cross_checks(CrossInput(_nodes(n), mesh=mesh, attempts=attempts))
              if c.id == "net.peer_reachability")
    return mesh["eth0"], pr


def test_a_link_dead_both_ways_names_its_two_ends_as_a_link():
    entry, pr = _reach(4, {(1, 2), (2, 1)})
    assert entry["cut_links"] == [[1, 2]]
    assert pr.status is Status.FAIL
    assert pr.summary == "eth0 carries no TCP between node 1 (h1) and node 2 (h2): a dead link (each node reaches " \
                         "the others)", pr.summary
    assert "1->2" in pr.detail and "no_answer" in pr.detail and "firewall" in pr.fix
    assert pr.evidence["cut_links"] == {"eth0": [[1, 2]]}


def test_a_link_dead_one_way_is_a_link_too():
    entry, pr = _reach(3, {(0, 2)})
    assert entry["cut_links"] == [[0, 2]]
    assert pr.status is Status.FAIL and "between node 0 (h0) and node 2 (h2)" in pr.summary


def test_in_a_sampled_mesh_a_dead_ring_link_names_only_its_ends():
    n = 40  # above FULL_MESH_MAX: each node probes its ring neighbours and a seeded sample
    entry, pr = _reach(n, {(20, 21), (21, 20)})
    assert entry.get("sampled") and entry["cut_links"] == [[20, 21]]
    assert pr.status is Status.FAIL and "node 20 (h20) and node 21 (h21)" in pr.summary
    assert "node 19" not in pr.summary and "node 22" not in pr.summary


def test_a_node_cut_off_from_two_peers_but_reaching_a_third_is_two_links():
    entry, pr = _reach(4, {(3, 1), (1, 3), (3, 2), (2, 3)})
    assert entry["cut_links"] == [[1, 3], [2, 3]]
    assert pr.status is Status.FAIL and "node 1 (h1) and node 3 (h3), node 2 (h2) and node 3 (h3)" in pr.summary


def test_a_node_cut_off_from_everyone_is_a_node_not_links():
    entry, pr = _reach(3, {(0, 2), (1, 2), (2, 0), (2, 1)})
    assert "cut_links" not in entry
    assert pr.status is Status.FAIL and "dead link" not in pr.summary and "node 2 (h2)" in pr.summary


def test_inbound_filtering_stays_a_firewall_and_a_silent_node_stays_a_node():
    entry, pr = _reach(4, {(0, 3), (1, 3), (2, 3)})
    assert "cut_links" not in entry and pr.summary == "node 3 (h3) drops inbound TCP: a firewall"
    entry, pr = _reach(4, {(1, 2), (2, 1)}, silent={3})
    assert "cut_links" not in entry and "dead link" not in pr.summary
