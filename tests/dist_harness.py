"""A bounded multi-process world for job tests: N spawned gloo (or NCCL) ranks on loopback, one WorkerContext each,
the same context a real world (ncclcheck.agent.runner) hands to a job.

    run = run_world("ncclcheck.links.job:links_job", payload, world_size=4)   # tolerant: deaths are data
    run.results[0], run.exitcodes, run.emits, run.errors

    res = run_job("ncclcheck.bench.collectives.bench_job", payload, nranks=2)  # strict: any rank error fails
    res[0]["result"], res[0]["events"]

The store is hosted by the test process (as a launcher agent would), so a rank that dies does not take it along.
With nproc_per_node < world_size the ranks stand in for several nodes, and each simulated node gets its own
hostname (real hostname + "-node<k>"), since that is what distinct nodes look like to a job. Everything is bounded:
ranks still running at the end are killed.
"""

from __future__ import annotations

import importlib
import os
import queue
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Optional

from ncclcheck_lab.loopstore import loopback_store
from tests import forked


@dataclass
class WorldRun:
    results: dict  # rank -> job result (ranks that died or hung are missing)
    exitcodes: dict  # rank -> exit code (None: killed by us after the bound)
    emits: list = field(default_factory=list)  # (rank, kind, data) in arrival order
    errors: dict = field(default_factory=dict)  # rank -> traceback text when the job raised
    wall_s: float = 0.0


def _resolve(job_ref: str):
    """'pkg.mod:fn' or 'pkg.mod.fn'."""
    mod, sep, fn = job_ref.partition(":")
    if not sep:
        mod, _, fn = job_ref.rpartition(".")
    return getattr(importlib.import_module(mod), fn)


def _child(job_ref: str, payload: dict, rank: int, ws: int, nproc: int, port: int, timeout_s: float,
           backend: str, env: dict, log_dir: Optional[str], q: Any) -> None:
    import traceback

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.update(env)  # before torch/NCCL initialise, as a real launcher would
    try:
        import socket

        import torch
        import torch.distributed as dist

        from ncclcheck.agent.context import WorkerContext
        from ncclcheck.rendezvous.budget import Budget

        torch.set_num_threads(1)
        node_rank = rank // nproc
        if ws > nproc:  # several simulated nodes: give each its own hostname
            real = socket.gethostname()
            socket.gethostname = lambda: f"{real}-node{node_rank}"
        device = "cpu"
        if backend == "nccl":
            device = f"cuda:{rank % nproc}"
            torch.cuda.set_device(rank % nproc)
        store = dist.TCPStore("127.0.0.1", port, ws, False, timeout=timedelta(seconds=30))
        dist.init_process_group(backend, store=dist.PrefixStore("pg/", store), rank=rank, world_size=ws,
                                timeout=timedelta(seconds=timeout_s))
        ctx = WorkerContext(
            rank=rank, world_size=ws, local_rank=rank % nproc, local_world_size=nproc, node_rank=node_rank,
            nnodes=ws // nproc, backend=backend, device=device, budget=Budget(timeout_s=timeout_s),
            store=dist.PrefixStore("job/", store),
            emit=lambda kind, data: q.put(("emit", rank, kind, data)), log_dir=log_dir,
        )
        out = _resolve(job_ref)(ctx, payload)
        q.put(("result", rank, out))
    except BaseException:
        q.put(("error", rank, traceback.format_exc()))
    finally:
        q.close()
        q.join_thread()  # flush what we put before leaving
        # Skip interpreter teardown: a peer that died can make gloo's destructors slow.
        os._exit(0)


def run_world(job_ref: str, payload: dict, world_size: int = 4, nproc_per_node: int = 1,
              timeout_s: float = 5.0, bound_s: float = 90.0,
              backend: str = "gloo", env: Optional[dict] = None, log_dir: Optional[str] = None) -> WorldRun:
    """Run the job on every rank; ranks that die, raise or hang are recorded, not raised."""

    ctx = forked.context()  # each rank a fork of a server that imported torch once (tests/forked.py)
    store = loopback_store(world_size=world_size, timeout_s=30)
    q = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(job_ref, payload, r, world_size, nproc_per_node, store.port,
                                              timeout_s, backend, env or {}, log_dir, q),
                         daemon=True)
             for r in range(world_size)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    run = WorldRun({}, {})
    end = t0 + bound_s
    while time.monotonic() < end and len(run.results) + len(run.errors) < world_size:
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
    while True:  # emits that arrived after the last result
        try:
            msg = q.get_nowait()
        except (queue.Empty, OSError, ValueError):
            break
        if msg[0] == "emit":
            run.emits.append(msg[1:])
    del store
    return run


def run_job(job: str, payload: dict, nranks: int = 2, timeout: float = 120.0,
            backend: str = "gloo", env: Optional[dict] = None,
            log_dir: Optional[str] = None) -> list:
    """Strict: every rank's {"result", "events"} by rank, one node of `nranks` local ranks. Raises AssertionError
    when a rank fails or the world does not finish within `timeout`.

    backend "nccl" puts rank r on cuda:r; `env` is set in each rank before torch.distributed initialises."""
    run = run_world(job, payload, world_size=nranks, nproc_per_node=nranks, timeout_s=60.0,
                    bound_s=timeout, backend=backend, env=env, log_dir=log_dir)
    if run.errors:
        rank = min(run.errors)
        raise AssertionError(f"rank {rank} failed:\n{run.errors[rank]}")
    missing = [r for r in range(nranks) if r not in run.results]
    if missing:
        raise AssertionError(f"job {job}: rank(s) {missing} gave no result within {timeout}s "
                             f"(exit codes {run.exitcodes})")
    return [{"result": run.results[r], "events": [(k, d) for rk, k, d in run.emits if rk == r]}
            for r in range(nranks)]
