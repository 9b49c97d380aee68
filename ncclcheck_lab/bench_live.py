"""Time for `ncclcheck watch` to answer, and the bytes it fetches per rank, at 8 / 64 (and more) responders.

The simulator's approach (as bench_scale.py for preflight): the real responder code (ncclcheck/live/responder.py,
its sockets, framing, registration in a real TCPStore), many responders per process (--procs processes), each rank
answering with a flight recorder built from a real hung job's (tests/live/fixtures/sleep, made by `watch --dump`:
ranks 0..n-2 are copies of its rank 0, the last rank is its rank 3, which never entered all_reduce #6), the default
group's ranks set to the whole world. Then the real `ncclcheck watch` (the api, in this process) looks at them.

    python scripts/bench_live.py [--ranks 8,64] [--procs 8] [--timeout 10]
    python scripts/bench_live.py --slow --ranks 1024 --procs 8      # the slow case (issue 47)

One line per size: ranks, wall time of the whole watch (two looks 2 s apart, the analysis), the slowest rank's
answer time, bytes fetched per rank, and whether the culprit (the last rank) was named.

--slow: a running job instead of a hung one (ncclcheck_lab/livesim.py: a simulated data-parallel job laid on the
wall clock, 1 s of compute per step, 1 % jitter on every rank, 8 ranks per host; each rank keeps its newest 96
collectives, torch keeps 2,000), run twice: once with the last
rank late by 10 % of the step (`case=slow`: named=K/K when watch names that rank and nobody else, within
`named_s` of watch starting) and once healthy (`case=healthy`: named_healthy=0). The same bytes and seconds.
Exits 1 when a culprit was missed (culprit_named=False or watch's exit not 1; named=0/1; named_healthy above 0).
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import os
import socket
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FIXTURE = os.path.join(REPO, "tests", "live", "fixtures", "sleep")


def _watch_then_stop(port: int, timeout: float, stop, ps: list) -> tuple:
    """The real watch on the simulated job (its report and wall seconds), then the simulator's processes stopped."""
    from ncclcheck.live.watch import watch  # torch under it: imported when the simulation runs
    from ncclcheck.options import api_config

    t0 = time.monotonic()
    report = watch(api_config("watch", {"master_addr": "127.0.0.1", "master_port": str(port),
                                        "timeout": str(timeout)}, "bench_live"))
    wall = time.monotonic() - t0
    stop.set()
    for p in ps:
        p.join(10)
    return report, wall


def _docs(n: int) -> dict:
    from ncclcheck.postmortem import flight

    base = {}
    for r in (0, 3):
        with open(os.path.join(FIXTURE, f"ncclcheck_live_rank_{r}.json")) as f:
            d = json.load(f)
        d.pop(flight.LIVE_KEY)
        d["pg_config"] = {"": {"desc": "", "name": "", "ranks": json.dumps(list(range(n)))}}
        base[r] = d
    return base


def _serve(ranks: list, n: int, port: int, ready, stop) -> None:
    from ncclcheck.live.responder import Responder, Sources
    from ncclcheck.rendezvous.store import Guard

    docs = _docs(n)

    class Sim(Sources):
        def __init__(self, rank: int) -> None:
            self.doc = docs[3] if rank == n - 1 else docs[0]

        def flight(self, entries: bool = True) -> dict:
            d = copy.deepcopy(self.doc)
            if not entries:
                d["entries"] = []
            return d

    rs = [Responder(r, n, r % 8, ("127.0.0.1", port), Guard(), sources=Sim(r), bind="127.0.0.1").start()
          for r in ranks]
    for r in rs:
        r.registered.wait(120)
    ready.put(len(rs))
    stop.wait()


def bench(n: int, procs: int, timeout: float) -> dict:
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, None, True)
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Queue(), ctx.Event()
    per = [list(range(n))[i::procs] for i in range(min(procs, n))]
    ps = [ctx.Process(target=_serve, args=(ranks, n, port, ready, stop), daemon=True) for ranks in per]
    for p in ps:
        p.start()
    got = sum(ready.get(timeout=300) for _ in ps)
    assert got == n
    report, wall = _watch_then_stop(port, timeout, stop, ps)
    del store
    live = report.extra["live"]
    root = next((c for c in report.checks if c.id == "postmortem.root_cause"), None)
    named = bool(root and root.evidence.get("ranks") == [n - 1])
    return {"ranks": n, "wall_s": round(wall, 2), "slowest_answer_s": max(r["answer_s"] or 0 for r in live["ranks"]),
            "bytes_per_rank": round(sum(r["bytes"] for r in live["ranks"]) / n), "culprit_named": named,
            "exit_code": report.exit_code}


def _serve_sim(ranks: list, job, port: int, epoch, ready, stop) -> None:
    from ncclcheck_lab import livesim

    rs = livesim.start(job, ranks, port, epoch=lambda: epoch.value)
    for r in rs:
        r.registered.wait(120)
    ready.put(len(rs))
    stop.wait()


def bench_slow(n: int, procs: int, timeout: float, late: float) -> dict:
    """The slow case: n simulated ranks of a running job, the last one late by `late` of the step (0: healthy)."""
    import torch.distributed as dist

    from ncclcheck_lab import livesim
    from ncclcheck_lab.slowsim import Job

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, None, True)
    # times from 0; laid on the wall clock once every simulated rank is up, with 60 steps recorded before watch
    # starts (the responders' buffer keeps the newest 48), 300 in all: the job runs on while watch looks. Steps of
    # ~1 s: fetching 1,024 ranks takes seconds, and each rank's window must overlap the others' by 8 steps or more
    job = Job(world=n, per_host=8, steps=300, step_us=1_000_000.0, jitter=0.01, seed=n,
              slow={n - 1: (0, late)} if late else {}, start_ns=0)
    ctx = mp.get_context("spawn")
    ready, stop, epoch = ctx.Queue(), ctx.Event(), ctx.Value("q", 0)
    per = [list(range(n))[i::procs] for i in range(min(procs, n))]
    ps = [ctx.Process(target=_serve_sim, args=(ranks, job, port, epoch, ready, stop), daemon=True) for ranks in per]
    for p in ps:
        p.start()
    got = sum(ready.get(timeout=600) for _ in ps)
    assert got == n
    epoch.value = time.time_ns() - 60 * livesim.step_ns(job)
    report, wall = _watch_then_stop(port, timeout, stop, ps)
    del store
    live = report.extra["live"]
    slow = next((c for c in report.checks if c.id == "live.slow"), None)
    found = (slow.evidence.get("named") or []) if slow is not None else []
    named = sorted({r for f in found for r in f.get("ranks", [])})
    return {"ranks": n, "case": "slow" if late else "healthy", "wall_s": round(wall, 2), "named": named,
            "slow_status": slow.status.value if slow else None, "summary": slow.summary if slow else "",
            "bytes_per_rank": round(sum(r["bytes"] for r in live.get("ranks", [])) / n),
            "slowest_answer_s": max((r["answer_s"] or 0 for r in live.get("ranks", [])), default=0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="8,64")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--slow", action="store_true", help="the slow case: a running job, one rank late by --late")
    ap.add_argument("--late", type=float, default=0.1, help="the late rank's lateness, a share of the step")
    a = ap.parse_args(argv)
    misses = 0
    if a.slow:
        for n in (int(x) for x in a.ranks.split(",")):
            for late in (a.late, 0.0):
                r = bench_slow(n, a.procs, a.timeout, late)
                ok = r["named"] == [n - 1] if late else not r["named"]
                misses += not ok
                field = f"named={int(ok)}/1" if late else f"named_healthy={len(r['named'])}"
                print(f"ranks={n} case={r['case']} named_s={r['wall_s']} {field} named_ranks={r['named'][:8]} "
                      f"bytes_per_rank={r['bytes_per_rank']} slowest_answer_s={r['slowest_answer_s']:.3f} "
                      f"live_slow={r['slow_status']}", flush=True)
        return 1 if misses else 0
    for n in (int(x) for x in a.ranks.split(",")):
        r = bench(n, a.procs, a.timeout)
        print(f"ranks={r['ranks']} watch_wall_s={r['wall_s']} slowest_answer_s={r['slowest_answer_s']:.3f} "
              f"bytes_per_rank={r['bytes_per_rank']} culprit_named={r['culprit_named']} exit={r['exit_code']}",
              flush=True)
        misses += not r["culprit_named"] or r["exit_code"] != 1
    return 1 if misses else 0


if __name__ == "__main__":
    main()
