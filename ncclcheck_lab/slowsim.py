"""A simulated data-parallel job's flight recorders (torch's JSON form, gloo): every rank computes, then calls a
step's collectives back to back; each collective begins when the last rank called it and ends a transfer later, for
every rank at once (gloo's all_reduce). Faults are a rank or host slower from some step on, a different rank slow each
step, jitter on every rank, a transfer slowdown, a checkpoint and host clocks that are off. Used by the tests of
postmortem/slow.py and by scripts/bench_live.py's slow case (1,024 simulated ranks).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class Job:
    world: int = 6
    per_host: int = 2
    steps: int = 60
    step_us: float = 100_000.0  # each rank's compute per step
    colls: int = 2  # collectives per step, called back to back (gradient buckets)
    transfer_us: float = 2_000.0  # one collective's transfer, once every rank called it
    transfer_by: tuple = ()  # each collective of a step its own transfer (us), e.g. (200_000, 2_000): a big
    # all_reduce that takes longer than the step's compute, then a small one
    gap_us: float = 50.0  # a rank's time between two back-to-back calls
    jitter: float = 0.0  # each rank's compute varies by +-jitter (uniform) every step
    slow: dict = field(default_factory=dict)  # rank -> (from step, extra share of step_us)
    slow_until: dict = field(default_factory=dict)  # rank -> the step its slowdown ends at (default: never)
    random_slow: float = 0.0  # one random rank per step computes this share longer
    leave_late: dict = field(default_factory=dict)  # rank -> (from step, extra us): leaves each collective late
    late_at: tuple = ()  # ... only the step's collectives of these indices (default: every one): the last to arrive
    # at gloo's ring all_reduce leaves that one late, not the small one after it
    transfer_from: Optional[tuple] = None  # (from step, factor): every transfer slower from then on
    warmup: tuple = (0, 0.0)  # (steps, extra share): the first steps slower on every rank
    checkpoint: Optional[tuple] = None  # (step, us): every rank saves (rank 0 longest) before that step's calls
    eval_steps: tuple = ()  # (from, to): an evaluation pass: one other collective per step, shorter compute
    clock_us: dict = field(default_factory=dict)  # host -> its clock's offset (us)
    seed: int = 0
    start_ns: int = 1_700_000_000 * 10**9

    def host(self, r: int) -> str:
        return f"h{r // self.per_host + 1}"


def arrivals(job: Job) -> tuple[list, dict]:
    """([profiling names, one per collective], {rank: [true call time ns per collective]})."""
    names, calls, _ = timeline(job)
    return names, calls


def timeline(job: Job) -> tuple[list, dict, dict]:
    """arrivals(), and {rank: [ns each collective ended for it]} (true times)."""
    rng = random.Random(job.seed)
    t = [float(job.start_ns)] * job.world
    names, calls, exits = [], {r: [] for r in range(job.world)}, {r: [] for r in range(job.world)}
    for s in range(job.steps):
        evaluating = job.eval_steps and job.eval_steps[0] <= s < job.eval_steps[1]
        loser = rng.randrange(job.world) if job.random_slow else None
        comp = []
        for r in range(job.world):
            c = job.step_us * (0.4 if evaluating else 1.0) * (1 + rng.uniform(-job.jitter, job.jitter))
            if s < job.warmup[0]:
                c += job.warmup[1] * job.step_us
            frm, extra = job.slow.get(r, (None, 0.0))
            if frm is not None and frm <= s < job.slow_until.get(r, job.steps):
                c += extra * job.step_us
            if r == loser:
                c += job.random_slow * job.step_us
            if job.checkpoint and job.checkpoint[0] == s:
                c += job.checkpoint[1] * (1.0 if r == 0 else 0.9)
            comp.append(c)
        transfer = job.transfer_us * (job.transfer_from[1] if job.transfer_from and s >= job.transfer_from[0]
                                      else 1.0)
        for c in range(1 if evaluating else job.colls):
            arr = [t[r] + (comp[r] if c == 0 else job.gap_us) * 1e3 for r in range(job.world)]
            own = transfer * (job.transfer_by[c] / job.transfer_us if c < len(job.transfer_by) else 1.0)
            end = max(arr) + own * 1e3
            for r in range(job.world):
                calls[r].append(arr[r])
                frm, extra = job.leave_late.get(r, (None, 0.0))
                late = frm is not None and s >= frm and (not job.late_at or c in job.late_at)
                t[r] = end + (extra * 1e3 if late else 0.0)
                exits[r].append(t[r])
            names.append("gloo:all_reduce" if not evaluating else "gloo:all_gather")
    return names, calls, exits


_ENTRY = {"record_id": 0, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 0, "p2p_seq_id": 0,
          "op_id": 0, "profiling_name": "", "input_sizes": None, "input_dtypes": ["Float"], "output_sizes": None,
          "output_dtypes": ["Float"], "state": "scheduled", "retired": True, "timeout_ms": 600000, "is_p2p": False,
          "time_created_ns": 0, "time_discovered_started_ns": 0, "time_discovered_completed_ns": 0}
_SIZES = ([[64]], [[1024]])  # a step's two buckets; shared by every entry (nothing changes an entry it reads)


def entry(i: int, name: str, t_ns: int) -> dict:
    """The job's i-th collective as torch's JSON dump holds it (gloo), called at t_ns on its rank's host clock. A copy
    of one template: a simulated rank builds its window's entries at each request."""
    e = _ENTRY.copy()
    e.update(record_id=i, collective_seq_id=i + 1, op_id=i + 1, profiling_name=name, input_sizes=_SIZES[i % 2],
             output_sizes=_SIZES[i % 2], time_created_ns=t_ns)
    return e


def header(job: Job) -> dict:
    """What every rank's dump holds beside its entries and pg_status."""
    return {"version": "2.10", "comm_lib_version": "gloo",
            "pg_config": {"": {"name": "", "desc": "", "ranks": json.dumps(list(range(job.world)))}}}


def status(n: int) -> dict:
    """pg_status of a rank that called n collectives (gloo's counters)."""
    return {"0": {"last_enqueued_collective": str(n), "last_started_collective": "-1",
                  "last_completed_collective": str(n)}}


def host_times(job: Job, calls: dict, r: int) -> list:
    """Rank r's call times on its host's clock (ns)."""
    off = job.clock_us.get(job.host(r), 0.0) * 1e3
    return [int(t + off) for t in calls[r]]


def phase_rows(job: Job, rank: int, t0_ns: int, t1_ns: int, every_ns: int = 2_000_000) -> dict:
    """What the responder's "phase" sampling (live/pace.py) of `rank` between two true times would say: {"0": [[ns
    of the sample before, ns of this one, enqueued, completed] per change]}, on the rank's host clock."""
    import bisect

    _, calls, exits = timeline(job)
    off = int(job.clock_us.get(job.host(rank), 0.0) * 1e3)
    rows, last, before = [], None, t0_ns
    for t in range(t0_ns, t1_ns, every_ns):
        v = (bisect.bisect_right(calls[rank], t), bisect.bisect_right(exits[rank], t))
        if v != last:
            rows.append([before + off, t + off, v[0], v[1]])
            last = v
        before = t
    return {"0": rows}


def docs(job: Job, ranks: Optional[list] = None, timing: bool = False) -> dict:
    """{rank: torch's flight-recorder JSON document} of the simulated job (of `ranks`, default every rank), each
    rank's times on its host's clock; timing: as NCCL's with TORCH_NCCL_ENABLE_TIMING=1 (each entry's GPU
    duration_ms, the time it was inside the collective)."""
    names, calls, exits = timeline(job)
    out = {}
    for r in calls if ranks is None else ranks:
        times = host_times(job, calls, r)
        entries = [entry(i, names[i], t) for i, t in enumerate(times)]
        if timing:
            off = int(job.clock_us.get(job.host(r), 0.0) * 1e3)
            for e, t, x in zip(entries, times, exits[r]):
                e.update(profiling_name=e["profiling_name"].replace("gloo:", "nccl:"), state="completed",
                         time_discovered_started_ns=t, time_discovered_completed_ns=int(x + off),
                         duration_ms=(x + off - t) / 1e6)
        out[r] = {**header(job), "entries": entries, "pg_status": status(len(entries))}
    return out
