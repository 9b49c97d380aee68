"""Jobs armed with ncclcheck.arm(DIR) under a real torchrun (CPU, gloo, loopback, tests/fixtures/armed_job.py): a
SIGKILLed peer, a rank that sleeps past the gloo timeout, a hang stopped by SIGTERM to torchrun (what Slurm and
`kill` do) after a SIGUSR1 on-demand dump: the ranks leave flight recorders and stacks in DIR that `ncclcheck
diagnose` reads to name the rank; a healthy armed job exits 0 and writes nothing. Unarmed, the same jobs leave no
dump (only NCCL's watchdog dumps on its own), which is what issue 33 saw."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, cli_env, run_cli

pytestmark = pytest.mark.slow  # torchrun worlds of real processes

JOB = os.path.join(REPO, "tests", "fixtures", "armed_job.py")


def _argv(nproc: int, scenario: str, pm, *more) -> list:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "--monitor-interval=0.5", JOB, scenario, str(pm), *map(str, more)]


def _env(**extra) -> dict:
    return cli_env({"OMP_NUM_THREADS": "1", **extra}, drop=("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                                                           "LOCAL_RANK", "TORCH_FR_BUFFER_SIZE"))


def torchrun(tmp_path, nproc: int, scenario: str, **env) -> tuple:
    pm = tmp_path / "pm"
    p = subprocess.run(_argv(nproc, scenario, pm), capture_output=True, text=True, env=_env(**env), cwd=tmp_path,
                       timeout=180)
    log = tmp_path / "launcher.log"
    log.write_text(p.stdout + p.stderr)
    return p, pm, log


def diagnose(*paths) -> tuple:
    p = run_cli("diagnose", *map(str, paths), "--json", "-")
    return p.returncode, json.loads(p.stdout)


def _root(report: dict) -> dict:
    return next(c for c in report["checks"] if c["id"] == "postmortem.root_cause")


def test_a_sigkilled_peer_leaves_the_survivors_dumps_and_diagnose_names_it(tmp_path):
    p, pm, log = torchrun(tmp_path, 3, "kill")
    assert p.returncode == 1, p.stderr[-3000:]
    assert sorted(os.listdir(pm)) == ["nccl_trace_rank_0.json", "nccl_trace_rank_1.json", "stacks_rank_0.txt",
                                      "stacks_rank_1.txt"]
    rc, report = diagnose(pm, log)
    root = _root(report)
    assert rc == 1 and root["status"] == "fail", root
    assert root["summary"].startswith("rank 2 ") and "SIGKILL" in root["summary"]
    assert "all_reduce #4" in root["summary"]  # from the survivors' dumps: where they were when it died


def test_a_gloo_timeout_leaves_dumps_and_diagnose_names_the_rank_that_never_entered(tmp_path):
    p, pm, log = torchrun(tmp_path, 3, "skip", ARM_TIMEOUT_S="3")
    assert p.returncode == 1, p.stderr[-3000:]
    names = sorted(os.listdir(pm))
    assert [n for n in names if n.startswith("nccl_trace")] == [f"nccl_trace_rank_{r}.json" for r in range(3)]
    for r in (0, 1):  # the ranks that timed out: gloo raised in them (the except path)
        assert "reason: raised " in (pm / f"stacks_rank_{r}.txt").read_text()
    rc, report = diagnose(pm)  # the dumps alone name it
    root = _root(report)
    assert rc == 1 and re.match(r"rank 2 \(host [^)]+\) never entered all_reduce #4", root["summary"]), root
    assert "armed_job.py:" in root["summary"]  # and say where rank 2 was (its stacks: the sleep)


def test_a_hang_stopped_by_sigterm_leaves_dumps_and_an_on_demand_dump_leaves_the_job_running(tmp_path):
    pm, ready = tmp_path / "pm", tmp_path / "ready"
    ready.mkdir()
    job = subprocess.Popen(_argv(2, "hang", pm, ready), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env=_env(ARM_TIMEOUT_S="300"), cwd=tmp_path)
    try:
        end = time.monotonic() + 120
        while len(os.listdir(ready)) < 2 and job.poll() is None and time.monotonic() < end:
            time.sleep(0.2)
        assert len(os.listdir(ready)) == 2, job.communicate(timeout=10)[0][-3000:]
        workers = subprocess.run(["pgrep", "-P", str(job.pid)], capture_output=True, text=True).stdout.split()
        assert len(workers) == 2
        os.kill(int(workers[0]), signal.SIGUSR1)  # asked: a dump, and the job goes on
        end = time.monotonic() + 30
        while len([n for n in os.listdir(pm) if n.startswith("stacks")]) < 1 and time.monotonic() < end:
            time.sleep(0.2)
        assert "reason: asked (SIGUSR1)" in "".join(open(pm / n).read() for n in os.listdir(pm)
                                                    if n.startswith("stacks"))
        assert job.poll() is None and all(os.path.exists(f"/proc/{w}") for w in workers)
        job.send_signal(signal.SIGTERM)  # torchrun passes it to the ranks: one waits inside all_reduce, one sleeps
        out, _ = job.communicate(timeout=60)  # far inside the 300 s collective timeout
    finally:
        if job.poll() is None:
            job.kill()
    for r in (0, 1):
        assert "reason: told to stop (SIGTERM)" in (pm / f"stacks_rank_{r}.txt").read_text(), out[-3000:]
    rc, report = diagnose(pm)
    root = _root(report)
    assert rc == 1 and re.match(r"rank 1 \(host [^)]+\) never entered all_reduce #4", root["summary"]), root
    assert "armed_job.py:" in root["summary"]


def test_a_healthy_armed_job_exits_0_and_writes_nothing(tmp_path):
    p, pm, _ = torchrun(tmp_path, 2, "healthy")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "HEALTHY rank=0" in p.stdout and "HEALTHY rank=1" in p.stdout
    assert os.listdir(pm) == []  # arm() made the directory; a healthy job writes nothing into it
