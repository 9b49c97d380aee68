"""gdr.support: NCCL's GPUDirect RDMA route on a GPU node with HCAs, each fault staged as a fake tree; and the node
without it named across nodes (NVIDIA/nccl#897)."""

from __future__ import annotations

import shutil

import pytest

from ncclcheck.checks import CrossInput, LocalInput
from ncclcheck.checks.gdr import check_gdr, check_gdr_cross
from ncclcheck.model import Status
from tests.checks.fabric_facts import node_facts, nodes
from tests.fakesys import FakeSys, gpu_node

PORTS = "mlx5_0:1, mlx5_1:1, mlx5_2:1, mlx5_3:1"


def local(facts: dict):
    return check_gdr(LocalInput.of(facts, node_rank=0, multi_node=True))


@pytest.mark.parametrize("peer", ["nvidia_peermem", "nv_mem", "nv_mem_nc"])
def test_any_of_nccls_three_files_is_gdr(fs, peer):
    gpu_node(fs, peermem=peer, flavor="proprietary")
    c = local(node_facts())
    assert c.status is Status.PASS, c
    assert f"through {peer}" in c.summary and "4 HCA port(s)" in c.summary
    assert c.evidence["route"] == peer


def test_no_peermem_and_a_proprietary_module_fails_naming_ports_and_action(fs):
    gpu_node(fs, peermem=None, flavor="proprietary")
    c = local(node_facts())
    assert c.status is Status.FAIL
    assert "no GPUDirect RDMA" in c.summary and "proprietary" in c.summary and "'POE'" in c.summary
    assert f"({PORTS}) go through host memory" in c.summary
    assert c.summary.endswith("action: isolate the node") and c.evidence["action"] == "isolate the node"
    assert "GPU Direct RDMA Disabled for HCA" in c.detail and "/sys/module/nvidia_peermem/version" in c.detail
    assert "modprobe nvidia-peermem" in c.fix


def test_old_kernel_has_no_dmabuf(fs):
    gpu_node(fs, peermem=None, flavor="open", kernel="5.10.0-28-amd64")
    c = local(node_facts())
    assert c.status is Status.FAIL and "kernel 5.10.0-28-amd64 is older than 5.12" in c.summary


def test_dmabuf_turned_off_by_nccl_dmabuf_enable(fs):
    gpu_node(fs, peermem=None, flavor="open")
    c = local(node_facts({"NCCL_DMABUF_ENABLE": "0"}))
    assert c.status is Status.FAIL and "NCCL_DMABUF_ENABLE=0" in c.summary


def test_dmabuf_route_passes_and_says_what_it_could_not_read(fs):
    gpu_node(fs, peermem=None, flavor="open", kernel="6.8.0-1064-azure")
    c = local(node_facts())
    assert c.status is Status.PASS and "through DMA-BUF" in c.summary and "6.8.0-1064-azure" in c.summary
    assert "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED" in c.detail and "ibv_reg_dmabuf_mr" in c.detail
    assert any("DMA_BUF_SUPPORTED" in n for n in c.evidence["not_read"])


def test_driver_not_loaded_cannot_be_told_never_healthy(fs):
    gpu_node(fs, peermem=None)
    shutil.rmtree(fs.sysfs / "module" / "nvidia")
    c = local(node_facts())
    assert c.status is Status.WARN and "could not be told" in c.summary and c.evidence["action"] == "monitor"


def test_skips_without_gpus_or_ib_ports(fs, monkeypatch):
    fs.ib_device("mlx5_0")
    fs.ib_port("mlx5_0")
    assert local(node_facts()).status is Status.SKIP  # no GPU
    fs2 = FakeSys(fs.root / "other", monkeypatch)
    fs2.gpu_at(["0000:00:06.0"])
    c = local(node_facts())
    assert c.status is Status.SKIP and "no ACTIVE InfiniBand/RoCE port" in c.summary


def test_efa_only_is_not_judged(fs):
    fs.gpu_at(["0000:00:06.0"])
    fs.ib_device("rdmap0s6")
    fs.ib_port("rdmap0s6", link_layer="Unspecified", gids={})
    assert local(node_facts()).status is Status.SKIP


def _tree(tmp_path, monkeypatch, name: str, **kw) -> dict:
    fs = FakeSys(tmp_path / name, monkeypatch)
    gpu_node(fs, **kw)
    return node_facts(hostname=name)


def test_cross_names_the_one_node_without_gdr(tmp_path, monkeypatch):
    f = [_tree(tmp_path, monkeypatch, f"h{i}", **({"peermem": None, "flavor": "proprietary"} if i == 2 else {}))
         for i in range(4)]
    c = check_gdr_cross(CrossInput(nodes(*f)))
    assert c.status is Status.FAIL
    assert c.summary.startswith("no GPUDirect RDMA on node 2 (h2) while node 0 (h0), node 1 (h1), node 3 (h3) have it")
    assert c.evidence["without"] == [2] and c.evidence["routes"]["0"] == "nvidia_peermem"
    assert "Node 2 (h2): no peer-memory module" in c.detail and c.evidence["action"] == "isolate the node"


def test_cross_same_everywhere_passes_and_mixed_routes_pass(tmp_path, monkeypatch):
    f = [_tree(tmp_path, monkeypatch, f"h{i}", **({"peermem": None, "flavor": "open"} if i == 1 else {}))
         for i in range(3)]
    c = check_gdr_cross(CrossInput(nodes(*f)))
    assert c.status is Status.PASS and "dma-buf, nvidia_peermem" in c.summary


def test_cross_unknown_node_warns(tmp_path, monkeypatch):
    f = [_tree(tmp_path, monkeypatch, f"h{i}") for i in range(2)]
    f[1]["gdr"]["nvidia_module"] = {"loaded": False, "version": None, "taint": None}
    f[1]["gdr"]["peer_memory"]["nvidia_peermem"]["present"] = False
    c = check_gdr_cross(CrossInput(nodes(*f)))
    assert c.status is Status.WARN and "could not be told on node 1 (h1)" in c.summary


def test_hostile_fabric_facts_from_another_node_never_crash_a_check(tmp_path, monkeypatch):
    from ncclcheck.checks import run_cross_checks, run_local_checks

    good = _tree(tmp_path, monkeypatch, "h0")
    bad = {**good, "host": {"hostname": "evil"}, "gdr": {"peer_memory": [1, 2], "nvidia_module": "x", "kernel": 5},
           "pci": {"gpus": [{"path": "0000:00:01.0", "numa": "x"}, 7]},
           "counters": {"first": {"ports": [1]}, "last": {"ports": {"a": {"counters": {"link_downed": True}}},
                                                          "netdevs": "eth0"}, "interval_s": 1.0},
           "rdma": {"devices": [{"name": "mlx5_0", "fw_ver": ["x"], "pci": "y", "ports": []}]}}
    res = run_cross_checks(CrossInput(nodes(good, bad))) + run_local_checks(LocalInput.of(bad, node_rank=1))
    assert not [c for c in res if "internal error" in c.summary], [c.summary for c in res if "internal" in c.summary]
