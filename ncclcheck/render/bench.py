"""Bench renderables for rich: the nccl-tests-like table and the summary block. Functions return renderables and
never print; they format numbers and compute nothing (the summary comes from bench/gates.summarize)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..model import BenchRow, CheckResult, Status
from ..units import format_bytes, format_gbps, format_us

# Rows carry nccl-tests' redop and root columns (bench/ops.py's table); these name them for reports saved before
# rows did, so a new collective needs no entry here.
_SAVED_REDOP = {"all_reduce": "sum", "reduce_scatter": "sum", "reduce": "sum"}
_SAVED_ROOT = {"broadcast": 0, "reduce": 0}


def nccl_time(us: Optional[float]) -> str:
    """Microseconds the way nccl-tests prints them: 3 significant-ish digits."""
    if us is None:
        return "-"
    if us > 10000:
        return f"{us:.0f}"
    if us > 100:
        return f"{us:.1f}"
    return f"{us:.2f}"


def _wrong(row: BenchRow) -> Text:
    if row.wrong is None:
        return Text("N/A", style="dim")
    return Text(str(row.wrong), style="bold red" if row.wrong else "green")


def _variation(row: BenchRow) -> tuple[str, Text]:
    """(p99 cell, cv cell): '-' for rows saved before per-iteration timing existed."""
    st = row.extra.get("iter_stats")
    if not isinstance(st, dict):
        return "-", Text("-", style="dim")
    cv = Text(f"{100 * st['cv']:.0f}%")
    if st.get("high_variation"):
        cv.stylize("bold yellow")
        cv.append("!", style="bold yellow")
    return nccl_time(st["p99_us"]), cv


# (header, justify): two-line headers so that no header is wider than the numbers under it; nccl-tests' type, redop
# and root columns go to the title (one value per table), which is what lets a row fit in 80 columns.
_COLUMNS = (("size\n(B)", "right"), ("count\n(elts)", "right"), ("place", "left"), ("time\n(us)", "right"),
            ("p99\n(us)", "right"), ("var\n(cv)", "right"), ("algbw\n(GB/s)", "right"), ("busbw\n(GB/s)", "right"),
            ("#wrong", "right"))


def bench_table(rows: Iterable[BenchRow], op: str, dtype: str) -> Table:
    """One op's sweep, one line per (size, placement), compact enough for an 80-column terminal: size, count,
    placement, mean time (the nccl-tests figure), p99 over iterations, coefficient of variation (flagged with '!'
    when high), algbw, busbw, #wrong. Numbers are never cut: on a terminal narrower than the table a cell folds
    onto a second line instead of ending in an ellipsis."""
    rows = sorted((r for r in rows if r.op == op and r.dtype == dtype), key=lambda r: (r.bytes, bool(r.in_place)))
    first = rows[0].extra if rows else {}
    redop, root = first.get("redop", _SAVED_REDOP.get(op, "none")), first.get("root", _SAVED_ROOT.get(op, -1))
    title = f"{op}  type {dtype}  redop {redop}  root {root}"
    t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False, box=None, padding=(0, 1),
              header_style="bold")
    for name, just in _COLUMNS:
        t.add_column(name, justify=just, overflow="fold")
    for r in rows:
        size_cell = Text(str(r.bytes))
        if r.extra.get("requested_bytes") is not None:
            size_cell.append("*", style="yellow")
        p99, cv = _variation(r)
        t.add_row(size_cell, str(r.count), "in" if r.in_place else "out", nccl_time(r.time_us), p99, cv,
                  f"{r.algbw_gbps:.2f}", f"{r.busbw_gbps:.2f}", _wrong(r))
    notes = []
    if any(r.extra.get("requested_bytes") is not None for r in rows):
        notes.append("* rounded down from the requested size as nccl-tests does (per-rank chunks of 16 bytes)")
    if any((r.extra.get("iter_stats") or {}).get("high_variation") for r in rows):
        notes.append("! iteration times vary a lot: p99 is far from the mean; look for other jobs, CPU contention "
                     "or a flapping link")
    if notes:
        t.caption = "\n".join(notes)
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


