"""`ncclcheck watch` names who slows a running gloo job of 3 lab hosts x 2 ranks (issue 47), under torchrun,
`fabric run` and srun in the lab's Slurm (tests/live/fixtures/slow_worker.py, armed with `ncclcheck.arm(DIR)`):
- a rank whose step becomes 1.5x slower from some step on: that rank, its host, "compute", its cost per step, since
  about when it began;
- a host whose link is shaped mid-job (tc tbf, both directions): that host, "communication", no rank's compute;
- a rank whose process is throttled by a cgroup CPU quota mid-job (cpu.max on cgroup v2, cpu.cfs_quota_us on v1:
  the same CFS bandwidth control): that rank;
- a healthy job with +-20 % jitter on every rank, and one whose slow rank changes every step at random: nobody
  named, watched several times each.
Each checks that every rank of the job is alive when watch answers. Watch runs on h1 with --timeout 10 (under Slurm
as a step of the job's allocation, `srun --overlap`), as tests/lab/test_watch_lab.py runs it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from ncclcheck_lab.netlab.harness import REPO_ROOT
from tests.lab import test_watch_lab as wl

shared = wl.shared
guard_lab = wl.guard_lab

pytestmark = pytest.mark.lab

WORKER = str(REPO_ROOT / "tests" / "live" / "fixtures" / "slow_worker.py")
CULPRIT = 3  # on h2, not node 0
STEPS_S = 15  # after the slowdown: ~80 steps of 0.18 s, ten stretches of the rule's 8 (25 s was ~140)
WATCHES = 3  # a healthy job is watched this many times: nothing named on any
DEADLINE = wl.START_S + 300  # the job's launchers are killed by then whatever happens
# CI: a rank slow from some step under torchrun; the shaped NIC, the cgroup quota, healthy jitter and a random
# slow rank (several runs each) and the other launchers in scripts/long_tests.py (the suite stays under 20 minutes)
IN_CI = {("torchrun-static", "slow-from")}  # comm and cpu: long (each a 50 s 3-host job)


class SlowJob(wl.Job):
    """tests/lab/test_watch_lab.py's Job running slow_worker.py."""

    def __init__(self, state: dict, name: str, scenario: str, env: dict) -> None:
        self.shared, self.name, self.lab = state, name, state["lab"]
        self.ready = self.lab.tmp / f"ready-{name}-{scenario}-{time.monotonic_ns()}"
        self.ready.mkdir()
        self.runs: dict = {}
        self.t0 = time.monotonic()
        self._before = len(self.lab._procs)
        self._thread = threading.Thread(target=lambda: self.runs.update(
            wl.run(state, name, {}, env=env, deadline=DEADLINE, script=[WORKER, scenario, str(self.ready)])),
            daemon=True)
        self._thread.start()


def job_env(**extra: str) -> dict:
    return {"TORCH_FR_BUFFER_SIZE": "2000", "CULPRIT": str(CULPRIT), "RUN_S": "300", **extra}


def _alive(ranks: dict) -> None:
    alive = {r: wl._alive(v["pid"]) for r, v in ranks.items()}
    assert all(alive.values()), f"the job must still run when watch answers: {alive}"


def _throttle(pid: int, share: float) -> Path:
    """Put `pid` (every thread of it) in a new cgroup whose CPU quota is `share` of one CPU; its path."""
    v2 = Path("/sys/fs/cgroup")
    name = f"ncclcheck-slow-{pid}"
    if "cpu" in (v2 / "cgroup.controllers").read_text().split() if (v2 / "cgroup.controllers").exists() else False:
        g = v2 / name
        g.mkdir(exist_ok=True)
        (g / "cpu.max").write_text(f"{int(share * 100_000)} 100000")
    else:
        g = v2 / "cpu" / name
        g.mkdir(exist_ok=True)
        (g / "cpu.cfs_period_us").write_text("100000")
        (g / "cpu.cfs_quota_us").write_text(str(int(share * 100_000)))
    for tid in os.listdir(f"/proc/{pid}/task"):
        (g / "tasks" if (g / "tasks").exists() else g / "cgroup.threads").write_text(tid)
    return g


def _release(g: Path) -> None:
    parent = g.parent
    for f in ("tasks", "cgroup.procs"):
        if (g / f).exists():
            for tid in (g / f).read_text().split():
                try:
                    (parent / f).write_text(tid)
                except OSError:
                    pass
    try:
        g.rmdir()
    except OSError:
        pass


CASES = [(n, f) for n in wl.LAUNCHERS for f in ("slow-from", "comm", "cpu")]


@pytest.mark.parametrize("name, fault", [pytest.param(n, f, marks=() if (n, f) in IN_CI else pytest.mark.long)
                                         for n, f in CASES], ids=[f"{n}-{f}" for n, f in CASES])
def test_watch_names_who_slows_the_job(guard_lab, name, fault, tmp_path):
    wl.need(name)
    lab = guard_lab["lab"]
    extra = {"comm": {"SIZE": str(256 << 10)}, "cpu": {"WORK_MS": "10"}}.get(fault, {})
    job = SlowJob(guard_lab, name, "healthy" if fault == "comm" else fault, job_env(**extra))
    group = None
    try:
        ranks = job.wait_ready()
        if fault == "slow-from":
            slowed = Path(job.ready) / "slowed"
            end = time.monotonic() + 60
            while not slowed.exists() and time.monotonic() < end:
                time.sleep(0.5)
            began = json.loads(slowed.read_text())["time_ns"]
        else:
            time.sleep(10)  # healthy steps first: the job's own best
            began = time.time_ns()
            if fault == "comm":
                lab.scenario("slow-link", "h2", "20mbit", "both")
            else:
                group = _throttle(ranks[CULPRIT]["pid"], 0.05)
        time.sleep(STEPS_S)
        p, took, doc = wl.watch(guard_lab, name, tmp_path / "dump")
        _alive(ranks)
        slow = wl._check(doc, "live.slow")
        if os.environ.get("H7DEBUG"):
            Path(os.environ["H7DEBUG"]).write_text(json.dumps(doc))
        assert slow.get("status") == "fail", (slow, p.stdout[-3000:], p.stderr[-2000:])
        assert p.returncode == 1
        first = slow["evidence"]["named"][0]
        if fault == "comm":
            hosts = [first["host"]] if first.get("host") else first.get("hosts", [])
            assert hosts == ["h2"] and first["kind"] == "communication", slow
            assert not any(f.get("kind") == "compute" for f in slow["evidence"]["named"]), slow
            assert "h2" in slow["summary"] and "communication" in slow["summary"], slow
        else:
            assert (first["unit"], first["rank"], first["host"]) == ("rank", CULPRIT, ranks[CULPRIT]["host"]), slow
            assert first["kind"] == "compute" and first["cost_us"] > 0, slow
            assert "per step" in slow["summary"]
            # named as beginning about when it began, not before (within the steps the loaded machine blurs)
            assert first["since_ns"] >= began - 10 * 10**9, (first, began)
        print(f"FIGURE slow {name} {fault}: answered in {took:.1f} s: {slow['summary']}")
    finally:
        if group is not None:
            _release(group)
        job.stop()


HEALTHY = [(n, f) for n in wl.LAUNCHERS for f in ("jitter", "random")]


@pytest.mark.parametrize("name, fault", [pytest.param(n, f, marks=() if (n, f) in IN_CI else pytest.mark.long)
                                         for n, f in HEALTHY], ids=[f"{n}-{f}" for n, f in HEALTHY])
def test_jitter_and_a_different_slow_rank_each_step_name_nobody(guard_lab, name, fault, tmp_path):
    wl.need(name)
    job = SlowJob(guard_lab, name, fault, job_env())
    try:
        ranks = job.wait_ready()
        time.sleep(STEPS_S)
        for i in range(WATCHES):
            p, took, doc = wl.watch(guard_lab, name, tmp_path / f"dump{i}")
            _alive(ranks)
            slow = wl._check(doc, "live.slow")
            assert slow.get("status") == "pass", (slow, p.stdout[-3000:])
            assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-2000:])
        print(f"FIGURE slow {name} {fault}: nobody named in {WATCHES} watches: {slow['summary']}")
    finally:
        job.stop()
