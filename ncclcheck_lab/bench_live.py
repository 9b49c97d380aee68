"""Time for `ncclcheck watch` to answer, and the bytes it fetches per rank, at 8 / 64 (and more) responders.

The simulator's approach (as bench_scale.py for preflight): the real responder code (ncclcheck/live/responder.py,
its sockets, framing, registration in a real TCPStore), many responders per process (--procs processes), each rank
answering with a flight recorder built from a real hung job's (tests/live/fixtures/sleep, made by `watch --dump`:
ranks 0..n-2 are copies of its rank 0, the last rank is its rank 3, which never entered all_reduce #6), the default
group's ranks set to the whole world. Then the real `ncclcheck watch` (the api, in this process) looks at them.

    python scripts/bench_live.py [--ranks 8,64] [--procs 8] [--timeout 10]

One line per size: ranks, wall time of the whole watch (two looks 2 s apart, the analysis), the slowest rank's
answer time, bytes fetched per rank, and whether the culprit (the last rank) was named.
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

    from ncclcheck.live.watch import watch
    from ncclcheck.options import api_config

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
    t0 = time.monotonic()
    report = watch(api_config("watch", {"master_addr": "127.0.0.1", "master_port": str(port),
                                        "timeout": str(timeout)}, "bench_live"))
    wall = time.monotonic() - t0
    stop.set()
    for p in ps:
        p.join(10)
    del store
    live = report.extra["live"]
    root = next((c for c in report.checks if c.id == "postmortem.root_cause"), None)
    named = bool(root and root.evidence.get("ranks") == [n - 1])
    return {"ranks": n, "wall_s": round(wall, 2), "slowest_answer_s": max(r["answer_s"] or 0 for r in live["ranks"]),
            "bytes_per_rank": round(sum(r["bytes"] for r in live["ranks"]) / n), "culprit_named": named,
            "exit_code": report.exit_code}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="8,64")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=10.0)
    a = ap.parse_args()
    for n in (int(x) for x in a.ranks.split(",")):
        r = bench(n, a.procs, a.timeout)
        print(f"ranks={r['ranks']} watch_wall_s={r['wall_s']} slowest_answer_s={r['slowest_answer_s']:.3f} "
              f"bytes_per_rank={r['bytes_per_rank']} culprit_named={r['culprit_named']} exit={r['exit_code']}",
              flush=True)


if __name__ == "__main__":
    main()
