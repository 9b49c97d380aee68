"""The gpu_health group (facts/gpuhealth.py): NVML and nvidia-smi answer alike, a driver that refuses a field is
asked again without it, the GPUs' counters are read in the run's one counter window, and a node without a GPU costs
nothing."""

from __future__ import annotations

import json

from ncclcheck.facts import counters, gpuhealth, links, pcitree
from ncclcheck.facts.counters import deltas
from ncclcheck_lab import fakehw

from ..checks.hwnode import read, read_counters
from ..fakesys import FakeSys

SAME = ("index", "bus_id", "uuid", "name", "vbios", "persistence", "mig", "ecc_mode", "ecc_uncorrected_volatile",
        "remapped_rows", "clock_event_reasons", "utilization_gpu", "memory_used_bytes", "processes", "fabric")


def test_nvml_and_nvidia_smi_read_the_same_node_alike(tmp_path, monkeypatch):
    spec = fakehw.faulty(fakehw.node_spec(), gpu=2, remapped_rows=[1, 0, True, False],
                         processes=[{"pid": 4242, "used": 2 << 30}], clocks=0x44)
    by_nvml = read(tmp_path, monkeypatch, spec)
    by_smi = read(tmp_path, monkeypatch, spec, smi=True)
    assert (by_nvml["source"], by_smi["source"]) == ("nvml", "nvidia-smi")
    for a, b in zip(by_nvml["gpus"], by_smi["gpus"]):
        for k in SAME:
            if k == "processes":
                a[k] = [{x: p[x] for x in ("pid", "used_bytes")} for p in a[k]]
                b[k] = [{x: p[x] for x in ("pid", "used_bytes")} for p in b[k]]
            assert a[k] == b[k], (k, a[k], b[k])
    assert "NVML unusable" in by_smi["reason"]


def test_gpu_counters_are_read_in_the_runs_one_window_and_only_moved_links_kept(tmp_path, monkeypatch):
    spec = fakehw.node_spec()
    spec["gpus"][1]["nvlink"]["errors"] = {"4": {"crc_flit": [7, 3]}, "5": {"replay": [2, 0]}}
    bus = spec["gpus"][1]["bus_id"]
    c = read_counters(tmp_path, monkeypatch, spec)
    assert deltas(c["first"]["gpus"], c["last"]["gpus"]) == {bus: {"nvlink.crc_flit": 3}}
    assert c["gpu_links"] == {bus: {"nvlink.crc_flit": {"4": 3}}}
    assert c["last"]["gpus"][bus]["nvlink.replay"] == 2  # a lifetime count, kept as a value only
    assert c["last"]["gpus"][bus]["pcie.aer_fatal"] == 0 and "nvlinks" not in c["last"]  # per link: moved only
    assert len(c["last"]["ports"]) == 8  # the fabric's in the same reads: one window


def test_one_window_waits_once_whatever_it_holds(monkeypatch):
    """The GPUs' counters and the fabric's share a window: what is left of it is waited once, and nothing when the
    node has no GPU and no RDMA port (a carrier count alone is judged over the time the run took anyway)."""
    slept = []
    for snap, want in (({"mono": 0.0, "gpus": {"b": {}}, "ports": {"p": {}}, "netdevs": {}}, [0.5]),
                       ({"mono": 0.0, "gpus": {}, "ports": {}, "netdevs": {"eth0": {}}}, []),
                       ({"mono": 0.0, "gpus": {}, "ports": {}, "netdevs": {}}, [])):
        slept.clear()
        monkeypatch.setattr(counters, "_read", lambda clock, nv, run=None: {
            "mono": 0.1, "at": 1.0, "gpus": {}, "ports": {}, "netdevs": {}, "nvml": None, "nvlinks": {}})
        counters.window(snap, 0.5, sleep=slept.append, clock=lambda: 0.0)
        assert slept == want


def test_an_hgx_nodes_facts_stay_small(tmp_path, monkeypatch):
    gh = read(tmp_path, monkeypatch, fakehw.node_spec())
    assert len(json.dumps(gh)) < 12_000  # they travel to node 0 with every node's facts


def test_pcie_upstream_is_the_bridge_above_the_gpu_and_none_on_a_root_bus(tmp_path, monkeypatch):
    spec = fakehw.node_spec(gpus=2, nvswitches=0)
    read(tmp_path, monkeypatch, spec)
    got = {p["bus_id"]: p["upstream"] for p in links.read_pcie_gpus(with_upstream=True)}
    assert got == {"0000:18:00.0": "0000:17:00.0", "0000:19:00.0": "0000:17:01.0"}
    fs = FakeSys(tmp_path / "vm", monkeypatch)
    fs.write("sys/bus/pci/devices/0000:00:06.0/vendor", "0x10de\n")
    fs.write("sys/bus/pci/devices/0000:00:06.0/class", "0x030200\n")
    assert links.read_pcie_gpus(with_upstream=True)[0]["upstream"] is None


def test_nvswitches_are_nvidia_bridges_of_class_0680(tmp_path, monkeypatch):
    read(tmp_path, monkeypatch, fakehw.node_spec(nvswitches=6))
    assert pcitree.nvswitch_bus_ids() == [f"0000:{0x05 + i:02x}:00.0" for i in range(6)]


def test_a_node_without_a_gpu_reads_nothing_more(tmp_path, monkeypatch):
    FakeSys(tmp_path, monkeypatch)
    gh = gpuhealth.collect(which=lambda n: None)
    assert gh["gpus"] == [] and "no NVIDIA GPU" in gh["reason"] and "kernel_log" not in gh


def test_nouveau_from_sysfs_or_proc_modules(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    assert gpuhealth.nouveau_loaded() is False
    fs.write("proc/modules", "nouveau 2961408 0 - Live 0x0\nnvidia 1 0 - Live 0x0\n")
    assert gpuhealth.nouveau_loaded() is True
