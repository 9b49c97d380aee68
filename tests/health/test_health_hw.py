"""`ncclcheck health` on a fake HGX node (ncclcheck_lab/fakehw.py: sysfs, procfs, /dev/kmsg, a fake pynvml and
nvidia-smi), as Slurm runs it: a GPU fault fails the node with a drain reason that names the check, the GPU and the
action; the healthy node passes every GPU check; a Prolog takes any GPU process for a leftover."""

from __future__ import annotations

import json

import pytest

from ncclcheck_lab import fakehw
from tests.conftest import run_cli

KEYS = ("PATH", "PYTHONPATH", "NCCLCHECK_SYSFS_ROOT", "NCCLCHECK_PROCFS_ROOT", "NCCLCHECK_DEVFS_ROOT",
        "NCCLCHECK_FAKE_HW")


def node(tmp_path, spec, **kw) -> dict:
    env = fakehw.install(tmp_path / "node", spec, **kw)
    return {k: env[k] for k in KEYS}


def health(tmp_path, env, *flags):
    out = tmp_path / "h.json"
    p = run_cli("health", "--gpus", "8", "--dry-run", "--drain", "--node", "n1", "--json", str(out), *flags, env=env)
    return p, json.loads(out.read_text())


def gpu_checks(doc) -> dict:
    return {c["id"]: c for c in doc["checks"] if c["id"].startswith("gpu.")}


@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
def test_a_healthy_node_passes_every_gpu_check(tmp_path, smi, validate_report):
    p, doc = health(tmp_path, node(tmp_path, fakehw.node_spec(ib_ports=0), with_pynvml=not smi))
    validate_report(doc)
    got = {k: c["status"] for k, c in gpu_checks(doc).items()}
    assert set(got) >= {"gpu.xid", "gpu.memory", "gpu.pcie", "gpu.nvlink", "gpu.fabric", "gpu.clocks",
                        "gpu.persistence", "gpu.mig", "gpu.processes", "gpu.vbios_consistent", "gpu.nouveau"}
    # NVLink too, through `nvidia-smi nvlink -s`; IMEX is for a tray of a multi-node NVLink domain, not an HGX node
    assert {k for k, s in got.items() if s != "pass"} == {"gpu.imex"}, got
    assert "no GPU in a multi-node NVLink domain" in gpu_checks(doc)["gpu.imex"]["summary"]
    assert p.returncode == 0, p.stdout[-2000:]


def test_a_gpu_fault_drains_the_node_naming_check_gpu_and_action(tmp_path):
    spec = fakehw.faulty(fakehw.node_spec(ib_ports=0), gpu=3, remapped_rows=[0, 0, True, False])
    spec["kernel_log"] = [(4000.0, fakehw.xid_line(spec["gpus"][5]["bus_id"], 79, "GPU has fallen off the bus."))]
    p, doc = health(tmp_path, node(tmp_path, spec), "--xid-window", "24")
    assert p.returncode == 1
    reason = doc["slurm"]["actions"][0]["reason"]
    assert reason.startswith("ncclcheck: gpu.xid: GPU 5 (0000:59:00.0") and "Xid 79" in reason, reason
    mem = gpu_checks(doc)["gpu.memory"]
    assert mem["status"] == "fail" and mem["evidence"]["findings"][0]["uuid"] == spec["gpus"][3]["uuid"]
    assert mem["evidence"]["action"] == "reset the GPU" and "in the last 24 h" in gpu_checks(doc)["gpu.xid"]["summary"]


def test_in_a_prolog_any_gpu_process_is_a_leftover(tmp_path):
    spec = fakehw.faulty(fakehw.node_spec(ib_ports=0), gpu=1, processes=[{"pid": 999999, "used": 20 << 30}])
    env = node(tmp_path, spec)
    _p, periodic = health(tmp_path, env)
    assert gpu_checks(periodic)["gpu.processes"]["status"] == "pass"  # jobs run while a health check does
    p, prolog = health(tmp_path, {**env, "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"})
    c = gpu_checks(prolog)["gpu.processes"]
    assert c["status"] == "fail" and "leftover" in c["summary"] and "pid 999999" in c["summary"]
    assert p.returncode == 1
    assert gpu_checks(health(tmp_path, env, "--prolog")[1])["gpu.processes"]["status"] == "fail"


def test_preflight_and_env_carry_the_gpu_facts_and_checks(tmp_path):
    spec = fakehw.faulty(fakehw.node_spec(ib_ports=0), gpu=2, mig=[1, 1])
    env = node(tmp_path, spec)
    out = tmp_path / "p.json"
    p = run_cli("preflight", "--json", str(out), env=env)
    doc = json.loads(out.read_text())
    mig = next(c for c in doc["checks"] if c["id"] == "gpu.mig")
    assert mig["status"] == "fail" and "GPU 2 (0000:38:00.0" in mig["summary"] and p.returncode == 1
    ok = run_cli("preflight", "--mig", "any", "--json", str(out), env=env)
    assert next(c for c in json.loads(out.read_text())["checks"] if c["id"] == "gpu.mig")["status"] == "pass"
    assert ok.returncode in (0, 1)
    e = run_cli("env", "--json", str(tmp_path / "e.json"), env=env)
    gh = json.loads((tmp_path / "e.json").read_text())["nodes"][0]["facts"]["gpu_health"]
    assert e.returncode == 0 and len(gh["gpus"]) == 8 and gh["gpus"][2]["mig"] == {"current": True, "pending": True}
    assert "GPU health" in e.stdout and "0000:38:00.0" in e.stdout
