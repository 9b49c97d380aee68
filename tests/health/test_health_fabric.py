"""`health` on a fake GPU node read by the real collectors: the fabric checks run inside it (node-local), a staged
fault drains the node with its reason, and a saved run is a counter baseline."""

from __future__ import annotations

import functools
import json

from ncclcheck.config import BaselineConfig, Config, HealthConfig, SlurmActionConfig
from ncclcheck.facts import collect_health_facts
from ncclcheck.health.run import run_health
from ncclcheck.health.scontrol import Scontrol
from tests.fakesys import gpu_node

FABRIC = ("gdr.support", "pci.affinity", "ib.counters")


def _run(**hc):
    cfg = Config(command="health", health=HealthConfig(slurm=SlurmActionConfig(dry_run=True), **hc))
    return cfg


def test_a_healthy_gpu_node_passes_the_fabric_checks(fs):
    gpu_node(fs)
    rep = run_health(_run(node="gpu7"), "0", collect=functools.partial(collect_health_facts, counter_window_s=0.0),
                     scontrol=Scontrol(binary=""))
    got = {c.id: c.status.value for c in rep.checks if c.id in FABRIC}
    assert got == {"gdr.support": "pass", "pci.affinity": "pass", "ib.counters": "pass"}


def test_no_gdr_drains_with_the_reason(fs):
    gpu_node(fs, peermem=None, flavor="proprietary")
    rep = run_health(_run(node="gpu7"), "0", collect=functools.partial(collect_health_facts, counter_window_s=0.0),
                     scontrol=Scontrol(binary=""))
    gdr = next(c for c in rep.checks if c.id == "gdr.support")
    assert gdr.status.value == "fail" and gdr.node == 0
    (action,) = rep.extra["slurm"]["actions"]
    assert action["action"] == "drain"
    assert action["reason"].startswith("ncclcheck: gdr.support: no GPUDirect RDMA: no peer-memory module")


def test_a_saved_health_run_is_a_counter_baseline(fs, tmp_path):
    gpu_node(fs)
    collect = functools.partial(collect_health_facts, counter_window_s=0.0)
    first = run_health(_run(node="gpu7"), "0", collect=collect, scontrol=Scontrol(binary=""))
    saved = json.loads(first.to_json())
    saved["nodes"][0]["facts"]["counters"]["last"]["at"] -= 7200  # saved two hours ago
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(saved))
    fs.ib_counters("mlx5_1", 1, symbol_error=40)
    cfg = Config(command="health", health=HealthConfig(slurm=SlurmActionConfig(dry_run=True), node="gpu7"),
                 baseline=BaselineConfig(path=str(path)))
    rep = run_health(cfg, "0", collect=collect, scontrol=Scontrol(binary=""))
    base = [c for c in rep.checks if c.id == "ib.counters" and "since" in c.summary]
    assert len(base) == 1 and base[0].status.value == "warn", [c.summary for c in rep.checks]
    assert base[0].summary.startswith("mlx5_1/1 symbol_error +40 since ") and "(2.0 h ago)" in base[0].summary


def test_env_shows_the_fabric_facts(fs):
    from rich.console import Console

    from ncclcheck.facts import collect_node_facts
    from ncclcheck.model import NodeInfo, Report
    from ncclcheck.render.console import render_env

    gpu_node(fs, fw_ver="28.41.1000")
    fs.ib_counters("mlx5_2", 1, symbol_error=1234)
    facts = collect_node_facts()
    c = Console(record=True, width=400, color_system=None)
    for part in render_env(Report(command="env", version="0", started="t", nodes=[NodeInfo(0, "gpu7", facts)])):
        c.print(part)
    text = c.export_text()
    assert "GPUDirect RDMA: peer memory nvidia_peermem; NVIDIA module 580.95.05 taint OE" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("mlx5_2:1"))
    assert "28.41.1000" in row and "MT_0000000838" in row and "0000:84:00.0" in row and "symbol_error 1,234" in row
    assert "mlx5_core (OFED): 24.10-1.1.4" in text
    assert "0000:00:01.0 > 0000:01:00.0 > 0000:02:00.0 > 0000:03:00.0" in text


def test_a_one_gpu_cloud_vm_without_rdma_has_no_fabric_finding(fs):
    """The shape of the recorded H100 VM (tests/data/nvml/h100-vm-1gpu.json): one GPU on the root bus (00:06.0), a
    virtio NIC, no /sys/class/infiniband. Nothing to judge is said as a skip, never a finding."""
    fs.gpu_at(["0000:00:06.0"], numa_node=-1)
    fs.net("eth0", "physical", speed=100000, addrs=["198.18.0.2/24"], driver="virtio_net")
    fs.carrier("eth0", 1, up=1, down=0)
    rep = run_health(_run(node="vm"), "0", collect=functools.partial(collect_health_facts, counter_window_s=0.0),
                     scontrol=Scontrol(binary=""))
    got = {c.id: (c.status.value, c.summary) for c in rep.checks if c.id in FABRIC}
    assert got["gdr.support"] == ("skip", "no ACTIVE InfiniBand/RoCE port (NCCL's IB transport is not used)")
    assert got["pci.affinity"] == ("skip", "no ACTIVE RDMA port")
    assert got["ib.counters"][0] == "pass" and "0 RDMA port(s) and 1 netdev(s)" in got["ib.counters"][1]
