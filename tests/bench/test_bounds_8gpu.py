"""The bound inside an 8-GPU node, end to end from a fake NVML and a fake sysfs (facts/links.py) to
nccl/bounds.intra_node_of (issue 35, item 4): an NVSwitch HGX with every link up, the same with one GPU's links
down, a PCIe-only box whose one GPU trained at a lower link, and a single GPU."""

from __future__ import annotations

import pytest

from ncclcheck.facts import links
from ncclcheck.nccl import bounds as B
from tests.facts.test_links_facts import FakeNvml
from tests.fakesys import FakeSys, gpu_pci

H100_LINK = 26562  # MB/s NVML reports per H100 NVLink link (raw signalling rate, NCCL-FACTS.md)


def _facts(nvml: FakeNvml, tmp_path=None, monkeypatch=None, pcie=()) -> dict:
    if tmp_path is not None:
        fs = FakeSys(tmp_path, monkeypatch)
        for bdf, speed, width, max_speed in pcie:
            gpu_pci(fs, bdf, speed, width, max_speed=max_speed, max_width=16)
    return {"nvlink": links.read_nvlink(nvml), "pcie_gpus": links.read_pcie_gpus() if tmp_path else []}


def test_an_nvswitch_hgx_is_bound_by_each_gpus_18_links():
    b = B.intra_node_of(_facts(FakeNvml([[H100_LINK] * 18] * 8)), 8, True)
    assert b.transport == "nvlink" and b.gbps == pytest.approx(18 * H100_LINK / 1000)
    assert b.by.startswith("GPU 0: 18 NVLink links")
    assert any("NVLS" in n for n in b.notes)  # an NVSwitch all_reduce may beat the wire figure: said


def test_an_nvswitch_hgx_with_two_links_down_on_one_gpu_is_bound_by_that_gpu():
    gpus = [[H100_LINK] * 18 for _ in range(8)]
    gpus[5][3] = gpus[5][11] = None  # down
    b = B.intra_node_of(_facts(FakeNvml(gpus)), 8, True)
    assert b.gbps == pytest.approx(16 * H100_LINK / 1000) and b.by.startswith("GPU 5: 16 NVLink links")
    # a job on the first four GPUs does not cross GPU 5
    assert B.intra_node_of(_facts(FakeNvml(gpus)), 4, True).gbps == pytest.approx(18 * H100_LINK / 1000)


def test_a_pcie_only_box_is_bound_by_its_slowest_gpu_link(tmp_path, monkeypatch):
    gen5 = "32.0 GT/s PCIe"
    pcie = [(f"0000:{0x19 + 0x10 * i:02x}:00.0", gen5, 16, gen5) for i in range(8)]
    pcie[6] = ("0000:79:00.0", "16.0 GT/s PCIe", 8, gen5)  # trained at Gen4 x8
    b = B.intra_node_of(_facts(FakeNvml([[]] * 8), tmp_path, monkeypatch, pcie), 8, True)
    assert b.transport == "pcie" and b.gbps == pytest.approx(B.pcie_gbps(16.0, 8))
    assert "0000:79:00.0" in b.by and "PCIe 16 GT/s x8" in b.by
    assert any("below its maximum" in n for n in b.notes)


def test_one_gpu_says_nothing_crosses_a_link():
    b = B.intra_node_of(_facts(FakeNvml([[H100_LINK] * 18])), 1, True)
    assert b.gbps is None and "one rank" in b.by
