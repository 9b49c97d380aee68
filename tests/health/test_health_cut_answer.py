"""`ncclcheck health` on a healthy HGX node whose `nvidia-smi -q` passes its cap (thousands of processes listed): the
GPUs after the cut are asked one by one (`nvidia-smi -q -i <bus id>`), a GPU no answer reached is named as not
measured (a warning, never a fault, never a drain), and a GPU really missing from a complete answer still fails."""

from __future__ import annotations

import json

import pytest

from ncclcheck.facts import smi
from ncclcheck_lab import fakehw, hwcorpus
from tests.conftest import run_cli

KEYS = ("PATH", "PYTHONPATH", "NCCLCHECK_SYSFS_ROOT", "NCCLCHECK_PROCFS_ROOT", "NCCLCHECK_DEVFS_ROOT",
        "NCCLCHECK_FAKE_HW")


def health(tmp_path, spec, smi_source=True):
    env = fakehw.install(tmp_path / "node", spec, with_pynvml=not smi_source)
    out = tmp_path / "h.json"
    p = run_cli("health", "--gpus", "8", "--dry-run", "--drain", "--node", "n1", "--json", str(out),
                env={k: env[k] for k in KEYS})
    return p, json.loads(out.read_text())


def by_id(doc) -> dict:
    return {c["id"]: c for c in doc["checks"]}


def calls(tmp_path) -> list:
    """The argv of every nvidia-smi call the fake answered."""
    path = tmp_path / "node" / "spec.json.calls"
    return [json.loads(line)[0] for line in path.read_text().splitlines()]


def many(gpus=range(8), n=hwcorpus.PROCESSES_PAST_THE_CAP) -> dict:
    return hwcorpus.many_processes(fakehw.node_spec(ib_ports=0), gpus, n)


@pytest.mark.parametrize("smi_source", [True, False], ids=["nvidia-smi", "nvml"])
def test_a_healthy_node_whose_q_is_cut_passes_with_every_gpu_read(tmp_path, smi_source, validate_report):
    spec = many()
    assert len(fakehw.render_q(spec)[0]) > smi.Q_OUTPUT_BYTES  # the whole answer passes the cap
    p, doc = health(tmp_path, spec, smi_source)
    validate_report(doc)
    checks = by_id(doc)
    bad = {k: (c["status"], c["summary"][:200]) for k, c in checks.items()
           if c["status"] in ("fail", "warn")}
    assert bad == {}, bad
    assert p.returncode == 0 and doc["slurm"]["actions"][0]["action"] == "none"
    gh = doc["nodes"][0]["facts"]["gpu_health"]
    assert [g["bus_id"] for g in gh["gpus"]] == [g["bus_id"] for g in spec["gpus"]]
    assert [g["index"] for g in gh["gpus"]] == list(range(8)) and gh["unread"] == [] and gh["absent"] == []
    if smi_source:  # the GPUs past the cut (and the one it fell in) were asked on their own
        asked = [a for a in calls(tmp_path) if a[:2] == ["-q", "-i"]]
        assert asked and {a[2] for a in asked} <= {g["bus_id"] for g in spec["gpus"]}
        assert "asked per GPU" in gh["reason"]


def test_a_gpu_no_answer_reached_is_named_unmeasured_never_a_fault(tmp_path):
    spec = many(gpus=[2], n=13000)  # GPU 2's own answer passes the cap too
    p, doc = health(tmp_path, spec)
    checks = by_id(doc)
    readable = checks["gpu.readable"]
    assert readable["status"] == "warn", readable
    assert "not measured" in readable["summary"] and "GPU 2 (0000:38:00.0" in readable["summary"]
    assert "nvidia-smi -q -i 0000:38:00.0" in readable["summary"] and "4 MiB" in readable["summary"]
    assert [u["bus_id"] for u in readable["evidence"]["unread"]] == ["0000:38:00.0"]
    assert "on the PCI bus but not listed" not in json.dumps(doc)
    assert not [c["id"] for c in doc["checks"] if c["status"] == "fail"]
    assert p.returncode == 0 and doc["slurm"]["actions"][0]["action"] == "none"  # never a drain
    gh = doc["nodes"][0]["facts"]["gpu_health"]
    assert len(gh["gpus"]) == 7 and gh["absent"] == []


@pytest.mark.parametrize("bound", [False, True], ids=["no-driver", "rminit-failed"])
def test_a_gpu_missing_from_a_complete_answer_behind_a_cut_still_fails(tmp_path, bound):
    """GPU 7 failed at probe; the -q that would have shown its absence is cut before it: asked on its own (where the
    nvidia driver holds it) or read from the PCI bus, it is still on the bus and not listed: FAIL and a drain."""
    spec = fakehw.faulty(many(gpus=range(7)), gpu=7, probe_failed=True, **({"bound": True} if bound else {}))
    p, doc = health(tmp_path, spec)
    bus = spec["gpus"][7]["bus_id"]
    readable = by_id(doc)["gpu.readable"]
    assert readable["status"] == "fail" and bus in readable["summary"] and "not listed" in readable["summary"]
    assert p.returncode == 1
    action = doc["slurm"]["actions"][0]
    assert action["action"] == "drain" and bus in action["reason"]
    if bound:  # the driver holds it: asked on its own, and nvidia-smi found no such GPU
        assert ["-q", "-i", bus] in calls(tmp_path)


def test_the_gpu_count_says_unmeasured_not_missing_when_the_node_is_counted_from_q(tmp_path):
    """With CUDA_VISIBLE_DEVICES set (a Prolog's share) the node's GPUs are counted from -q: one no answer reached
    is short of the count as unmeasured, a warning."""
    spec = many(gpus=[2], n=13000)
    env = fakehw.install(tmp_path / "node", spec, with_pynvml=False)
    out = tmp_path / "h.json"
    p = run_cli("health", "--gpus", "8", "--dry-run", "--drain", "--node", "n1", "--json", str(out),
                env={**{k: env[k] for k in KEYS}, "CUDA_VISIBLE_DEVICES": "0,1"})
    doc = json.loads(out.read_text())
    gpus = by_id(doc)["health.gpus"]
    assert gpus["status"] == "warn" and "7 of 8 GPUs measured" in gpus["summary"], gpus
    assert "0000:38:00.0" in gpus["summary"] and p.returncode == 0
