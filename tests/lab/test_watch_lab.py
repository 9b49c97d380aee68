"""`ncclcheck watch` on a hung gloo job of 3 lab hosts x 2 ranks (issue 33), under torchrun, `fabric run` and srun in
the lab's Slurm: the ranks are armed with `ncclcheck.arm(DIR)` (tests/live/fixtures/live_worker.py) and one of them
- sleeps before an all_reduce (sleep);
- takes another branch: an all_reduce on a sub-group it shares with rank 0, which waits in the default group's
  (branch);
- deadlocks on a Python lock a second thread of its own holds (lock);
- or its host's link is dropped (nftables: every packet to and from the other hosts) while every rank is inside a
  long all_reduce (link: h2; link-node0: h1, the master's host, where watch runs).
`ncclcheck watch --master-addr h1 --master-port P --timeout 10`, run on h1, must name the rank, its host and the
collective (for a dropped link: that host, its ranks, and the collective the others wait in) within --timeout + 10 s
of being started, while every process of the job is still alive (the ranks write their pids; watch's JSON has them
too). A healthy armed job trains to the end on every host while watch says it makes progress (exit 0).

One lab serves the module (test_guard_lab's: its fixtures, launch lines and node profile; Slurm started once). CI
runs a cover (each fault under one launcher, each launcher meets a fault, one healthy run); the whole product runs in
scripts/long_tests.py. The cost of arming (the healthy job unarmed, ARM=0) is measured only when asked:
NCCLCHECK_LAB_FIGURES=1 python3 -m pytest -s -m lab tests/lab/test_watch_lab.py -k healthy
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from ncclcheck.postmortem.analyze import ranks_text
from ncclcheck_lab.netlab.harness import REPO_ROOT, HostRun
from tests.lab import test_guard_lab as guard
from tests.lab.test_guard_lab import FIGURES, PORT, explain, need, run

# the guard lab's fixtures, so this module gets one such lab of its own (module scope), healthy again after each test
shared = guard.shared
guard_lab = guard.guard_lab

pytestmark = pytest.mark.lab

WORKER = str(REPO_ROOT / "tests" / "live" / "fixtures" / "live_worker.py")
TIMEOUT = 10  # watch's --timeout: its bound on fetching every rank at once
HANG_S = 45  # how long a culprit hangs (and the job's gloo timeout + 60 s): the job ends by itself soon after
START_S = 150  # the job's 6 ranks importing torch and arming on 2 shared cores, until each wrote READY
DEADLINE = START_S + HANG_S + 60  # the job's launchers are killed by then whatever happens
# the culprit rank of each fault, spread over the hosts (node 0, h1, too); for a link, the host cut off
FAULTS = {"sleep": 5, "branch": 3, "lock": 1, "link": "h2", "link-node0": "h1"}
# where the culprit's main thread is, as its stack says (the branch: in the sub-group's all_reduce)
WHERE = {"sleep": "time.sleep(HANG_S)", "lock": "with lock:", "branch": "dist.all_reduce(t, group=sub)"}
LAUNCHERS = ["torchrun-static", "fabric-run", "srun"]
# CI: each fault under one launcher, each launcher meets a fault, one healthy run; the rest: scripts/long_tests.py
# srun with the sleep fault: the munge case below runs it in CI (a forged rank besides)
IN_CI = {("torchrun-static", "branch")}  # a lock under fabric run, a dropped host: long (CI's time); the host
# down is also tests/live/test_watch.py's, on the dump of such a run (dropped-h2-ring-ahead)
# long: the rest of launchers x faults, node 0's link under torchrun alone (the analysis of node 0 cut off is also
# tests/live/test_watch.py's, on data captured from this test)
SKIP = {("fabric-run", "link-node0"), ("srun", "link-node0")}
# a healthy job: tests/live/test_live_job.py::test_watch_says_a_healthy_job_makes_progress runs in CI (real ranks on
# loopback); the lab's 3-host run of it (~50 s) is long
HEALTHY_IN_CI = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (a rank that ended, its launcher not yet reaped it) is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Job:
    """A job of the module's lab started in the background (test_guard_lab.run in a thread): its ranks' READY
    files, and a stop that kills every process of it (the ranks by their pids, the launchers' process groups, the
    Slurm job)."""

    def __init__(self, state: dict, name: str, scenario: str, env: dict) -> None:
        self.shared, self.name, self.lab = state, name, state["lab"]
        self.ready = self.lab.tmp / f"ready-{name}-{scenario}-{time.monotonic_ns()}"
        self.ready.mkdir()
        self.runs: dict[str, HostRun] = {}
        self.t0 = time.monotonic()
        self._before = len(self.lab._procs)
        self._thread = threading.Thread(target=lambda: self.runs.update(
            run(state, name, {}, env=env, deadline=DEADLINE, script=[WORKER, scenario, str(self.ready)])),
            daemon=True)
        self._thread.start()

    def ranks(self) -> dict:
        """{rank: {"pid", "host"}} of the ranks that wrote READY."""
        out = {}
        for f in self.ready.iterdir():
            try:
                out[int(f.name)] = json.loads(f.read_text())
            except (ValueError, OSError):
                pass  # being written
        return out

    def wait_ready(self, n: int = 6) -> dict:
        end = time.monotonic() + START_S
        while len(self.ranks()) < n and time.monotonic() < end and self._thread.is_alive():
            time.sleep(0.2)
        got = self.ranks()
        assert len(got) == n, f"{len(got)} of {n} ranks ready\n" + self.explain()
        return got

    def wait(self, timeout: float) -> dict[str, HostRun]:
        self._thread.join(timeout)
        return self.runs

    def explain(self) -> str:
        return explain(self.runs) if self.runs else "(the job still runs)"

    def stop(self) -> None:
        for r in self.ranks().values():
            try:
                os.kill(r["pid"], signal.SIGKILL)
            except (ProcessLookupError, KeyError, TypeError):
                pass
        if self.name == "srun" and self.shared.get("slurm"):
            self.lab.exec("h1", ["scancel", "--full", "--signal=KILL", "--user", "root"], env=self.shared["slurm"],
                          timeout=30)
        for p in self.lab._procs[self._before:]:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self._thread.join(60)


def watch(shared: dict, name: str, dump) -> tuple[subprocess.CompletedProcess, float, dict]:
    """`ncclcheck watch` on h1, as a user there runs it (under Slurm: a step of the job's own allocation, `srun
    --overlap`, as docs/live.md says): (its run, seconds from its start to its answer, its report)."""
    lab = shared["lab"]
    argv = [sys.executable, "-m", "ncclcheck", "watch", "--master-addr", lab.ip("h1"), "--master-port", str(PORT),
            "--timeout", str(TIMEOUT), "--json", "-", "--dump", str(dump)]
    env = {}
    if name == "srun":
        env = shared["slurm"]
        jobs = lab.exec("h1", ["squeue", "-h", "-t", "RUNNING", "-o", "%i"], env=env, timeout=30).stdout.split()
        assert jobs, "no running Slurm job"
        argv = ["srun", "--overlap", "--jobid", max(jobs, key=int), "-N1", "-n1", "-w", "h1", *argv]
    t0 = time.monotonic()
    p = lab.exec("h1", argv, timeout=3 * TIMEOUT + 60, cwd=lab.tmp, env=env)
    took = time.monotonic() - t0
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = {}
    return p, took, doc


def job_env(**extra: str) -> dict:
    return {"TORCH_FR_BUFFER_SIZE": "2000", "HANG_S": str(HANG_S), "ARM": "arm", **extra}


def _check(doc: dict, cid: str) -> dict:
    return next((c for c in doc.get("checks", []) if c["id"] == cid), {})


CASES = [(n, f) for n in LAUNCHERS for f in FAULTS if (n, f) not in SKIP]


@pytest.mark.parametrize("name, fault", [pytest.param(n, f, marks=() if (n, f) in IN_CI else pytest.mark.long)
                                         for n, f in CASES], ids=[f"{n}-{f}" for n, f in CASES])
def test_watch_names_the_culprit_while_the_job_runs(guard_lab, name, fault, tmp_path):
    need(name)
    lab = guard_lab["lab"]
    link = fault.startswith("link")
    culprit = FAULTS[fault]
    job = Job(guard_lab, name, "link" if link else fault, job_env(**({} if link else {"CULPRIT": str(culprit)})))
    try:
        ranks = job.wait_ready()
        if link:  # every rank is inside the 32 MiB all_reduces: cut the host off from the others (nftables)
            for h in lab.hosts:
                if h != culprit:
                    lab.scenario("dropped-link", culprit, h)
            time.sleep(1)  # the collective in flight when the packets stopped is the one left hanging
        p, took, doc = watch(guard_lab, name, tmp_path / "dump")
        alive = {r: _alive(v["pid"]) for r, v in ranks.items()}
        live = doc.get("live", {})
        assert all(alive.values()), f"the job must still run when watch answers: {alive}\n{p.stdout[-3000:]}"
        # every rank registered; those that answered gave the pids the job's ranks wrote
        assert sorted(x["rank"] for x in live.get("ranks", [])) == sorted(ranks), p.stdout[-3000:]
        assert all(x["pid"] == ranks[x["rank"]]["pid"] for x in live["ranks"] if x.get("pid")), live
        assert p.returncode == 1, (p.stdout[-4000:], p.stderr[-2000:], job.explain())
        assert took < TIMEOUT + 10, took
        root = _check(doc, "postmortem.root_cause")
        assert root.get("status") == "fail", doc.get("checks")
        verdict = doc["postmortem"]["verdict"]
        if link:  # the host cut off and its ranks (seen from h1: node 0 cut off is h1 reaching no other host)
            dropped = sorted(r for r, v in ranks.items() if v["host"] == culprit)
            assert root["status"] == "fail" and sorted(root["evidence"]["ranks"]) == dropped, root
            assert f"host {culprit} ({ranks_text(dropped)})" in verdict, verdict
            assert re.search(r"all_reduce #\d+ of default_pg", verdict), verdict
        else:
            assert root["status"] == "fail" and root["evidence"]["ranks"] == [culprit], root
            assert f"rank {culprit} (host {ranks[culprit]['host']}" in verdict, verdict
            assert re.search(r"all_reduce #\d+ of default_pg", verdict), verdict
            assert WHERE[fault] in verdict, verdict
        print(f"FIGURE watch {name} {fault}: answered in {took:.1f} s (bound {TIMEOUT + 10} s): {verdict}")
    finally:
        job.stop()


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == HEALTHY_IN_CI else pytest.mark.long)
                                  for n in LAUNCHERS])
def test_an_armed_healthy_job_trains_to_the_end_and_watch_says_it_progresses(guard_lab, name, tmp_path):
    need(name)
    steps = "600"  # ~20 s of training after READY on the shared 2 cores: watch's two looks fall inside it
    job = Job(guard_lab, name, "healthy", job_env(STEPS=steps))
    try:
        job.wait_ready()
        p, took, doc = watch(guard_lab, name, tmp_path / "dump")
        assert p.returncode == 0, (p.stdout[-4000:], p.stderr[-2000:])
        assert _check(doc, "live.progress").get("status") == "pass", doc.get("checks")
        assert _check(doc, "live.answered").get("status") == "pass", doc.get("checks")
        runs = job.wait(DEADLINE)
        assert runs and all(r.rc == 0 and not r.timed_out for r in runs.values()), job.explain()
        out = "".join(r.stdout + r.stderr for r in runs.values())
        assert len(re.findall(rf"TRAINED world=6 steps={steps}", out)) == 1, job.explain()
        armed = max(r.elapsed for r in runs.values())
    finally:
        job.stop()
    print(f"FIGURE watch {name} healthy armed (watched once): {armed:.1f} s; watch answered in {took:.1f} s")
    if FIGURES:  # the cost of arming is a measurement, not an assertion: only when figures are asked for
        bare = Job(guard_lab, name, "healthy", job_env(STEPS=steps, ARM="0"))
        try:
            runs = bare.wait(DEADLINE)
            assert runs and all(r.rc == 0 for r in runs.values()), bare.explain()
            unarmed = max(r.elapsed for r in runs.values())
        finally:
            bare.stop()
        print(f"FIGURE watch {name} healthy unarmed: {unarmed:.1f} s; arming cost {armed - unarmed:+.1f} s")


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == "torchrun-static" else pytest.mark.long)
                                  for n in LAUNCHERS])
def test_watch_names_the_link_cut_between_two_hosts_that_both_answer(guard_lab, name, tmp_path):
    """Only h2 <-> h3 is cut (nftables), mid all_reduce: every rank still answers watch from h1, so no host is
    silent; the ranks' connects to each other (reach) name the pair, and no rank. Whether every rank is left inside
    the all_reduce or rank 0 (h1) had all it needed and finished it is the ring's timing: both are the link."""
    need(name)
    lab = guard_lab["lab"]
    job = Job(guard_lab, name, "link", job_env())
    try:
        ranks = job.wait_ready()
        lab.scenario("dropped-link", "h2", "h3")
        time.sleep(1)  # the collective in flight when the packets stopped is the one left hanging
        p, took, doc = watch(guard_lab, name, tmp_path / "dump")
        alive = {r: _alive(v["pid"]) for r, v in ranks.items()}
        assert all(alive.values()), f"the job must still run when watch answers: {alive}\n{p.stdout[-3000:]}"
        assert p.returncode == 1, (p.stdout[-4000:], p.stderr[-2000:], job.explain())
        assert took < TIMEOUT + 10, took
        assert _check(doc, "live.answered").get("status") == "pass", doc.get("checks")
        prog = _check(doc, "live.progress")
        assert prog.get("status") == "fail", doc.get("checks")
        assert "the link between h2 <-> h3 does not connect" in prog["summary"], prog
        assert prog["evidence"]["reach"]["pairs"] == [["h2", "h3"]], prog["evidence"]
        root = _check(doc, "postmortem.root_cause")  # the link, no rank: every one of them waits on it
        assert root.get("status") == "fail" and root["evidence"]["kind"] == "link_cut", root
        assert root["evidence"]["ranks"] == [] and "the link between h2 <-> h3" in root["summary"], root
        print(f"FIGURE watch {name} pair h2-h3: answered in {took:.1f} s (bound {TIMEOUT + 10} s): {prog['summary']}")
    finally:
        job.stop()


def test_munge_under_srun_the_guard_refuses_a_forged_pass_and_watch_a_forged_rank(guard_lab, tmp_path):
    """Issue 45: no token, a job launched by srun in the lab's Slurm, where munged runs. The guard's preflight runs
    at trust `munge` (a per-run key in a credential of the job's user) while a stranger on h2, who finds the job with
    squeue, forges a pass (the verdict "ok", exit 0, a join record): every rank's report says `munge` and names the
    forgery it refused. Then, once the job hangs (rank 5 sleeps before an all_reduce), the stranger points rank 5's
    live record at his own listener, which answers in rank 5's name that every collective completed. watch, a step
    of the job's allocation, seals its requests with a munge credential (trust `munge` in its report): the stranger
    cannot seal his answer, so rank 5 is named as answering with garbage, and the verdict still names rank 5."""
    need("srun")
    lab = guard_lab["lab"]
    if guard_lab["slurm"] is None:
        guard_lab["slurm"] = guard.nlx.slurm_up(lab.state)
    senv = {**guard_lab["slurm"], "PYTHONPATH": str(REPO_ROOT)}
    culprit = FAULTS["sleep"]
    forger = lab.spawn("h2", [guard.PY, "-m", "tests.lab.stranger", "pass", lab.ip("h1"), str(PORT), "--canary",
                              str(lab.tmp / "canary"), "--job-id", "squeue", "--guard", "--hold", str(START_S)],
                       env=senv, cwd=str(REPO_ROOT))
    job = Job(guard_lab, "srun", "sleep", job_env(ARM="guard", CULPRIT=str(culprit)))
    liar = None
    try:
        ranks = job.wait_ready()
        forger.kill()
        forged = forger.communicate(timeout=10)[0]
        assert "forged verdict ok" in forged or "forged final exit 0" in forged, forged
        for r, v in sorted(ranks.items()):  # every rank's guard report: munge, and the forgery it refused
            t = v.get("trust") or {}
            assert t.get("level") == "munge", (r, t)
            assert any("not signed" in x for x in t.get("ignored", [])), (r, t, forged)
        liar = lab.spawn("h2", [guard.PY, "-m", "tests.lab.stranger", "live", lab.ip("h1"), str(PORT), "--canary",
                                str(lab.tmp / "canary"), "--rank", str(culprit), "--hold", "90"],
                         env=senv, cwd=str(REPO_ROOT))
        said = liar.stdout.readline()
        assert f"rank {culprit}'s record" in said, (said, liar.stderr.read() if liar.poll() is not None else "")
        p, took, doc = watch(guard_lab, "srun", tmp_path / "dump")
        assert doc.get("trust", {}).get("level") == "munge", (doc.get("trust"), p.stderr[-2000:])
        live = doc["live"]
        assert live["garbage"] == [culprit], live.get("unanswered")
        assert "not signed" in live["unanswered"][str(culprit)], live["unanswered"]
        assert sorted(live["answered"]) == [r for r in sorted(ranks) if r != culprit], live
        root = _check(doc, "postmortem.root_cause")
        assert p.returncode == 1 and root.get("status") == "fail", (p.stdout[-3000:], doc.get("checks"))
        verdict = doc["postmortem"]["verdict"]
        assert f"rank {culprit} (host {ranks[culprit]['host']}" in verdict and "answered with garbage" in verdict, \
            verdict
        assert re.search(r"all_reduce #\d+ of default_pg", verdict), verdict
        print(f"FIGURE watch srun munge, rank {culprit}'s record forged: answered in {took:.1f} s: {verdict}")
    finally:
        for proc in (forger, liar):
            if proc is not None and proc.poll() is None:
                proc.kill()
        job.stop()
