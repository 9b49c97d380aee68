"""ncclcheck.guard(): the switch, the exports, the key prefix, the failure message, what apply=True sets."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ncclcheck
from ncclcheck import training
from ncclcheck.agent.launchers import detect_placement
from ncclcheck.model import CheckResult, NodeInfo, Recommendation, Report, Status, WorldInfo
from tests.conftest import REPO, cli_env

TORCHRUN_ENV = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
                "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "198.18.0.1", "MASTER_PORT": "29500",
                "TORCHELASTIC_RUN_ID": "job42", "TORCHELASTIC_USE_AGENT_STORE": "True"}


def test_exports_are_lazy_and_torch_free():
    code = ("import sys, ncclcheck; assert 'torch' not in sys.modules; e = ncclcheck.PreflightFailed; "
            "assert issubclass(e, RuntimeError); assert callable(ncclcheck.guard); assert callable(ncclcheck.arm); "
            "assert 'torch' not in sys.modules; print('ok')")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=REPO,
                         timeout=60)
    assert got.stdout.strip() == "ok", got.stderr
    assert ncclcheck.guard is training.guard and ncclcheck.PreflightFailed is training.PreflightFailed
    assert ncclcheck.arm is training.arm.arm and "arm" in ncclcheck.__all__


def test_off_switch_is_a_no_op(monkeypatch):
    monkeypatch.setenv("NCCLCHECK_GUARD", "0")
    monkeypatch.setenv("RANK", "not a number")  # would be a usage error if the guard read the world at all
    assert ncclcheck.guard(timeout=1) is None


def test_bad_launcher_variables_raise_preflight_failed(monkeypatch):
    monkeypatch.delenv("NCCLCHECK_GUARD", raising=False)
    for k, v in {"RANK": "5", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ncclcheck.PreflightFailed, match="rank 5 .* out of range"):
        ncclcheck.guard(timeout=1)


def test_postmortem_dir_arms_the_job_and_keeps_what_the_user_set(tmp_path):
    """guard(postmortem_dir=D) in plain python: the flight recorder and NCCL's log are armed under D in os.environ
    (what `recommend --postmortem D --format env` prints), and a variable the user set is left as it was."""
    code = ("import json, os, ncclcheck; r = ncclcheck.guard(postmortem_dir=os.environ['PM'], quiet=True); "
            "print(json.dumps({'armed': r.extra['guard_postmortem'], 'env': dict(os.environ)}))")
    pm = tmp_path / "pm"
    env = {k: v for k, v in cli_env().items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_",
                                                                  "TORCH", "NCCL", "SLURM", "OMPI"))}
    env.update(PM=str(pm), NCCL_DEBUG="WARN")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    got = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert pm.is_dir()
    assert got["env"]["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG" not in got["armed"]  # the user's value stands
    assert got["armed"]["TORCH_FR_BUFFER_SIZE"] and str(pm) in got["armed"]["NCCL_DEBUG_FILE"]
    # timing tells "its GPU never started it" from "started, never finished"; torch 2.13 (installed) reads the
    # TORCH_FR_* names and warns on every rank for the old ones, so only those are set
    assert got["armed"]["TORCH_NCCL_ENABLE_TIMING"] == "1"
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in got["armed"] and "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" not in got["armed"]
    assert all(got["env"][k] == v for k, v in got["armed"].items())


def test_guard_prefix_is_its_own_and_changes_with_each_restart():
    p = detect_placement(TORCHRUN_ENV)
    first = training.guard_placement(p, TORCHRUN_ENV)
    again = training.guard_placement(p, {**TORCHRUN_ENV, "TORCHELASTIC_RESTART_COUNT": "1"})
    assert p.prefix == "ncclcheck/job42/"  # the CLI's preflight under the same torchrun
    assert first.prefix == "ncclcheck/job42-guard0/" and again.prefix == "ncclcheck/job42-guard1/"
    assert (first.rank, first.node_rank, first.agent_store, first.hosts_store) == (1, 0, True, False)


def _report(checks, strict=False, nodes=((0, "h1"), (2, "h3"))):
    return Report(command="preflight", version="0", started="", world=WorldInfo(nnodes=3, launcher="torchrun"),
                  nodes=[NodeInfo(r, h, {}) for r, h in nodes], checks=checks, strict=strict)


def test_failure_message_names_node_host_cause_and_fix():
    checks = [CheckResult("code.consistent", Status.FAIL, "code differs on node 2", node=2, fix="sync the code"),
              CheckResult("net.route", Status.PASS, "fine", node=0)]
    msg = training.failure_message(_report(checks), rank=3)
    assert msg.splitlines()[0] == "ncclcheck preflight failed (rank 3, exit code 1):"
    assert "[code.consistent] on node 2 (h3): code differs on node 2" in msg and "fix: sync the code" in msg
    assert "net.route" not in msg


def test_failure_message_counts_what_it_leaves_out_and_strict_names_warnings():
    many = [CheckResult(f"c.{i}", Status.FAIL, f"bad {i}", node=0) for i in range(5)]
    assert "... and 2 more" in training.failure_message(_report(many), 0)
    warn = [CheckResult("env.nccl", Status.WARN, "NCCL_DEBUG is set", node=0)]
    assert training.failure_message(_report(warn), 0).endswith("(see global rank 0's report)")
    assert "[env.nccl] on node 0 (h1): NCCL_DEBUG is set" in training.failure_message(_report(warn, strict=True), 0)


def test_apply_sets_only_unset_variables_node_values_first():
    recs = [Recommendation("NCCL_SOCKET_IFNAME", "=eth0", "job"), Recommendation("GLOO_SOCKET_IFNAME", "eth0", "job"),
            Recommendation("GLOO_SOCKET_IFNAME", "ens1", "node 1 only", node=1),
            Recommendation("NCCL_IB_HCA", "=mlx5_0", "node 0 only", node=0),
            Recommendation("NCCL_DEBUG", "WARN", "never applied: not an interface choice")]
    env = {"NCCL_SOCKET_IFNAME": "bond0"}
    applied = training.apply_recommendations(recs, env, node_rank=1)
    assert applied == {"GLOO_SOCKET_IFNAME": "ens1"}
    assert env == {"NCCL_SOCKET_IFNAME": "bond0", "GLOO_SOCKET_IFNAME": "ens1"}
    env0: dict = {}
    assert training.apply_recommendations(recs, env0, node_rank=0) == {
        "NCCL_SOCKET_IFNAME": "=eth0", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "=mlx5_0"}


SLURM_ENV = {"SLURM_PROCID": "3", "SLURM_NTASKS": "6", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
             "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_TASKS_PER_NODE": "2(x3)",
             "SLURM_STEP_NODELIST": "node[07-09].invalid", "SLURM_JOB_ID": "4242"}
MPI_ENV = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "head.invalid"}


def test_apply_exports_the_srun_world_where_unset():
    """Under srun the guard's world (SLURM_PROCID..., the first host of the node list, 15000 + the job id's last
    four digits) becomes torch.distributed's env:// variables; a MASTER_PORT the user exported stays."""
    env = dict(SLURM_ENV)
    got = training.world_exports(detect_placement(env), env)
    assert got == {"RANK": "3", "WORLD_SIZE": "6", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "NODE_RANK": "1",
                   "MASTER_ADDR": "node07.invalid", "MASTER_PORT": "19242"}
    assert all(env[k] == v for k, v in got.items())
    mine = {**SLURM_ENV, "MASTER_PORT": "29500", "RANK": ""}
    got = training.world_exports(detect_placement(mine), mine)
    assert "MASTER_PORT" not in got and mine["MASTER_PORT"] == "29500" and got["RANK"] == "3"


def test_apply_exports_the_mpirun_world_and_nothing_under_torchrun():
    env = dict(MPI_ENV)
    got = training.world_exports(detect_placement(env), env)
    # mpirun -x MASTER_ADDR=...: the user's address stays; the port is the default the guard itself used
    assert got == {"RANK": "5", "WORLD_SIZE": "6", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "NODE_RANK": "2",
                   "MASTER_PORT": "29500"}
    assert env["MASTER_ADDR"] == "head.invalid" and env["RANK"] == "5"
    tr = dict(TORCHRUN_ENV)
    assert training.world_exports(detect_placement(tr), tr) == {} and tr == TORCHRUN_ENV  # torchrun set them all
