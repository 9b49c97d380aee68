"""`ncclcheck.guard()` as the first line of real training scripts (tests/fixtures/train_ddp.py, train_fabric.py) on 3
lab hosts with 2 ranks each, under torchrun (static and c10d rendezvous), `fabric run`, srun and mpirun.

Healthy: every host exits 0, the job trains (one TRAINED line) and prints exactly one report. Faults the launcher's own
rendezvous cannot see (h2 dropping every new inbound connection, h3 with GLOO_SOCKET_IFNAME=docker0, h3 running
different code): every rank of every host raises PreflightFailed within T + 10 s of calling guard(), naming the node
and the cause. Under srun and mpirun the script itself is the first to meet the master, so a blocked master port and
a wrong master address are the guard's to name too (under torchrun and fabric run those hang in the launcher, before
the script starts). Under srun and mpirun the script gets its world as their tutorials write it: the launch line
exports MASTER_ADDR (the first host of SLURM_JOB_NODELIST; rank 0's host for mpirun -x) and MASTER_PORT, the script
reads SLURM_PROCID / OMPI_COMM_WORLD_RANK and the like; a node's own difference (h3's GLOO_SOCKET_IFNAME, its copy
of the code) comes from that node's profile (node-env.sh sources env-<hostname>).

One lab serves the module (a scenario per test, switched off after it; Slurm's daemons started once). The same
scripts without the guard line (GUARD=0), healthy and under the same faults, are measured only when asked: the
healthy ones give the guard's cost, the fault ones hang for up to 120 s each. Each run prints a FIGURE line (pytest
-s), the figures the README quotes:
NCCLCHECK_LAB_FIGURES=1 python3 -m pytest -s -m lab tests/lab/test_guard_lab.py
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterator, Sequence

import pytest

from ncclcheck_lab.netlab import launchers as nlx
from ncclcheck_lab.netlab.harness import REPO_ROOT, HostRun, Lab, code_drift
from tests.lab.conftest import _why_not

pytestmark = pytest.mark.lab

PY = sys.executable
PORT = 29500
T = 20  # the guard's timeout in the fixtures (GUARD_TIMEOUT)
UNGUARDED_BOUND = 120  # an unguarded job that has not ended by then is counted as hung
FIGURES = os.environ.get("NCCLCHECK_LAB_FIGURES") == "1"  # measure the unguarded runs too (minutes)
DEADLINE = 200
DDP = str(REPO_ROOT / "tests" / "fixtures" / "train_ddp.py")
FABRIC = str(REPO_ROOT / "tests" / "fixtures" / "train_fabric.py")
# --code: the fixtures' folder, the same on every host (the default, the working directory, is the lab's scratch
# folder, where each host's output files grow while the guard hashes it)
ENV = {"COLUMNS": "200", "GUARD_TIMEOUT": str(T), "NUM_NODES": "3", "GUARD_CODE": str(REPO_ROOT / "tests" / "fixtures")}
HEADER = re.compile(r"ncclcheck preflight (\d+) nodes?, (\d+) ranks?, launched by (\w+)")
# the fixtures join the message's lines by " | "; two ranks' writes may still meet on one line (a write of the text,
# then one of its newline), so a message ends at the next rank's marker too
FAILED = re.compile(r"GUARD-FAILED rank=(\d+) after=([\d.]+)s: (.*?)(?=GUARD-FAILED rank=|$)", re.M)
EXITED = re.compile(r"RANK-EXIT rank=(\d+) rc=(\d+)")
SLURMD_PORT = str(nlx.SLURMD_PORT)
# a node's profile: what it adds to every process started there (the per-node faults under srun and mpirun); then
# each rank's own exit code, which a single launch line does not show rank by rank
NODE_ENV = ('#!/bin/sh\nf="$(dirname "$0")/env-$(hostname)"\n[ -f "$f" ] && . "$f"\n"$@"\nrc=$?\n'
            'echo "RANK-EXIT rank=${SLURM_PROCID:-$OMPI_COMM_WORLD_RANK} rc=$rc" >&2\nexit $rc\n')


def torchrun(lab: Lab, node: int, script: str, c10d: bool = False) -> list[str]:
    world = (["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{lab.ip('h1')}:{PORT}", "--rdzv-id", "guard1"] if c10d
             else ["--node-rank", str(node), "--master-addr", lab.ip("h1"), "--master-port", str(PORT)])
    return [PY, "-m", "torch.distributed.run", "--nnodes", "3", "--nproc-per-node", "2", *world, script]


def fabric(lab: Lab, node: int, script: str) -> list[str]:
    return ["fabric", "run", "--accelerator", "cpu", "--devices", "2", "--num-nodes", "3", "--node-rank", str(node),
            "--main-address", lab.ip("h1"), "--main-port", str(PORT), script]


def srun(lab: Lab, master: str | None, script: Sequence[str] = (DDP,)) -> list[str]:
    """salloc + srun as a batch script runs them: MASTER_ADDR is the first host of the allocation's node list (or
    the `master` given: a wrong one), MASTER_PORT a fixed port, then srun starts 2 tasks per node of the script
    (with its arguments)."""
    addr = shlex.quote(master) if master else '$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
    line = (f"export MASTER_ADDR={addr} MASTER_PORT={PORT}; "
            f"exec srun {shlex.quote(str(lab.tmp / 'node-env.sh'))} {PY} {shlex.join(script)}")
    return ["salloc", "-N", "3", "--ntasks-per-node=2", "/bin/sh", "-c", line]


def mpirun(lab: Lab, master: str | None, env: dict) -> list[str]:
    """mpirun from h1 with MASTER_ADDR (rank 0's host, or the `master` given), MASTER_PORT and env exported by -x.
    Every rank is let finish (orte_abort_on_non_zero_status 0) so each one's own outcome is seen, not mpirun's kill."""
    env = {**env, "PYTHONPATH": str(REPO_ROOT), "MASTER_ADDR": master or "h1", "MASTER_PORT": str(PORT)}
    argv = nlx.mpirun_argv(lab.state, 2, [str(lab.tmp / "node-env.sh"), PY, DDP], env)
    argv[1:1] = ["--mca", "orte_abort_on_non_zero_status", "0"]
    return argv


# name -> (launcher as the report names it, the tools it needs, whether the script meets the master first)
LAUNCHERS = {
    "torchrun-static": ("torchrun", (), False),
    "torchrun-c10d": ("torchrun", (), False),
    "fabric-run": ("fabric", ("fabric",), False),
    "srun": ("slurm", ("salloc", "srun", "slurmctld", "slurmd", "munged"), True),
    "mpirun": ("mpi", ("mpirun",), True),
}
PER_NODE = {
    "torchrun-static": lambda lab, i: torchrun(lab, i, DDP),
    "torchrun-c10d": lambda lab, i: torchrun(lab, i, DDP, c10d=True),
    "fabric-run": lambda lab, i: fabric(lab, i, FABRIC),
}
FAULTS = ["inbound-drop-h2", "gloo-docker0-h3", "code-drift-h3"]
MASTER_FAULTS = ["blocked-master-port", "wrong-master-addr"]


@pytest.fixture(scope="module")
def shared() -> Iterator[dict]:
    """One 3-host lab for the module (bringing one up and down per test cost more than a fault run); Slurm on it
    once, when the first srun test asks."""
    if why := _why_not():
        pytest.skip(why)
    lab = Lab(3)
    state = {"lab": lab, "slurm": None}
    try:
        (lab.tmp / "node-env.sh").write_text(NODE_ENV)
        (lab.tmp / "node-env.sh").chmod(0o755)
        state["drift"] = {h: args[1] for h, args in code_drift(lab).items()}
        yield state
    finally:
        lab.down()


@pytest.fixture
def guard_lab(shared) -> Iterator[dict]:
    """The shared lab, healthy at the start of each test and again after it (whatever the test switched on)."""
    lab = shared["lab"]
    yield shared
    lab.healthy()
    for f in lab.tmp.glob("env-h*"):
        f.unlink()


def need(name: str) -> None:
    missing = [t for t in LAUNCHERS[name][1] if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (.ci/run installs them: apt-get install slurm-wlm munge "
                    "openmpi-bin; pip install lightning)")


def explain(runs: dict[str, HostRun]) -> str:
    return "\n".join(f"--- {h} rc={r.rc} {r.elapsed:.1f}s timed_out={r.timed_out}\n{r.stdout[-3000:]}\n"
                     f"{r.stderr[-4000:]}" for h, r in runs.items())


def run(shared: dict, name: str, host_env: dict, *, master: str | None = None, deadline: float = DEADLINE,
        env: dict = ENV, script: Sequence[str] = ()) -> dict[str, HostRun]:
    """One job: a launcher per host (torchrun, fabric run), or one launch line on h1 (srun, mpirun), whose ranks get
    host_env[host] from their node's profile. script: another script than the launcher's training fixture, with its
    arguments (torchrun, fabric run, srun)."""
    lab = shared["lab"]
    if name in PER_NODE:
        cmds = {h: [*PER_NODE[name](lab, i)[:-1], *script] if script else PER_NODE[name](lab, i)
                for i, h in enumerate(lab.hosts)}
        return lab.run_all(cmds, deadline=deadline, cwd=lab.tmp, env=env, host_env=host_env)
    for h in lab.hosts:
        (lab.tmp / f"env-{h}").write_text("".join(f"export {k}={shlex.quote(v)}\n"
                                                   for k, v in host_env.get(h, {}).items()))
    if name == "srun":
        if shared["slurm"] is None:
            shared["slurm"] = nlx.slurm_up(lab.state)
        return lab.run_all({"h1": srun(lab, master, script or (DDP,))}, deadline=deadline, cwd=lab.tmp,
                           env={**env, **shared["slurm"]})
    return lab.run_all({"h1": mpirun(lab, master, env)}, deadline=deadline, cwd=lab.tmp, env=env)


def figure(what: str, runs: dict[str, HostRun]) -> None:
    worst = max(r.elapsed for r in runs.values())
    how = "hung (killed)" if any(r.timed_out for r in runs.values()) else \
        "exit " + ",".join(str(r.rc) for r in runs.values())
    inside = [float(x) for r in runs.values() for x in re.findall(r"GUARD-(?:OK|FAILED) rank=\d+ after=([\d.]+)s",
                                                                     r.stderr)]
    guard = f"; guard() itself {max(inside):.1f} s on the slowest rank" if inside else ""
    print(f"FIGURE {what}: {worst:.1f} s to an answer on the slowest host, {how}{guard}")


def fault(shared: dict, name: str, which: str) -> tuple:
    """Switch the fault on: (per-host env, master address to give, what every rank's message must name)."""
    lab = shared["lab"]
    h1 = re.escape(lab.ip("h1"))
    if which == "inbound-drop-h2":
        # h2's firewall: every new inbound connection dropped, but to slurmd's port, whichever launcher runs the job
        # (a Slurm node's firewall keeps its management port open). Closing it under torchrun once cost CI 120 s:
        # slurmctld's pings to h2 failed for SlurmdTimeout, h2 went "idle*" (not responding) and the next srun
        # case's salloc waited for it (staged: 30 s of drop, then salloc waited 29 s).
        lab.scenario("inbound-drop", "h2", SLURMD_PORT)
        return {}, None, re.compile(r"h2|node 1")
    if which == "gloo-docker0-h3":
        lab.scenario("docker-decoy")
        return {"h3": {"GLOO_SOCKET_IFNAME": "docker0"}}, None, re.compile(r"docker0")
    if which == "code-drift-h3":
        return ({h: {"GUARD_CODE": d} for h, d in shared["drift"].items()}, None,
                re.compile(r"code\.consistent.*h3|h3.*code", re.S))
    if which == "blocked-master-port":
        lab.block_port("h1", PORT)
        # nodes 1 and 2 cannot reach it; node 0 (which hosts it) names the nodes that never joined
        return {}, None, re.compile(rf"(cannot reach|could not join:) master (h1|{h1}):{PORT}"
                                    r"|node rank\(s\) 1-2 never joined")
    wrong = f"198.18.{lab.state.slot}.250"  # no lab host has it
    return {}, wrong, re.compile(re.escape(wrong))


# c10d: CI runs a guarded job under it meeting a fault (IN_CI below), the healthy one in scripts/long_tests.py
# srun, mpirun, fabric run: CI runs each meeting a fault (IN_CI here, fabric-run lock in test_watch_lab.py); their
# healthy runs are in the long tier with c10d's
@pytest.mark.parametrize("name", [n if n == "torchrun-static" else pytest.param(n, marks=pytest.mark.long)
                                  for n in LAUNCHERS])
def test_guarded_job_trains_with_one_report(guard_lab, name):
    need(name)
    launcher = LAUNCHERS[name][0]
    runs = run(guard_lab, name, {})
    assert all(r.rc == 0 and not r.timed_out for r in runs.values()), explain(runs)
    out = "".join(r.stdout + r.stderr for r in runs.values())
    assert HEADER.findall(out) == [("3", "6", launcher)], explain(runs)
    assert len(re.findall(r"TRAINED world=6", out)) == 1, explain(runs)
    assert sorted(int(r) for r in re.findall(r"GUARD-OK rank=(\d+)", out)) == list(range(6)), explain(runs)
    if name not in PER_NODE:  # one launch line: every rank's own exit code
        assert sorted(EXITED.findall(out)) == [(str(r), "0") for r in range(6)], explain(runs)
    figure(f"{name} healthy guarded", runs)
    if FIGURES:  # the guard's cost is a measurement, not an assertion: only when figures are asked for
        unguarded = run(guard_lab, name, {}, env={**ENV, "GUARD": "0"})
        assert all(r.rc == 0 for r in unguarded.values()), explain(unguarded)
        figure(f"{name} healthy unguarded", unguarded)
        cost = max(r.elapsed for r in runs.values()) - max(r.elapsed for r in unguarded.values())
        print(f"FIGURE {name} guard cost: {cost:.1f} s")


# Under torchrun and fabric run the launcher meets the master before the script does: a blocked master port or a
# wrong master address hangs there, before guard() runs (the docs point to `ncclcheck preflight` as its own step).
CASES = [(name, which) for name, (_, _, first) in LAUNCHERS.items() for which in FAULTS + MASTER_FAULTS[:2 * first]]
# CI runs a cover of the product: every launcher meets one fault and every fault one launcher; the whole product
# (19 jobs of 3 hosts x 2 ranks, 20-40 s each) runs in scripts/long_tests.py (pytest -m long).
# fabric run trains in CI (test_guarded_job_trains_with_one_report); a code drift fails every node in CI under
# torchrun (test_launchers_lab, the CLI) and on the lab's own launcher (test_preflight_lab).
# srun's guard runs in CI in test_watch_lab's munge case; a wrong master address and a blocked master port in
# test_preflight_lab's; mpirun launches in CI in test_launchers_lab (bench, one report)
IN_CI = {("torchrun-c10d", "gloo-docker0-h3")}  # inbound-drop under the guard: long (preflight_lab names it in CI)


@pytest.mark.parametrize("name, which", [pytest.param(n, w, marks=() if (n, w) in IN_CI else pytest.mark.long)
                                         for n, w in CASES], ids=[f"{n}-{w}" for n, w in CASES])
def test_fault_fails_every_rank_within_bound(guard_lab, name, which):
    need(name)
    host_env, master, named = fault(guard_lab, name, which)
    runs = run(guard_lab, name, host_env, master=master)
    err = "".join(r.stderr for r in runs.values())
    got = {int(r): (float(s), msg) for r, s, msg in FAILED.findall(err)}
    assert sorted(got) == list(range(6)), explain(runs)  # every rank of every host raised PreflightFailed
    assert not any(r.timed_out for r in runs.values()), explain(runs)
    if name in PER_NODE:
        assert all(r.rc != 0 for r in runs.values()), explain(runs)
    else:  # mpirun lets every rank finish (its own code is then 0): each rank's code, from the node profile
        assert sorted(EXITED.findall(err)) == [(str(r), "3") for r in range(6)], explain(runs)
    for rank, (after, msg) in got.items():
        assert after <= T + 10, (rank, after, explain(runs))
        assert named.search(msg), (rank, msg)
    assert "TRAINED" not in "".join(r.stdout for r in runs.values())
    figure(f"{name} {which} guarded", runs)
    if FIGURES:
        unguarded = run(guard_lab, name, host_env, master=master, deadline=UNGUARDED_BOUND,
                        env={**ENV, "GUARD": "0"})
        figure(f"{name} {which} unguarded", unguarded)
