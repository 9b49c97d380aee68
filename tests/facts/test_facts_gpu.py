"""GPU facts with every hardware call faked: no driver, torch CPU build on a GPU node, nvidia-smi hanging."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ncclcheck.facts import gpu

SMI_QUERY = ("0, NVIDIA H200, 143771, GPU-aaaa-0000, 00000000:19:00.0\n"
             "1, NVIDIA H200, 143771, GPU-bbbb-1111, 00000000:3B:00.0\n")
TOPO = "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n"
DRIVER_FILE = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  560.35.03  Fri Aug 16 21:39:15 UTC 2024\n"


@pytest.fixture(autouse=True)
def _no_cuda_visible_devices(monkeypatch):
    """The fake tree's GPUs are all visible unless a test sets CUDA_VISIBLE_DEVICES itself."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def fake_smi(calls, fail=()):
    def run(argv, timeout):
        calls.append((tuple(argv), timeout))
        key = argv[1]
        if key in fail:
            raise RuntimeError(f"nvidia-smi timed out after {timeout:g}s")
        if key.startswith("--query-gpu=index"):
            return SMI_QUERY
        if key.startswith("--query-gpu=driver_version"):
            return "560.35.03\n560.35.03\n"
        if key == "topo":
            return TOPO
        raise AssertionError(argv)

    return run


def fake_torch(cuda="12.4", available=True, count=2, nccl=(2, 21, 5)):
    return SimpleNamespace(
        version=SimpleNamespace(cuda=cuda),
        cuda=SimpleNamespace(is_available=lambda: available, device_count=lambda: count,
                             nccl=SimpleNamespace(version=lambda: nccl)),
    )


def no_torch():
    raise AssertionError("torch must not be imported without an NVIDIA driver")


def test_no_driver_reports_zero_without_importing_torch(fs):
    calls = []
    g = gpu.collect(run=fake_smi(calls), which=lambda n: None, load_torch=no_torch)
    assert (g["count"], g["source"], g["reason"], g["devices"]) == (0, "none", "no NVIDIA driver", [])
    assert calls == []


def test_gpu_node_with_torch(fs):
    fs.write("proc/driver/nvidia/version", DRIVER_FILE)
    calls = []
    g = gpu.collect(run=fake_smi(calls), which=lambda n: "/usr/bin/nvidia-smi", load_torch=fake_torch)
    assert (g["count"], g["source"], g["cuda"], g["nccl"], g["driver"]) == (2, "torch", "12.4", "2.21.5", "560.35.03")
    assert g["devices"][1] == {"index": 1, "name": "NVIDIA H200", "memory_bytes": 143771 << 20,
                               "uuid": "GPU-bbbb-1111", "pci_bus_id": "00000000:3B:00.0"}
    assert g["topology"] == TOPO.strip()
    assert g["reason"] is None
    assert all(t == gpu.SMI_TIMEOUT_S for _a, t in calls)  # every call bounded


def test_cpu_torch_on_gpu_node_counts_with_nvidia_smi_and_says_why(fs):
    calls = []
    g = gpu.collect(run=fake_smi(calls), which=lambda n: "/usr/bin/nvidia-smi",
                    load_torch=lambda: fake_torch(cuda=None, available=False, count=0, nccl=()))
    assert (g["count"], g["source"], g["cuda"], g["nccl"]) == (2, "nvidia-smi", None, None)
    assert g["driver"] == "560.35.03"  # no procfs file: from nvidia-smi
    assert "CPU build" in g["reason"]


def test_hanging_nvidia_smi_degrades_to_nulls_with_reason(fs):
    fs.write("proc/driver/nvidia/version", DRIVER_FILE)
    g = gpu.collect(run=fake_smi([], fail={"--query-gpu=index,name,memory.total,uuid,pci.bus_id", "topo"}),
                    which=lambda n: "/usr/bin/nvidia-smi", load_torch=lambda: fake_torch(count=8))
    assert (g["count"], g["source"], g["topology"], g["driver"]) == (8, "torch", None, "560.35.03")
    assert "nvidia-smi query failed" in g["reason"] and "topo -m failed" in g["reason"]


def test_torch_import_failure_is_a_reason_not_a_crash(fs):
    def broken():
        raise ImportError("libcudart.so.12: cannot open shared object file")

    g = gpu.collect(run=fake_smi([]), which=lambda n: "/usr/bin/nvidia-smi", load_torch=broken)
    assert (g["count"], g["source"]) == (2, "nvidia-smi")
    assert "libcudart" in g["reason"]


def test_cuda_visible_devices_applies_to_nvidia_smi_list(fs, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    g = gpu.collect(run=fake_smi([]), which=lambda n: "/usr/bin/nvidia-smi", load_torch=no_torch_but_raise)
    assert g["visible_devices"] == "1"
    assert [(d["index"], d["uuid"]) for d in g["devices"]] == [(0, "GPU-bbbb-1111")]
    assert g["count"] == 1


def no_torch_but_raise():
    raise ImportError("No module named 'torch'")


@pytest.mark.parametrize(("v", "s"), [((2, 21, 5), "2.21.5"), (22105, "2.21.5"), (2708, "2.7.8"), ((), None),
                                      (0, None), ("x", None)])
def test_nccl_version_str(v, s):
    assert gpu.nccl_version_str(v) == s


def test_topology_is_plain_text_without_terminal_escapes(fs):
    # nvidia-smi 580 underlines the topo header even into a pipe (seen on an H100): the report keeps plain text.
    fs.write("proc/driver/nvidia/version", DRIVER_FILE)

    def run(argv, timeout):
        if argv[1] == "topo":
            return "\x1b[4mGPU0\tCPU Affinity\x1b[0m\nGPU0\t X \t0-15\n"
        return fake_smi([])(argv, timeout)

    g = gpu.collect(run=run, which=lambda n: "/usr/bin/nvidia-smi", load_torch=fake_torch)
    assert g["topology"] == "GPU0\tCPU Affinity\nGPU0\t X \t0-15"
