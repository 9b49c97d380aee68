"""The collective sweep, as a job on a formed world: `bench_job(ctx, payload) -> dict` runs on every rank.

For each op x size (x placement): buffers allocated once, warm-up, a barrier, the timed loop (CUDA events on the
current stream with NCCL, perf_counter on gloo, whose collectives complete on the host), then the --check pass on
its own, then one small all_gather that brings every rank's time, arrival and wrong count to every rank. Rank 0 builds
the row (time = the slowest rank's, nccl-tests semantics) and emits it at once, so a run cut short still reports
what it measured. Sizes that cannot finish before ctx.deadline are not started; ranks agree on that together.
"""

from __future__ import annotations

import time
from dataclasses import asdict, fields
from typing import Any, Optional

from ..config import BenchConfig
from ..errors import UsageError
from ..model import BenchRow, sig
from ..units import format_size_short
from . import check as chk
from .ops import OPS, bandwidths, coll_counts, dtype_name, parse_ops, torch_dtype
from .runners import TORCH_IN_PLACE_ONLY, allocate, make_runner, unsupported_reason

PAYLOAD_KEYS = tuple(f.name for f in fields(BenchConfig))
# Per-rank figures gathered after each measurement, in this order.
_STATS = ("time_us", "barrier_wait_us", "start_offset_us", "wall_start_s", "wrong")
# Seconds kept free before the deadline for the last row's exchange and the report.
DEADLINE_MARGIN_S = 1.0


def bench_config_to_payload(cfg: BenchConfig) -> dict:
    """BenchConfig -> JSON-safe dict (tuples become lists)."""
    d = asdict(cfg)
    d["sizes"] = [int(s) for s in cfg.sizes]
    d["ops"] = list(cfg.ops)
    return d


def bench_config_from_payload(d: dict) -> BenchConfig:
    """The inverse of bench_config_to_payload; unknown keys are ignored, missing ones take the defaults."""
    kw = {k: d[k] for k in PAYLOAD_KEYS if k in d}
    if "sizes" in kw:
        kw["sizes"] = tuple(int(s) for s in kw["sizes"])
    if "ops" in kw:
        kw["ops"] = tuple(kw["ops"])
    return BenchConfig(**kw)


def placements(cfg: BenchConfig) -> tuple[bool, ...]:
    """Out-of-place always; with --in-place the in-place variant too (nccl-tests reports both)."""
    return (False, True) if cfg.in_place else (False,)


def validate(cfg: BenchConfig, world_size: int) -> BenchConfig:
    """Canonical op/dtype names, and a UsageError for any (op, size) that rounds to zero elements on this world.

    api.run_bench calls this before forming the world when it knows the world size; bench_job calls it again."""
    if cfg.iters < 1:
        raise UsageError(f"--iters must be >= 1, got {cfg.iters}")
    if cfg.warmup < 0:
        raise UsageError(f"--warmup must be >= 0, got {cfg.warmup}")
    if not cfg.sizes:
        raise UsageError("no sizes to run")
    ops = parse_ops(cfg.ops)
    dtype = dtype_name(cfg.dtype)
    for op in ops:
        for size in cfg.sizes:
            coll_counts(op, size, dtype, world_size)
    if cfg.gate_size is not None and cfg.gate_size not in cfg.sizes:
        sizes = ", ".join(format_size_short(s) for s in cfg.sizes)
        raise UsageError(f"--gate-size {format_size_short(cfg.gate_size)} is not one of the swept sizes ({sizes})")
    return BenchConfig(**{**asdict(cfg), "ops": ops, "dtype": dtype, "sizes": tuple(sorted(set(cfg.sizes)))})


# ---------------------------------------------------------------------------------------------------------------
# synchronisation helpers (every rank calls these in the same order)


def _device_index(ctx) -> Optional[int]:
    return int(ctx.device.split(":")[1]) if ctx.device.startswith("cuda:") else None


def _sync(ctx) -> None:
    if ctx.backend == "nccl" or ctx.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _barrier(ctx) -> None:
    import torch.distributed as dist

    idx = _device_index(ctx)
    if ctx.backend == "nccl" and idx is not None:
        dist.barrier(device_ids=[idx])
    else:
        dist.barrier()
    _sync(ctx)


def _all_agree(ctx, ok: bool) -> tuple[bool, list[int]]:
    """(every rank said ok, the ranks that did not). One tiny all_gather on the world's own group."""
    import torch
    import torch.distributed as dist

    mine = torch.tensor([0 if ok else 1], dtype=torch.int32, device=ctx.device)
    out = torch.zeros(ctx.world_size, dtype=torch.int32, device=ctx.device)
    _all_gather_flat(dist, out, mine)
    bad = [r for r, v in enumerate(out.tolist()) if v]
    return not bad, bad


def _all_gather_flat(dist, out, inp) -> None:
    ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    ag(out, inp)


def _gather_stats(ctx, values: list[float]) -> list[list[float]]:
    """Every rank's _STATS vector, indexed by rank (float64 keeps wall-clock seconds to the microsecond)."""
    import torch
    import torch.distributed as dist

    mine = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    out = torch.zeros(ctx.world_size * len(values), dtype=torch.float64, device=ctx.device)
    _all_gather_flat(dist, out, mine)
    flat = out.cpu().tolist()
    k = len(values)
    return [flat[r * k:(r + 1) * k] for r in range(ctx.world_size)]


# ---------------------------------------------------------------------------------------------------------------
# one measurement


def _timed_loop(ctx, call, iters: int) -> tuple[float, float, float, float]:
    """(per-iteration us, barrier wait us, start offset us, wall-clock start s) on this rank."""
    t_enter = time.perf_counter()
    _barrier(ctx)
    t_exit = time.perf_counter()
    wall = time.time()
    if ctx.backend == "nccl":
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t_start = time.perf_counter()
        start.record()
        for _ in range(iters):
            call()
        end.record()
        end.synchronize()
        per_iter_us = start.elapsed_time(end) * 1000.0 / iters
    else:
        t_start = time.perf_counter()
        for _ in range(iters):
            call()
        per_iter_us = (time.perf_counter() - t_start) * 1e6 / iters
    return per_iter_us, (t_exit - t_enter) * 1e6, (t_start - t_exit) * 1e6, wall


def _check_pass(ctx, op: str, dtype: str, runner, counts, hooks: dict, in_place: bool) -> int:
    """Fresh inputs, one collective, exact comparison. Returns this rank's wrong-element count."""
    runner.clear.zero_()
    chk.fill(runner.input, dtype, ctx.world_size, OPS[op].reduces, ctx.rank)
    _sync(ctx)
    runner.call()
    _sync(ctx)
    c = hooks.get("corrupt") if hooks else None
    if c and c.get("rank") == ctx.rank and c.get("op", op) == op and c.get("in_place", in_place) == in_place:
        chk.corrupt(runner.output)
    expected = chk.expected_output(op, dtype, ctx.world_size, ctx.rank, counts, device=ctx.device)
    return chk.count_wrong(runner.output, expected)


def _build_row(op: str, dtype: str, in_place: bool, counts, stats: list[list[float]], checked: bool,
               nranks: int) -> BenchRow:
    times = [s[0] for s in stats]
    t = max(times)  # a collective is as slow as its slowest member
    algbw, busbw = bandwidths(op, counts.bytes, t, nranks)
    extra: dict[str, Any] = {
        "arrival": {
            "barrier_wait_us": [sig(s[1]) for s in stats],
            "start_offset_us": [sig(s[2]) for s in stats],
            "wall_start_s": [s[3] for s in stats],
        },
    }
    if counts.rounded:
        extra["requested_bytes"] = counts.requested_bytes
    if op in TORCH_IN_PLACE_ONLY:
        extra["in_place_call"] = True
    wrong = None
    if checked:
        per_rank = [int(s[4]) for s in stats]
        wrong = sum(per_rank)
        if wrong:
            extra["rank_wrong"] = per_rank
    return BenchRow(
        op=op, bytes=counts.bytes, count=counts.count, dtype=dtype, in_place=in_place,
        time_us=sig(t), algbw_gbps=sig(algbw), busbw_gbps=sig(busbw), wrong=wrong,
        rank_time_us=[sig(x) for x in times], extra=extra,
    )


def _estimate_s(history: dict, op: str, size: int, cfg: BenchConfig, n_place: int) -> float:
    """Seconds the next (op, size) needs, scaled from the last measurement (linear in bytes: pessimistic enough
    for bandwidth-bound sizes, and small sizes are cheap anyway). 0 when nothing was measured yet."""
    prev = history.get(op) or history.get("*")
    if not prev:
        return 0.0
    prev_size, prev_us = prev
    per_iter_s = prev_us * 1e-6 * max(1.0, size / prev_size)
    return per_iter_s * (cfg.warmup + cfg.iters + (2 if cfg.check else 0)) * n_place


# ---------------------------------------------------------------------------------------------------------------
# the job


def run_sweep(ctx, cfg: BenchConfig) -> dict:
    """The sweep itself (bench_job minus payload decoding); every rank calls it with the same cfg."""
    import torch

    cfg = validate(cfg, ctx.world_size)
    n = ctx.world_size
    if ctx.device.startswith("cuda"):
        torch.cuda.set_device(ctx.device)
    tdtype = torch_dtype(cfg.dtype)
    places = placements(cfg)
    hooks = ctx.test_hooks or {}
    lead = ctx.rank == 0
    rows: list[dict] = []
    skipped: list[dict] = []
    stopped: Optional[dict] = None
    history: dict = {}
    runnable: dict[str, list[bool]] = {}
    for op in cfg.ops:
        runnable[op] = []
        for p in places:
            why = unsupported_reason(op, p, n)
            if why:
                skipped.append({"op": op, "dtype": cfg.dtype, "in_place": p, "reason": why})
            else:
                runnable[op].append(p)
    if lead:
        ctx.observer.start(sum(len(v) for v in runnable.values()) * len(cfg.sizes), "bench")
    try:
        for op in cfg.ops:
            live = runnable[op]
            for i, size in enumerate(cfg.sizes):
                if not live:
                    break
                est = _estimate_s(history, op, size, cfg, len(live))
                fits = time.monotonic() + est + DEADLINE_MARGIN_S <= ctx.deadline
                h = hooks.get("hang")  # tests: this rank stalls before (op, size), so the others' collective hangs
                if h and h.get("rank") == ctx.rank and h.get("op", op) == op and h.get("bytes", size) == size:
                    time.sleep(float(h.get("sleep_s", 3600)))
                _arrive(ctx, op, size)
                try:
                    go, _ = _all_agree(ctx, fits)
                except RuntimeError as exc:  # a collective past its bound (--timeout): a hang, named
                    stopped = _hang(ctx, op, size, exc)
                    break
                if not go:
                    stopped = {"reason": "deadline", "op": op, "bytes": size,
                               "detail": f"stopped before {op} at {format_size_short(size)}: it would not finish "
                                         f"before the run's deadline"}
                    break
                counts = coll_counts(op, size, cfg.dtype, n)
                bufs = allocate(counts, tdtype, ctx.device)
                for in_place in live:
                    try:
                        row = _measure(ctx, op, cfg, in_place, bufs, counts, hooks)
                    except RuntimeError as exc:
                        stopped = _hang(ctx, op, size, exc)
                        break
                    if isinstance(row, str):
                        skipped.append({"op": op, "dtype": cfg.dtype, "in_place": in_place, "reason": row})
                        live = [p for p in live if p != in_place]
                        if lead:  # the sizes this placement will now not run
                            for _ in cfg.sizes[i + 1:]:
                                ctx.observer.advance(f"{op} skipped")
                    else:
                        history[op] = history["*"] = (counts.bytes, row.time_us)
                        if lead:
                            rows.append(row.to_json())
                            ctx.emit("bench_row", row.to_json())
                    if lead:
                        ctx.observer.advance(f"{op} {format_size_short(size)}")
                del bufs
                if stopped:
                    break
            if stopped:
                break
    finally:
        if lead:
            ctx.observer.stop()
    if stopped and lead:
        ctx.emit("bench_stopped", stopped)
    return {
        "rank": ctx.rank,
        "world_size": n,
        "backend": ctx.backend,
        "device": ctx.device,
        "dtype": cfg.dtype,
        "rows": rows,  # rank 0 only: every rank has the data, but n copies of n-long arrays would be quadratic
        "skipped": skipped,
        "stopped": stopped,
    }


def _arrive(ctx, op: str, size: int) -> None:
    """Mark in the store that this rank reached (op, size): a hang then names the ranks that did not."""
    st = ctx.store
    if st is None:
        return
    try:
        st.set(f"bench/at/{op}/{size}/{ctx.rank}", "1")
    except Exception:  # noqa: BLE001 - the mark only improves a hang's message; the sweep must not depend on it
        pass


def _absent(ctx, op: str, size: int) -> list[int]:
    st = ctx.store
    has = getattr(st, "has", None) or (lambda k: bool(st.check([k])))
    out = []
    for r in range(ctx.world_size):
        try:
            if not has(f"bench/at/{op}/{size}/{r}"):
                out.append(r)
        except Exception:  # noqa: BLE001 - the store may be gone with the rank that hung
            return []
    return out


def _hang(ctx, op: str, size: int, exc: BaseException) -> dict:
    """The `stopped` record of a collective that did not complete within its bound (or whose peer died)."""
    absent = _absent(ctx, op, size) if ctx.store is not None else []
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    who = f"; rank(s) {','.join(map(str, absent))} never arrived" if absent else ""
    return {"reason": "hang", "op": op, "bytes": size, "ranks_absent": absent,
            "detail": f"{op} at {format_size_short(size)} did not complete within --timeout "
                      f"{ctx.timeout_s:g} s{who} ({first})"}


def _measure(ctx, op: str, cfg: BenchConfig, in_place: bool, bufs, counts, hooks: dict):
    """One row, or a string saying why this (op, dtype, placement) cannot run on this backend."""
    runner = make_runner(op, in_place, bufs, counts, ctx.rank, ctx.world_size)
    if cfg.check:
        # Timing on the check values keeps reductions away from denormals and NaNs.
        chk.fill(runner.input, cfg.dtype, ctx.world_size, OPS[op].reduces, ctx.rank)
    # The first warm-up call doubles as the probe: a backend that lacks the op or dtype raises here, on every
    # rank alike (the check is local, before any byte moves), and all ranks agree before going further.
    err = None
    try:
        runner.call()
        _sync(ctx)
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
        err = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300]
    ok, bad = _all_agree(ctx, err is None)
    if not ok:
        return err or f"not supported by the {ctx.backend} backend on rank(s) {bad}"
    for _ in range(max(0, cfg.warmup - 1)):
        runner.call()
    _sync(ctx)
    per_iter_us, wait_us, offset_us, wall = _timed_loop(ctx, runner.call, cfg.iters)
    wrong = _check_pass(ctx, op, cfg.dtype, runner, counts, hooks, in_place) if cfg.check else 0
    stats = _gather_stats(ctx, [per_iter_us, wait_us, offset_us, wall, float(wrong)])
    return _build_row(op, cfg.dtype, in_place, counts, stats, cfg.check, ctx.world_size)


def bench_job(ctx, payload: dict) -> dict:
    """Job entry point (world.py calls it on every rank): payload = bench_config_to_payload(cfg).

    Returns {"rank", "world_size", "backend", "device", "dtype", "rows": [BenchRow JSON] (rank 0 only),
    "skipped": [{"op", "dtype", "in_place", "reason"}], "stopped": None | {"reason", "op", "bytes", "detail"}}.
    Rows are also emitted one by one as ctx.emit("bench_row", row_json) the moment they exist.
    """
    return run_sweep(ctx, bench_config_from_payload(payload))


def rows_from_result(result: dict) -> list[BenchRow]:
    return [BenchRow.from_json(r) for r in result.get("rows", [])]


__all__ = ["bench_job", "run_sweep", "bench_config_to_payload", "bench_config_from_payload", "validate",
           "placements", "rows_from_result"]
