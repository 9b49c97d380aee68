"""Node-local recommendations: exact values a user would paste."""

from ncclcheck.recommend import NodeView, recommend_local
from tests.fakefacts import facts, ib_one_active_one_down, iface, roce_v2_at_3


def recs(f, **kw):
    return {r.name: r.value for r in recommend_local(NodeView(f, **kw))}


def test_eth0_over_docker_and_veth_exact_form():
    f = facts(interfaces=[iface("lo", "loopback", "127.0.0.1"), iface("docker0", "docker", "172.17.0.1"),
                          iface("vethab12", "veth", "169.254.1.1"), iface("eth0", ipv4="10.0.0.1", speed=25000)])
    r = recs(f)
    assert r["NCCL_SOCKET_IFNAME"] == "=eth0" and r["GLOO_SOCKET_IFNAME"] == "eth0"


def test_route_to_master_wins_over_speed():
    f = facts(interfaces=[iface("eth0", ipv4="10.0.0.1", speed=100000), iface("eth1", ipv4="10.1.0.1", speed=1000)],
              route={"target": "10.1.0.9", "target_ip": "10.1.0.9", "interface": "eth1", "source": "10.1.0.1"})
    assert recs(f, multi_node=True)["NCCL_SOCKET_IFNAME"] == "=eth1"


def test_only_loopback_recommends_nothing():
    assert recs(facts(interfaces=[iface("lo", "loopback", "127.0.0.1")])) == {}


def test_ib_hca_active_ports_only():
    r = recs(facts(rdma=ib_one_active_one_down()))
    assert r["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert "NCCL_IB_DISABLE" not in r


def test_ib_disable_when_no_port_active():
    rd = ib_one_active_one_down()
    rd["devices"] = rd["devices"][1:]
    assert recs(facts(rdma=rd))["NCCL_IB_DISABLE"] == "1"


def test_gid_index_only_for_old_nccl_on_roce():
    assert recs(facts(rdma=roce_v2_at_3(), versions={"nccl": "2.18.3"}))["NCCL_IB_GID_INDEX"] == "3"
    assert "NCCL_IB_GID_INDEX" not in recs(facts(rdma=roce_v2_at_3(), versions={"nccl": "2.21.5"}))
    assert "NCCL_IB_GID_INDEX" not in recs(facts(rdma=ib_one_active_one_down(), versions={"nccl": "2.18.3"}))


def test_socket_threads_for_fast_socket_only_links():
    assert recs(facts())["NCCL_SOCKET_NTHREADS"] == "4"  # eth0 is 100G in the base facts, no RDMA
    assert "NCCL_SOCKET_NTHREADS" not in recs(facts(rdma=ib_one_active_one_down()))


def test_never_debug_switches():
    names = set(recs(facts(rdma=ib_one_active_one_down())))
    assert not names & {"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_ALGO", "NCCL_PROTO", "NCCL_DEBUG"}
