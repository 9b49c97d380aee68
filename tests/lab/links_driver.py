"""Run links_job on one lab host without the CLI: form a gloo world of one rank per host, run the job, write JSON.

    python -m tests.lab.links_driver --rank I --nnodes N --master ADDR:PORT --payload '{...}' --out FILE

The job-level lab tests use it so links is tested over real kernel TCP before (and independently of) agent/runner.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--nnodes", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--payload", default="{}")
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch.distributed as dist

    from ncclcheck.agent.context import WorkerContext
    from ncclcheck.links.job import links_job
    from ncclcheck.rendezvous.budget import Budget

    host, _, port = a.master.rpartition(":")
    store = dist.TCPStore(host, int(port), a.nnodes, a.rank == 0, timeout=timedelta(seconds=60))
    dist.init_process_group("gloo", store=dist.PrefixStore("pg/", store), rank=a.rank, world_size=a.nnodes,
                            timeout=timedelta(seconds=a.timeout))
    t0 = time.monotonic()

    def emit(kind: str, data: dict) -> None:  # rows on stderr, timed, for whoever reads the host's output
        print(json.dumps({"t": round(time.monotonic() - t0, 3), "kind": kind, **data}), file=sys.stderr, flush=True)

    ctx = WorkerContext(rank=a.rank, world_size=a.nnodes, node_rank=a.rank, nnodes=a.nnodes,
                        budget=Budget(timeout_s=a.timeout), store=dist.PrefixStore("job/", store), emit=emit)
    out = links_job(ctx, json.loads(a.payload))
    out["driver_wall_s"] = time.monotonic() - t0
    with open(a.out, "w") as f:
        json.dump(out, f)
    if a.rank == 0:
        # node 0 hosts the store: give the others a moment to read the final verdict before it goes away
        deadline = time.monotonic() + 10
        alive = a.nnodes - len((out.get("links") or {}).get("dead") or [])
        while time.monotonic() < deadline and store.add("driver/done", 0) < alive - 1:
            time.sleep(0.1)
    else:
        try:
            store.add("driver/done", 1)
        except Exception:
            pass
    os._exit(0)


if __name__ == "__main__":
    main()
