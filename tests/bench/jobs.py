"""Jobs the multi-process bench tests run in one spawned world (importable by the spawned ranks)."""

from __future__ import annotations

import time

from ncclcheck.bench.collectives import bench_config_from_payload, run_sweep


class CountingObserver:
    def __init__(self) -> None:
        self.total, self.advanced, self.stopped = None, 0, False

    def start(self, total: int, label: str) -> None:
        self.total, self.advanced, self.stopped = total, 0, False

    def advance(self, label: str = "") -> None:
        self.advanced += 1

    def stop(self) -> None:
        self.stopped = True


def sweeps(ctx, payload: dict) -> dict:
    """Several sweeps on one world: payload = {"runs": [{"cfg": <bench payload>, "hooks": {...}, "deadline_s": x}]}.

    One world per rank count keeps the suite fast on a 2-core machine."""
    out = []
    for run in payload["runs"]:
        ctx.test_hooks = run.get("hooks") or {}
        ctx.deadline = time.monotonic() + run["deadline_s"] if run.get("deadline_s") is not None else float("inf")
        obs = ctx.observer = CountingObserver()
        res = run_sweep(ctx, bench_config_from_payload(run["cfg"]))
        res["progress"] = {"total": obs.total, "advanced": obs.advanced, "stopped": obs.stopped}
        out.append(res)
    return {"runs": out}
