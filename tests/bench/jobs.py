"""Jobs the multi-process bench tests run in one spawned world (importable by the spawned ranks)."""

from __future__ import annotations

import time

from ncclcheck.bench.collectives import bench_config_from_payload, run_sweep


def sweeps(ctx, payload: dict) -> dict:
    """Several sweeps on one world: payload = {"runs": [{"cfg": <bench payload>, "hooks": {...}, "deadline_s": x}]}.

    One world per rank count keeps the suite fast on a 2-core machine."""
    out = []
    for run in payload["runs"]:
        ctx.test_hooks = run.get("hooks") or {}
        ctx.deadline = time.monotonic() + run["deadline_s"] if run.get("deadline_s") is not None else float("inf")
        out.append(run_sweep(ctx, bench_config_from_payload(run["cfg"])))
    return {"runs": out}
