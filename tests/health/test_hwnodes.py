"""The nodes issue 62 names, from tests/data/hwnodes (what operators posted, replayed through both of health's GPU
sources: ncclcheck_lab/hwcorpus.py), each judged as health judges a node: the healthy HGX boards of three
generations pass, and each fault is named with its GPU and its action whichever source read it."""

from __future__ import annotations

import pytest

from ncclcheck_lab import hwcorpus

SOURCES = ("nvml", "nvidia-smi")


def verdicts(tmp_path, name):
    node = hwcorpus.load(hwcorpus.CORPUS / name)
    return node, {src: hwcorpus.judge(tmp_path / src, node, src) for src in SOURCES}


def failing(v) -> dict:
    return {c["id"]: c for c in v["results"] if c["status"] in ("fail", "warn")}


@pytest.mark.parametrize("name", ["a100-dgxa100-r535-healthy", "a100-ndv4-r535-healthy", "v100-dgx1-r470-healthy",
                                  "h100-hgx-r535-healthy", "h200-hgx-r580-healthy", "b200-hgx-r580-healthy"])
def test_a_healthy_hgx_or_dgx_node_passes_through_both_sources(tmp_path, name):
    """An A100 HGX answers fabric N/A (pre-Hopper) with NVSwitches on the bus: never 'the fabric manager is not
    running'."""
    _node, vs = verdicts(tmp_path, name)
    for src, v in vs.items():
        assert failing(v) == {}, (src, {k: c["summary"] for k, c in failing(v).items()})
    assert hwcorpus.outcome(vs["nvml"]) == hwcorpus.outcome(vs["nvidia-smi"])


@pytest.mark.parametrize("name,check,words,action", [
    ("h100-pcie-vm-r580-recovery-reset", "gpu.memory", "recovery action: GPU reset required", "reset the GPU"),
    ("h200-vm-r580-fabric-in-progress", "gpu.fabric", "in progress", "reboot"),
    ("a40-pcie-r525-gpu0-err", "gpu.readable", "Unknown Error", "reset the GPU"),
    ("h100-ndv5-r580-probe-failed", "gpu.readable", "GPU at 000a:00:00.0: on the PCI bus but not listed", "reboot"),
    ("v100-ndv2-r470-nvlink-inactive", "gpu.nvlink", "4 of 6 NVLink links up", "reset the GPU"),
    ("b200-hgx-r580-gpu-all-links-inactive", "gpu.nvlink", "0 of 18 NVLink links up", "reboot"),
])
def test_each_fault_is_named_with_its_gpu_and_action_through_both_sources(tmp_path, name, check, words, action):
    node, vs = verdicts(tmp_path, name)
    for src, v in vs.items():
        c = failing(v).get(check)
        assert c is not None and words in c["summary"], (src, c and c["summary"])
        assert c["evidence"]["action"] == action, (src, c["summary"])
        sc = hwcorpus.score(node, v)
        assert sc["named"] == sc["expected"] and not sc["false_alarms"], (src, sc)
    assert hwcorpus.outcome(vs["nvml"]) == hwcorpus.outcome(vs["nvidia-smi"])
    # the finding names the source its GPU was read from
    assert any(w in failing(vs["nvidia-smi"])[check]["summary"] for w in ("nvidia-smi", "/sys/bus/pci"))


def test_the_probe_failed_gpu_is_named_by_bus_id_in_the_count(tmp_path):
    _node, vs = verdicts(tmp_path, "h100-ndv5-r580-probe-failed")
    c = failing(vs["nvidia-smi"])["health.gpus"]
    assert "7 of 8 GPUs visible" in c["summary"] and "000a:00:00.0" in c["summary"]
    # where to look for a GPU that failed at probe: the driver's NVRM lines, not an Xid grep that finds nothing
    assert "grep NVRM" in c["fix"] and "grep -i xid" not in c["fix"]


def test_an_ib_port_down_says_polling_or_disabled(tmp_path):
    _node, vs = verdicts(tmp_path, "h100-hgx-r535-ib-polling-disabled")
    s = failing(vs["nvml"])["health.ib_ports"]["summary"]
    assert "physical state Polling: no cable, or no partner port" in s and "physical state Disabled" in s
