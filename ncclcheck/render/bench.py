"""Bench renderables for rich: the nccl-tests-like table and the summary block. Functions return renderables and
never print; they format numbers and compute nothing (the summary comes from bench/gates.summarize)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..model import BenchRow, CheckResult, Status
from ..units import format_bytes, format_gbps, format_size_short, format_us

_REDOP = {"all_reduce": "sum", "reduce_scatter": "sum", "reduce": "sum"}
_ROOT = {"broadcast": "0", "reduce": "0"}


def nccl_time(us: Optional[float]) -> str:
    """Microseconds the way nccl-tests prints them: 3 significant-ish digits."""
    if us is None:
        return "-"
    if us > 10000:
        return f"{us:.0f}"
    if us > 100:
        return f"{us:.1f}"
    return f"{us:.2f}"


def _wrong(row: Optional[BenchRow]) -> Text:
    if row is None:
        return Text("")
    if row.wrong is None:
        return Text("N/A", style="dim")
    return Text(str(row.wrong), style="bold red" if row.wrong else "green")


def _cells(row: Optional[BenchRow]) -> list:
    if row is None:
        return ["", "", "", ""]
    return [nccl_time(row.time_us), f"{row.algbw_gbps:.2f}", f"{row.busbw_gbps:.2f}", _wrong(row)]


def bench_table(rows: Iterable[BenchRow], op: str, dtype: str) -> Table:
    """One op's sweep: size, count, type, redop, root, then time/algbw/busbw/#wrong out-of-place and in-place."""
    rows = [r for r in rows if r.op == op and r.dtype == dtype]
    by_size: dict[int, dict[bool, BenchRow]] = {}
    for r in rows:
        by_size.setdefault(r.bytes, {})[bool(r.in_place)] = r
    has_ip = any(True in v for v in by_size.values())
    t = Table(title=f"{op} ({dtype})", title_justify="left", show_edge=False, pad_edge=False)
    for name in ("size (B)", "count (elements)", "type", "redop", "root"):
        t.add_column(name, justify="right" if name.startswith(("size", "count", "root")) else "left")
    for place in ("out-of-place",) + (("in-place",) if has_ip else ()):
        t.add_column(f"{place}\ntime (us)", justify="right")
        t.add_column("algbw\n(GB/s)", justify="right")
        t.add_column("busbw\n(GB/s)", justify="right")
        t.add_column("#wrong", justify="right")
    for size in sorted(by_size):
        pair = by_size[size]
        any_row = pair.get(False) or pair.get(True)
        size_cell = Text(str(size))
        req = any_row.extra.get("requested_bytes")
        if req is not None:
            size_cell.append("*", style="yellow")
        cells: list = [size_cell, str(any_row.count), dtype, _REDOP.get(op, "none"), _ROOT.get(op, "-1")]
        cells += _cells(pair.get(False))
        if has_ip:
            cells += _cells(pair.get(True))
        t.add_row(*cells)
    if any(r.extra.get("requested_bytes") is not None for r in rows):
        t.caption = "* rounded down from the requested size as nccl-tests does (per-rank chunks of 16 bytes)"
        t.caption_justify = "left"
    return t


def bench_tables(rows: Iterable[BenchRow]) -> RenderableType:
    """Every (op, dtype) swept, one table each, in the order they ran."""
    rows = list(rows)
    keys = list(dict.fromkeys((r.op, r.dtype) for r in rows))
    if not keys:
        return Text("no bench rows", style="dim")
    return Group(*[bench_table(rows, op, dt) for op, dt in keys])


_STATUS_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def summary_block(summary: dict, gates: Iterable[CheckResult] = (), stopped: Optional[dict] = None) -> RenderableType:
    """Per op: busbw at the largest size, latency at the smallest, the published reference where one applies;
    then the gates' verdicts and a note when the sweep was cut short."""
    t = Table(title="bench summary", title_justify="left", show_edge=False, pad_edge=False)
    for name, just in (("op", "left"), ("type", "left"), ("busbw", "right"), ("at", "right"),
                       ("latency", "right"), ("at", "right"), ("reference", "left")):
        t.add_column(name, justify=just)
    for e in summary.get("per_op", []):
        t.add_row(e["op"], e["dtype"], format_gbps(e["busbw_gbps"]), format_bytes(e["largest_bytes"]),
                  format_us(e["latency_us"]), format_bytes(e["smallest_bytes"]), e.get("reference", ""))
    parts: list[RenderableType] = [t]
    if summary.get("note"):
        parts.append(Text(summary["note"], style="dim"))
    for g in gates:
        line = Text(f"{g.status.value.upper():5} ", style=_STATUS_STYLE.get(g.status, ""))
        line.append(f"{g.id}: {g.summary}")
        parts.append(line)
    if stopped:
        parts.append(Text(f"partial: {stopped.get('detail') or stopped.get('reason')}", style="yellow"))
    return Group(*parts)


def row_line(row: BenchRow) -> str:
    """One row as a single plain line (progress labels, logs)."""
    place = " in-place" if row.in_place else ""
    return (f"{row.op} {format_size_short(row.bytes)} {row.dtype}{place}: {nccl_time(row.time_us)} us, "
            f"busbw {format_gbps(row.busbw_gbps)}")
