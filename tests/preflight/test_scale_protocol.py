"""Preflight at scale as pure functions: who probes whom in a sampled mesh, who is blamed when probes fail, and the
compact verdict node 0 publishes (its size follows the problems, not the node count)."""

from __future__ import annotations

import json

from ncclcheck.model import CheckResult, Recommendation, Status, failed, passed, warned
from ncclcheck.nccl import reachability as R
from ncclcheck.preflight import wire as V
from ncclcheck.render.common import group_checks, group_summary


def _connected(n: int, edges: dict) -> bool:
    adj = {i: set() for i in range(n)}
    for i, ts in edges.items():
        for j in ts:
            adj[i].add(j)
            adj[j].add(i)
    seen, todo = {0}, [0]
    while todo:
        for j in adj[todo.pop()] - seen:
            seen.add(j)
            todo.append(j)
    return len(seen) == n


def test_full_mesh_up_to_the_threshold_then_a_bounded_sample():
    assert R.probe_targets(R.FULL_MESH_MAX, 3) == [j for j in range(R.FULL_MESH_MAX) if j != 3]
    n = 1024
    edges = {i: R.probe_targets(n, i) for i in range(n)}
    assert all(i not in ts and len(ts) <= R.SAMPLE_PEERS + 2 for i, ts in edges.items())
    assert all({(i + 1) % n, (i - 1) % n} <= set(ts) for i, ts in edges.items())  # the ring: always connected
    assert _connected(n, edges)
    probed_by = [0] * n
    for ts in edges.values():
        for j in ts:
            probed_by[j] += 1
    assert min(probed_by) >= 2  # every node is probed by several peers
    assert R.probe_targets(n, 5) == R.probe_targets(n, 5)  # every node computes anyone's targets alike


def _attempts(n: int, ok=lambda s, d: True, silent=()):
    out = {}
    for s in range(n):
        if s in silent:
            continue
        out[s] = [{"peer": d, "iface": "eth0", "addr": f"10.0.{d // 250}.{d % 250}", "port": 1, "ok": ok(s, d),
                   "reached": d if ok(s, d) else None, "error": None if ok(s, d) else "refused: x"}
                  for d in R.probe_targets(n, s)]
    return out


def _eps(n: int) -> dict:
    return {r: {"eth0": [[f"10.0.{r // 250}.{r % 250}", 1]]} for r in range(n)}


def test_sampled_mesh_reports_sampled_and_pairs_tested_without_a_dense_matrix():
    n = 200
    m = R.build_matrix(list(range(n)), _eps(n), _attempts(n))["eth0"]
    assert m["sampled"] and "matrix" not in m
    assert m["pairs_tested"] == sum(len(R.probe_targets(n, i)) for i in range(n))
    assert R.usable_everywhere(m, list(range(n)))
    assert json.dumps(m["usable"]).count("true") == n and len(json.dumps(m)) < 40 * n  # per node, not per pair


def test_a_node_whose_probes_all_fail_is_blamed_alone():
    n, bad = 200, 17
    m = R.build_matrix(list(range(n)), _eps(n), _attempts(n, ok=lambda s, d: s != bad))["eth0"]
    assert m["cannot_reach"] == [bad]
    assert [r for r in range(n) if not R.node_usable(m, n)[r]] == [bad]
    assert m["errors_total"] == len(R.probe_targets(n, bad)) and len(m["errors"]) <= R.MAX_ERRORS


def test_a_node_no_peer_can_reach_is_named_and_a_silent_node_is_blamed():
    n, deaf, silent = 200, 42, 99
    m = R.build_matrix(list(range(n)), _eps(n), _attempts(n, ok=lambda s, d: d != deaf, silent={silent}))["eth0"]
    assert [r for r in range(n) if not R.node_usable(m, n)[r]] == [deaf, silent]
    assert f"{silent}->*" in m["errors"]


def test_full_mesh_keeps_the_dense_matrix_and_a_two_node_failure_still_fails_the_target():
    m = R.build_matrix([0, 1], _eps(2), {0: [{"peer": 1, "iface": "eth0", "addr": "10.0.0.1", "port": 1,
                                              "ok": False, "error": "refused"}],
                                         1: [{"peer": 0, "iface": "eth0", "addr": "10.0.0.0", "port": 1,
                                              "ok": True, "reached": 0}]})["eth0"]
    assert m["matrix"] == [[None, False], [True, None]]
    assert R.node_usable(m, 2) == [True, False]


def _local(n: int, bad: dict) -> list:
    out = []
    for r in range(n):
        s = bad.get(r)
        out.append(failed("host.shm", s, node=r, fix="--shm-size=8g") if s else passed("host.shm", "16 GiB", node=r))
        out.append(passed("host.memlock", "unlimited", node=r))
    return out


def test_aggregated_local_checks_name_the_odd_nodes_and_count_the_rest():
    hosts = {r: f"gpu{r:03d}" for r in range(1024)}
    agg = V.aggregate_local(_local(1024, {17: "/dev/shm is 64 MiB", 230: "/dev/shm is 64 MiB"}), hosts)
    assert [c.id for c in agg] == ["host.shm"]  # memlock passed everywhere: not in the verdict
    assert agg[0].status is Status.FAIL and agg[0].node is None
    assert agg[0].summary == "pass on 1,022 nodes; fail on node 17 (gpu017), node 230 (gpu230): /dev/shm is 64 MiB"
    assert agg[0].fix == "--shm-size=8g"


def test_the_compact_verdict_grows_with_problems_not_with_nodes():
    def size(n: int) -> int:
        hosts = {r: f"gpu{r:04d}" for r in range(n)}
        cross = [failed("code.consistent", "code differs on node 17 (gpu0017)",
                        evidence={"hashes": {str(r): "sha256:" + "a" * 64 for r in range(n)}, "odd_nodes": [17]})]
        recs = [Recommendation("NCCL_SOCKET_IFNAME", "eth0", "connects every pair")]
        return len(json.dumps(V.build_result(cross, _local(n, {17: "/dev/shm is 64 MiB"}), recs, hosts)))

    assert size(1024) - size(64) < 16  # only the digits of the counts differ
    back = V.read_result(json.loads(json.dumps(V.build_result(
        [warned("env.nccl", "x")], [], [Recommendation("A", "1", "r", node=3)], {}))))
    assert back[0][0].status is Status.WARN and back[2][0].node == 3


def test_group_summary_names_at_most_a_few_nodes():
    checks = [failed("gpu.count", f"{r} GPUs", node=r) for r in range(20)] + [passed("gpu.count", "8", node=99)]
    (g,) = group_checks(checks)
    text = group_summary(g, {})
    # a text per node: every failing node as ranges and a count, one node's text as the example, no "N more"
    assert text == "pass on 1 node; fail on 20 nodes ? (node ranks 0-19), 20 different texts, e.g. 0 GPUs"
    assert isinstance(g.results[0], CheckResult)


def test_peer_reachability_says_sampled_and_names_the_node_that_reaches_nobody():
    from ncclcheck.preflight.decide import mesh_note as _mesh_note

    n, bad = 100, 7
    m = R.build_matrix(list(range(n)), _eps(n), _attempts(n, ok=lambda s, d: s != bad))
    c = _mesh_note(failed("net.peer_reachability", "no interface of node 7 (h7) is reachable"), m, n,
                   {r: f"h{r}" for r in range(n)})
    assert "sampled mesh" in c.summary and f"of {n * (n - 1):,} node pairs" in c.summary
    assert c.evidence["sampled"] and c.evidence["pairs_tested"] == m["eth0"]["pairs_tested"]
    assert c.detail.startswith("node 7 (h7) reached none of the peers it probed") and c.evidence["cannot_reach"] == [7]


def _published(n: int) -> dict:
    return {r: {"id": f"{r:04x}" + "ab" * 6, "endpoints": {"eth0": [[f"198.18.5.{r + 1}", 40000 + r]],
                                                           "docker0": [["172.17.0.1", 30000 + r]]}}
            for r in range(n)}


def test_the_endpoint_directory_round_trips_in_a_few_bytes_a_node():
    from ncclcheck.preflight import wire as P

    eps = _published(16)
    eps[5] = {"id": "not-hex-at-all", "endpoints": {"eth0": [["fd00::5", 40005]]}}  # travels as published
    del eps[9]  # never published: absent, not an empty entry
    back = P.unpack_directory(json.loads(json.dumps(P.pack_directory(eps, 16))))
    assert sorted(back) == [r for r in range(16) if r != 9]
    assert back[5] == eps[5]
    for r in (0, 7, 15):
        assert back[r]["endpoints"] == eps[r]["endpoints"]
        assert eps[r]["id"].startswith(back[r]["id"]) and len(back[r]["id"]) == P.ID_PREFIX_HEX
    big, small = (len(json.dumps(P.pack_directory(_published(n), n))) for n in (32, 4))
    assert (big - small) / 28 <= (5 + 2 * 7) * 4 / 3 + 1  # per node: base64 of 5 bytes + 7 per endpoint
    assert P.unpack_directory({"if": ["eth0"], "n": 3, "b": "!!"}) == {}  # garbage is nobody, never a crash


def test_a_healthy_probe_row_is_the_same_size_at_4_or_32_nodes_and_keeps_failures_and_node0_timings():
    from ncclcheck.preflight import wire as P

    def row(n: int, fail: frozenset = frozenset()) -> tuple:
        eps = _published(n)
        attempts = [{"peer": r, "iface": "eth0", "addr": eps[r]["endpoints"]["eth0"][0][0],
                     "port": eps[r]["endpoints"]["eth0"][0][1], "ok": r not in fail, "reached": r,
                     "reached_id": eps[r]["id"], "expected_id": eps[r]["id"][:P.ID_PREFIX_HEX], "rtt_us": 80.0,
                     "offset_s": 0.002, "error": "refused: x" if r in fail else None} for r in range(2, n)]
        packed = json.loads(json.dumps(P.pack_row(attempts, eps, timed={0, 2})))
        published = {r: e["endpoints"] for r, e in eps.items()}
        return packed, {a["peer"]: a for a in P.unpack_row(packed, published)}

    (r4, _), (r32, back) = row(4), row(32, frozenset({7, 20}))
    assert len(json.dumps(row(32)[0])) == len(json.dumps(r4)) + 6  # "[3, 31]" instead of "3"
    assert sorted(back) == list(range(2, 32))
    assert back[2]["offset_s"] == 0.002 and back[2]["rtt_us"] == 80  # towards a timed peer: kept
    assert back[3]["ok"] and back[3]["rtt_us"] is None and back[3]["addr"] == "198.18.5.4"
    assert not back[7]["ok"] and back[7]["error"] == "refused: x"
    assert r32["okr"] == [[0, 0, [[3, 6], [8, 19], [21, 31]]]]


def test_a_formed_world_names_its_nodes_as_ranges():
    from ncclcheck.preflight.decide import world_check

    members = [{"node_rank": r, "hostname": f"gpu{r:04d}"} for r in range(4096)]
    c = world_check({"ok": True, "nnodes": 4096, "members": members}, 4.3, 60.0)
    assert c.summary == "all 4,096 node ranks joined in 4.3 s: 4,096 nodes gpu[0000-4095] (node ranks 0-4095)"
    two = world_check({"ok": True, "nnodes": 2, "members": members[:2]}, 0.1, 60.0)
    assert two.summary == "all 2 node ranks joined in 0.1 s: node 0 (gpu0000), node 1 (gpu0001)"
