"""pci.affinity (each GPU's nearest NIC, a set NCCL_IB_HCA that puts a GPU on the far socket), ib.firmware (HCA
firmware / board / OFED the same on every node, the odd one named), and the RoCE port with no RoCE v2 IPv4 GID that
ib.devices and health.ib_ports now name; each fault staged as a fake tree."""

from __future__ import annotations

from ncclcheck.checks import CrossInput, LocalInput
from ncclcheck.checks.affinity import check_affinity
from ncclcheck.checks.firmware import check_firmware
from ncclcheck.checks.health import Expect, check_ib_ports
from ncclcheck.checks.local import check_ib_devices
from ncclcheck.model import Status
from ncclcheck.recommend import NodeView, recommend_local
from tests.checks.fabric_facts import node_facts, nodes
from tests.fakesys import FakeSys, gpu_node


def affinity(env=None):
    facts = node_facts(env)
    return check_affinity(LocalInput.of(facts, node_rank=1, multi_node=True))


def test_nearest_nic_per_gpu(fs):
    gpu_node(fs)
    c = affinity()
    assert c.status is Status.PASS
    assert c.summary == ("nearest NIC per GPU: GPU 0 -> mlx5_0:1 (PIX), GPU 1 -> mlx5_1:1 (PIX), GPU 2 -> mlx5_2:1 "
                         "(PIX), GPU 3 -> mlx5_3:1 (PIX)")
    g2 = c.evidence["gpus"][2]
    assert (g2["local_rank"], g2["bus_id"], g2["numa"], g2["distance"], g2["nearest"]) == (
        2, "0000:83:00.0", 1, "PIX", ["mlx5_2:1"])


def test_nccl_ib_hca_on_one_socket_names_the_far_gpus(fs):
    gpu_node(fs)
    c = affinity({"NCCL_IB_HCA": "=mlx5_0"})
    assert c.status is Status.WARN
    assert "GPU 2 (0000:83:00.0, NUMA 1) gets mlx5_0:1 (SYS) instead of mlx5_2:1 (PIX)" in c.summary
    assert "GPU 3 (0000:87:00.0, NUMA 1) gets mlx5_0:1 (SYS) instead of mlx5_3:1 (PIX)" in c.summary
    assert "GPU 1 (0000:07:00.0, NUMA 0) gets mlx5_0:1 (PHB) instead of mlx5_1:1 (PIX)" in c.summary  # loses GDR
    assert "GPU 0 " not in c.summary
    assert c.summary.endswith("action: restart the job") and "no GPUDirect RDMA" in c.detail


def test_excluding_one_nic_moves_its_gpu_across_the_switch(fs):
    gpu_node(fs)
    c = affinity({"NCCL_IB_HCA": "^=mlx5_3"})
    assert c.status is Status.WARN and "GPU 3 (0000:87:00.0, NUMA 1) gets mlx5_2:1 (PHB)" in c.summary
    assert "GPU 2" not in c.summary


def test_an_nccl_ib_hca_keeping_every_nearest_nic_passes(fs):
    gpu_node(fs)
    c = affinity({"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"})
    assert c.status is Status.PASS and "under NCCL_IB_HCA=" in c.summary


def test_gpus_whose_socket_has_no_nic_are_said_not_failed(fs):
    gpu_node(fs)
    import shutil

    for dev in ("mlx5_2", "mlx5_3"):
        shutil.rmtree(fs.sysfs / "class" / "infiniband" / dev)
    c = affinity()
    assert c.status is Status.PASS and "2 GPU(s) have no NIC on their socket" in c.summary


def test_no_pci_path_skips(fs):
    fs.gpu_at(["0000:00:06.0"])
    fs.ib_device("mlx5_0")
    fs.ib_port("mlx5_0")
    c = affinity()
    assert c.status is Status.SKIP and "no PCI path" in c.summary


def test_recommendation_extends_nccl_ib_hca_per_local_rank(fs):
    gpu_node(fs)
    recs = [r for r in recommend_local(NodeView(node_facts(), multi_node=True)) if r.name == "NCCL_IB_HCA"]
    assert len(recs) == 1  # one recommendation, extended, not a second one
    assert recs[0].value == "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"
    assert "local rank 0 NCCL_IB_HCA='=mlx5_0:1' (PIX)" in recs[0].reason
    assert "local rank 3 NCCL_IB_HCA='=mlx5_3:1' (PIX)" in recs[0].reason


def _tree(tmp_path, monkeypatch, name: str, **kw) -> dict:
    gpu_node(FakeSys(tmp_path / name, monkeypatch), **kw)
    return node_facts(hostname=name)


def test_firmware_same_everywhere_passes(tmp_path, monkeypatch):
    f = [_tree(tmp_path, monkeypatch, f"h{i}") for i in range(3)]
    c = check_firmware(CrossInput(nodes(*f)))
    assert c.status is Status.PASS and c.summary == (
        "same HCA firmware on 3 nodes (MT4129 28.39.1002, mlx5_core 24.10-1.1.4)")


def test_the_node_on_other_firmware_is_named_alone(tmp_path, monkeypatch):
    f = [_tree(tmp_path, monkeypatch, f"h{i}", **({"fw_ver": "28.41.1000"} if i == 3 else {})) for i in range(4)]
    c = check_firmware(CrossInput(nodes(*f)))
    assert c.status is Status.WARN
    assert c.summary == ("HCA firmware (MT4129) 28.39.1002 on most nodes but 28.41.1000 on node 3 (h3); "
                         "action: monitor")
    assert c.evidence["odd_nodes"] == {"fw_ver MT4129": [3]}


def test_board_and_ofed_drift(tmp_path, monkeypatch):
    f = [_tree(tmp_path, monkeypatch, "h0"), _tree(tmp_path, monkeypatch, "h1"),
         _tree(tmp_path, monkeypatch, "h2", board_id="MT_0000001070", ofed=None)]
    c = check_firmware(CrossInput(nodes(*f)))
    assert c.status is Status.WARN
    assert "HCA board (MT4129) MT_0000000838 on most nodes but MT_0000001070 on node 2 (h2)" in c.summary
    assert "mlx5_core (OFED) 24.10-1.1.4 on most nodes but inbox (no module version) on node 2 (h2)" in c.summary


ROCE_V1_ONLY = {0: ("fe80:0000:0000:0000:0e42:a1ff:fe12:3456", "IB/RoCE v1", "ens1f0"),
                1: ("fe80:0000:0000:0000:0e42:a1ff:fe12:3456", "RoCE v2", "ens1f0")}


def _roce(fs) -> None:
    fs.ib_device("mlx5_0", netdevs=["ens1f0"])
    fs.ib_port("mlx5_0", 1, rate="200 Gb/sec (4X HDR)", link_layer="Ethernet", gids=ROCE_V1_ONLY)


def test_roce_port_without_a_v2_ipv4_gid_is_named(fs):
    _roce(fs)
    facts = node_facts()
    res = check_ib_devices(LocalInput.of(facts, node_rank=0, multi_node=True))
    bad = [c for c in res if "RoCE v2 IPv4 GID" in c.summary]
    assert len(bad) == 1 and bad[0].status is Status.FAIL
    assert bad[0].summary == ("ACTIVE RoCE port(s) with no RoCE v2 IPv4 GID: mlx5_0:1 (ens1f0); action: isolate the "
                              "node")
    assert "Got completion with error 12" in bad[0].detail and "ens1f0" in bad[0].fix
    (h,) = check_ib_ports(facts, Expect())
    assert h.status is Status.FAIL and "mlx5_0:1 (ens1f0)" in h.summary
    single = check_ib_devices(LocalInput.of(facts, node_rank=0, multi_node=False))
    assert [c.status for c in single if "RoCE v2 IPv4 GID" in c.summary] == [Status.WARN]


def test_a_set_gid_index_or_a_v2_gid_is_not_named(fs):
    from tests.fakesys import roce_gid_index_3

    _roce(fs)
    res = check_ib_devices(LocalInput.of(node_facts({"NCCL_IB_GID_INDEX": "1"}), node_rank=0, multi_node=True))
    assert not [c for c in res if "RoCE v2 IPv4 GID" in c.summary]
    import shutil

    shutil.rmtree(fs.sysfs / "class" / "infiniband")
    roce_gid_index_3(fs)
    facts = node_facts({"NCCL_IB_HCA": "=mlx5_0"})
    res = check_ib_devices(LocalInput.of(facts, node_rank=0, multi_node=True))
    assert not [c for c in res if "RoCE v2 IPv4 GID" in c.summary]
    assert [c.status for c in check_ib_ports(facts, Expect())] == [Status.PASS]


def test_recommended_nccl_ib_hca_leaves_out_a_roce_port_without_its_v2_gid(fs):
    from tests.fakesys import ROCE_GIDS

    _roce(fs)  # mlx5_0: no v2 IPv4 GID
    fs.ib_device("mlx5_1", netdevs=["ens2f0"])
    fs.ib_port("mlx5_1", 1, rate="200 Gb/sec (4X HDR)", link_layer="Ethernet",
               gids={i: (g, t, "ens2f0") for i, (g, t, _n) in ROCE_GIDS.items()})
    (rec,) = [r for r in recommend_local(NodeView(node_facts(), multi_node=True)) if r.name == "NCCL_IB_HCA"]
    assert rec.value == "=mlx5_1:1" and "leaves out mlx5_0:1 (no RoCE v2 IPv4 GID)" in rec.reason
