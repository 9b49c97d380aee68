"""Run a job on N local gloo ranks (spawned processes, loopback, a free port) and return every rank's result.

A stand-in for world.py in tests: it builds the same WorkerContext a real world hands to a job. Bounded: a rank that
hangs or dies fails the test after `timeout` seconds instead of hanging the suite.
"""

from __future__ import annotations

import importlib
import os
import queue
import socket
import time
import traceback


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _resolve(qualname: str):
    mod, _, fn = qualname.rpartition(".")
    return getattr(importlib.import_module(mod), fn)


def _rank_main(rank: int, n: int, port: int, job: str, payload: dict, hooks: dict, q, deadline_s: float,
               backend: str, env: dict, log_dir) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.update(env)  # before torch/NCCL initialise, as a real launcher would
    try:
        import datetime

        import torch
        import torch.distributed as dist

        from ncclcheck.worker import WorkerContext

        torch.set_num_threads(1)
        device = "cpu"
        if backend == "nccl":
            device = f"cuda:{rank}"
            torch.cuda.set_device(rank)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                                timeout=datetime.timedelta(seconds=60))
        events: list = []
        ctx = WorkerContext(rank=rank, world_size=n, local_rank=rank, local_world_size=n, backend=backend,
                            device=device, deadline=time.monotonic() + deadline_s,
                            emit=lambda kind, data: events.append((kind, data)), test_hooks=hooks, log_dir=log_dir)
        result = _resolve(job)(ctx, payload)
        q.put((rank, "ok", {"result": result, "events": events}))
        dist.destroy_process_group()
    except BaseException:  # report everything: the parent turns it into a test failure with the traceback
        q.put((rank, "error", traceback.format_exc()))


def run_job(job: str, payload: dict, nranks: int = 2, timeout: float = 120.0, hooks: dict | None = None,
            deadline_s: float = 600.0, backend: str = "gloo", env: dict | None = None,
            log_dir: str | None = None) -> list[dict]:
    """Every rank's {"result", "events"}, by rank. Raises AssertionError on a rank error or a timeout.

    backend "nccl" puts rank r on cuda:r; `env` is set in each rank before torch.distributed initialises."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, nranks, port, job, payload, hooks or {}, q, deadline_s,
                                                             backend, env or {}, log_dir),
                         daemon=True) for r in range(nranks)]
    for p in procs:
        p.start()
    results: dict = {}
    end = time.monotonic() + timeout
    try:
        while len(results) < nranks:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"job {job} timed out after {timeout}s; ranks done: {sorted(results)}")
            try:
                rank, status, data = q.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [i for i, p in enumerate(procs) if p.exitcode not in (None, 0) and i not in results]
                if dead:
                    raise AssertionError(f"rank(s) {dead} died without a result") from None
                continue
            if status == "error":
                raise AssertionError(f"rank {rank} failed:\n{data}")
            results[rank] = data
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    return [results[r] for r in range(nranks)]
