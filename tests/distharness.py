"""A small, bounded multi-process world for job tests: N gloo ranks on loopback, one WorkerContext each.

The store is hosted by the test process itself (like a launcher agent would), so a rank that dies does not take the
store with it. Everything is bounded: ranks still running at the end are killed, by their own pid.
"""

from __future__ import annotations

import importlib
import os
import queue
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Optional


@dataclass
class WorldRun:
    results: dict  # rank -> job result (ranks that died or hung are missing)
    exitcodes: dict  # rank -> exit code (None: killed by us after the bound)
    emits: list = field(default_factory=list)  # (rank, kind, data) in arrival order
    errors: dict = field(default_factory=dict)  # rank -> traceback text when the job raised
    wall_s: float = 0.0


def _child(job_ref: str, payload: dict, rank: int, ws: int, nproc: int, port: int, hooks: dict,
           timeout_s: float, q: Any) -> None:
    import traceback

    import torch.distributed as dist

    from ncclcheck.worker import WorkerContext

    try:
        store = dist.TCPStore("127.0.0.1", port, ws, False, timeout=timedelta(seconds=30))
        dist.init_process_group("gloo", store=dist.PrefixStore("pg/", store), rank=rank, world_size=ws,
                                timeout=timedelta(seconds=timeout_s))
        ctx = WorkerContext(
            rank=rank, world_size=ws, local_rank=rank % nproc, local_world_size=nproc, node_rank=rank // nproc,
            nnodes=ws // nproc, backend="gloo", device="cpu", timeout_s=timeout_s,
            deadline=time.monotonic() + 120, store=dist.PrefixStore("job/", store),
            emit=lambda kind, data: q.put(("emit", rank, kind, data)), test_hooks=dict(hooks),
        )
        mod, _, fn = job_ref.partition(":")
        out = getattr(importlib.import_module(mod), fn)(ctx, payload)
        q.put(("result", rank, out))
    except BaseException:
        q.put(("error", rank, traceback.format_exc()))
    finally:
        q.close()
        q.join_thread()  # flush what we put before leaving
        # Skip interpreter teardown: a peer that died can make gloo's destructors slow.
        os._exit(0)


def run_world(job_ref: str, payload: dict, world_size: int = 4, nproc_per_node: int = 1,
              hooks: Optional[dict] = None, timeout_s: float = 5.0, bound_s: float = 90.0) -> WorldRun:
    import multiprocessing as mp

    import torch.distributed as dist

    ctx = mp.get_context("spawn")
    store = dist.TCPStore("127.0.0.1", 0, world_size, True, timeout=timedelta(seconds=30), wait_for_workers=False)
    q = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(job_ref, payload, r, world_size, nproc_per_node, store.port,
                                              hooks or {}, timeout_s, q), daemon=True)
             for r in range(world_size)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    run = WorldRun({}, {})
    end = t0 + bound_s
    while time.monotonic() < end:
        try:
            msg = q.get(timeout=0.2)
        except queue.Empty:
            if all(not p.is_alive() for p in procs):
                break
            continue
        if msg[0] == "emit":
            run.emits.append(msg[1:])
        elif msg[0] == "result":
            run.results[msg[1]] = msg[2]
        else:
            run.errors[msg[1]] = msg[2]
    run.wall_s = time.monotonic() - t0
    for r, p in enumerate(procs):
        p.join(timeout=max(0.1, end - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(5)
            run.exitcodes[r] = None
        else:
            run.exitcodes[r] = p.exitcode
    del store
    return run
