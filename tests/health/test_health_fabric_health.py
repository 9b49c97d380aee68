"""`ncclcheck health` on a GB200 NVL72 tray whose fabric is trained (Completed, Success) while the driver's fabric
health says otherwise (issue 76), read through NVML's versioned fabric call and through `nvidia-smi -q` each: an
Unhealthy summary drains the node with what it says, Limited Capacity warns without a drain, Healthy passes."""

from __future__ import annotations

import json

import pytest

from ncclcheck_lab import fakehw, hwcorpus
from tests.conftest import run_cli

KEYS = ("PATH", "PYTHONPATH", "NCCLCHECK_SYSFS_ROOT", "NCCLCHECK_PROCFS_ROOT", "NCCLCHECK_DEVFS_ROOT",
        "NCCLCHECK_FAKE_HW")
SOURCES = pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])


def health(tmp_path, spec, smi):
    # the tray's HCAs left out, as tests/health/test_health_hw.py does: RDMA would judge this machine's memlock
    env = fakehw.install(tmp_path / "node", {**spec, "ib_ports": []}, with_pynvml=not smi)
    out = tmp_path / "h.json"
    p = run_cli("health", "--gpus", "4", "--dry-run", "--drain", "--node", "tray1", "--json", str(out),
                env={k: env[k] for k in KEYS})
    doc = json.loads(out.read_text())
    return p, doc, next(c for c in doc["checks"] if c["id"] == "gpu.fabric")


@SOURCES
def test_a_healthy_tray_passes_and_names_its_clique(tmp_path, smi):
    p, doc, fab = health(tmp_path, hwcorpus.gb200_tray(), smi)
    assert fab["status"] == "pass", fab["summary"]
    assert "fabric health Healthy on 4" in fab["summary"]
    assert f"clique 32766 of cluster {hwcorpus.GB200_CLUSTER}" in fab["summary"]
    assert p.returncode == 0, [(c["id"], c["summary"]) for c in doc["checks"] if c["status"] == "fail"]
    assert [a["action"] for a in doc["slurm"]["actions"]] == ["none"]


@SOURCES
def test_an_unhealthy_summary_drains_the_tray_naming_the_gpu_and_the_item(tmp_path, smi):
    spec = hwcorpus.gb200_fabric(2, summary=2, route_unhealthy=True)
    p, doc, fab = health(tmp_path, spec, smi)
    assert p.returncode == 1 and fab["status"] == "fail" and fab["evidence"]["action"] == "reboot"
    reason = doc["slurm"]["actions"][0]["reason"]
    assert reason.startswith(f"ncclcheck: gpu.fabric: GPU 2 ({spec['gpus'][2]['bus_id']}"), reason
    assert "fabric health Unhealthy (Route Unhealthy), though trained (Completed, Success)" in fab["summary"]
    assert ("nvidia-smi -q: Fabric / Health" if smi else "nvmlDeviceGetGpuFabricInfoV") in fab["summary"]
    (finding,) = fab["evidence"]["findings"]
    assert finding["uuid"] == spec["gpus"][2]["uuid"] and finding["index"] == 2


@SOURCES
def test_an_incorrect_configuration_isolates_the_tray(tmp_path, smi):
    """A configuration the fabric manager rejects is not fixed by a reboot: a person looks at the tray."""
    spec = hwcorpus.gb200_fabric(1, summary=2, incorrect_configuration="insufficient NVLinks")
    p, doc, fab = health(tmp_path, spec, smi)
    assert p.returncode == 1 and fab["evidence"]["action"] == "isolate the node", fab["summary"]
    assert "Incorrect Configuration insufficient NVLinks" in fab["summary"]


@SOURCES
def test_limited_capacity_warns_and_does_not_drain(tmp_path, smi):
    p, doc, fab = health(tmp_path, hwcorpus.gb200_fabric(3, summary=3, bandwidth="degraded"), smi)
    assert fab["status"] == "warn" and fab["evidence"]["action"] == "monitor", fab["summary"]
    assert "fabric health Limited Capacity (Bandwidth Degraded)" in fab["summary"]
    assert p.returncode == 0 and [a["action"] for a in doc["slurm"]["actions"]] == ["none"]


@SOURCES
def test_without_a_summary_the_items_decide(tmp_path, smi):
    """A driver that reports the mask and no summary (NVML's v2 struct; nvidia-smi's Summary N/A)."""
    p, _doc, fab = health(tmp_path, hwcorpus.gb200_fabric(0, summary=0, api=2, route_unhealthy=True), smi)
    assert p.returncode == 1 and fab["evidence"]["action"] == "reboot"
    assert "fabric health: Route Unhealthy (the driver reports no summary)" in fab["summary"]


@pytest.mark.parametrize("node", hwcorpus.gb200_staged(), ids=lambda n: n["name"])
def test_the_staged_trays_are_judged_alike_by_both_sources(tmp_path, node):
    vs = {src: hwcorpus.judge(tmp_path / src, node, src) for src in ("nvml", "nvidia-smi")}
    for src, v in vs.items():
        sc = hwcorpus.score(node, v)
        assert sc["named"] == sc["expected"] and not sc["false_alarms"], (src, sc)
    assert hwcorpus.outcome(vs["nvml"]) == hwcorpus.outcome(vs["nvidia-smi"])
