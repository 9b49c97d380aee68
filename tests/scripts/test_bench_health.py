"""scripts/bench_health.py run small (one run, 4 GPUs on 2 PCIe switches, 1 NVSwitch, 4 IB ports: the fewest that
stage every class, GPU and fabric): its correctness fields on its last line, healthy_hw=0 (every hardware check
passes on the healthy node), faults_named=12/12 (each staged fault's check names its device and action: 8 GPU
classes, no GPUDirect RDMA, an IB link flapping since the baseline, a RoCE port without its v2 GID, NCCL_IB_HCA on a
far NIC), exit=1 (the faulty node would be drained), and the script's exit 0; never its timings (docs/hardware.md
quotes the full-size figure)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, cli_env


def test_small_node_every_staged_fault_named_and_the_healthy_node_clean():
    p = subprocess.run([sys.executable, "scripts/bench_health.py", "--runs", "1", "--gpus", "4", "--nvswitches", "1",
                        "--ib-ports", "4"], capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=240)
    last = p.stdout.strip().splitlines()[-1]
    fields = dict(kv.split("=", 1) for kv in last.split("; ")[-1].split())
    assert fields == {"healthy_hw": "0", "faults_named": "12/12", "exit": "1"}, last + p.stderr[-2000:]
    assert p.returncode == 0 and "health_s=" in last and "reference_s=" in last
