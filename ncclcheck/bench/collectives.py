"""The collective sweep, as a job on a formed world: `bench_job(ctx, payload) -> dict` runs on every rank.

For each op x size (x placement): buffers allocated once, warm-up, a barrier, the timed loop (CUDA events on the
current stream with NCCL, perf_counter on gloo, whose collectives complete on the host), with NCCL on a GPU the same
calls captured in a CUDA graph and its replay timed (bench/timing.py: the fabric figure), then the --check pass on
its own, then one small all_gather that brings every rank's time, arrival and wrong count to every rank. Rank 0 builds
the row (time = the slowest rank's, nccl-tests semantics) and emits it at once, so a run cut short still reports
what it measured. A sweep has no overall deadline: it runs as long as its work needs, each collective bounded by
--timeout.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Optional

from ..agent.context import show_row
from ..config import BenchConfig
from ..errors import UsageError
from ..model import BenchRow, sig
from ..units import format_size_short
from . import check as chk
from . import stats
from . import timing as tm
from .efficiency import RECORD_KIND, link_record
from .ops import OPS, bandwidths, coll_counts, dtype_name, parse_ops, torch_dtype
from .runners import (
    TORCH_IN_PLACE_ONLY,
    Runner,
    allocate,
    copies_for,
    expected_output,
    make_runner,
    moves_data,
    unsupported_reason,
)
from .straggler import annotate_row

# (op, in_place, buffers, counts, rank, nranks) -> Runner: what one measurement times and checks.
RunnerFactory = Callable[..., Runner]
PAYLOAD_KEYS = tuple(f.name for f in fields(BenchConfig))
# Per-rank figures gathered after each measurement, in this order.
_STATS = ("time_us", "barrier_wait_us", "start_offset_us", "wall_start_s", "wrong", "graph_us")
NO_GRAPH = -1.0  # graph_us of a measurement that timed no graph


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

    bench/pipeline.py calls this before forming the world when it knows the world size; bench_job calls it again."""
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


@dataclass
class Timing:
    """This rank's timed loop: the mean per iteration (the nccl-tests figure), each iteration, and its arrival."""

    per_iter_us: float
    iter_us: list
    barrier_wait_us: float
    start_offset_us: float
    wall_start_s: float
    stride: int = 1  # iterations per entry of iter_us (1 up to stats.MAX_SAMPLES iterations)


def _marks(iters: int, stride: int) -> list[int]:
    """After which iterations (1-based) a timestamp is taken: every `stride`-th and the last."""
    return [i for i in range(1, iters + 1) if i % stride == 0 or i == iters]


def _timed_loop(ctx, calls: list, iters: int) -> Timing:
    """Time `iters` calls (taking `calls` in turn: one per buffer copy, runners.copies_for) after a barrier, one
    timestamp per iteration (per `stride` iterations past stats.MAX_SAMPLES). On gloo, whose collectives complete on
    the host, perf_counter stamps cost ~0.1 us and one loop gives both the mean (first-to-last stamp over iters,
    what a bare loop measures) and each iteration.

    With NCCL an event recorded per iteration costs ~3 us of CPU, which a launch-bound loop (small sizes, no data to
    move) adds to every iteration: so the mean comes from a first loop timed exactly as nccl-tests and a bare loop
    time it (one CUDA event pair around `iters` calls), and the per-iteration figures from a second loop with an
    event per iteration, back to back on the same stream."""
    stride = stats.stride_for(iters)
    marks = set(_marks(iters, stride)) if stride > 1 else None
    t_enter = time.perf_counter()
    _barrier(ctx)
    t_exit = time.perf_counter()
    wall = time.time()
    if ctx.backend == "nccl":
        import torch

        # record(stream) costs ~3 us of CPU; record() looks the current stream up each time and costs ~13 us (H100,
        # torch 2.11).
        stream = torch.cuda.current_stream()
        first, last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(len(marks or range(iters)) + 1)]
        n = len(calls)
        t_start = time.perf_counter()
        first.record(stream)
        for i in range(iters):
            calls[i % n]()
        last.record(stream)
        events[0].record(stream)
        k = 1
        for i in range(1, iters + 1):
            calls[(i - 1) % n]()
            if marks is None or i in marks:
                events[k].record(stream)
                k += 1
        events[-1].synchronize()
        gaps_us = [a.elapsed_time(b) * 1000.0 for a, b in zip(events, events[1:])]
        per_iter_us = first.elapsed_time(last) * 1000.0 / iters
    else:
        call = calls[0]  # one copy off the GPU (runners.copies_for): the tightest loop
        stamp_fn = time.perf_counter
        stamps = [stamp_fn()]
        t_start = stamps[0]
        if marks is None:  # the common case: the tightest loop
            for _ in range(iters):
                call()
                stamps.append(stamp_fn())
        else:
            for i in range(1, iters + 1):
                call()
                if i in marks:
                    stamps.append(stamp_fn())
        gaps_us = stats.per_iteration(stamps)
        per_iter_us = (stamps[-1] - stamps[0]) * 1e6 / iters
    iter_us = [g / n for g, n in zip(gaps_us, stats.bucket_sizes(iters, stride))]
    return Timing(per_iter_us, iter_us, (t_exit - t_enter) * 1e6, (t_start - t_exit) * 1e6, wall, stride)


def _slowest_per_iteration(ctx, iter_us: list) -> tuple[list[float], list[int]]:
    """(slowest time, slowest rank) per iteration over the world: two all_reduces of `iters` values, so the cost
    does not grow with the world size (the lowest rank wins a tie)."""
    import torch
    import torch.distributed as dist

    t = torch.tensor(iter_us, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    worst = t.cpu().tolist()
    mine = [float(ctx.rank) if x >= w else float(ctx.world_size) for x, w in zip(iter_us, worst)]
    who = torch.tensor(mine, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(who, op=dist.ReduceOp.MIN)
    return worst, [int(r) for r in who.cpu().tolist()]


def _check_pass(ctx, op: str, dtype: str, runner, counts) -> int:
    """Fresh inputs, one collective, exact comparison. Returns this rank's wrong-element count."""
    runner.clear.zero_()
    chk.fill(runner.input, dtype, ctx.world_size, OPS[op].reduces, ctx.rank)
    _sync(ctx)
    runner.call()
    _sync(ctx)
    expected = expected_output(op, dtype, ctx.world_size, ctx.rank, counts, device=ctx.device)
    return chk.count_wrong(runner.output, expected)


def _build_row(op: str, dtype: str, in_place: bool, counts, per_rank: list[list[float]], checked: bool,
               nranks: int, iters: Optional[dict] = None) -> BenchRow:
    eager = [s[0] for s in per_rank]
    graph = [s[5] for s in per_rank] if all(len(s) > 5 and s[5] >= 0 for s in per_rank) else None
    times = graph or eager  # the fabric figure where a graph was timed: busbw, efficiency and the gates use it
    t = max(times)  # a collective is as slow as its slowest member
    moved = moves_data(op, in_place, nranks)
    # A call that moves nothing has no bandwidth: 0, and the row says why (moves_data false), never size / time.
    algbw, busbw = bandwidths(op, counts.bytes, t, nranks) if moved else (0.0, 0.0)
    arrival = {
        "barrier_wait_us": [sig(s[1]) for s in per_rank],
        "start_offset_us": [sig(s[2]) for s in per_rank],
        "wall_start_s": [s[3] for s in per_rank],
    }
    spec = OPS[op]  # nccl-tests' redop and root columns, carried by the row so renderers need no op table
    extra: dict[str, Any] = {"arrival": arrival, "redop": spec.redop, "root": spec.root,
                             "timing": tm.GRAPH if graph else tm.EAGER}
    if graph:
        # What each torch call costs a training step, beside the fabric figure, and the difference: torch's
        # dispatch and launch per call (iter_stats, when present, are of these eager calls).
        extra["eager_time_us"] = sig(max(eager))
        extra["eager_overhead_us"] = sig(max(eager) - t)
    if not moved:
        extra["moves_data"] = False
    if iters is not None:
        extra["iter_stats"] = iters
    if nranks > 1:
        # What a reader can act on: how far apart the ranks started, and the rank that kept the others waiting.
        note = annotate_row({"arrival_us": arrival["start_offset_us"], "rank_time_us": times})
        extra["arrival_spread_us"] = sig(max(arrival["start_offset_us"]) - min(arrival["start_offset_us"]))
        if note["late_rank"] is not None:
            extra["late_rank"] = note["late_rank"]
            extra["late_by_us"] = note["late_by_us"]
    if counts.rounded:
        extra["requested_bytes"] = counts.requested_bytes
    if op in TORCH_IN_PLACE_ONLY:
        extra["in_place_call"] = True
    wrong = None
    if checked:
        rank_wrong = [int(s[4]) for s in per_rank]
        wrong = sum(rank_wrong)
        if wrong:
            extra["rank_wrong"] = rank_wrong
    return BenchRow(
        op=op, bytes=counts.bytes, count=counts.count, dtype=dtype, in_place=in_place,
        time_us=sig(t), algbw_gbps=sig(algbw), busbw_gbps=sig(busbw), wrong=wrong,
        rank_time_us=[sig(x) for x in times], extra=extra,
    )


def _probe(ctx, runner) -> Optional[str]:
    """The first warm-up call doubles as the probe: a backend that lacks the op or dtype raises here, on every rank
    alike (the check is local, before any byte moves), and all ranks agree before going further. Returns why the
    op cannot run, or None."""
    err = None
    try:
        runner.call()
        _sync(ctx)
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
        err = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300]
    ok, bad = _all_agree(ctx, err is None)
    if ok:
        return None
    return err or f"not supported by the {ctx.backend} backend on rank(s) {bad}"


def _arrive(ctx, op: str, size: int) -> None:
    """Mark in the store that this rank reached (op, size): a hang then names the ranks that did not."""
    st = ctx.store
    if st is None:
        return
    try:
        st.set(f"bench/at/{op}/{size}/{ctx.rank}", "1")
    except Exception:  # noqa: BLE001 - the mark only improves a hang's message; the sweep must not depend on it
        pass


def _say(ctx, key: str, text: str) -> None:
    """A short text for other ranks to read (why this rank could not do something); best effort."""
    if ctx.store is not None:
        try:
            ctx.store.set(key, text[:300])
        except Exception:  # noqa: BLE001 - the text only improves a message; the sweep must not depend on it
            pass


def _heard(ctx, key: str, default: str) -> str:
    """What another rank said under `key` (written before a collective this rank has completed), else `default`."""
    st = ctx.store
    if st is None:
        return default
    try:
        if hasattr(st, "get_now"):  # the world's JsonStore (rendezvous/store.py): decoded, and checked to be text
            raw = st.get_now(key, lambda v: None if isinstance(v, str) else "not a text")
        else:  # a bare c10d store (tests' worlds)
            raw = st.get(key) if st.check([key]) else None
    except Exception:  # noqa: BLE001 - the store may be gone with the rank that failed
        raw = None
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw if isinstance(raw, str) else ""
    return "".join(ch for ch in text if ch.isprintable())[:300] or default  # a peer's words: no control characters


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


def _graph_time(ctx, calls: list, iters: int, api: tm.CudaApi) -> tuple[float, Optional[str]]:
    """(this rank's per-call time of a graph replay, None), or (NO_GRAPH, why) when some rank could not capture.

    Every rank agrees before any replays: a graph replayed on some ranks only would wait forever for the others."""
    graph, why = None, None
    try:
        graph = tm.capture(calls, iters, api)
    except tm.CaptureFailed as exc:
        why = f"CUDA-graph capture failed: {exc}"
        _say(ctx, f"bench/no_graph/{ctx.rank}", why)  # before the agreement, so it is there when rank 0 reads it
    ok, bad = _all_agree(ctx, graph is not None)
    if not ok:
        on = f"CUDA-graph capture failed on rank(s) {','.join(map(str, bad))}"
        return NO_GRAPH, why or _heard(ctx, f"bench/no_graph/{bad[0]}", on)
    us = tm.replay_us(graph, iters, api, lambda: _barrier(ctx))
    del graph  # its NCCL work and memory pool go with it, before the next size allocates
    return us, None


def _measure(ctx, op: str, cfg: BenchConfig, in_place: bool, runners: list[Runner], counts,
             api: Optional[tm.CudaApi] = None):
    """(one row, or a string saying why this (op, dtype, placement) cannot run here; why a graph was not timed).

    `runners`: one per buffer copy, taken in turn by the timed calls; the first is probed and checked.
    `api`: time a CUDA-graph replay too (bench/timing.py); None: the eager loop alone (gloo, --timing eager)."""
    runner, calls = runners[0], [r.call for r in runners]
    if cfg.check:
        # Timing on the check values keeps reductions away from denormals and NaNs.
        chk.fill(runner.input, cfg.dtype, ctx.world_size, OPS[op].reduces, ctx.rank)
    why = _probe(ctx, runner)
    if why:
        return why, None
    for i in range(max(0, cfg.warmup - 1)):
        calls[i % len(calls)]()
    _sync(ctx)
    timing = _timed_loop(ctx, calls, cfg.iters)
    graph_us, no_graph = _graph_time(ctx, calls, cfg.iters, api) if api is not None else (NO_GRAPH, None)
    if no_graph and cfg.timing == tm.GRAPH:
        return no_graph, no_graph  # graph figures were asked for: this one cannot be had, so the row is not shown
    wrong = _check_pass(ctx, op, cfg.dtype, runner, counts) if cfg.check else 0
    per_rank = _gather_stats(ctx, [timing.per_iter_us, timing.barrier_wait_us, timing.start_offset_us,
                                   timing.wall_start_s, float(wrong), graph_us])
    worst, who = _slowest_per_iteration(ctx, timing.iter_us)
    return _build_row(op, cfg.dtype, in_place, counts, per_rank, cfg.check, ctx.world_size,
                      stats.iteration_stats(worst, who, iters=cfg.iters, stride=timing.stride)), no_graph


# ---------------------------------------------------------------------------------------------------------------
# the sweep


@dataclass
class _Sweep:
    """What a sweep has gathered so far (rows on rank 0 only) and what it needs to plan the next size."""

    ctx: Any
    cfg: BenchConfig
    runner_factory: RunnerFactory
    rows: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    stopped: Optional[dict] = None
    api: Optional[tm.CudaApi] = None  # graphs are timed with this; None: eager timing only
    no_graph: dict = field(default_factory=dict)  # op -> why its graph could not be timed (said once, not per row)

    @property
    def lead(self) -> bool:
        return self.ctx.rank == 0

    def skip(self, op: str, in_place: bool, reason: str) -> None:
        self.skipped.append({"op": op, "dtype": self.cfg.dtype, "in_place": in_place, "reason": reason})

    def advance(self, label: str) -> None:
        if self.lead:
            self.ctx.observer.advance(label)

    def graph_api(self, op: str) -> Optional[tm.CudaApi]:
        """The API to time `op`'s graphs with, or None once a capture of this op failed (it would fail again)."""
        return None if op in self.no_graph else self.api


def _runnable(sw: _Sweep) -> dict[str, list[bool]]:
    """Per op, the placements this world can run at all; the others are recorded as skipped with the reason."""
    out: dict[str, list[bool]] = {}
    for op in sw.cfg.ops:
        out[op] = []
        for p in placements(sw.cfg):
            why = unsupported_reason(op, p, sw.ctx.world_size)
            if why:
                sw.skip(op, p, why)
            else:
                out[op].append(p)
    return out


def _run_size(sw: _Sweep, op: str, size: int, live: list[bool], sizes_left: int, tdtype) -> list[bool]:
    """Every live placement of (op, size); returns the placements still live afterwards."""
    ctx, cfg = sw.ctx, sw.cfg
    counts = coll_counts(op, size, cfg.dtype, ctx.world_size)
    bufs = allocate(counts, tdtype, ctx.device, copies_for(size, max(cfg.sizes), cfg.iters, ctx.device))
    still = list(live)
    for in_place in live:
        runners = [sw.runner_factory(op, in_place, b, counts, ctx.rank, ctx.world_size) for b in bufs]
        _arrive(ctx, op, size)
        try:
            row, no_graph = _measure(ctx, op, cfg, in_place, runners, counts, sw.graph_api(op))
        except RuntimeError as exc:  # a collective past its bound, or a peer that died: named, and the sweep stops
            sw.stopped = _hang(ctx, op, size, exc)
            break
        if no_graph and not isinstance(row, str):  # measured eager instead: said once per op, in the result
            sw.no_graph.setdefault(op, no_graph)
        if isinstance(row, str):
            sw.skip(op, in_place, row)
            still.remove(in_place)
            for _ in range(sizes_left):  # the sizes this placement will now not run
                sw.advance(f"{op} skipped")
        else:
            if sw.lead:
                sw.rows.append(row.to_json())
                ctx.emit("bench_row", row.to_json())
                show_row(ctx.observer, "bench_row", row.to_json())
        sw.advance(f"{op} {format_size_short(size)}")
    del bufs
    return still


def _run_op(sw: _Sweep, op: str, live: list[bool], tdtype) -> None:
    sizes = sw.cfg.sizes
    for i, size in enumerate(sizes):
        if not live:
            return
        live = _run_size(sw, op, size, live, len(sizes) - i - 1, tdtype)
        if sw.stopped:
            return


def _timing_plan(ctx, cfg: BenchConfig, cuda_api: Optional[tm.CudaApi]) -> tuple[Optional[tm.CudaApi], Optional[str]]:
    """(the API graphs are timed with, or None; why every row is eager when that is not the user's choice)."""
    if cfg.timing == tm.EAGER:
        return None, None
    if cuda_api is not None:
        return cuda_api, None
    why = tm.graph_unavailable(ctx.backend, ctx.device)
    if why and cfg.timing == tm.GRAPH:  # bench/pipeline.py refuses this before any rank starts; the API may not
        raise UsageError(tm.refusal(cfg.timing, ctx.backend, ctx.device) or why)
    return (None, why) if why else (tm.torch_cuda_api(), None)


def run_sweep(ctx, cfg: BenchConfig, runner_factory: Optional[RunnerFactory] = None,
              cuda_api: Optional[tm.CudaApi] = None) -> dict:
    """The sweep itself (bench_job minus payload decoding); every rank calls it with the same cfg.

    `runner_factory` (default runners.make_runner) builds the callable each measurement times and checks: the seam
    through which tests inject faults, so product code carries no test hooks. `cuda_api` (default: torch.cuda where
    the world runs NCCL on GPUs) is the seam through which tests run the graph path on CPU with fakes."""
    import torch

    cfg = validate(cfg, ctx.world_size)
    if ctx.device.startswith("cuda"):
        torch.cuda.set_device(ctx.device)
    tdtype = torch_dtype(cfg.dtype)
    api, eager_why = _timing_plan(ctx, cfg, cuda_api)
    sw = _Sweep(ctx, cfg, runner_factory or make_runner, api=api)
    record = link_record(ctx)  # each node's links, for the bound of every row (bench/efficiency.py)
    if record is not None:
        ctx.emit(RECORD_KIND, record)
    runnable = _runnable(sw)
    if sw.lead:
        ctx.observer.start(sum(len(v) for v in runnable.values()) * len(cfg.sizes), "bench")
    try:
        for op in cfg.ops:
            _run_op(sw, op, runnable[op], tdtype)
            if sw.stopped:
                break
    finally:
        if sw.lead:
            ctx.observer.stop()
    if sw.stopped and sw.lead:
        ctx.emit("bench_stopped", sw.stopped)
    return {
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "backend": ctx.backend,
        "device": ctx.device,
        "dtype": cfg.dtype,
        "rows": sw.rows,  # rank 0 only: every rank has the data, but n copies of n-long arrays would be quadratic
        "skipped": sw.skipped,
        "stopped": sw.stopped,
        # How time_us was taken, said once: each row's `timing` says which; here, why rows are eager when they are.
        "timing": {"requested": cfg.timing, "eager_why": eager_why,
                   "no_graph": [{"op": op, "reason": why} for op, why in sw.no_graph.items()]},
    }


def bench_job(ctx, payload: dict) -> dict:
    """Job entry point (agent/runner.run_job calls it on every rank): payload = bench_config_to_payload(cfg).

    Returns {"rank", "world_size", "backend", "device", "dtype", "rows": [BenchRow JSON] (rank 0 only),
    "skipped": [{"op", "dtype", "in_place", "reason"}], "stopped": None | {"reason", "op", "bytes", "detail"},
    "timing": {"requested", "eager_why", "no_graph": [{"op", "reason"}]}}.
    Rows are also emitted one by one as ctx.emit("bench_row", row_json) the moment they exist.
    """
    return run_sweep(ctx, bench_config_from_payload(payload))


def rows_from_result(result: dict) -> list[BenchRow]:
    return [BenchRow.from_json(r) for r in result.get("rows", [])]


__all__ = ["bench_job", "run_sweep", "bench_config_to_payload", "bench_config_from_payload", "validate",
           "placements", "rows_from_result"]
