"""The GPU checks that look past one reading: VBIOS across nodes (the odd node named), the CUDA variables that slow a
job, and host copies judged against the PCIe bound (measured through an injected copier: no GPU needed)."""

from __future__ import annotations

import types

import pytest

from ncclcheck.checks import hwaction
from ncclcheck.checks.cross import CrossInput, check_vbios
from ncclcheck.checks.local import LocalInput, check_env_cuda
from ncclcheck.model import Status
from ncclcheck.steps import hostcopy
from ncclcheck_lab import fakehw

from .hwnode import read


def test_the_node_on_another_vbios_is_named_among_four(tmp_path, monkeypatch):
    gh = read(tmp_path, monkeypatch, fakehw.node_spec(gpus=2, nvswitches=0))
    odd = {**gh, "gpus": [{**g, "vbios": "96.00.74.00.0F"} for g in gh["gpus"]]}
    nodes = [(r, f"gpu-{r}", {"gpu_health": odd if r == 2 else gh}) for r in range(4)]
    r = check_vbios(CrossInput(nodes=nodes))
    assert r.status is Status.WARN and r.node is None
    assert "node 2 (gpu-2): NVIDIA H100 80GB HBM3 VBIOS 96.00.74.00.0F, most nodes run 96.00.99.00.01" in r.summary
    assert [f["node"] for f in r.evidence["findings"]] == [2] and r.evidence["action"] == hwaction.MONITOR
    same = check_vbios(CrossInput(nodes=[(r, f"gpu-{r}", {"gpu_health": gh}) for r in range(4)]))
    assert same.status is Status.PASS and "same VBIOS on 4 nodes" in same.summary


@pytest.mark.parametrize("env,status,text", [
    ({}, Status.PASS, "no CUDA variable"),
    ({"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, Status.PASS, "CUDA_DEVICE_MAX_CONNECTIONS=1"),
    ({"CUDA_LAUNCH_BLOCKING": "1"}, Status.WARN, "CUDA_LAUNCH_BLOCKING=1"),
    ({"CUDA_LAUNCH_BLOCKING": "0"}, Status.PASS, "no CUDA variable"),
    ({"CUDA_INJECTION64_PATH": "/opt/nsys/libToolsInjection64.so"}, Status.WARN, "injects itself"),
    ({"CUDA_DEVICE_MAX_CONNECTIONS": "64"}, Status.WARN, "outside 1-32"),
    ({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, Status.WARN, "caching allocator is off"),
])
def test_cuda_variables_that_slow_or_instrument_a_job(env, status, text):
    from ncclcheck.facts import envvars

    facts = {"env": envvars.collect(env)}  # the facts layer keeps them: the check sees what a node has
    [r] = check_env_cuda(LocalInput.of(facts))
    assert r.status is status and text in r.summary, r.summary


class FakeTorch:
    """torch.cuda's surface host_copy_check uses, for a node whose GPUs sit at `buses`."""

    def __init__(self, buses):
        self.buses = buses
        self.version = types.SimpleNamespace(cuda="12.8")
        self.cuda = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: len(buses),
                                          get_device_properties=self._props)

    def _props(self, i):
        dom, bus, dev = self.buses[i][:-2].split(":")
        return types.SimpleNamespace(pci_domain_id=int(dom, 16), pci_bus_id=int(bus, 16), pci_device_id=int(dev, 16))


def copier_at(gbps: dict):
    """A copier that takes as long as copies at gbps[(index, direction)] GB/s would."""
    return lambda torch, i, d, nbytes, iters: nbytes * iters / (gbps.get((i, d), 53.0) * 1e9)


@pytest.mark.parametrize("slow,status,action", [(None, Status.PASS, None), (40.0, Status.WARN, hwaction.MONITOR),
                                                (20.0, Status.FAIL, hwaction.ISOLATE)])
def test_host_copies_against_the_pcie_bound(tmp_path, monkeypatch, slow, status, action):
    spec = fakehw.node_spec(gpus=4, nvswitches=0)
    gh = read(tmp_path, monkeypatch, spec)
    torch = FakeTorch([g["bus_id"] for g in spec["gpus"]])
    speeds = {(2, "d2h"): slow} if slow else {}
    r = hostcopy.host_copy_check({"gpu_health": gh}, 0, lambda: torch, copier_at(speeds))
    assert r.status is status, r.summary
    rows = r.evidence["gpus"]
    assert [round(x["bound_gbps"], 1) for x in rows] == [63.0] * 4  # Gen5 x16, one way
    if action:
        assert r.evidence["action"] == action and f"device to host {slow:.1f} GB/s" in r.summary
        assert f"GPU 2 ({spec['gpus'][2]['bus_id']}" in r.summary
    else:
        assert "GPU 0: 53.0/53.0 GB/s H2D/D2H of 63.0" in r.summary


def test_host_copies_without_cuda_are_skipped_with_the_reason():
    cpu = types.SimpleNamespace(version=types.SimpleNamespace(cuda=None))
    r = hostcopy.host_copy_check({}, 0, lambda: cpu)
    assert r.status is Status.SKIP and "CPU build" in r.summary

    def no_torch():
        raise ImportError("No module named 'torch'")

    assert "torch unusable" in hostcopy.host_copy_check({}, 0, no_torch).summary


def test_a_vbios_flashed_since_the_baseline_is_a_drift(tmp_path, monkeypatch):
    from ncclcheck.checks.drift import differences

    gh = read(tmp_path, monkeypatch, fakehw.node_spec(gpus=2, nvswitches=0))
    now = {**gh, "gpus": [{**g, "vbios": "96.00.74.00.0F"} for g in gh["gpus"]]}
    assert differences({"gpu_health": gh}, {"gpu_health": now}) == [
        {"what": "NVIDIA H100 80GB HBM3 VBIOS", "baseline": "96.00.99.00.01", "now": "96.00.74.00.0F"}]
