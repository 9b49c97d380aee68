"""Node 0's per-arrival and per-node work stays O(1) and O(n) (issue 27: 8,192 nodes), with the same answers as the
whole-world computation it replaces."""

from __future__ import annotations

import random

from ncclcheck.preflight.decide import JoinTally, decide
from ncclcheck.recommend.mesh import MeshView


def _join(rank, nnodes=4, host=None):
    return {"node_rank": rank, "nnodes": nnodes, "hostname": host or f"h{rank}", "uuid": f"u{rank}", "pid": 1}


def test_the_tally_is_complete_exactly_when_decide_says_so_for_any_arrival_order():
    rng = random.Random(7)
    for _ in range(200):
        expected = rng.choice([3, 4, 5])
        pool = [_join(r, nnodes=rng.choice([expected, expected, expected, 6])) for r in range(-1, 7)]
        pool += [_join(rng.randrange(0, 5), host="dup") for _ in range(2)]
        rng.shuffle(pool)
        tally, joins = JoinTally(expected), []
        for j in pool:
            tally.add(j)
            joins.append(j)
            assert tally.complete == decide(joins, expected, final=False)["complete"], joins


def test_the_mesh_view_answers_per_node_and_interface_as_the_facts_say_first_listing_first():
    eth = {"name": "eth0", "speed_mbps": 100}
    nodes = [(0, "a", {"interfaces": [eth, {"name": "eth0", "speed_mbps": 1}, "junk"]}),
             (1, "b", {"interfaces": None}), (0, "again", {"interfaces": [{"name": "ib0"}]}), (2, "c", None)]
    v = MeshView(nodes, {})
    assert v.iface(0, "eth0") is eth  # the first interface of that name on the first node listed with the rank
    assert v.iface(0, "ib0") == {} and v.iface(1, "eth0") == {} and v.iface(2, "x") == {} and v.iface(9, "eth0") == {}
    assert v.ranks == [0, 1, 0, 2]
