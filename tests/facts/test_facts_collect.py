"""collect_node_facts() on this real machine: every group, JSON-able, fast, and torch left alone on a CPU node."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import ncclcheck.facts as facts
from ncclcheck.facts import GROUPS, collect_node_facts

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_real_machine_returns_every_group_as_json():
    f = collect_node_facts(master_addr="127.0.0.1")
    assert set(GROUPS) | {"collected_at"} == set(f)
    json.loads(json.dumps(f))
    for group in GROUPS:
        assert not (isinstance(f[group], dict) and "unavailable" in f[group]), (group, f[group])
    assert f["route"]["interface"] is not None
    assert any(i["kind"] == "loopback" for i in f["interfaces"])


def test_no_master_means_no_route():
    assert collect_node_facts()["route"] is None


def test_a_crashing_collector_becomes_unavailable_not_a_crash(monkeypatch, caplog):
    from ncclcheck.facts import rdma

    def boom():
        raise PermissionError("sysfs says no")

    monkeypatch.setattr(rdma, "collect", boom)
    f = collect_node_facts()
    assert f["rdma"] == {"unavailable": "PermissionError: sysfs says no"}
    assert f["host"]["hostname"]
    assert "sysfs says no" in caplog.text  # traceback logged for the run's log file


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
@pytest.mark.skipif(os.path.exists("/proc/driver/nvidia/version"), reason="has an NVIDIA driver")
def test_cpu_node_does_not_import_torch_and_is_fast():
    code = ("import sys, time, json; t = time.perf_counter(); from ncclcheck.facts import collect_node_facts; "
            "f = collect_node_facts(); print(json.dumps({'torch': 'torch' in sys.modules, "
            "'s': time.perf_counter() - t, 'gpu': f['gpu']}))")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + ":/usr/bin:/bin")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if r["gpu"]["source"] != "none":
        pytest.skip("nvidia-smi on PATH")
    assert r["torch"] is False
    assert r["gpu"]["count"] == 0
    assert r["s"] < 2.0  # target is < 0.5 s; the bound leaves room for a loaded CI machine


def test_public_surface():
    assert facts.__all__ == ["collect_node_facts", "collect_health_facts", "GROUPS", "hostname", "hostname_of"]


def test_health_knows_no_torch_only_version_and_says_so_by_leaving_it_out():
    """health never imports torch: the CUDA and NCCL versions it was built with are unknown there, not none, so a
    baseline's comparison skips them (checks/drift.py) instead of reading 'cuda version 12.4 -> (none)'."""
    from ncclcheck.facts import collect_health_facts
    from ncclcheck.facts.versions import TORCH_ONLY

    got = collect_health_facts()
    assert got["versions"]["python"] and not set(TORCH_ONLY) & set(got["versions"])
    assert got["packages"]  # every health run is a whole baseline for the next (versions and packages in it)
