"""Module-level jobs for the runner tests (spawned workers import them by name)."""

from __future__ import annotations

import os
import time


def allreduce_job(ctx, payload):
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(ctx.rank + 1)])
    dist.all_reduce(t)
    ctx.emit("row", {"rank": ctx.rank, "sum": t.item()})
    return {"sum": t.item(), "backend": ctx.backend, "world": ctx.world_size}


def crash_or_hang_job(ctx, payload):
    ctx.emit("row", {"rank": ctx.rank, "step": 1})
    what = (payload.get("do") or {}).get(str(ctx.rank))  # the fault is the test's input, not a product hook
    if what == "crash":
        os._exit(7)
    if what == "hang":
        time.sleep(3600)
    if what == "raise":
        raise ValueError("bad input on this rank")
    return {"ok": True}


def steps_job(ctx, payload):
    """A job longer than --timeout whose every step (a sleep, then an all_reduce) emits: never a hang."""
    import torch
    import torch.distributed as dist

    for i in range(payload["steps"]):
        time.sleep(payload["step_s"])
        t = torch.ones(1)
        dist.all_reduce(t)
        ctx.emit("step", {"rank": ctx.rank, "i": i})
    return {"steps": payload["steps"]}
def progress_job(ctx, payload):
    """Reports n steps of progress (only rank 0's observer is real)."""
    n = int(payload.get("steps", 3))
    ctx.observer.start(n, "steps")
    for i in range(n):
        ctx.observer.advance(f"step {i + 1}")
    ctx.observer.stop()
    return {"ok": True}
