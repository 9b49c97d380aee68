"""Jobs the multi-process bench tests run in one spawned world (importable by the spawned ranks)."""

from __future__ import annotations

import dataclasses
import time
from typing import Optional

from ncclcheck.bench import stats
from ncclcheck.bench.collectives import bench_config_from_payload, run_sweep
from ncclcheck.bench.runners import make_runner


class CountingObserver:
    def __init__(self) -> None:
        self.total, self.advanced, self.stopped = None, 0, False

    def start(self, total: int, label: str) -> None:
        self.total, self.advanced, self.stopped = total, 0, False

    def advance(self, label: str = "") -> None:
        self.advanced += 1

    def stop(self) -> None:
        self.stopped = True


def corrupt(output) -> None:
    """Perturb a rank's output after the collective so the check must catch it."""
    flat = output.reshape(-1)
    n = flat.numel()
    # Every check value is >= 0, so -1 differs from whatever belongs there, exactly, in every dtype (adding 1 would
    # not: 256 + 1 rounds back to 256 in bfloat16).
    for i in sorted({0, n // 2, n - 1}):
        flat[i] = -1


def corrupting_factory(spec: Optional[dict]):
    """A runner factory that damages the output after every call on one rank (spec: {"rank", "op"?, "in_place"?}):
    the fault a broken GPU or transport would cause, injected through run_sweep's seam instead of product code."""
    if not spec:
        return make_runner

    def factory(op, in_place, bufs, counts, rank, nranks, group=None):
        runner = make_runner(op, in_place, bufs, counts, rank, nranks, group)
        if rank != spec["rank"] or spec.get("op", op) != op or spec.get("in_place", in_place) != in_place:
            return runner

        def call() -> None:
            runner.call()
            corrupt(runner.output)

        return dataclasses.replace(runner, call=call)

    return factory


def sweeps(ctx, payload: dict) -> dict:
    """Several sweeps on one world: payload = {"runs": [{"cfg": <bench payload>, "corrupt": {...}}]}.

    One world per rank count keeps the suite fast on a 2-core machine."""
    out = []
    for run in payload["runs"]:
        obs = ctx.observer = CountingObserver()
        default_cap = stats.MAX_SAMPLES
        # A small sample cap makes striding show without 10,000 iterations.
        stats.MAX_SAMPLES = run.get("max_samples") or default_cap
        try:
            res = run_sweep(ctx, bench_config_from_payload(run["cfg"]), corrupting_factory(run.get("corrupt")))
        finally:
            stats.MAX_SAMPLES = default_cap
        res["progress"] = {"total": obs.total, "advanced": obs.advanced, "stopped": obs.stopped}
        out.append(res)
    return {"runs": out}


def stalling_factory(spec: dict):
    """A runner factory under which one rank stalls before (op, size) (spec: {"rank", "op", "bytes", "sleep_s"}), so
    the others' collective hangs: the fault a stuck process causes, injected through run_sweep's seam."""

    def factory(op, in_place, bufs, counts, rank, nranks, group=None):
        if rank == spec["rank"] and spec.get("op", op) == op and spec.get("bytes", counts.requested_bytes) in (
                counts.bytes, counts.requested_bytes):
            time.sleep(float(spec.get("sleep_s", 3600)))
        return make_runner(op, in_place, bufs, counts, rank, nranks, group)

    return factory


def bench_with_stall(ctx, payload: dict) -> dict:
    """bench_job with one stalling rank: payload = {"cfg": <bench payload>, "stall": <stalling_factory spec>}."""
    return run_sweep(ctx, bench_config_from_payload(payload["cfg"]), stalling_factory(payload["stall"]))


def _counting_factory(calls: list):
    """make_runner whose calls are counted in calls[0] (the fake graph learns from it how many it captured)."""

    def factory(op, in_place, bufs, counts, rank, nranks, group=None):
        runner = make_runner(op, in_place, bufs, counts, rank, nranks, group)

        def call() -> None:
            calls[0] += 1
            runner.call()

        return dataclasses.replace(runner, call=call)

    return factory


def graph_sweeps(ctx, payload: dict) -> dict:
    """Sweeps whose graph path runs on a fake CUDA API (tests/bench/fake_cuda.py): payload = {"runs": [{"cfg":
    <bench payload>, "fake": {"per_call_us", "fail_on_ranks"} | None}]}. Each result gains "fake": {"captured":
    calls per capture, "replays"}."""
    from tests.bench.fake_cuda import fake_api

    out = []
    for run in payload["runs"]:
        calls = [0]
        fake = run.get("fake")
        api, clock = (None, None)
        if fake is not None:
            api, clock = fake_api(fake.get("per_call_us", 2.5), tuple(fake.get("fail_on_ranks", ())), ctx.rank,
                                  counter=lambda c=calls: c[0])
        res = run_sweep(ctx, bench_config_from_payload(run["cfg"]), _counting_factory(calls), cuda_api=api)
        res["fake"] = {"captured": clock.captured, "replays": clock.replays} if clock else None
        out.append(res)
    return {"runs": out}
