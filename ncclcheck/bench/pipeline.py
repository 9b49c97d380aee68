"""`ncclcheck bench` as one pipeline, in the order it runs: the world, the sweep's refusals (sizes, memory, GPUs),
the sweep on every rank, the gates and stragglers, NCCL's capture, then the Report, built once, and the baseline."""

from __future__ import annotations

from ..config import Config
from ..errors import WorldError
from ..model import BenchRow, Report, failed
from ..steps import world as w


def run(config: Config, observer=None, placement=None) -> Report:
    """Collective sweeps on real process groups (NCCL on GPUs, gloo on CPUs) with nccl-tests' semantics."""
    from . import gates
    from .collectives import bench_config_to_payload, bench_job, validate

    clock = w.Clock()
    budget = w.budget(config)
    placement = w.placement(config, placement)
    try:
        world, placement = w.job_world(config, placement, budget, observer)
    except WorldError as exc:
        return w.world_failure_report(config, "bench", clock, str(exc), placement)
    world_size = placement.world_size if placement.worker_mode else world.nnodes * w.local_ranks(world, placement)
    cfg = validate(config.bench, world_size)  # UsageError before any rendezvous
    _check_memory(cfg, world, placement, world_size)
    _check_timing(cfg, world, placement)
    base_rows = gates.load_baseline(cfg.baseline) if cfg.baseline else None
    # Between two rows: the size's agreement, warm-up, barrier, timed iterations, check and stats collectives.
    step_ops = (cfg.warmup + cfg.iters + 6) * (2 if cfg.in_place else 1)
    out = w.run_world_job(world, placement, bench_job, bench_config_to_payload(cfg), budget, observer, step_ops)
    rows, skips, stopped = _rows(out)
    checks, extra, partial = gates.outcome(cfg, rows, skips, stopped, hardware=None, base_rows=base_rows,
                                           backend=out.backend,
                                           world={"nnodes": placement.nnodes, "backend": out.backend,
                                                  "ranks_per_node": w.local_ranks(world, placement),
                                                  "records": out.emitted},
                                           timing=(out.results.get(0) or {}).get("timing"))
    if out.world_size > 1 and rows:
        from .straggler import find_stragglers

        # Arrival = each rank's start of the timed loop after the shared barrier (bench records it per row).
        timing = [{"arrival_us": (r.extra.get("arrival") or {}).get("start_offset_us"),
                   "rank_time_us": r.rank_time_us} for r in rows]
        checks.extend(find_stragglers(timing).checks)
    if config.nccl_diag and config.nccl_diag.capture:
        from ..steps.nccl_capture import nccl_capture

        more, sections = nccl_capture(config, world, placement, out.backend, budget)
        checks.extend(more)
        extra.update(sections)
    if out.failures and not out.interrupted:
        first = out.failures[0]
        checks.insert(0, failed("bench.world", f"rank {first['rank']} failed: {first['reason']}",
                                evidence={"failures": out.failures},
                                fix="Run `ncclcheck preflight` with the same world flags to find the cause."))
    report = w.job_report("bench", config, clock, world, placement, out, checks=checks, bench=rows, extra=extra,
                          partial=partial or bool(out.failures))
    w.save_baseline(cfg.save_baseline, report)
    return report


def _rows(out) -> tuple[list, list, object]:
    """(rows, skipped combinations, why the sweep stopped) from rank 0's result, or from what rank 0 emitted
    before the world broke or was interrupted."""
    result = out.results.get(0)
    if result is not None:
        from .collectives import rows_from_result

        return rows_from_result(result), result.get("skipped", []), result.get("stopped")
    rows = [BenchRow.from_json(e["data"]) for e in out.emitted if e.get("kind") == "bench_row"]
    stopped = {"reason": "world broke", "detail": "; ".join(f"rank {f['rank']}: {f['reason']}" for f in out.failures)}
    hang = next((e["data"] for e in out.emitted if e.get("kind") == "bench_stopped"), None)
    if out.interrupted:
        stopped = {"reason": "interrupted", "by": out.interrupted_by,
                   "detail": f"interrupted ({out.interrupted_by}) before the sweep ended"}
    elif isinstance(hang, dict):
        stopped = hang
    return rows, [], stopped


def _check_timing(cfg, world, placement) -> None:
    """UsageError for --timing graph on a world whose ranks cannot run CUDA graphs (gloo), before any rank starts."""
    from ..agent.runner import gpu_count, resolve_backend
    from ..errors import UsageError
    from .timing import GRAPH, refusal

    if cfg.timing != GRAPH:  # only graph can be refused; the others need no GPU count (no torch import)
        return
    backend = resolve_backend(world.backend, gpu_count(), w.local_ranks(world, placement))
    why = refusal(cfg.timing, backend, "cuda" if backend == "nccl" else "cpu")
    if why:
        raise UsageError(why)


def _check_memory(cfg, world, placement, world_size: int) -> None:
    """UsageError when the ranks of this node cannot allocate the largest --sizes (before any rank starts)."""
    from ..agent.runner import gpu_count, load_torch, resolve_backend
    from ..facts.gpu import device_memory_bytes
    from ..facts.host import mem_available_bytes
    from .memory import check_fits

    local = w.local_ranks(world, placement)
    on_gpu = resolve_backend(world.backend, gpu_count(), local) == "nccl"
    check_fits(cfg, world_size, local, mem_available_bytes(), device_memory_bytes(load_torch) if on_gpu else None)
