"""diagnose on a real multi-node failure: 2 lab hosts x 2 gloo ranks with the flight recorder on, rank 3 (on h2)
SIGKILLed mid-job, under torchrun (one agent per host, each printing its own failure table) and under srun --label
(one combined, rank-prefixed output). Every surviving rank dumps; diagnose must name rank 3 on h2 and its signal."""

from __future__ import annotations

import json
import sys

import pytest

from ncclcheck_lab.netlab import launchers as nlx
from ncclcheck_lab.netlab.harness import REPO_ROOT
from tests.conftest import run_cli
from tests.lab.test_launchers_lab import explain, need

pytestmark = pytest.mark.lab

PY = sys.executable
PORT = 29531
WORKER = str(REPO_ROOT / "tests" / "postmortem" / "fixtures" / "fr_worker.py")
ENV = {"TORCH_FR_BUFFER_SIZE": "64", "FR_TIMEOUT_S": "5", "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
DEADLINE = 180


def diagnosed(dumps) -> dict:
    out = dumps / "report.json"
    p = run_cli("diagnose", str(dumps), "--json", str(out))
    assert p.returncode == 1, p.stdout + p.stderr
    return json.loads(out.read_text())


def test_torchrun_two_nodes_one_rank_killed(lab):
    lab2 = lab(2)
    dumps = lab2.tmp / "pm"
    dumps.mkdir()
    cmds = {h: [PY, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(i),
                "--master-addr", lab2.ip("h1"), "--master-port", str(PORT), "--monitor-interval", "0.5", WORKER,
                "kill", str(dumps)] for i, h in enumerate(lab2.hosts)}
    runs = lab2.run_all(cmds, deadline=DEADLINE, cwd=lab2.tmp, env=ENV)
    assert all(r.rc != 0 for r in runs.values()), explain(runs)
    for h, r in runs.items():  # what each host's launcher printed, kept beside the dumps as a user would
        (dumps / f"launcher-{h}.log").write_text(r.stdout + r.stderr)
    doc = diagnosed(dumps)
    first = doc["checks"][0]
    assert first["id"] == "postmortem.root_cause" and first["evidence"]["ranks"] == [3], explain(runs)
    assert "host h2" in first["summary"] and "SIGKILL" in first["summary"], first["summary"]


@pytest.mark.long  # CI: the torchrun case above; srun's labelled table in tests/postmortem/test_logs.py
def test_srun_label_two_nodes_one_rank_killed(lab):
    need("srun", "slurmctld", "slurmd", "munged")
    lab2 = lab(2)
    env = {**nlx.slurm_up(lab2.state), **ENV, "MASTER_ADDR": lab2.ip("h1"), "MASTER_PORT": str(PORT)}
    dumps = lab2.tmp / "pm"
    dumps.mkdir()
    task = f"RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS exec {PY} {WORKER} kill {dumps}"
    run = lab2.exec("h1", ["srun", "--label", "-N", "2", "--ntasks-per-node=2", "/bin/sh", "-c", task], env=env,
                    cwd=lab2.tmp, timeout=DEADLINE)
    (dumps / "srun.log").write_text(run.stdout + run.stderr)
    assert run.returncode != 0 and "task 3" in run.stderr, run.stdout + run.stderr
    doc = diagnosed(dumps)
    first = doc["checks"][0]
    assert first["evidence"]["ranks"] == [3], first
    assert "host h2" in first["summary"] and "SIGKILL" in first["summary"], first["summary"]
    assert doc["world"]["launcher"] == "slurm"


ARMED = str(REPO_ROOT / "tests" / "fixtures" / "armed_job.py")
ARMED_ENV = {"ARM_TIMEOUT_S": "5", "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1", "KILL_RANK": "1"}
REPEATS = 20


@pytest.mark.long
def test_a_rank_sigkilled_mid_run_is_named_every_time(lab):
    """Issue 44 item 4: 4 armed gloo ranks under torchrun (2 lab hosts x 2), each working an uneven 0-0.5 s before
    every all_reduce; rank 1 (on h1) SIGKILLs itself mid-step. The agents stop the others wherever they are, some
    before the step's all_reduce: their dumps end a collective early, which main once in 4 runs called "never
    entered". 20 runs: the killed rank must be the root cause every time (docs/accuracy.md quotes the count)."""
    lab2 = lab(2)
    named, stopped = [], 0
    for i in range(REPEATS):
        run_dir = lab2.tmp / f"run{i:02d}"
        dumps = run_dir / "pm"
        dumps.mkdir(parents=True)
        cmds = {h: [PY, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2", "--node-rank",
                    str(n), "--master-addr", lab2.ip("h1"), "--master-port", str(PORT + 1 + i), "--monitor-interval",
                    "0.5", ARMED, "kill_mid", str(dumps)] for n, h in enumerate(lab2.hosts)}
        runs = lab2.run_all(cmds, deadline=DEADLINE, cwd=run_dir, env=ARMED_ENV)
        assert all(r.rc != 0 for r in runs.values()), explain(runs)
        for h, r in runs.items():
            (dumps / f"launcher-{h}.log").write_text(r.stdout + r.stderr)
        doc = diagnosed(dumps)
        first = doc["checks"][0]
        named.append((i, first["evidence"]["ranks"], "SIGKILL" in first["summary"], first["summary"][:200]))
        # the shape main misnamed: a rank stopped before the collective the others waited in
        stopped += any("stopped, not skipped" in c["text"] for c in doc["postmortem"]["causes"])
    wrong = [n for n in named if n[1:3] != ([1], True)]
    print(f"killed rank named as the root cause in {REPEATS - len(wrong)} of {REPEATS} runs; in {stopped} of them "
          "torchrun had stopped a rank before the collective the others waited in")
    assert not wrong, wrong
