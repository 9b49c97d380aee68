"""Node-local checks on fake facts: the statuses a user would see, and that fixes are concrete."""

from ncclcheck.checks import run_local_checks
from ncclcheck.checks.local import LocalInput
from ncclcheck.model import Status
from tests.fakefacts import facts, ib_one_active_one_down, iface, roce_v2_at_3


def run(f, **kw):
    return run_local_checks(LocalInput.of(f, **kw))


def by_id(results, cid):
    return [r for r in results if r.id == cid]


def status(results, cid):
    return {r.status for r in by_id(results, cid)}


def test_healthy_node_passes_everything():
    res = run(facts())
    assert not [r for r in res if r.status in (Status.FAIL, Status.WARN)], [r.summary for r in res]
    assert status(res, "rendezvous.master_reachable") == {Status.SKIP}
    assert status(res, "ib.devices") == {Status.SKIP}


def test_socket_ifname_naming_no_interface_fails_with_the_present_names():
    res = run(facts(env={"NCCL_SOCKET_IFNAME": "ens5"}))
    (r,) = by_id(res, "net.socket_ifname")
    assert r.status is Status.FAIL
    assert "ens5" in r.summary and "eth0" in r.summary
    assert "no socket interface found" in r.fix


def test_socket_ifname_prefix_collision_warns_with_exact_form():
    f = facts(interfaces=[iface("eth1", ipv4="198.18.1.1"), iface("eth10", ipv4="198.18.10.1")],
              env={"NCCL_SOCKET_IFNAME": "eth1"})
    (r,) = by_id(run(f), "net.socket_ifname")
    assert r.status is Status.WARN and "eth10" in r.summary and "=eth1" in r.fix


def test_socket_ifname_docker_on_multi_node_fails():
    f = facts(interfaces=[iface("docker0", "docker", "198.19.17.1"), iface("eth0", ipv4="198.18.0.1")],
              env={"NCCL_SOCKET_IFNAME": "docker0"})
    assert status(run(f, multi_node=True), "net.socket_ifname") == {Status.FAIL}


def test_gloo_ifname_docker_on_multi_node_fails_and_alone_passes():
    # the lab's docker-decoy scenario with GLOO_SOCKET_IFNAME=docker0 on one host (tests/lab/test_guard_lab.py)
    f = facts(interfaces=[iface("docker0", "docker", "198.19.17.1"), iface("eth0", ipv4="198.18.0.1")],
              env={"GLOO_SOCKET_IFNAME": "docker0"})
    (r,) = by_id(run(f, multi_node=True), "net.socket_ifname")
    assert r.status is Status.FAIL and "docker0" in r.summary and "GLOO_SOCKET_IFNAME=eth0" in r.fix
    assert status(run(f), "net.socket_ifname") == {Status.PASS}


def test_gloo_ifname_must_be_exact():
    res = run(facts(env={"GLOO_SOCKET_IFNAME": "eth"}))
    (r,) = by_id(res, "net.socket_ifname")
    assert r.status is Status.FAIL and "exact" in r.fix


def test_shm_64mib_warns_on_cpu_and_fails_with_gpus():
    small = {"path": "/dev/shm", "total_bytes": 64 << 20, "free_bytes": 64 << 20}
    (r,) = by_id(run(facts(host={"shm": small})), "host.shm")
    assert r.status is Status.WARN and "64 MiB" in r.summary and "--shm-size" in r.fix
    gpus = {"count": 8, "source": "torch", "devices": [{"name": "H200"}] * 8}
    (r,) = by_id(run(facts(host={"shm": small}, gpu=gpus)), "host.shm")
    assert r.status is Status.FAIL


def test_memlock_matters_only_with_active_rdma():
    limited = {"soft": 8 << 20, "hard": 8 << 20}
    assert status(run(facts(host={"memlock": limited})), "host.memlock") == {Status.PASS}
    res = run(facts(host={"memlock": limited}, rdma=ib_one_active_one_down()))
    (r,) = by_id(res, "host.memlock")
    assert r.status is Status.FAIL and "ulimit -l unlimited" in r.fix


def test_hostname_on_loopback_fails_multi_node_only():
    lo = {"resolves_to": ["127.0.1.1"], "loopback": True}
    assert status(run(facts(host=lo)), "host.hostname_resolves") == {Status.PASS}
    (r,) = by_id(run(facts(host=lo), multi_node=True), "host.hostname_resolves")
    assert r.status is Status.FAIL and "127.0.1.1" in r.summary and "GLOO_SOCKET_IFNAME" in r.fix
    relaxed = run(facts(host=lo, env={"GLOO_SOCKET_IFNAME": "eth0"}), multi_node=True)
    assert status(relaxed, "host.hostname_resolves") == {Status.WARN}


def test_ib_down_port_warns_and_active_port_named():
    res = run(facts(rdma=ib_one_active_one_down()))
    (r,) = by_id(res, "ib.devices")
    assert r.status is Status.WARN and "mlx5_1:1" in r.summary


def test_ib_hca_matching_only_down_port_fails():
    res = run(facts(rdma=ib_one_active_one_down(), env={"NCCL_IB_HCA": "=mlx5_1"}))
    assert Status.FAIL in status(res, "ib.devices")


def test_roce_old_nccl_without_gid_index_warns_with_index_3():
    f = facts(rdma=roce_v2_at_3(), versions={"nccl": "2.18.3"})
    (r,) = by_id(run(f), "ib.devices")
    assert r.status is Status.WARN and r.fix == "export NCCL_IB_GID_INDEX=3"
    assert status(run(facts(rdma=roce_v2_at_3(), versions={"nccl": "2.21.5"})), "ib.devices") == {Status.PASS}


def test_gpu_count_against_nproc():
    g = {"count": 4, "source": "torch", "devices": [{"name": "H100"}] * 4}
    assert status(run(facts(gpu=g), nproc_per_node=8), "gpu.count") == {Status.FAIL}
    assert status(run(facts(gpu=g), nproc_per_node=4), "gpu.count") == {Status.PASS}
    assert status(run(facts(), backend="nccl"), "gpu.count") == {Status.FAIL}


def test_debug_switches_warned_and_thread_product_checked():
    res = run(facts(env={"NCCL_P2P_DISABLE": "1", "NCCL_SOCKET_NTHREADS": "16", "NCCL_NSOCKS_PERTHREAD": "8"}))
    st = status(res, "env.nccl")
    assert st == {Status.WARN, Status.FAIL}


def test_master_probe_results_become_fixes():
    refused = {"addr": "198.18.0.9", "port": 29500, "mode": "connect", "ok": False, "kind": "timeout",
               "error": "timed out after 5.0s"}
    (r,) = by_id(run(facts(), master=refused), "rendezvous.master_reachable")
    assert r.status is Status.FAIL and "198.18.0.9:29500" in r.summary and "firewall" in r.fix


def test_unavailable_group_skips_not_crashes():
    res = run(facts(interfaces={"unavailable": "psutil missing"}, host={"unavailable": "boom"}))
    assert status(res, "net.interfaces") == {Status.SKIP}
    assert status(res, "host.shm") == {Status.SKIP}
    assert all(r.summary for r in res)


def test_nccl_default_bootstrap_differs_from_master_route_warns():
    f = facts(interfaces=[iface("ens1", ipv4="198.19.9.1"), iface("eth0", ipv4="198.18.0.1")],
              route={"target": "198.18.0.5", "target_ip": "198.18.0.5", "interface": "eth0", "source": "198.18.0.1"})
    (r,) = by_id(run(f, multi_node=True), "net.interfaces")
    assert r.status is Status.WARN and "ens1" in r.summary and "=eth0" in r.fix


def test_old_nccl_would_bootstrap_on_dead_interface_warns():
    f = facts(interfaces=[iface("eth9", ipv4="198.18.9.1", running=False), iface("eth0", ipv4="198.18.0.1")],
              versions={"nccl": "2.21.5"})
    (r,) = by_id(run(f), "net.interfaces")
    assert r.status is Status.WARN and "eth9" in r.summary
    f["versions"]["nccl"] = "2.28.3"
    assert status(run(f), "net.interfaces") == {Status.PASS}


def test_docker_and_veth_are_not_counted_usable():
    f = facts(interfaces=[iface("docker0", "docker", "198.19.17.1"), iface("vethab", "veth", "198.19.254.1"),
                          iface("eth0", ipv4="198.18.0.1")])
    (r,) = by_id(run(f), "net.interfaces")
    assert r.evidence["usable"] == ["eth0"]


def test_a_path_that_does_not_exist_warns_naming_it(tmp_path):
    from ncclcheck.checks.local import LocalInput, check_paths_exist
    from ncclcheck.facts.paths import collect
    from ncclcheck.model import Status

    facts = {"paths": collect([str(tmp_path), "/nonexistent/data"])}
    r = check_paths_exist(LocalInput.of(facts))
    assert r.status is Status.WARN and "/nonexistent/data: does not exist" in r.summary
    assert str(tmp_path) not in r.summary
    assert check_paths_exist(LocalInput.of({"paths": collect([str(tmp_path)])})).status is Status.PASS


def test_hostname_resolving_first_to_loopback_fails_naming_node_and_hosts_line():
    # stock Ubuntu /etc/hosts: "127.0.1.1 h2" before "198.18.0.3 h2"; getaddrinfo returns them in that order
    first = {"hostname": "h2", "resolves_to": ["127.0.1.1", "198.18.0.3"], "loopback": False,
             "hosts_lines": ["127.0.1.1\th2", "198.18.0.3\th2"]}
    (r,) = by_id(run(facts(host=first), node_rank=1, multi_node=True), "host.hostname_resolves")
    assert r.status is Status.FAIL, r
    assert "node 1" in r.summary and "first to loopback 127.0.1.1" in r.summary and "198.18.0.3" in r.summary
    assert "'127.0.1.1\th2'" in r.fix and "node 1" in r.fix
    assert status(run(facts(host=first)), "host.hostname_resolves") == {Status.PASS}  # one node: fine
    real_first = dict(first, resolves_to=["198.18.0.3", "127.0.1.1"])
    assert status(run(facts(host=real_first), multi_node=True), "host.hostname_resolves") == {Status.PASS}


def test_hosts_lines_reads_the_lines_naming_the_host(tmp_path):
    from ncclcheck.facts.host import hosts_lines

    f = tmp_path / "hosts"
    f.write_text("127.0.0.1 localhost\n127.0.1.1 h2.lab h2  # ubuntu\n198.18.0.3 h2\n198.18.0.4 h20\n")
    assert hosts_lines("h2", str(f)) == ["127.0.1.1 h2.lab h2  # ubuntu", "198.18.0.3 h2"]


def test_node0_fails_on_an_unresolvable_master_addr_and_warns_on_a_foreign_one():
    bind = {"addr": "no.such.host.invalid", "port": 29500, "mode": "bind", "ok": True, "in_use": False,
            "error": None, "kind": None, "local": None}
    (r,) = by_id(run(facts(), master=bind, multi_node=True), "rendezvous.master_reachable")
    assert r.status is Status.FAIL and "no.such.host.invalid does not resolve on node 0" in r.summary
    foreign = dict(bind, addr="198.18.0.250", local=False)
    (r,) = by_id(run(facts(), master=foreign, multi_node=True), "rendezvous.master_reachable")
    assert r.status is Status.WARN and "198.18.0.250 is not an address of this host" in r.summary
    (r,) = by_id(run(facts(), master=dict(bind, addr="198.18.0.1", local=True)), "rendezvous.master_reachable")
    assert r.status is Status.PASS


def test_node0_ties_ranks_that_never_joined_to_a_foreign_master_addr():
    from ncclcheck.checks.local import check_master_reachable
    from ncclcheck.preflight.decide import decide, world_check
    from ncclcheck.preflight.decide import tie_to_master as _tie_to_master

    verdict = decide([{"node_rank": 0, "nnodes": 3, "uuid": "a", "hostname": "h1"}], 3, final=True)
    w = world_check(verdict, 8.0, 8.0)
    m = check_master_reachable(LocalInput.of(facts(), multi_node=True, master={
        "addr": "198.18.0.250", "port": 29500, "mode": "bind", "ok": True, "local": False}))
    tied = _tie_to_master(w, [m])
    # nobody joined: the other ranks are not blamed (they may have joined a node 0 at MASTER_ADDR)
    assert tied.status is Status.FAIL and "never joined" not in tied.summary and "1-2" not in tied.summary
    assert "nobody joined" in tied.summary and "MASTER_ADDR 198.18.0.250 is not an address of this host" in tied.summary
    assert "(h1)" in tied.summary and "MASTER_ADDR" in tied.fix
    # some joined, some did not: the missing ranks are named, tied to the foreign MASTER_ADDR
    some = decide([{"node_rank": 0, "nnodes": 3, "uuid": "a", "hostname": "h1"},
                   {"node_rank": 1, "nnodes": 3, "uuid": "b", "hostname": "h2"}], 3, final=True)
    tied = _tie_to_master(world_check(some, 8.0, 8.0), [m])
    assert tied.status is Status.FAIL and "node rank(s) 2 never joined" in tied.summary
    assert "MASTER_ADDR 198.18.0.250 is not an address of this host" in tied.summary
    assert tied.fix.startswith("Set MASTER_ADDR to an address of node 0")
    local = check_master_reachable(LocalInput.of(facts(), multi_node=True, master={
        "addr": "198.18.0.1", "port": 29500, "mode": "bind", "ok": True, "local": True}))
    assert _tie_to_master(w, [local]) is w


def test_a_second_node_rank_0_elsewhere_is_named_the_duplicate_not_the_ranks_that_started():
    """pf-duplicate-rank-0 (scripts/accuracy_corpus.py): h1 and h2 both started as node rank 0, MASTER_ADDR is h1's.
    h2 hosts a store nobody joins; its report blamed "node rank(s) 1-2 never joined" though h3 and h4 had started
    with those ranks (and joined h1). A connect to MASTER_ADDR:MASTER_PORT from h2 answering names h2 the duplicate."""
    from ncclcheck.checks.local import check_master_reachable
    from ncclcheck.preflight.decide import decide, tie_to_master, world_check

    verdict = decide([{"node_rank": 0, "nnodes": 3, "uuid": "b", "hostname": "h2", "pid": 7}], 3, final=True)
    m = check_master_reachable(LocalInput.of(facts(), multi_node=True, master={
        "addr": "198.18.2.1", "port": 29500, "mode": "bind", "ok": True, "local": False}))
    elsewhere = {"addr": "198.18.2.1", "port": 29500, "mode": "connect", "ok": True, "kind": "ok", "attempts": 1}
    tied = tie_to_master(world_check(verdict, 8.0, 8.0), [m], elsewhere, "h2")
    assert tied.status is Status.FAIL
    assert "never joined" not in tied.summary and "1-2" not in tied.summary
    assert "this node (h2) is a duplicate of node rank 0" in tied.summary
    assert "198.18.2.1:29500 answers" in tied.summary and "nobody joined" in tied.summary
    assert tied.evidence["master_elsewhere"] == elsewhere and tied.evidence["missing"] == [1, 2]
    assert "--node-rank" in tied.fix and "(h2)" in tied.fix
    # nothing answers at MASTER_ADDR: still no blame on ranks 1-2, the wrong-address reading stays open
    refused = dict(elsewhere, ok=False, kind="refused")
    tied = tie_to_master(world_check(verdict, 8.0, 8.0), [m], refused, "h2")
    assert "never joined" not in tied.summary and "duplicate of node rank 0" not in tied.summary
    assert "sent elsewhere" in tied.summary and "a second node rank 0 there" in tied.summary


def test_a_second_node_rank_0_on_the_same_host_is_named_the_duplicate():
    """The same-host neighbour: the port is held by ncclcheck's own store front (another node rank 0 here)."""
    from ncclcheck.preflight.decide import port_taken

    bind = {"port": 29500, "bindable": False, "in_use": True, "error": "OSError: [Errno 98] Address already in use"}
    front = "pid 41 (/usr/bin/python3 -I /opt/ncclcheck/rendezvous/front.py {\"port\": 29500})"
    c = port_taken(29500, bind["error"], front, bind, "h1")
    assert c.status is Status.FAIL and "this node (h1) is a duplicate of node rank 0" in c.summary
    assert "pid 41" in c.summary and c.evidence["duplicate_of_rank0"] is True and "--node-rank" in c.fix
    other = port_taken(29500, bind["error"], "pid 9 (python3 -m http.server 29500)", bind, "h1")
    assert "duplicate" not in other.summary and "cannot host the rendezvous on port 29500" in other.summary
    assert other.fix.startswith("Free the port")
