"""`ncclcheck.guard()` as the first line of real training scripts (tests/fixtures/train_ddp.py, train_fabric.py) on 3
lab hosts with 2 ranks each, under torchrun (static and c10d rendezvous) and `fabric run`.

Healthy: every host exits 0, the job trains (one TRAINED line) and prints exactly one report. Faults the launcher's own
rendezvous cannot see (h2 dropping every new inbound connection, h3 with GLOO_SOCKET_IFNAME=docker0, h3 running
different code): every rank of every host raises PreflightFailed within T + 10 s of calling guard(), naming the node
and the cause. The same scripts without the guard line (GUARD=0) and the same faults are bounded at 120 s; each run
prints a FIGURE line (pytest -s) with the seconds to an answer, the figures the README quotes. Those unguarded fault
runs assert nothing and hang for up to 120 s each (9 of them), so they run only when asked:
NCCLCHECK_LAB_FIGURES=1 python3 -m pytest -s -m lab tests/lab/test_guard_lab.py
"""

from __future__ import annotations

import os
import re
import sys
import time

import pytest

from tests.lab.harness import REPO_ROOT, HostRun, Lab, code_drift

pytestmark = pytest.mark.lab

PY = sys.executable
PORT = 29500
T = 20  # the guard's timeout in the fixtures (GUARD_TIMEOUT)
UNGUARDED_BOUND = 120  # an unguarded job that has not ended by then is counted as hung
FIGURES = os.environ.get("NCCLCHECK_LAB_FIGURES") == "1"  # measure the unguarded fault runs too (minutes each)
DEADLINE = 200
DDP = str(REPO_ROOT / "tests" / "fixtures" / "train_ddp.py")
FABRIC = str(REPO_ROOT / "tests" / "fixtures" / "train_fabric.py")
# --code: the fixtures' folder, the same on every host (the default, the working directory, is the lab's scratch
# folder, where each host's output files grow while the guard hashes it)
ENV = {"COLUMNS": "200", "GUARD_TIMEOUT": str(T), "NUM_NODES": "3", "GUARD_CODE": str(REPO_ROOT / "tests" / "fixtures")}
HEADER = re.compile(r"ncclcheck preflight (\d+) node\(s\), (\d+) rank\(s\), (\w+)")
FAILED = re.compile(r"GUARD-FAILED rank=(\d+) after=([\d.]+)s: (.*(?:\n  .*)*)")


def torchrun(lab: Lab, node: int, script: str, c10d: bool = False) -> list[str]:
    world = (["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{lab.ip('h1')}:{PORT}", "--rdzv-id", "guard1"] if c10d
             else ["--node-rank", str(node), "--master-addr", lab.ip("h1"), "--master-port", str(PORT)])
    return [PY, "-m", "torch.distributed.run", "--nnodes", "3", "--nproc-per-node", "2", *world, script]


def fabric(lab: Lab, node: int, script: str) -> list[str]:
    return ["fabric", "run", "--accelerator", "cpu", "--devices", "2", "--num-nodes", "3", "--node-rank", str(node),
            "--main-address", lab.ip("h1"), "--main-port", str(PORT), script]


LAUNCHERS = {
    "torchrun-static": ("torchrun", lambda lab, i: torchrun(lab, i, DDP)),
    "torchrun-c10d": ("torchrun", lambda lab, i: torchrun(lab, i, DDP, c10d=True)),
    "fabric-run": ("fabric", lambda lab, i: fabric(lab, i, FABRIC)),
}


def explain(runs: dict[str, HostRun]) -> str:
    return "\n".join(f"--- {h} rc={r.rc} {r.elapsed:.1f}s timed_out={r.timed_out}\n{r.stdout[-3000:]}\n"
                     f"{r.stderr[-4000:]}" for h, r in runs.items())


def run(lab: Lab, make, host_env: dict, deadline: float = DEADLINE, env: dict = ENV) -> dict[str, HostRun]:
    cmds = {h: make(lab, i) for i, h in enumerate(lab.hosts)}
    return lab.run_all(cmds, deadline=deadline, cwd=lab.tmp, env=env, host_env=host_env)


def figure(what: str, runs: dict[str, HostRun]) -> None:
    worst = max(r.elapsed for r in runs.values())
    how = "hung (killed)" if any(r.timed_out for r in runs.values()) else \
        "exit " + ",".join(str(r.rc) for r in runs.values())
    inside = [float(x) for r in runs.values() for x in re.findall(r"GUARD-(?:OK|FAILED) rank=\d+ after=([\d.]+)s",
                                                                     r.stderr)]
    guard = f"; guard() itself {max(inside):.1f} s on the slowest rank" if inside else ""
    print(f"FIGURE {what}: {worst:.1f} s to an answer on the slowest host, {how}{guard}")


def faults(lab: Lab) -> dict:
    """name -> (scenario or None, per-host env, what the message must name)."""
    drift = {h: {"GUARD_CODE": args[1]} for h, args in code_drift(lab).items()}
    return {
        "inbound-drop-h2": ("inbound-drop h2", {}, re.compile(r"h2|node 1")),
        "gloo-docker0-h3": ("docker-decoy", {"h3": {"GLOO_SOCKET_IFNAME": "docker0"}}, re.compile(r"docker0")),
        "code-drift-h3": (None, drift, re.compile(r"code\.consistent.*h3|h3.*code", re.S)),
    }


@pytest.mark.parametrize("name", list(LAUNCHERS))
def test_guarded_job_trains_with_one_report(lab, name):
    launcher, make = LAUNCHERS[name]
    if launcher == "fabric":
        pytest.importorskip("lightning")
    lab3 = lab(3)
    t0 = time.monotonic()
    runs = run(lab3, make, {})
    assert all(r.rc == 0 for r in runs.values()), explain(runs)
    out = "".join(r.stdout + r.stderr for r in runs.values())
    assert HEADER.findall(out) == [("3", "6", launcher)], explain(runs)
    assert len(re.findall(r"TRAINED world=6", out)) == 1, explain(runs)
    figure(f"{name} healthy guarded", runs)
    unguarded = run(lab3, make, {}, env={**ENV, "GUARD": "0"})
    assert all(r.rc == 0 for r in unguarded.values()), explain(unguarded)
    figure(f"{name} healthy unguarded", unguarded)
    cost = max(r.elapsed for r in runs.values()) - max(r.elapsed for r in unguarded.values())
    print(f"FIGURE {name} guard cost: {cost:.1f} s (whole test {time.monotonic() - t0:.0f} s)")


@pytest.mark.parametrize("fault", ["inbound-drop-h2", "gloo-docker0-h3", "code-drift-h3"])
@pytest.mark.parametrize("name", list(LAUNCHERS))
def test_fault_fails_every_rank_within_bound(lab, name, fault):
    launcher, make = LAUNCHERS[name]
    if launcher == "fabric":
        pytest.importorskip("lightning")
    lab3 = lab(3)
    scenario, host_env, named = faults(lab3)[fault]
    if scenario:
        lab3.scenario(scenario)
    runs = run(lab3, make, host_env)
    err = "".join(r.stderr for r in runs.values())
    got = {int(r): (float(s), msg) for r, s, msg in FAILED.findall(err)}
    assert sorted(got) == list(range(6)), explain(runs)  # every rank of every host raised PreflightFailed
    assert all(r.rc != 0 and not r.timed_out for r in runs.values()), explain(runs)
    for rank, (after, msg) in got.items():
        assert after <= T + 10, (rank, after, explain(runs))
        assert named.search(msg), (rank, msg)
    assert "TRAINED" not in "".join(r.stdout for r in runs.values())
    figure(f"{name} {fault} guarded", runs)
    if FIGURES:
        unguarded = run(lab3, make, host_env, deadline=UNGUARDED_BOUND, env={**ENV, "GUARD": "0"})
        figure(f"{name} {fault} unguarded", unguarded)
