"""NCCL's GPU-NIC distance from PCI placements (xml.cc's two-level climb, paths.cc's path types)."""

from __future__ import annotations

import pytest

from ncclcheck.facts import pcitree, rdma
from ncclcheck.nccl import pcipath
from tests.fakesys import gpu_node


def place(root: str, *path: str, numa: int = 0) -> dict:
    return {"bus_id": path[-1], "root": root, "path": list(path), "numa": [numa] * len(path)}


def test_parents_climb_two_levels_to_the_cpu():
    # root port > switch up > switch down > device: NCCL's parent is the switch's upstream port, then the CPU
    assert pcipath.parents(place("pci0000:00", "00:01.0", "01:00.0", "02:00.0", "03:00.0", numa=1)) == (
        ("01:00.0",), 1)
    assert pcipath.parents(place("pci0000:00", "00:01.0", "05:00.0")) == ((), 0)  # on a root port
    assert pcipath.parents(place("pci0000:00", "00:06.0")) == ((), 0)  # on the root bus (a VM)
    assert pcipath.parents({"bus_id": "x"}) is None
    assert pcipath.parents({"path": "garbage"}) is None


@pytest.mark.parametrize(("gpu", "nic", "want"), [
    # one switch: device - switch - device
    (("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"),
     ("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:04:00.0"), "PIX"),
    # nested switches: the GPU under a second switch below the NIC's
    (("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0",
      "0000:05:00.0"),
     ("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:06:00.0"), "PXB"),
    # two root ports of one socket
    (("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"),
     ("pci0000:00", "0000:00:02.0", "0000:05:00.0", "0000:06:01.0", "0000:08:00.0"), "PHB"),
    # two root complexes of one NUMA node (nvidia-smi's NODE; NCCL's PHB)
    (("pci0000:00", "0000:00:01.0", "0000:03:00.0"), ("pci0000:40", "0000:40:01.0", "0000:41:00.0"), "PHB"),
])
def test_distance_levels(gpu, nic, want):
    assert pcipath.distance(place(*gpu), place(*nic)) == want
    assert pcipath.distance(place(*nic), place(*gpu)) == want


def test_other_socket_is_sys_and_unknown_numa_is_one_cpu():
    a, b = place("pci0000:00", "0000:00:01.0", "0000:03:00.0"), place("pci0000:80", "0000:80:01.0", "0000:83:00.0",
                                                                     numa=1)
    assert pcipath.distance(a, b) == "SYS"
    a["numa"], b["numa"] = [None, None], [None, None]  # numa_node -1 everywhere (VMs): NCCL's one "-1" CPU
    assert pcipath.distance(a, b) == "PHB"
    assert pcipath.distance(a, {"unavailable": "x"}) is None


def test_the_fake_gpu_node_from_sysfs(fs):
    gpu_node(fs)
    gpus = pcitree.collect()["gpus"]
    nics = [(f"{d['name']}:1", d["pci"]) for d in rdma.collect()["devices"]]
    assert [pcipath.distance(gpus[0], p) for _, p in nics] == ["PIX", "PHB", "SYS", "SYS"]
    assert [pcipath.nearest(g, nics) for g in gpus] == [("PIX", ["mlx5_0:1"]), ("PIX", ["mlx5_1:1"]),
                                                        ("PIX", ["mlx5_2:1"]), ("PIX", ["mlx5_3:1"])]


def test_local_ranks_follow_cuda_visible_devices_and_nvidia_smi():
    places = [place("pci0000:00", f"0000:0{i}:00.0") for i in range(4)]
    facts = {"pci": {"gpus": places}, "gpu": {"count": 4, "devices": [
        {"index": i, "pci_bus_id": f"00000000:0{i}:00.0"} for i in range(4)]},
        "env": {"vars": {"CUDA_VISIBLE_DEVICES": "2,3"}}}
    got = pcipath.local_gpus(facts)
    assert [(g["local_rank"], g["index"], g["bus_id"]) for g in got] == [(0, 2, "0000:02:00.0"),
                                                                         (1, 3, "0000:03:00.0")]
    assert got[0]["place"] is places[2]
    del facts["gpu"]  # no nvidia-smi: PCI bus order
    facts["env"] = {}
    assert [g["bus_id"] for g in pcipath.local_gpus(facts)] == [p["bus_id"] for p in places]


def test_gdr_level():
    assert pcipath.gdr_level({}) == "PXB"
    assert pcipath.gdr_level({"NCCL_NET_GDR_LEVEL": "phb"}) == "PHB"
    assert pcipath.gdr_level({"NCCL_NET_GDR_LEVEL": "7"}) == "PXB"  # integers: not read as a level name
    assert pcipath.within("PIX", "PXB") and not pcipath.within("PHB", "PXB") and not pcipath.within("PIX", "LOC")
