"""Simulated armed ranks of a running job: real responders (ncclcheck/live/responder.py: sockets, framing,
registration in a real TCPStore) whose flight recorders are a ncclcheck_lab/slowsim.py job laid on the wall clock:
each answer holds the collectives whose call time has passed (the newest BUFFER of them), so progress moves between
two looks as in a real job, and a slowdown set to begin at some step begins then. Used by tests/live (a few ranks
in the test's process) and scripts/bench_live.py's slow case (1,024 ranks over several processes).
"""

from __future__ import annotations

import bisect
import time
from typing import Any, Optional

from ncclcheck.live.responder import Responder, Sources
from ncclcheck.rendezvous.store import Guard

from .slowsim import Job, entry, header, host_times, timeline

BUFFER = 96  # flight-recorder entries a simulated rank keeps (torch's default is 2,000; 48 steps of 2 here)
SILENT_S = 3600.0  # how long a silent rank's recorder takes to read: past any watch's bound (its process ends first)


def laid(job: Job, past_steps: int) -> Job:
    """The job with its start set so that `past_steps` steps of it have happened by now."""
    job.start_ns = time.time_ns() - past_steps * step_ns(job)
    return job


class SimSources(Sources):
    """One simulated rank's flight recorder: its collectives whose call time has passed, the newest `buffer` of them,
    built when asked (a job of 4,096 ranks x 600 collectives held as entries was gigabytes). times: the rank's call
    times (ns from the job's time 0, on its host's clock); names: each collective's profiling name; head: the rest of
    its document (slowsim.header); exits: when each collective ended for it (its host clock). epoch: when the job's
    time 0 is on the wall clock (ns), or a callable that says it (a job laid once every simulated rank of several
    processes is up)."""

    def __init__(self, times: list, names: list, head: dict, buffer: int = BUFFER, epoch: Any = 0,
                 exits: Optional[list] = None, silent: bool = False) -> None:
        self.times, self.names, self.head, self.buffer, self.epoch = times, names, head, buffer, epoch
        self.exits = exits  # when each collective ended for this rank (its host clock), else: the newest still runs
        self.silent = silent  # registered and accepting, but reading its recorder never ends: no answer in any bound

    def flight(self, entries: bool = True) -> dict:
        if self.silent:
            time.sleep(SILENT_S)
        base = self.epoch() if callable(self.epoch) else self.epoch
        k = bisect.bisect_right(self.times, time.time_ns() - base)
        out = dict(self.head)
        out["entries"] = [entry(i, self.names[i], self.times[i] + base)
                          for i in range(max(0, k - self.buffer), k)] if entries else []
        out["pg_status"] = {"0": {"last_enqueued_collective": str(k), "last_started_collective": "-1",
                                  "last_completed_collective": str(
                                      max(0, k - 1) if self.exits is None else
                                      min(k, bisect.bisect_right(self.exits, time.time_ns() - base)))}}
        return out

    def stacks(self) -> list:
        return []


def step_ns(job: Job) -> int:
    return int((job.step_us + job.transfer_us * job.colls + job.gap_us) * 1e3)


def start(job: Job, ranks: list, port: int, buffer: int = BUFFER, token: Optional[bytes] = None,
          epoch: Any = 0, arrived: Optional[tuple] = None, silent: frozenset = frozenset()) -> list:
    """Responders for `ranks` of the job, registered in the store at 127.0.0.1:port, each calling itself by its
    simulated host's name (Job.host); epoch: as SimSources'; arrived: slowsim.timeline(job) when the caller has it
    (names, {rank: call times}, {rank: end times} of at least these ranks); silent: ranks that never answer (a rank
    whose process holds its recorder's reader, as one stuck holding the GIL does)."""
    names, calls, ends = arrived or timeline(job)
    head = header(job)
    out = []
    for r in ranks:
        off = int(job.clock_us.get(job.host(r), 0.0) * 1e3)
        resp = Responder(r, job.world, r % job.per_host, ("127.0.0.1", port), Guard(token=token),
                         sources=SimSources(host_times(job, calls, r), names, head, buffer, epoch,
                                            [int(x) + off for x in ends[r]], silent=r in silent),
                         bind="127.0.0.1", launcher="torchrun")
        resp.host = job.host(r)
        out.append(resp.start())
    return out
