"""Bench gates and summary: pure functions of bench rows and the BenchConfig (no torch, no I/O except loading a
baseline file).

Check ids are stable API: bench.correctness, bench.min_busbw, bench.baseline, bench.unsupported. The summary never
averages small sizes in (nccl-tests' "Avg bus bandwidth" does, and misleads): it gives busbw at the largest size
and latency at the smallest, per op.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

from ..config import BenchConfig
from ..errors import UsageError
from ..model import BenchRow, CheckResult, failed, load_saved_report, passed, sig, skipped, warned
from ..render.words import timing_note
from ..units import count_noun, format_gbps, format_size_short
from .coverage import coverage_check


def requested(row: BenchRow) -> int:
    """The size the user asked for (rows keep it in extra when nccl-tests' rounding changed it)."""
    return int(row.extra.get("requested_bytes", row.bytes))


def _label(row: BenchRow) -> str:
    place = " in-place" if row.in_place else ""
    return f"{row.op} {format_size_short(requested(row))} {row.dtype}{place}"


def correctness(rows: list[BenchRow], cfg: BenchConfig) -> CheckResult:
    """Every checked row must have wrong == 0."""
    if not cfg.check:
        return skipped("bench.correctness", "results not verified (run with --check)")
    checked = [r for r in rows if r.wrong is not None]
    if not checked:
        return skipped("bench.correctness", "no verified rows")
    bad = [r for r in checked if r.wrong]
    if not bad:
        return passed("bench.correctness", f"all {len(checked)} verified rows exact (0 wrong elements)")
    first = bad[0]
    detail = "\n".join(
        f"{_label(r)}: {r.wrong} of {r.count} elements wrong"
        + (f" (per rank {r.extra['rank_wrong']})" if r.extra.get("rank_wrong") else "")
        for r in bad
    )
    return failed(
        "bench.correctness",
        f"{_label(first)}: {first.wrong} wrong elements" + (f" (+{len(bad) - 1} more rows)" if len(bad) > 1 else ""),
        detail=detail,
        fix="Wrong results mean broken hardware or a broken transport: rerun with NCCL_DEBUG=INFO, check GPU "
            "health (dcgmi diag) and the ranks listed per row.",
        evidence={"rows": [{"op": r.op, "bytes": r.bytes, "dtype": r.dtype, "in_place": r.in_place,
                            "wrong": r.wrong, "rank_wrong": r.extra.get("rank_wrong")} for r in bad]},
    )


def gate_rows(rows: list[BenchRow], cfg: BenchConfig) -> dict[str, Optional[BenchRow]]:
    """Per op (out-of-place), the row at --gate-size or at the largest requested size; None when not measured."""
    size = cfg.gate_size if cfg.gate_size is not None else (max(cfg.sizes) if cfg.sizes else None)
    ops = list(dict.fromkeys(list(cfg.ops) + [r.op for r in rows]))
    out: dict[str, Optional[BenchRow]] = {}
    for op in ops:
        match = [r for r in rows if r.op == op and not r.in_place and requested(r) == size]
        out[op] = match[0] if match else None
    return out


def transport_hint(backend: str) -> str:
    """Where a slow figure's path was decided, in the words of the backend that ran (gloo has no "transport NCCL
    chose": it connects on GLOO_SOCKET_IFNAME, else the address the hostname resolves to)."""
    if backend == "nccl":
        return "compare the transport NCCL chose (ncclcheck preflight, NCCL_DEBUG=INFO) with the fast interface"
    return (f"this run used {backend}, which connects on GLOO_SOCKET_IFNAME or else the address the hostname "
            "resolves to: check that it is the fast interface (ncclcheck preflight)")


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def min_busbw(rows: list[BenchRow], cfg: BenchConfig, backend: str = "nccl") -> Optional[CheckResult]:
    """--min-busbw GBPS at the largest size (or --gate-size): each op must reach it. None when no gate is set."""
    need = cfg.min_busbw_gbps
    if need is None:
        return None
    size = cfg.gate_size if cfg.gate_size is not None else max(cfg.sizes)
    at = gate_rows(rows, cfg)
    low, missing, ok = [], [], []
    for op, row in at.items():
        if row is None:
            missing.append(op)
        elif row.busbw_gbps < need:
            low.append(row)
        else:
            ok.append(row)
    ev = {"required_gbps": need, "size": size,
          "measured": {op: (r.busbw_gbps if r else None) for op, r in at.items()}}
    if not low and not missing:
        worst = min(ok, key=lambda r: r.busbw_gbps)
        return passed("bench.min_busbw", f"busbw >= {format_gbps(need)} at {format_size_short(size)} for every op "
                                         f"(lowest {worst.op} {format_gbps(worst.busbw_gbps)})", evidence=ev)
    parts = [f"{r.op} at {format_size_short(size)}: {format_gbps(r.busbw_gbps)} < required {format_gbps(need)}"
             for r in low]
    parts += [f"{op} at {format_size_short(size)}: not measured (the run was cut short or the op was skipped)"
              for op in missing]
    return failed("bench.min_busbw", parts[0] + (f" (+{len(parts) - 1} more)" if len(parts) > 1 else ""),
                  detail="\n".join(parts),
                  fix=f"{_upper_first(transport_hint(backend))}; run `ncclcheck links` to find a slow node or link.",
                  evidence=ev)


def load_baseline(path: str) -> list[BenchRow]:
    """Bench rows of a saved report (schema ncclcheck.report/1). UsageError when unreadable or not such a report."""
    data = load_saved_report(path, f"--baseline {path}")
    if not data.get("bench"):
        made = data.get("command") if isinstance(data.get("command"), str) else None
        what = f"a report of `ncclcheck {made}`" if made else "the report"
        raise UsageError(f"--baseline {path}: {what} holds no bench rows to compare; a bench baseline is a report of "
                         "bench (`ncclcheck bench --save-baseline FILE`)")
    try:
        return [BenchRow.from_json(r) for r in data["bench"]]
    except (KeyError, TypeError) as e:
        raise UsageError(f"--baseline {path}: malformed bench row ({e})") from None


def _key(r: BenchRow) -> tuple:
    return (r.op, r.bytes, r.dtype, bool(r.in_place))


def baseline(rows: list[BenchRow], base_rows: list[BenchRow], tolerance: float, source: str = "",
             backend: str = "nccl") -> CheckResult:
    """Regression gate: busbw per matching (op, bytes, dtype, in_place) must not drop by more than `tolerance`."""
    base = {_key(r): r for r in base_rows}
    regressed, compared, absent = [], [], []
    for r in rows:
        b = base.get(_key(r))
        if b is None:
            absent.append(r)
            continue
        if b.busbw_gbps <= 0:
            continue  # a 1-rank baseline has busbw 0: nothing to compare against
        ratio = r.busbw_gbps / b.busbw_gbps
        compared.append({"op": r.op, "bytes": r.bytes, "dtype": r.dtype, "in_place": r.in_place,
                         "busbw_gbps": r.busbw_gbps, "baseline_gbps": b.busbw_gbps, "ratio": sig(ratio)})
        if ratio < 1.0 - tolerance:
            regressed.append((r, b, ratio))
    ev: dict[str, Any] = {"tolerance": tolerance, "baseline": source, "compared": compared,
                          "absent_in_baseline": [_label(r) for r in absent]}
    note = f"; {count_noun(len(absent), 'row')} absent in the baseline" if absent else ""
    if regressed:
        parts = [f"{_label(r)}: {format_gbps(r.busbw_gbps)} vs baseline {format_gbps(b.busbw_gbps)} "
                 f"({(1 - ratio) * 100:.0f}% slower, tolerance {tolerance * 100:.0f}%)" for r, b, ratio in regressed]
        return failed("bench.baseline", parts[0] + (f" (+{len(parts) - 1} more)" if len(parts) > 1 else ""),
                      detail="\n".join(parts) + note,
                      fix="Something changed since the baseline run: compare versions (ncclcheck preflight); "
                          f"{transport_hint(backend)}; run `ncclcheck links` to find a slow link.",
                      evidence=ev)
    if not compared:
        return warned("bench.baseline", f"no row matches the baseline {source} (same op, size, dtype, placement)"
                      + note, evidence=ev)
    within = f"{count_noun(len(compared), 'row')} within {tolerance * 100:.0f}% of the baseline"
    return passed("bench.baseline", within + note,
                  detail=note.lstrip("; "), evidence=ev)


def unsupported(skips: Iterable[dict]) -> Optional[CheckResult]:
    """(op, dtype, placement) combinations the backend could not run, as one skip result; None when there are none."""
    skips = list(skips)
    if not skips:
        return None
    lines = [f"{s['op']} {s['dtype']}{' in-place' if s.get('in_place') else ''}: {s['reason']}" for s in skips]
    what = count_noun(len(skips), "op/dtype/placement combination")
    return skipped("bench.unsupported", f"{what} not run: {lines[0]}",
                   detail="\n".join(lines), evidence={"skipped": skips})


def evaluate(rows: list[BenchRow], cfg: BenchConfig, skips: Iterable[dict] = (),
             base_rows: Optional[list[BenchRow]] = None, backend: str = "nccl") -> list[CheckResult]:
    """All gates that apply to this run, in report order. Loads --baseline when base_rows is not given."""
    out: list[CheckResult] = []
    if cfg.check:
        out.append(correctness(rows, cfg))
    g = min_busbw(rows, cfg, backend)
    if g:
        out.append(g)
    if cfg.baseline:
        out.append(baseline(rows, base_rows if base_rows is not None else load_baseline(cfg.baseline),
                            cfg.tolerance, cfg.baseline, backend))
    u = unsupported(skips)
    if u:
        out.append(u)
    return out


# ---------------------------------------------------------------------------------------------------------------
# summary and "is this normal?"

# Published nccl-tests all_reduce busbw (NCCL-FACTS.md): single node, 8 GPUs, (ring, NVLS) in GB/s.
_REFERENCE_8GPU = {"H200": (366, 473), "H100": (370, 480)}
# Multi-node, by NIC speed in Gb/s: the busbw such a NIC peaks near.
_REFERENCE_NIC = {200: 24, 400: 48}


def reference_note(op: str, hardware: Optional[dict]) -> Optional[str]:
    """A published reference point for this op on matching hardware, else None (never an invented number).

    hardware: {"gpu_name": "NVIDIA H100 80GB HBM3", "gpus_per_node": 8, "nnodes": 1, "nic_gbit": 400}."""
    if not hardware or op != "all_reduce":
        return None
    name = str(hardware.get("gpu_name") or "").upper()
    nnodes = int(hardware.get("nnodes") or 1)
    if nnodes == 1 and int(hardware.get("gpus_per_node") or 0) == 8:
        for model in ("H200", "H100"):  # H200 first: its names do not contain H100, but keep the order explicit
            if model in name:
                ring, nvls = _REFERENCE_8GPU[model]
                return (f"published 8x{model} all_reduce busbw: ~{ring} GB/s (ring), ~{nvls} GB/s with NVLS "
                        f"(large sizes)")
    nic = hardware.get("nic_gbit")
    if nnodes > 1 and nic in _REFERENCE_NIC:
        return f"a {nic}G NIC peaks near {_REFERENCE_NIC[nic]} GB/s busbw across nodes"
    return None


def summarize(rows: list[BenchRow], hardware: Optional[dict] = None, timing: Optional[dict] = None) -> dict:
    """extra["bench_summary"]: per (op, dtype), busbw at the largest size and latency at the smallest size (and its
    eager figure where the rows were graph-timed).

    Out-of-place rows define the figures; in-place busbw at the largest size is added when measured. `timing`: the
    sweep's result["timing"] (how times were taken, and why a graph was not), said once in the note."""
    groups: dict[tuple, list[BenchRow]] = {}
    for r in rows:
        groups.setdefault((r.op, r.dtype), []).append(r)
    per_op = []
    for (op, dtype), rs in groups.items():
        oop = [r for r in rs if not r.in_place] or rs
        big = max(oop, key=lambda r: r.bytes)
        small = min(oop, key=lambda r: r.bytes)
        entry: dict[str, Any] = {
            "op": op, "dtype": dtype,
            "largest_bytes": big.bytes, "busbw_gbps": big.busbw_gbps, "algbw_gbps": big.algbw_gbps,
            "smallest_bytes": small.bytes, "latency_us": small.time_us,
        }
        if big.extra.get("moves_data") is False:  # its busbw is no bandwidth (bench/runners.moves_data)
            entry["moves_data"] = False
        else:  # one row at the largest size can be the noisiest on a loaded node: the best of every size beside it
            moving = [r for r in oop if r.extra.get("moves_data") is not False]
            best = max(moving, key=lambda r: (r.busbw_gbps, r.bytes)) if moving else big
            if best is not big:
                entry["peak_busbw_gbps"], entry["peak_bytes"] = best.busbw_gbps, best.bytes
        if "eager_time_us" in small.extra:  # what a training step pays per call at the smallest size
            entry["eager_latency_us"] = small.extra["eager_time_us"]
        ip = [r for r in rs if r.in_place and r.bytes == big.bytes]
        if ip and oop is not rs:
            entry["in_place_busbw_gbps"] = ip[0].busbw_gbps
        wrong = [r.wrong for r in rs if r.wrong is not None]
        if wrong:
            entry["wrong"] = sum(wrong)
        ref = reference_note(op, hardware)
        if ref:
            entry["reference"] = ref
        per_op.append(entry)
    note = ("busbw at the largest size (the size the gates judge; the best size's beside it where another size "
            "measured more) and latency at the smallest; small sizes are not averaged in")
    if rows and all(len(r.rank_time_us) == 1 for r in rows):
        note += ("; 1 rank: nothing crosses a link, so busbw is 0 as in nccl-tests (factor (n-1)/n) and algbw is a "
                 "copy on this device; an in-place call (all_reduce, broadcast, reduce, --in-place rows) moves "
                 "nothing on one rank, so its row shows no bandwidth, only the call's cost: run on 2+ GPUs or nodes "
                 "to measure the fabric")
    how = timing_note(timing)
    if how:
        note += f"; {how}"
    return {"per_op": per_op, "note": note}


def outcome(cfg: BenchConfig, rows: list[BenchRow], skips: Iterable[dict] = (), stopped: Optional[dict] = None,
            hardware: Optional[dict] = None, base_rows: Optional[list[BenchRow]] = None, backend: str = "nccl",
            world: Optional[dict] = None, timing: Optional[dict] = None) -> tuple[list[CheckResult], dict, bool]:
    """Everything a bench Report needs beyond the rows: (checks, extra, partial).

    rows: from the job's result (rows_from_result) or, when the world broke, the rows it emitted before that.
    timing: the sweep's result["timing"], said once in the summary's note.
    world: {"nnodes", "backend", "ranks_per_node", "records": the job's emitted records}: each row then gains its
    bound and efficiency (written into the rows) and each op a bench.efficiency check (bench/efficiency.py).
    extra holds "bench_summary" and, when the sweep stopped early, "bench_stopped"."""
    from .efficiency import evaluate as efficiency_checks
    from .efficiency import summarize as summarize_bounds

    checks = evaluate(rows, cfg, skips, base_rows, backend)
    checks.append(coverage_check(cfg, rows, skips, stopped))
    eff_checks, bounds, seen = efficiency_checks(rows, gate_rows(rows, cfg), world, cfg.min_efficiency)
    checks.extend(eff_checks)
    extra: dict[str, Any] = {"bench_summary": summarize(rows, hardware or seen, timing)}
    summarize_bounds(extra["bench_summary"]["per_op"], bounds)
    if stopped:
        extra["bench_stopped"] = stopped
    return checks, extra, bool(stopped)
