"""ncclcheck.guard() in real training scripts under torchrun (static and c10d) and `fabric run` on one host (loopback):
a healthy job trains after it; a fault fails every rank with PreflightFailed; it leaves nothing behind that the
script's own init_process_group could trip on; NCCLCHECK_GUARD=0 skips it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env, free_port

pytestmark = pytest.mark.slow  # torchrun worlds of real processes

FIX = os.path.join(REPO, "tests", "fixtures")




def torchrun(script: str, env: dict, c10d: bool = False, nproc: int = 2) -> subprocess.CompletedProcess:
    port = free_port()
    world = (["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "guardtest"] if c10d
             else ["--master-addr", "127.0.0.1", "--master-port", str(port)])
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc), *world,
            os.path.join(FIX, script)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=REPO,
                          env=cli_env({"GUARD_TIMEOUT": "20", "GUARD_CODE": FIX, "NUM_NODES": "1", **env}))


def why(p: subprocess.CompletedProcess) -> str:
    return f"rc={p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"


# c10d: test_guard_lab's torchrun-c10d runs the same script on 3 hosts in CI; here in scripts/long_tests.py
@pytest.mark.parametrize("c10d", [False, pytest.param(True, marks=pytest.mark.long)], ids=["static", "c10d"])
def test_healthy_job_trains_after_the_guard_with_one_report(c10d):
    p = torchrun("train_ddp.py", {}, c10d=c10d)
    assert p.returncode == 0, why(p)
    assert re.findall(r"TRAINED world=2", p.stdout) == ["TRAINED world=2"], why(p)
    assert len(re.findall(r"ncclcheck preflight 1 node, 2 ranks, launched by torchrun", p.stdout + p.stderr)) == 1
    assert len(re.findall(r"GUARD-OK rank=\d", p.stderr)) == 2, why(p)


@pytest.mark.parametrize("c10d", [False, True], ids=["static", "c10d"])
def test_guard_leaves_no_thread_socket_handler_or_redirect(c10d):
    p = torchrun("guard_leftovers.py", {}, c10d=c10d)
    assert p.returncode == 0, why(p)
    assert sorted(re.findall(r"LEFTOVERS-OK rank=(\d)", p.stdout)) == ["0", "1"], why(p)


def test_a_fault_fails_every_rank_with_the_cause():
    p = torchrun("train_ddp.py", {"GLOO_SOCKET_IFNAME": "nonexistent0"})
    assert p.returncode != 0 and "TRAINED" not in p.stdout, why(p)
    failed = re.findall(r"GUARD-FAILED rank=(\d) after=[\d.]+s: (.*)", p.stderr)  # the message's lines joined by |
    assert sorted(r for r, _ in failed) == ["0", "1"], why(p)
    for _, said in failed:
        head, cause = said.split(" | ")[:2]
        assert "ncclcheck preflight failed" in head and "GLOO_SOCKET_IFNAME=nonexistent0" in cause, (head, cause)
    assert len(re.findall(r"ncclcheck preflight 1 node,", p.stdout + p.stderr)) == 1, why(p)


def test_off_switch_runs_the_script_unguarded():
    p = torchrun("train_ddp.py", {"NCCLCHECK_GUARD": "0"})
    assert p.returncode == 0 and "TRAINED world=2" in p.stdout, why(p)
    assert "GUARD-OK" in p.stderr and "ncclcheck preflight" not in p.stdout + p.stderr, why(p)


@pytest.mark.long  # test_guard_lab's fabric-run runs it on 3 hosts in CI; here in scripts/long_tests.py
def test_fabric_run_script_trains_after_the_guard():
    if shutil.which("fabric") is None:
        pytest.skip("needs lightning's `fabric` (pip install lightning)")
    port = free_port()
    argv = ["fabric", "run", "--accelerator", "cpu", "--devices", "2", "--num-nodes", "1", "--main-port", str(port),
            os.path.join(FIX, "train_fabric.py")]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=REPO,
                       env=cli_env({"GUARD_TIMEOUT": "20", "GUARD_CODE": FIX, "NUM_NODES": "1"}))
    assert p.returncode == 0 and "TRAINED world=2" in p.stdout, why(p)
    assert len(re.findall(r"ncclcheck preflight 1 node, 2 ranks, launched by fabric", p.stdout + p.stderr)) == 1


def test_plain_python_runs_the_node_checks_alone():
    code = ("import ncclcheck; r = ncclcheck.guard(timeout=5, quiet=True); "
            "print('STATUS', r.status.value, r.world.nnodes, r.world.launcher)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                       env=cli_env())
    assert p.returncode == 0 and re.search(r"STATUS (pass|warn) 1 ncclcheck", p.stdout), why(p)


def test_env_static_init_after_the_guard_hosted_the_store_on_the_master_port():
    """No launcher agent (what srun/mpirun scripts do: RANK, WORLD_SIZE, MASTER_* set, env:// init): rank 0's guard
    hosts the store on MASTER_PORT and closes it; then the script's rank 0 binds the same port for its own store."""
    port = free_port()
    env = {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    procs = [subprocess.Popen([sys.executable, os.path.join(FIX, "guard_leftovers.py")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=REPO,
                              env=cli_env({**env, "RANK": str(r), "LOCAL_RANK": str(r)})) for r in range(4)]
    outs = [p.communicate(timeout=180) for p in procs]
    text = "\n".join(o + e[-3000:] for o, e in outs)
    assert [p.returncode for p in procs] == [0, 0, 0, 0], text
    assert sorted(re.findall(r"LEFTOVERS-OK rank=(\d)", text)) == ["0", "1", "2", "3"], text
