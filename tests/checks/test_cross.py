"""Cross-node checks and the mesh recommendation rules, on fake facts and fake matrices."""

from __future__ import annotations

from ncclcheck.checks import CrossInput, run_cross_checks
from ncclcheck.checks.cross import check_clock_skew
from ncclcheck.model import Recommendation, Status
from ncclcheck.recommend.mesh import MeshView, merge_recommendations, recommend_mesh
from tests.fakefacts import facts, iface


def _nodes(*fs):
    return [(r, f"h{r}", f) for r, f in enumerate(fs)]


def _by_id(results):
    return {r.id: r for r in results}


def _full(n, value=True):
    return [[None if i == j else value for j in range(n)] for i in range(n)]


def _entry(matrix, nodes=None, errors=None, duplicates=None):
    n = len(matrix)
    return {"matrix": matrix, "errors": errors or {}, "duplicates": duplicates or {},
            "nodes": list(range(n)) if nodes is None else nodes}


def test_everything_equal_passes():
    res = _by_id(run_cross_checks(CrossInput(_nodes(facts(), facts(), facts()),
                                             mesh={"eth0": _entry(_full(3))})))
    for cid in ("versions.consistent", "packages.consistent", "code.consistent", "gpu.count", "env.nccl",
                "ib.devices", "net.peer_reachability", "net.mtu_consistent"):
        assert res[cid].status is Status.PASS, (cid, res[cid].summary)
        assert res[cid].node is None
    assert res["paths.consistent"].status is Status.SKIP


def test_versions_differ_on_one_node_names_it():
    odd = facts(versions={"torch": "2.12.0"})
    r = _by_id(run_cross_checks(CrossInput(_nodes(facts(), facts(), odd))))["versions.consistent"]
    assert r.status is Status.FAIL
    assert "torch 2.13.0 on most nodes but 2.12.0 on node 2 (h2)" in r.summary
    assert r.evidence["odd_nodes"]["torch"] == [2]
    assert r.fix


def test_driver_only_difference_is_a_warning():
    r = _by_id(run_cross_checks(CrossInput(_nodes(facts(versions={"driver": "550"}),
                                                  facts(versions={"driver": "560"})))))["versions.consistent"]
    assert r.status is Status.WARN


def test_packages_differ_lists_the_distribution():
    a = facts(packages={"hash": "sha256:a", "count": 2, "items": {"torch": "2.13.0", "numpy": "2.1.0"}})
    b = facts(packages={"hash": "sha256:b", "count": 2, "items": {"torch": "2.13.0", "numpy": "2.0.0"}})
    c = facts(packages={"hash": "sha256:c", "count": 1, "items": {"torch": "2.13.0"}})
    r = _by_id(run_cross_checks(CrossInput(_nodes(a, a, b, c))))["packages.consistent"]
    assert r.status is Status.FAIL
    assert "torch" not in r.evidence["differ"]
    assert r.evidence["differ"]["numpy"] == {"2.1.0": [0, 1], "2.0.0": [2], "missing": [3]}
    assert "numpy 2.0.0 on node 2 (h2), missing on node 3 (h3) (2.1.0 on the others)" in r.summary
    assert r.evidence["odd_nodes"]["numpy"] == [2, 3] and r.evidence["majority"]["numpy"] == "2.1.0"


def test_a_package_at_another_version_on_one_node_fails_naming_it():
    """Issue 44 item 5: one node's own package (or torch, numpy: anything listed) at another version is a
    failure naming that node, the package, its version there and the majority's."""
    def pk(mine):
        items = {"torch": "2.13.0", "numpy": "2.1.0", "mytrainer": mine}
        return facts(packages={"hash": f"sha256:{mine}", "count": 3, "items": items})
    r = _by_id(run_cross_checks(CrossInput(_nodes(pk("1.4.0"), pk("1.4.0"), pk("1.3.2"), pk("1.4.0")))))[
        "packages.consistent"]
    assert r.status is Status.FAIL
    assert r.summary == "1 distribution(s) differ on node 2 (h2): mytrainer 1.3.2 on node 2 (h2) (1.4.0 on the others)"
    assert r.evidence["odd_nodes"] == {"mytrainer": [2]}
    assert r.fix


def test_a_package_only_a_minority_has_is_a_warning():
    base = {"torch": "2.13.0"}
    plain = facts(packages={"hash": "sha256:a", "count": 1, "items": base})
    debug = facts(packages={"hash": "sha256:b", "count": 2, "items": dict(base, **{"py-spy": "0.4.0"})})
    r = _by_id(run_cross_checks(CrossInput(_nodes(plain, debug, plain))))["packages.consistent"]
    assert r.status is Status.WARN
    assert "py-spy 0.4.0 on node 1 (h1) (not on the others)" in r.summary, r.summary


def test_hashes_differ_without_lists_is_never_a_pass():
    a = facts(packages={"hash": "sha256:a", "count": 1, "items": {"torch": "2.13.0"}})
    b = facts(packages={"hash": "sha256:b", "count": 1, "items": None})
    r = _by_id(run_cross_checks(CrossInput(_nodes(a, a, b))))["packages.consistent"]
    assert r.status is Status.WARN and "node 2 (h2) sent no list" in r.summary


def test_code_differs_on_one_node_names_the_odd_one():
    odd = facts(code={"hash": "sha256:other", "git_head": "bbbbbbbbbbbbbbbb"})
    good = facts(code={"git_head": "aaaaaaaaaaaaaaaa"})
    r = _by_id(run_cross_checks(CrossInput(_nodes(good, odd, good))))["code.consistent"]
    assert r.status is Status.FAIL
    assert r.summary == "code differs on node 1 (h1)"
    assert "git bbbbbbbbbbbb" in r.detail


def test_paths_missing_and_different():
    p = {"path": "/data", "exists": True, "readable": True, "kind": "dir", "files": 3, "bytes": 30,
         "fingerprint": "sha256:d", "truncated": False}
    missing = dict(p, exists=False, readable=False, kind="missing", fingerprint=None)
    other = dict(p, files=2, fingerprint="sha256:e")
    r = _by_id(run_cross_checks(CrossInput(_nodes(facts(paths=[p]), facts(paths=[missing])))))["paths.consistent"]
    assert r.status is Status.FAIL and "node 1 (h1)" in r.summary
    r = _by_id(run_cross_checks(CrossInput(_nodes(facts(paths=[p]), facts(paths=[p]),
                                                  facts(paths=[other])))))["paths.consistent"]
    assert r.status is Status.WARN and "node 2 (h2)" in r.summary


def test_heterogeneous_gpu_count_is_a_warning():
    r = _by_id(run_cross_checks(CrossInput(_nodes(facts(gpu={"count": 8}), facts(gpu={"count": 7})))))["gpu.count"]
    assert r.status is Status.WARN and "node 1 (h1)" in r.summary


def test_mtu_differs_names_the_node_and_the_command():
    n0 = facts()
    n1 = facts(interfaces=[iface("eth0", ipv4="10.0.0.2", mtu=9000)])
    r = _by_id(run_cross_checks(CrossInput(_nodes(n0, n1), mesh={"eth0": _entry(_full(2))})))["net.mtu_consistent"]
    assert r.status is Status.FAIL
    assert "ip link set dev eth0 mtu" in r.fix


def test_nccl_env_differs_and_per_node_ifname_is_fine():
    a = facts(env={"NCCL_P2P_DISABLE": "1", "NCCL_SOCKET_IFNAME": "eth0"})
    b = facts(env={"NCCL_SOCKET_IFNAME": "ens5"})
    r = _by_id(run_cross_checks(CrossInput(_nodes(a, b))))["env.nccl"]
    assert r.status is Status.WARN
    assert "NCCL_P2P_DISABLE" in r.summary and "NCCL_SOCKET_IFNAME" not in r.summary
    r = _by_id(run_cross_checks(CrossInput(_nodes(facts(env={"NCCL_SOCKET_IFNAME": "a"}),
                                                  facts(env={"NCCL_SOCKET_IFNAME": "b"})))))["env.nccl"]
    assert r.status is Status.PASS


def test_ib_active_set_differs():
    from tests.fakefacts import ib_one_active_one_down, port

    both = {"devices": [{"name": "mlx5_0", "ports": [port(1)]}, {"name": "mlx5_1", "ports": [port(1)]}]}
    r = _by_id(run_cross_checks(CrossInput(_nodes(facts(rdma=both), facts(rdma=both),
                                                  facts(rdma=ib_one_active_one_down())))))["ib.devices"]
    assert r.status is Status.WARN and "node 2 (h2): mlx5_0:1" in r.summary
    r = _by_id(run_cross_checks(CrossInput(_nodes(facts(rdma=both), facts(rdma={"devices": []})))))["ib.devices"]
    assert r.status is Status.FAIL


def test_clock_skew_names_the_skewed_node():
    attempts = {0: [{"ok": True, "peer": 1, "reached": 1, "offset_s": 0.01, "rtt_us": 100},
                    {"ok": True, "peer": 2, "reached": 2, "offset_s": 3.2, "rtt_us": 100}]}
    r = check_clock_skew(CrossInput(_nodes(facts(), facts(), facts()), attempts=attempts))
    assert r.status is Status.WARN and "node 2 (h2)" in r.summary and "+3.2 s" in r.summary
    attempts = {1: [{"ok": True, "peer": 0, "reached": 0, "offset_s": -0.2, "rtt_us": 100}]}
    r = check_clock_skew(CrossInput(_nodes(facts(), facts()), attempts=attempts))
    assert r.status is Status.PASS and r.evidence["offset_s"]["1"] == 0.2


# ---- reachability + mesh recommendation ------------------------------------------------------------------------


def _cluster(n, extra=None):
    """n nodes with eth0 (100G), a docker0 decoy with the same address everywhere, and per-node extras."""
    out = []
    for r in range(n):
        ifs = [iface("lo", "loopback", "127.0.0.1"), iface("eth0", ipv4=f"10.0.0.{r + 1}", speed=100000),
               iface("docker0", "docker", "172.17.0.1")]
        ifs += (extra or {}).get(r, [])
        out.append((r, f"h{r}", facts(interfaces=ifs)))
    return out


DOCKER_DUP = _entry(_full(3, False), errors={"0->1": "172.17.0.1: same address on nodes 0,1,2"},
                    duplicates={"172.17.0.1": [0, 1, 2]})


def test_docker_decoy_with_the_same_address_is_never_recommended():
    nodes = _cluster(3)
    mesh = {"eth0": _entry(_full(3)), "docker0": dict(DOCKER_DUP, matrix=_full(3, True))}  # even if "reached"
    recs = {(r.name, r.node): r for r in recommend_mesh(MeshView(nodes, mesh))}
    assert recs[("NCCL_SOCKET_IFNAME", None)].value == "=eth0"  # one (exact) form, as standalone: issue 24
    assert recs[("GLOO_SOCKET_IFNAME", None)].value == "eth0"
    assert "docker0 unusable: same address 172.17.0.1 on nodes 0-2" in recs[("NCCL_SOCKET_IFNAME", None)].reason
    res = _by_id(run_cross_checks(CrossInput(nodes, mesh={"eth0": _entry(_full(3)), "docker0": DOCKER_DUP})))
    pr = res["net.peer_reachability"]
    assert pr.status is Status.PASS and "eth0" in pr.summary and "docker0 (same address 172.17.0.1" in pr.summary


def test_fastest_interface_first_and_prefix_collision_gives_exact_form():
    extra = {r: [iface("eth1", ipv4=f"10.1.0.{r + 1}", speed=400000), iface("eth10", ipv4=None, speed=1000)]
             for r in range(3)}
    nodes = _cluster(3, extra)
    mesh = {"eth0": _entry(_full(3)), "eth1": _entry(_full(3))}
    recs = {(r.name, r.node): r for r in recommend_mesh(MeshView(nodes, mesh))}
    assert recs[("NCCL_SOCKET_IFNAME", None)].value == "=eth1"
    assert "also matches eth10" in recs[("NCCL_SOCKET_IFNAME", None)].reason
    assert recs[("GLOO_SOCKET_IFNAME", None)].value == "eth1"


def test_second_nic_dropped_on_one_node_is_not_recommended():
    extra = {r: [iface("eth1", ipv4=f"10.1.0.{r + 1}", speed=400000)] for r in range(3)}
    nodes = _cluster(3, extra)
    m = _full(3)
    m[0][2] = m[1][2] = False
    mesh = {"eth0": _entry(_full(3)), "eth1": _entry(m, errors={"0->2": "10.1.0.3: timeout"})}
    recs = {(r.name, r.node): r for r in recommend_mesh(MeshView(nodes, mesh))}
    assert recs[("NCCL_SOCKET_IFNAME", None)].value == "=eth0"
    assert "eth1 unusable: 0->2 10.1.0.3: timeout" in recs[("NCCL_SOCKET_IFNAME", None)].reason


def test_per_node_names_when_interfaces_are_named_differently():
    nodes = [(0, "h0", facts(interfaces=[iface("eth0", ipv4="10.0.0.1")])),
             (1, "h1", facts(interfaces=[iface("ens5", ipv4="10.0.0.2")]))]
    mesh = {"eth0": _entry([[None, None], [True, None]], nodes=[0]),
            "ens5": _entry([[None, True], [None, None]], nodes=[1])}
    recs = {(r.name, r.node): r.value for r in recommend_mesh(MeshView(nodes, mesh))}
    assert recs == {("NCCL_SOCKET_IFNAME", 0): "=eth0", ("GLOO_SOCKET_IFNAME", 0): "eth0",
                    ("NCCL_SOCKET_IFNAME", 1): "=ens5", ("GLOO_SOCKET_IFNAME", 1): "ens5"}
    pr = _by_id(run_cross_checks(CrossInput(nodes, mesh=mesh)))["net.peer_reachability"]
    assert pr.status is Status.PASS and "per node" in pr.summary


def test_no_usable_interface_is_a_failure_with_the_matrix():
    nodes = _cluster(3)
    m = _full(3)
    m[0][2] = m[1][2] = m[2][0] = m[2][1] = False
    mesh = {"eth0": _entry(m, errors={"0->2": "10.0.0.3:4000: timeout"}), "docker0": DOCKER_DUP}
    pr = _by_id(run_cross_checks(CrossInput(nodes, mesh=mesh)))["net.peer_reachability"]
    assert pr.status is Status.FAIL and "node 2 (h2)" in pr.summary
    assert pr.evidence["interfaces"]["eth0"]["matrix"] == m
    assert "ephemeral ports" in pr.fix
    assert recommend_mesh(MeshView(nodes, mesh)) == []


def test_explicit_ifname_pointing_at_an_unusable_interface_fails():
    nodes = _cluster(2)
    nodes[1] = (1, "h1", dict(nodes[1][2], env={"vars": {"NCCL_SOCKET_IFNAME": "docker0"}, "redacted": []}))
    mesh = {"eth0": _entry(_full(2)), "docker0": _entry(_full(2, False), duplicates={"172.17.0.1": [0, 1]})}
    pr = _by_id(run_cross_checks(CrossInput(nodes, mesh=mesh)))["net.peer_reachability"]
    assert pr.status is Status.FAIL and "node 1 would use docker0" in pr.summary


def test_merge_collapses_agreeing_local_recommendations_and_mesh_wins_ifname():
    mesh_recs = [Recommendation("NCCL_SOCKET_IFNAME", "eth0", "mesh")]
    local = {0: [Recommendation("NCCL_SOCKET_IFNAME", "=eth9", "local"), Recommendation("NCCL_IB_DISABLE", "1", "x")],
             1: [Recommendation("NCCL_IB_DISABLE", "1", "x"), Recommendation("NCCL_IB_HCA", "=mlx5_0:1", "y")]}
    out = {(r.name, r.node): r.value for r in merge_recommendations(mesh_recs, local)}
    assert out == {("NCCL_SOCKET_IFNAME", None): "eth0", ("NCCL_IB_DISABLE", None): "1",
                   ("NCCL_IB_HCA", 1): "=mlx5_0:1"}


def test_inbound_filtering_is_named_as_a_firewall_with_the_nodes_ephemeral_range():
    nodes = _cluster(3)
    m = _full(3)
    m[0][1] = m[2][1] = False  # nobody reaches node 1; node 1 reaches everyone
    mesh = {"eth0": _entry(m, errors={"0->1": "10.0.0.2:40000: timeout", "2->1": "10.0.0.2:40000: timeout"}),
            "docker0": DOCKER_DUP}
    pr = _by_id(run_cross_checks(CrossInput(nodes, mesh=mesh)))["net.peer_reachability"]
    assert pr.status is Status.FAIL
    assert pr.summary == "node 1 (h1) drops inbound TCP: a firewall", pr.summary
    assert "32768-60999" in pr.fix and "iptables" in pr.fix and "node 1 (h1)" in pr.fix
    assert pr.evidence["inbound_filtered"] == [1]


def test_a_node_cut_off_both_ways_is_not_called_a_firewall():
    nodes = _cluster(3)
    m = _full(3)
    m[0][2] = m[1][2] = m[2][0] = m[2][1] = False
    pr = _by_id(run_cross_checks(CrossInput(nodes, mesh={"eth0": _entry(m)})))["net.peer_reachability"]
    assert pr.status is Status.FAIL and "firewall" not in pr.summary and "node 2 (h2)" in pr.summary
