"""The slow-job matrix (issue 65): is the straggler's kind and fix right whatever the job's shape? Step time (10 ms to
2 s) x compute/communication ratio (0.2 to 5) x fault (a compute straggler, a slow link, both, none), each cell run
several times (seeds); one line per cell, right K/N, and the total.

    python3 scripts/slow_matrix.py                      # the whole matrix, simulated
    python3 scripts/slow_matrix.py --steps-ms 100 --ratios 0.2,5 --runs 2

Simulated (ncclcheck_lab/slowsim.py): 3 hosts x 2 ranks, each step its compute then a big all_reduce and a small one
(the communication split between them), the analysis watch makes of them (postmortem/slow.py) with three ranks'
phases sampled as watch samples them (one rank a host, over straggle.phase_window of the job's step at the pace a
sample's CPU sets, live/pace.phase_pace of SAMPLE_COST_S, each reply fitted to what watch asks for:
live/pace.fit_rows within live/straggle.phase_ask), each host's clock as watch measures it (its true offset, within
CLOCK_ERR_NS: without a measure, a host whose ranks are all late by the same time reads like a host whose clock is
ahead), then straggle.with_probe and the fix.

    python3 scripts/slow_matrix.py --lab --steps-ms 100 --ratios 1   # real jobs in the lab (root): one cell
    python3 scripts/slow_matrix.py --lab                # the whole matrix on real jobs (an hour or more)

--lab runs the same matrix on real jobs: tests/lab/test_slow_lab.py's matrix test, one torchrun job of 3 lab hosts x
2 gloo ranks per (step, ratio), every host's link shaped and the big gradient sized so its all_reduce takes the
step's communication, the four faults in turn on the running job (none first), each sized by the step the job
measured and begun inside the window of each of its --runs watches by the real `ncclcheck watch`; the same line per
cell, the step the job measured and the ratio its own records show (docs/live.md says how each fault is sized).

Faults: "compute", rank 3 (h2) computes 1.5x longer; "link", both ranks of h3 leave each collective late by
LINK_LATE of the step's communication (what a slow link does to its ranks); each at least FAULT_SHARE of the step;
"both", the two at once; "none", +-5 % jitter on every rank. A cell is right when every run names exactly the
fault's units, each with its kind (compute, or communication), and the fix says each kind's fix and no other. No
probe runs here (loopback links all measure alike): the kind comes from the sampled phases alone. The lab's run of
the issue's job (real ranks, a shaped link) is tests/lab/test_slow_lab.py's issue-65 test.
"""

from __future__ import annotations

import argparse
import time
from typing import Optional

from ncclcheck.live import pace, straggle
from ncclcheck.postmortem import flight, slow
from ncclcheck.rendezvous.budget import FIXED

from .slowsim import Job, docs, phase_rows, timeline

STEPS_MS = (10, 100, 500, 2000)
RATIOS = (0.2, 1.0, 5.0)  # compute / communication
FAULTS = ("compute", "link", "both", "none")
RUNS = 3
CULPRIT, LINK_HOST = 3, "h3"  # the compute straggler (on h2) and the slow link's host
SMALL_SHARE = 0.05  # of a step's communication, the small all_reduce after the big one
SAMPLED = (0, 2, 4)  # the ranks watch samples: the first answering rank of each host
STEPS = 48  # steps in the flight recorder's window
CLOCK_ERR_NS = 50_000  # each host's clock as watch measures it: its true offset (0), within half a LAN's round trip
FAULT_SHARE = 0.15  # each fault costs at least this share of the step: three times the rule's floor (slowness.FLOOR:
# 5 % of each step, the step the faults make), so that each is named whatever the other adds to the step (up to half
# of it: a 1.5x compute where compute is most of the step); a fault at the floor is the rule's own tests'
# (tests/postmortem/test_slow.py)
SAMPLE_COST_S = 120e-6  # a sample's CPU on a real rank (one read of its recorder's progress): ~0.12 ms in the lab's
# ranks busy in a big all_reduce; it sets the sampling's pace as the responder's does (live/pace.phase_pace)
LINK_LATE = 0.25  # of a step's communication, the slow link's ranks leave each of its two collectives late: the
# link costs the step half its communication (a straggler computing 1.5x longer costs half its compute)


def job_of(step_ms: float, ratio: float, fault: str, seed: int) -> Job:
    """The cell's simulated job: a step of `step_ms` whose compute is `ratio` x its communication."""
    step_us = step_ms * 1e3
    comm = step_us / (1 + ratio)
    compute = step_us - comm
    small = comm * SMALL_SHARE
    kw: dict = {"slow": {}, "leave_late": {}}
    if fault in ("compute", "both"):
        kw["slow"] = {CULPRIT: (0, max(0.5, FAULT_SHARE * step_us / compute))}  # of its compute, longer
    if fault in ("link", "both"):
        kw["leave_late"] = {r: (0, max(LINK_LATE * comm, FAULT_SHARE / 2 * step_us)) for r in (4, 5)}
    return Job(world=6, per_host=2, steps=STEPS, step_us=compute, transfer_us=small, transfer_by=(comm - small, small),
               gap_us=min(50.0, small / 4), jitter=0.05 if fault == "none" else 0.02, seed=seed, **kw)


def sampled(job: Job, seconds: float) -> tuple[dict, list]:
    """({rank: {pg: rows}}, Sampled.asked) of watch's sampling of SAMPLED over the job's last `seconds`."""
    _, calls, _ = timeline(job)
    t1 = int(max(calls[0]))
    rows, asked = {}, []
    for r in SAMPLED:
        got = phase_rows(job, r, t1 - int(seconds * 1e9), t1, int(pace.phase_pace(SAMPLE_COST_S, seconds, FIXED) * 1e9))
        ask = straggle.phase_ask(seconds, len(got), FIXED)
        kept, dropped = pace.fit_rows(got, *ask)
        rows[r] = kept
        asked.append({"rank": r, "host": job.host(r), "asked_bytes": ask[0], "asked_items": ask[1],
                      "rows": sum(len(v) for v in kept.values()), "dropped": dropped, "error": None})
    return rows, asked


def verdict(job: Job, seconds: Optional[float] = None) -> dict:
    """What watch would conclude: {"named": [(unit, who, kind)], "fix", "steps_by", "measure", "under_floor":
    [(unit, who)]}."""
    seconds = FIXED.live_confirm_s if seconds is None else seconds
    rows, asked = sampled(job, straggle.phase_window(seconds, job.step_us + sum(job.transfer_by)))
    dumps = {r: flight.normalise(d, r, f"rank{r}.json", "json") for r, d in docs(job).items()}
    clocks = {r: {"offset_ns": 0, "err_ns": CLOCK_ERR_NS} for r in dumps}  # watch measures them (true: 0)
    section = slow.analyse(dumps, {r: job.host(r) for r in dumps}, clocks, rows, sampling=asked)
    named, links = straggle.with_probe(section["named"], None, section.get("job") or {},
                                       straggle._measured_steps(section))
    found = [*named, *links]
    g = next((g for g in section["groups"] if g.get("steps")), {})
    return {"named": sorted((f["unit"], f["rank"] if f["unit"] == "rank" else f.get("host"), f["kind"])
                            for f in found),
            "fix": slow.fix_for(found), "steps_by": g.get("steps_by"), "measure": section.get("measure"),
            "under_floor": sorted((f["unit"], f["rank"] if f["unit"] == "rank" else f.get("host"))
                                  for f in section.get("under_floor") or [])}


def expected(fault: str) -> list:
    out = []
    if fault in ("compute", "both"):
        out.append(("rank", CULPRIT, "compute"))
    if fault in ("link", "both"):
        out.append(("host", LINK_HOST, "communication"))
    return sorted(out)


def right(fault: str, v: dict) -> bool:
    """The fault's units, each its kind, and each kind's fix and no other."""
    fix = v["fix"]
    compute_fix = f"find what rank {CULPRIT}" in fix
    link_fix = f"check {LINK_HOST}'s links" in fix
    want = {"compute": (True, False), "link": (False, True), "both": (True, True), "none": (False, False)}[fault]
    # nothing else said late under the floor: a healthy job's jitter, or a unit beside the fault's, is no warning
    return v["named"] == expected(fault) and (compute_fix, link_fix) == want and "not told" not in fix \
        and not v["under_floor"]


def cell(step_ms: float, ratio: float, fault: str, runs: int) -> dict:
    got = [verdict(job_of(step_ms, ratio, fault, seed)) for seed in range(runs)]
    ok = [right(fault, v) for v in got]
    wrong = next((v for v, k in zip(got, ok) if not k), None)
    return {"step_ms": step_ms, "ratio": ratio, "fault": fault, "right": sum(ok), "runs": runs, "wrong": wrong}


def matrix(steps_ms: tuple = STEPS_MS, ratios: tuple = RATIOS, faults: tuple = FAULTS, runs: int = RUNS) -> list:
    return [cell(s, r, f, runs) for s in steps_ms for r in ratios for f in faults]


def _floats(text: str) -> tuple:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None


LAB_TEST = "tests/lab/test_slow_lab.py"
LAB_CELL_S = 1800  # one lab cell (a job and its four faults' watches) at most, whatever its step (2 s: ~12 min)


def lab_matrix(steps_ms: tuple, ratios: tuple, runs: int, on_cell=None) -> tuple[list, str]:
    """The cells on real lab jobs: (their results as the lab test wrote them, the test run's tail when a cell gave
    none). Each cell is its own pytest run of the lab test (one job per cell), so one that breaks leaves the rest;
    on_cell(row) as each arrives (an hour's run shows each job's cells when it ends)."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rows, tails = [], []
    for step in steps_ms:
        for ratio in ratios:
            with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as out:
                env = {**os.environ, "NCCLCHECK_LAB_MATRIX_RUNS": str(runs), "NCCLCHECK_LAB_MATRIX_OUT": out.name}
                argv = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "-m", "lab or long", LAB_TEST, "-k", f"matrix_on_real_jobs and step{step:g}ms-ratio{ratio:g}]"]
                try:
                    p = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=LAB_CELL_S)
                    tail = (p.stdout + p.stderr)[-1500:]
                except subprocess.TimeoutExpired:
                    tail = f"the cell's run passed its bound of {LAB_CELL_S} s"
                got = [json.loads(line) for line in out.read().splitlines() if line.strip()]
            if not got:
                tails.append(f"step={step:g}ms ratio={ratio:g}: no result: {tail}")
            for c in got:
                c["wrong"] = None if c["right"] == c["runs"] else {
                    "named": next(x for x in c["said"] if not x.startswith("right")), "steps_by": None}
                if on_cell:
                    on_cell(c)
            rows += got
    return rows, "\n".join(tails)


def _print_cell(c: dict) -> None:
    seen = c.get("comm_over_compute")  # the lab job's own records: its all_reduce over its compute
    print(f"step={c['step_ms']:g}ms ratio={c['ratio']:g} fault={c['fault']} right={c['right']}/{c['runs']}"
          + (f" stepped={c['stepped_ms']:g}ms" if c.get("stepped_ms") else "")
          + (f" (its all_reduce {seen:g}x the compute: ratio {1 / seen:.2f})" if seen else "")
          + (f" wrong: named={c['wrong']['named']} steps_by={c['wrong']['steps_by']!r}" if c["wrong"] else ""),
          flush=True)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(prog="slow_matrix.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps-ms", type=_floats, default=STEPS_MS, help="step times, ms (default: 10,100,500,2000)")
    ap.add_argument("--ratios", type=_floats, default=RATIOS, help="compute/communication ratios (default: 0.2,1,5)")
    ap.add_argument("--faults", default=",".join(FAULTS), help="of compute, link, both, none (default: all)")
    ap.add_argument("--runs", type=int, default=RUNS, help="runs (seeds) per cell (default: 3)")
    ap.add_argument("--lab", action="store_true", help="on real jobs in the network-namespace lab (root; every "
                    f"fault on each job; steps of {','.join(f'{x:g}' for x in STEPS_MS)} ms, ratios of "
                    f"{','.join(f'{x:g}' for x in RATIOS)})")
    a = ap.parse_args(argv)
    faults = tuple(a.faults.split(","))
    if not set(faults) <= set(FAULTS) or a.runs < 1 or any(x <= 0 for x in (*a.steps_ms, *a.ratios)):
        ap.error(f"--faults: of {', '.join(FAULTS)}; --runs, --steps-ms and --ratios: above 0")
    if a.lab and (not set(a.steps_ms) <= set(STEPS_MS) or not set(a.ratios) <= set(RATIOS) or faults != FAULTS):
        ap.error("--lab: its jobs' cells only (--steps-ms of 10,100,500,2000, --ratios of 0.2,1,5), every fault")
    t0 = time.monotonic()
    missing = ""
    if a.lab:
        rows, missing = lab_matrix(a.steps_ms, a.ratios, a.runs, _print_cell)
    else:
        rows = matrix(a.steps_ms, a.ratios, faults, a.runs)
        for c in rows:
            _print_cell(c)
    good = sum(1 for c in rows if c["right"] == c["runs"])
    want = len(a.steps_ms) * len(a.ratios) * len(faults)
    if missing:
        print(missing)
    print(f"cells_right={good}/{want} runs_right={sum(c['right'] for c in rows)}/{sum(c['runs'] for c in rows)} "
          + (f"lab=1 cells_missing={want - len(rows)}" if a.lab else "sim_errors=0")
          + f" took_s={time.monotonic() - t0:.1f}")
    return 3 if len(rows) < want else 0 if good == want else 1
