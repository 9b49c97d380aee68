"""Issue 76's nodes from tests/data/hwnodes and hwcorpus's staged ones, judged as health judges a node through both
GPU sources: a GB200 tray with nonfatal NVLink Xids passes (the line's word decides, as NVIDIA's Xid catalogue does),
its fatal twin is drained; a GPU whose initialisation failed (RmInitAdapter) is said so, whichever way the driver
shows it (counted without a handle, or not listed though bound)."""

from __future__ import annotations

from ncclcheck_lab import hwcorpus

from .test_hwnodes import SOURCES, failing, verdicts


def by_id(v) -> dict:
    return {c["id"]: c for c in v["results"]}


def test_a_gb200_tray_with_nonfatal_nvlink_xids_passes_naming_them(tmp_path):
    node, vs = verdicts(tmp_path, "gb200-nvl72-r570-xid145-nonfatal")
    for src, v in vs.items():
        assert failing(v) == {}, (src, {k: c["summary"] for k, c in failing(v).items()})
        s = by_id(v)["gpu.xid"]["summary"]
        assert "GPU 2 (0018:01:00.0" in s and "Xid 145 x1 (RLW_RXPIPE Nonfatal, NVLink link 13)" in s, (src, s)
        assert "Xid 144 x1 (SAW_MVB Nonfatal, NVLink link 0)" in s, (src, s)
        sc = hwcorpus.score(node, v)
        assert not sc["false_alarms"] and sc["named"] == sc["expected"] == 0, (src, sc)
    assert hwcorpus.outcome(vs["nvml"]) == hwcorpus.outcome(vs["nvidia-smi"])


def test_its_fatal_twin_is_drained_with_the_line_s_words(tmp_path):
    node, vs = verdicts(tmp_path, "gb200-nvl72-r570-xid149-netir-fatal")
    for src, v in vs.items():
        c = failing(v)["gpu.xid"]
        assert c["evidence"]["action"] == "reboot" and "Xid 149 x1 (NETIR Fatal)" in c["summary"], (src, c)
        [f] = c["evidence"]["findings"]
        assert f["bus_id"] == "0019:01:00.0" and f["value"]["severity"] == "Fatal" and f["value"]["links"] == []
        sc = hwcorpus.score(node, v)
        assert sc["named"] == sc["expected"] == 1 and not sc["false_alarms"], (src, sc)
    assert hwcorpus.outcome(vs["nvml"]) == hwcorpus.outcome(vs["nvidia-smi"])


def test_a_gpu_counted_without_a_handle_after_rminitadapter_failed_is_said_so(tmp_path):
    _node, vs = verdicts(tmp_path, "h100-hgx-tdx-r570-sxid-nonfatal-rminit-failed")
    for src, v in vs.items():
        bad = failing(v)
        assert "RmInitAdapter failed" in bad["gpu.readable"]["summary"], (src, bad["gpu.readable"]["summary"])
        assert "0000:05:00.0 (no handle: unknown error; RmInitAdapter failed)" in bad["health.gpus"]["summary"]
        assert not any("failed at probe" in c["summary"] for c in bad.values()), src


def test_a_bound_gpu_that_failed_to_initialise_is_not_said_to_have_failed_at_probe(tmp_path):
    [node] = [n for n in hwcorpus.staged_nodes() if n["name"].endswith("rminit-failed")]
    bus = node["spec"]["gpus"][6]["bus_id"]
    for src in SOURCES:
        v = hwcorpus.judge(tmp_path / src, node, src)
        bad = failing(v)
        assert f"{bus} (failed to initialise: RmInitAdapter failed)" in bad["health.gpus"]["summary"], src
        assert "failed at probe" not in bad["gpu.readable"]["summary"], bad["gpu.readable"]["summary"]
        sc = hwcorpus.score(node, v)
        assert sc["named"] == sc["expected"] == 3 and not sc["false_alarms"], (src, sc)
