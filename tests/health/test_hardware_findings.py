"""What `hardware=True` promises (checks/registry.py): every hardware check health runs, GPU and fabric, judges a fake
HGX node (ncclcheck_lab/fakehw.py) with one fault per class staged (the bench's own plan) through the real
collectors, and whatever does not pass carries its findings, each naming a device, what was read, its window and an
action of the one vocabulary, the check's action being its worst; on the healthy node every one of them passes."""

from __future__ import annotations

import functools

import pytest

from ncclcheck.checks import hwaction
from ncclcheck.checks.health import Expect, health_checks
from ncclcheck.checks.registry import HEALTH, hardware_ids, specs
from ncclcheck.facts import collect_health_facts
from ncclcheck.facts import nvml as nv_
from ncclcheck_lab import bench_health, fakehw
from tests.fakesys import hide_machine_gpus


def _health(tmp_path, monkeypatch, spec, env=None) -> list:
    root = tmp_path / "node"
    fakehw.write_tree(root, spec)
    for k, v in fakehw.env_for(root, {}).items():
        if k.startswith("NCCLCHECK_"):
            monkeypatch.setenv(k, v)
    hide_machine_gpus(monkeypatch)  # its GPUs: the spec's through the fake NVML, the PCI tree's; none of the machine's
    monkeypatch.setattr(nv_, "import_nvml", functools.partial(fakehw.FakeNvml, spec))
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    facts = collect_health_facts(counter_window_s=0.0)
    return health_checks(facts, Expect(gpus=len(spec["gpus"])))


def _hardware_health_ids() -> set:
    return {s.id for s in specs("local", command=HEALTH) if s.hardware}


def test_a_healthy_node_passes_every_hardware_check(tmp_path, monkeypatch):
    res = [c for c in _health(tmp_path, monkeypatch, fakehw.node_spec(gpus=4, nvswitches=1, ib_ports=4))
           if c.id in hardware_ids()]
    assert {c.id for c in res} == _hardware_health_ids()
    assert [(c.id, c.summary) for c in res if c.status.value != "pass"] == []


@pytest.fixture
def faulty(tmp_path, monkeypatch):
    spec, plan = bench_health.faulty_spec(fakehw.node_spec(gpus=4, nvswitches=1, ib_ports=4))
    spec["ib_counters"] = {}  # the flap is judged against a baseline (the bench's); here the run's window only
    return _health(tmp_path, monkeypatch, spec, {"NCCL_IB_HCA": bench_health.FAR_HCA}), plan


def test_every_hardware_verdict_is_findings_with_an_action(faulty):
    res, _plan = faulty
    bad = [c for c in res if c.id in hardware_ids() and c.status.value != "pass"]
    assert {c.id for c in bad} >= {cid for cid, *_ in _plan if cid in hardware_ids() and cid != "ib.counters"}
    for c in bad:
        found = c.evidence.get("findings") or []
        assert found, (c.id, c.summary)
        assert all(f["action"] in hwaction.ACTIONS and f["device"] and f["read"] and f["window"] for f in found), c.id
        assert c.evidence["action"] == hwaction.worst(f["action"] for f in found), c.id
        assert c.status is hwaction.STATUS[c.evidence["action"]], c.id
        assert c.summary.startswith(found[0]["device"]) and c.summary.endswith(found[0]["action"]), c.summary
