"""The job runner: spawned local ranks over gloo on loopback; crashes and hangs are named, emitted rows survive."""

from __future__ import annotations

import time

import pytest

from ncclcheck.agent.launchers import detect_placement
from ncclcheck.agent.runner import resolve_backend, run_job
from ncclcheck.config import Config, WorldConfig
from ncclcheck.rendezvous.budget import Budget
from tests.conftest import cli_env
from tests.jobs_for_tests import allreduce_job, crash_or_hang_job, steps_job

pytestmark = pytest.mark.slow  # real worlds of spawned processes: the slow tier (a marker, not a folder)


def test_standalone_two_cpu_ranks_allreduce():
    w = WorldConfig(nproc_per_node=2, timeout_s=60)
    out = run_job(w, detect_placement({}, w), allreduce_job, {}, budget=Budget.of(Config('t', world=w)))
    assert out.ok, out.failures
    assert out.backend == "gloo"
    assert out.results == {0: {"sum": 3.0, "backend": "gloo", "world": 2}, 1: {"sum": 3.0, "backend": "gloo",
                                                                                 "world": 2}}
    assert sorted(e["rank"] for e in out.emitted) == [0, 1]


def test_crash_hang_and_exception_are_named_and_emits_survive():
    w = WorldConfig(nproc_per_node=3, timeout_s=15)
    faults = {"do": {"0": "raise", "1": "crash", "2": "hang"}}
    t = time.monotonic()
    out = run_job(w, detect_placement({}, w), crash_or_hang_job, faults, budget=Budget.of(Config('t', world=w)))
    # Hung = nothing emitted for one step's bound (T + a fixed grace) after the last emit; a loose bound on the
    # whole call only catches an unbounded wait (startup on a loaded 2-core machine takes seconds).
    assert time.monotonic() - t < 2 * 15 + 10
    reasons = {f["rank"]: f["reason"] for f in out.failures}
    assert "ValueError: bad input on this rank" in reasons[0]
    assert "exited with code 7" in reasons[1]
    assert "killed" in reasons[2] and "hung" in reasons[2]
    assert sorted(e["rank"] for e in out.emitted) == [0, 1, 2]


def test_backend_auto():
    assert resolve_backend("auto", 0, 2) == "gloo"
    assert resolve_backend("auto", 8, 8) == "nccl"
    assert resolve_backend("gloo", 8, 8) == "gloo"


def test_worker_mode_runs_in_process_as_that_rank(tmp_path):
    """Two processes with torchrun's variables (rank 0 hosts the store, as without an agent store)."""
    import json
    import os
    import socket
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    code = ("import json,os,sys; from ncclcheck.config import WorldConfig; "
            "from ncclcheck.agent.launchers import detect_placement; from ncclcheck.agent.runner import run_job; "
            "from tests.jobs_for_tests import allreduce_job;"
            "from ncclcheck.rendezvous.budget import Budget; "
            "w=WorldConfig(timeout_s=30); o=run_job(w, detect_placement(os.environ, w), allreduce_job, {}, "
            "budget=Budget(timeout_s=30));"
            "print(json.dumps({'r': {str(k): v for k, v in o.results.items()}, 'f': o.failures}))")
    procs = []
    for rank in (1, 0):
        env = {k: v for k, v in cli_env().items() if not k.startswith(("SLURM_", "OMPI_", "TORCHELASTIC"))}
        env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2", GROUP_RANK="0",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # cli_env: this checkout first, no GPU
        procs.append(subprocess.Popen([sys.executable, "-c", code], cwd=repo, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        o, e = p.communicate(timeout=90)
        assert p.returncode == 0, e
        outs.append(json.loads(o.strip().splitlines()[-1]))
    rank0 = outs[1]
    assert rank0["f"] == [] and rank0["r"]["0"]["sum"] == 3.0 and rank0["r"]["1"]["sum"] == 3.0


def test_a_job_longer_than_the_timeout_is_not_cut_while_it_emits():
    """--timeout bounds each wait, not the job: 4 steps of ~1.5 s each under --timeout 2 all complete."""
    w = WorldConfig(nproc_per_node=2, timeout_s=2)
    out = run_job(w, detect_placement({}, w), steps_job, {"steps": 4, "step_s": 1.5},
                  budget=Budget.of(Config('t', world=w)))
    assert out.ok, out.failures
    assert out.results[0]["steps"] == 4
