"""Time for `ncclcheck watch` to answer, and the bytes it fetches per rank, at 8 / 64 (and more) responders.

The simulator's approach (as bench_scale.py for preflight): the real responder code (ncclcheck/live/responder.py,
its sockets, framing, registration in a real TCPStore), many responders per process (--procs processes), each rank
answering with a flight recorder built from a real hung job's (tests/live/fixtures/sleep, made by `watch --dump`:
ranks 0..n-2 are copies of its rank 0, the last rank is its rank 3, which never entered all_reduce #6), the default
group's ranks set to the whole world. Then the real `ncclcheck watch` (the api, in this process) looks at them.

    python scripts/bench_live.py [--ranks 8,64] [--procs 8] [--timeout 10]
    python scripts/bench_live.py --ranks 4096                       # 512 simulated ranks a process
    python scripts/bench_live.py --slow --ranks 4096                # the slow case

Run as the script, it re-runs itself in a private network namespace where it can (ncclcheck_lab/private_net.py). One
line per size: ranks, wall time of the whole watch from its start to its answer (watch_wall_s; the slow case's
named_s), whether the culprit (the last rank) was named (culprit_named=1/1 with watch's exit 1), and per rank: the
bytes watch fetched (bytes_per_rank), watch's CPU seconds per 1,000 ranks (its process: every thread of the watch,
and the job's store this process hosts for the simulated ranks; work, not wall time), the mean and slowest seconds
of a rank's first answer, how many answered, and watch's phases in seconds (live.phases_s); then the simulation's
own: sim_errors, the seconds its ranks took to register, the machine's load when watch started.

--slow: a running job instead of a hung one (ncclcheck_lab/livesim.py: a simulated data-parallel job laid on the
wall clock, 1 s of compute per step, 1 % jitter on every rank, 8 ranks per host; each rank keeps its newest 96
collectives, torch keeps 2,000), run twice: once with the last
rank late by 10 % of the step (`case=slow`: named=K/K when watch names that rank and nobody else, within
`named_s` of watch starting) and once healthy (`case=healthy`: named_healthy=0). The same bytes and seconds.
Exits 1 when a culprit was missed (culprit_named=0/1 or watch's exit not 1; named=0/1; named_healthy above 0), 3
when the simulation failed (sim_errors=1: ranks that never registered, a responder process that died: no figure).
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import queue
import sys
import threading
import time

from . import private_net
from .loopstore import loopback_store

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FIXTURE = os.path.join(REPO, "tests", "live", "fixtures", "sleep")
PROFILE: list = [None]  # --profile: where the last watch's CPU profile goes


def _watch_then_stop(port: int, timeout: float, stop, ps: list) -> tuple:
    """The real watch on the simulated job (its report, wall and CPU seconds), then the simulator's processes
    stopped."""
    from ncclcheck.live.watch import watch  # torch under it: imported when the simulation runs
    from ncclcheck.options import api_config

    profs: list = []
    if PROFILE[0]:
        _profile_threads(profs)
    t0, c0 = time.monotonic(), time.process_time()
    try:
        report = watch(api_config("watch", {"master_addr": "127.0.0.1", "master_port": str(port),
                                            "timeout": str(timeout)}, "bench_live"))
    finally:
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
        if profs:
            _dump_profiles(profs, PROFILE[0])
    stop.set()
    for p in ps:
        p.join(10)
    return report, wall, cpu


def _profile_threads(profs: list) -> None:
    """Profile this thread and every thread started from now on, each by its own CPU time (time.thread_time): watch's
    reading and analysis run on threads of its own, which one profile of the process's CPU time charged to whatever
    the main thread was doing meanwhile."""
    import cProfile

    run = threading.Thread.run

    def profiled(self: threading.Thread) -> None:
        p = cProfile.Profile(time.thread_time)
        profs.append(p)
        p.enable()
        try:
            run(self)
        finally:
            p.disable()

    _THREAD_RUN[:] = [run]  # put back by _dump_profiles
    profs.append(cProfile.Profile(time.thread_time))
    profs[0].enable()
    threading.Thread.run = profiled  # type: ignore[method-assign]


_THREAD_RUN: list = []  # threading.Thread.run while every thread is profiled


def _dump_profiles(profs: list, path: str) -> None:
    import pstats

    threading.Thread.run = _THREAD_RUN.pop()  # type: ignore[method-assign]
    profs[0].disable()
    stats = pstats.Stats(profs[0])
    for p in profs[1:]:
        try:
            stats.add(p)
        except (TypeError, ValueError):  # a thread still running past the look: its profile is left out
            pass
    stats.dump_stats(path)


def _docs(n: int) -> dict:
    from ncclcheck.postmortem import flight

    base = {}
    for r in (0, 3):
        with open(os.path.join(FIXTURE, f"ncclcheck_live_rank_{r}.json")) as f:
            d = json.load(f)
        d["stacks"] = d.pop(flight.LIVE_KEY)["stacks"]  # what that rank's threads were doing
        d["pg_config"] = {"": {"desc": "", "name": "", "ranks": json.dumps(list(range(n)))}}
        base[r] = d
    return base


def _serve(ranks: list, n: int, port: int, ready, stop) -> None:
    from ncclcheck.live.responder import Responder, Sources
    from ncclcheck.rendezvous.store import Guard

    docs = _docs(n)

    class Sim(Sources):
        def __init__(self, rank: int) -> None:
            doc = docs[3] if rank == n - 1 else docs[0]
            self.doc = {k: v for k, v in doc.items() if k != "stacks"}
            self.threads = doc["stacks"]

        def flight(self, entries: bool = True) -> dict:
            # a new top level, the rest shared: the responder never changes what its source gave it (it trims
            # copies), and a deep copy per request was the simulator's own CPU, not the product's
            return dict(self.doc) if entries else dict(self.doc, entries=[])

        def stacks(self) -> list:
            # the real rank's threads, as its responder sent them: this process's own are hundreds of responders'
            # (each request walked them all: the simulator's CPU, ~4 ms a request at 512 responders a process)
            return self.threads

    rs = [Responder(r, n, r % 8, ("127.0.0.1", port), Guard(), sources=Sim(r), bind="127.0.0.1").start()
          for r in ranks]
    _registered(rs, n, ready)
    stop.wait()


class SimError(RuntimeError):
    """The simulation failed (a responder process died, ranks never registered): no figure."""


def _store() -> tuple:
    """(the simulated job's store, its port): torch's TCPStore server, as torchrun's, on 127.0.0.1 (loopstore.py)."""
    store = loopback_store()
    return store, store.port


SPAWN = mp.get_context("spawn")


def _start(target, args_of, n: int, procs: int) -> tuple:
    """Start the simulated ranks (round robin over `procs` processes, each running target(ranks, *args_of(ranks),
    ready, stop)); wait until every one registered, bounded by what registering n ranks takes here. Returns
    (processes, stop, seconds to register)."""
    ready, stop = SPAWN.Queue(), SPAWN.Event()
    per = [list(range(n))[i::procs] for i in range(min(procs, n))]
    ps = [SPAWN.Process(target=target, args=(ranks, *args_of(ranks), ready, stop), daemon=True) for ranks in per]
    t0 = time.monotonic()
    for p in ps:
        p.start()
    got, said, end = 0, 0, t0 + _register_s(n) + 30.0  # the processes' own bound, and their start
    while said < len(ps) and time.monotonic() < end:
        try:
            got += ready.get(timeout=1.0)
            said += 1
        except queue.Empty:
            if sum(p.is_alive() for p in ps) < len(ps) - said:  # one died before saying
                break
    if got != n:
        stop.set()
        dead = sum(p.exitcode not in (None, 0) for p in ps)
        raise SimError(f"{got} of {n} simulated ranks registered in {time.monotonic() - t0:.0f} s ({dead} of "
                       f"{len(ps)} responder processes died)")
    return ps, stop, time.monotonic() - t0


# Registering: a simulator process starts hundreds of responders at once on 2 shared cores (~20 s for 2,048 ranks)
REGISTER_S = 60.0
REGISTER_S_PER_RANK = 0.1


def _register_s(n: int) -> float:
    return REGISTER_S + REGISTER_S_PER_RANK * n


def _registered(rs: list, n: int, ready) -> None:
    """Say how many of this process's responders registered in the store, once all did or the bound passed."""
    end = time.monotonic() + _register_s(n)
    for r in rs:
        r.registered.wait(max(0.0, end - time.monotonic()))
    # What the simulation built to stand (its ranks' times, responders, threads) lives to the end: out of the
    # collector's walk. A process of 512 simulated ranks holds ~245,000 such objects, and the replies its ranks build
    # in one look (each kept for Budget.live_answer_cache_s) trigger a full collection over all of them: 0.32 ms of
    # every rank's ~1.8 ms of CPU a first look, the simulation's own. A real rank's one reply is a few thousand
    # objects of its training process's allocations, not 512 ranks'.
    gc.freeze()
    ready.put(sum(r.registered.is_set() for r in rs))


def _figures(n: int, live: dict, cpu: float) -> dict:
    """Bytes and seconds per rank of watch's first look (every rank asked at once)."""
    rows = live.get("ranks", [])
    answers = [r["answer_s"] for r in rows if r.get("answer_s") is not None]
    return {"bytes_per_rank": round(sum(r["bytes"] for r in rows) / n),
            "cpu_s_per_1k": round(1000 * cpu / n, 3),
            "answer_s_mean": round(sum(answers) / len(answers), 3) if answers else None,
            "slowest_answer_s": round(max(answers, default=0.0), 3),
            "answered": len(live.get("answered", [])),
            "phases": ",".join(f"{k}:{v:.2f}" for k, v in live.get("phases_s", {}).items())}


def bench(n: int, procs: int, timeout: float) -> dict:
    store, port = _store()
    ps, stop, register_s = _start(_serve, lambda ranks: (n, port), n, procs)
    load = os.getloadavg()[0]
    report, wall, cpu = _watch_then_stop(port, timeout, stop, ps)
    del store
    live = report.extra["live"]
    root = next((c for c in report.checks if c.id == "postmortem.root_cause"), None)
    named = bool(root and root.evidence.get("ranks") == [n - 1])
    return {"ranks": n, "wall_s": round(wall, 2), "culprit_named": named, "exit_code": report.exit_code,
            "register_s": round(register_s, 1), "load": round(load, 1), **_figures(n, live, cpu)}


def _serve_sim(ranks: list, job, port: int, epoch, arrived: tuple, silent: frozenset, ready, stop) -> None:
    from ncclcheck_lab import livesim

    rs = livesim.start(job, ranks, port, epoch=lambda: epoch.value, arrived=arrived, silent=silent)
    _registered(rs, job.world, ready)
    stop.wait()


def silent_ranks(n: int, k: int) -> frozenset:
    """k ranks spread over the job, never the late one (the last): those that do not answer watch in --silent."""
    return frozenset(sorted({(i * (n - 1)) // max(1, k) for i in range(k)})[:k]) if k else frozenset()


def bench_slow(n: int, procs: int, timeout: float, late: float, silent: frozenset = frozenset()) -> dict:
    """The slow case: n simulated ranks of a running job, the last one late by `late` of the step (0: healthy);
    `silent` ranks registered but never answering."""
    from ncclcheck_lab import livesim
    from ncclcheck_lab.slowsim import Job, timeline

    store, port = _store()
    # times from 0; laid on the wall clock once every simulated rank is up, with 60 steps recorded before watch
    # starts (the responders' buffer keeps the newest 48), 300 in all: the job runs on while watch looks. Steps of
    # ~1 s: fetching 1,024 ranks takes seconds, and each rank's window must overlap the others' by 8 steps or more
    job = Job(world=n, per_host=8, steps=300, step_us=1_000_000.0, jitter=0.01, seed=n,
              slow={n - 1: (0, late)} if late else {}, start_ns=0)
    epoch = SPAWN.Value("q", 0)
    names, calls, ends = timeline(job)  # once here, each process given its own ranks' times
    ps, stop, register_s = _start(_serve_sim, lambda ranks: (job, port, epoch, (names, {r: calls[r] for r in ranks},
                                                                                {r: ends[r] for r in ranks}),
                                                             silent & set(ranks)), n, procs)
    epoch.value = time.time_ns() - 60 * livesim.step_ns(job)
    load = os.getloadavg()[0]
    report, wall, cpu = _watch_then_stop(port, timeout, stop, ps)
    del store
    live = report.extra["live"]
    slow = next((c for c in report.checks if c.id == "live.slow"), None)
    found = (slow.evidence.get("named") or []) if slow is not None else []
    named = sorted({r for f in found for r in f.get("ranks", [])})
    unjudged = (slow.evidence.get("unjudged") or {}) if slow is not None else {}
    return {"ranks": n, "case": "slow" if late else "healthy", "wall_s": round(wall, 2), "named": named,
            "unjudged": unjudged,
            "slow_status": slow.status.value if slow else None, "summary": slow.summary if slow else "",
            "register_s": round(register_s, 1), "load": round(load, 1), **_figures(n, live, cpu)}


def _per_rank(r: dict) -> str:
    return (f"bytes_per_rank={r['bytes_per_rank']} watch_cpu_s_per_1k_ranks={r['cpu_s_per_1k']} "
            f"answer_s_mean={r['answer_s_mean']} "
            f"slowest_answer_s={r['slowest_answer_s']:.3f} answered={r['answered']}/{r['ranks']} "
            f"phases_s={r['phases']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="8,64")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--slow", action="store_true", help="the slow case: a running job, one rank late by --late")
    ap.add_argument("--late", type=float, default=0.1, help="the late rank's lateness, a share of the step")
    ap.add_argument("--silent", type=int, default=0, help="the slow case: this many ranks (spread, never the late "
                    "one) registered but never answering; the late rank must still be named and they said unjudged")
    ap.add_argument("--profile", help="cProfile the last watch, every thread of it by its own CPU time; stats to "
                    "this file")
    a = ap.parse_args(argv)
    PROFILE[0] = a.profile
    try:
        sizes = [int(x) for x in a.ranks.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--ranks takes comma-separated integers, not {a.ranks!r}")
    if not sizes or min(sizes) < 2 or a.procs < 1:
        ap.error("every size must be at least 2 ranks and --procs at least 1")
    if argv is None:  # run as the script: c10d's lookups stay off the machine's resolver (private_net)
        private_net.isolate("ncclcheck_lab.bench_live")
    misses = 0
    try:
        if a.slow:
            for n in sizes:
                silent = silent_ranks(n, min(a.silent, n - 1))
                for late in (a.late, 0.0):
                    r = bench_slow(n, a.procs, a.timeout, late, silent)
                    ok = r["named"] == [n - 1] if late else not r["named"]
                    # a rank that never answered is said not judged, each one, never left out nor judged healthy
                    told = (r["unjudged"].get("count") == len(silent)
                            and set(r["unjudged"].get("ranks") or []) <= silent) if silent else not r["unjudged"]
                    misses += not (ok and told)
                    field = f"named={int(ok)}/1" if late else f"named_healthy={len(r['named'])}"
                    if silent:
                        field += f" silent={len(silent)} said_unjudged={int(told)}/1"
                    print(f"ranks={n} case={r['case']} named_s={r['wall_s']} {field} named_ranks={r['named'][:8]} "
                          f"{_per_rank(r)} live_slow={r['slow_status']} sim_errors=0 register_s={r['register_s']} "
                          f"load={r['load']}", flush=True)
                    if not ok:
                        print(f"  live.slow said: {r['summary'][:300]}", flush=True)
            return 1 if misses else 0
        for n in sizes:
            r = bench(n, a.procs, a.timeout)
            ok = r["culprit_named"] and r["exit_code"] == 1
            misses += not ok
            print(f"ranks={n} watch_wall_s={r['wall_s']} culprit_named={int(ok)}/1 exit={r['exit_code']} "
                  f"{_per_rank(r)} sim_errors=0 register_s={r['register_s']} load={r['load']}", flush=True)
    except SimError as exc:
        print(f"sim_errors=1 no figure: {exc}", flush=True)
        return 3
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
