"""scripts/bench_report.py on a saved large report: bytes per node by key path (the shared table counted once), each
renderer's size, and a scaled report whose nodes are all distinct (rank, hostname, addresses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ncclcheck.model import NodeInfo, Report, WorldInfo, passed

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_report.py"


def _report(n: int = 16) -> Report:
    pk = {"hash": "sha256:" + "a" * 64, "count": 30, "items": {f"pkg{i}": "1.0" for i in range(30)}}
    nodes = [NodeInfo(r, f"gpu{r:04d}", {"host": {"hostname": f"gpu{r:04d}"}, "packages": pk,
                                         "interfaces": [{"name": "eth0", "ipv4": [{"address": f"198.18.0.{r + 1}"}]}]})
             for r in range(n)]
    checks = [passed("host.shm", f"node {r}: /dev/shm is 16 GiB on gpu{r:04d}", node=r) for r in range(n)]
    return Report(command="preflight", version="t", started="", world=WorldInfo(nnodes=n, world_size=n),
                  nodes=nodes, checks=checks)


def test_the_script_measures_a_saved_report(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(_report().to_json())
    p = subprocess.run([sys.executable, str(SCRIPT), str(path), "--no-browser", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "shared.facts.packages" in p.stdout and "checks[host.shm, per node]" in p.stdout
    assert "every fact and result equal: True" in p.stdout
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("nodes=16 json_bytes_per_node=") and "html_bytes=" in last
    assert json.loads((tmp_path / "out" / "report.json").read_text())["shared"]["facts"]["packages"]


def test_a_scaled_report_has_distinct_nodes():
    from ncclcheck_lab import bench_report as mod
    big = mod.scaled(_report(), 40)
    assert [n.node_rank for n in big.nodes] == list(range(40)) and big.world.nnodes == 40
    assert len({n.hostname for n in big.nodes}) == 40
    addrs = [n.facts["interfaces"][0]["ipv4"][0]["address"] for n in big.nodes]
    assert len(set(addrs)) == 40
    shm = [c for c in big.checks if c.id == "host.shm"]
    assert [c.node for c in shm] == list(range(40)) and shm[37].summary == "node 37: /dev/shm is 16 GiB on gpu00037"
