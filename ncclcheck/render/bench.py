"""Bench renderables for rich: the nccl-tests-like table and the summary block. Functions return renderables and
never print; they format numbers and compute nothing (the summary comes from bench/gates.summarize)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import Optional

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..model import BenchRow, CheckResult, Status
from ..units import format_bytes, format_gbps, format_us
from .common import bound_gbps_text, efficiency_captions, efficiency_text
from .words import (
    BYTES,
    COLUMN,
    ELEMENTS,
    GBPS,
    NO_FIGURE,
    NOT_CHECKED,
    NOT_CHECKED_NOTE,
    ROUNDED_MARK,
    ROUNDED_NOTE,
    SINGLE_FORM,
    SINGLE_FORM_LEGEND,
    STATUS_WORD,
    UNSTEADY_MARK,
    UNSTEADY_NOTE,
    US,
    graph_timed,
    moves_no_data,
    placement,
    table_notes,
)

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


def bandwidth_cells(row: BenchRow) -> tuple[str, str]:
    """(algbw, busbw) as nccl-tests prints them, or '-' twice for a call that moved nothing (no bandwidth)."""
    if moves_no_data(row):
        return NO_FIGURE, NO_FIGURE
    return f"{row.algbw_gbps:.2f}", f"{row.busbw_gbps:.2f}"


def eager_cell(row: BenchRow) -> str:
    """The eager figure beside a graph-timed time; '-' on a row whose time is itself eager."""
    return nccl_time(row.extra.get("eager_time_us")) if graph_timed(row) else NO_FIGURE


def _wrong(row: BenchRow) -> Text:
    if row.wrong is None:
        return Text(NOT_CHECKED, style="dim")
    return Text(str(row.wrong), style="bold red" if row.wrong else "green")


def _variation(row: BenchRow) -> tuple[str, Text]:
    """(p99 cell, cv cell): '-' for rows saved before per-iteration timing existed."""
    st = row.extra.get("iter_stats")
    if not isinstance(st, dict):
        return "-", Text("-", style="dim")
    cv = Text(f"{100 * st['cv']:.0f}%")
    if st.get("high_variation"):
        cv.stylize("bold yellow")
        cv.append(UNSTEADY_MARK, style="bold yellow")
    return nccl_time(st["p99_us"]), cv


# (header, justify): two-line headers so that no header is wider than the numbers under it; nccl-tests' type, redop
# and root columns go to the title (one value per table), which is what lets a row fit in 80 columns.
_C = COLUMN
_COLUMNS = ((f"{_C['size']}\n({BYTES})", "right"), (f"{_C['count']}\n({ELEMENTS})", "right"),
            (_C["placement_short"], "left"), (f"{_C['time']}\n({US})", "right"), (f"{_C['p99']}\n({US})", "right"),
            (f"{_C['variation']}\n(cv)", "right"), (f"{_C['algbw']}\n({GBPS})", "right"),
            (f"{_C['busbw']}\n({GBPS})", "right"), (_C["wrong"], "right"))
_EFF_COLUMN = (f"{_C['efficiency']}\n(%bnd)", "right")
_EAGER_COLUMN = (f"{_C['eager']}\n({US})", "right")


def has_bounds(rows: Iterable[BenchRow]) -> bool:
    """Rows saved before bounds existed carry none: their tables keep the old columns."""
    return any("bound_gbps" in r.extra for r in rows)


def _unsteady(row: BenchRow) -> bool:
    return bool((row.extra.get("iter_stats") or {}).get("high_variation"))


def legend(rows: list, said: Optional[set] = None) -> list[str]:
    """The lines under a table that say what its marks mean ('*' after a size, 'single', 'N/A', '!' after var) and
    how its times were taken, each once: `said` holds what earlier tables of the same output already explained."""
    said = set() if said is None else said
    notes: list[str] = []
    marks = ((ROUNDED_NOTE, any(r.extra.get("requested_bytes") is not None for r in rows)),
             (SINGLE_FORM_LEGEND, any(placement(r) is SINGLE_FORM for r in rows)),
             (NOT_CHECKED_NOTE, any(r.wrong is None for r in rows)),
             (UNSTEADY_NOTE, any(_unsteady(r) for r in rows)))
    for note in [text for text, shown in marks if shown] + table_notes(rows):
        if note not in said:
            said.add(note)
            notes.append(note)
    return notes


def bench_table(rows: Iterable[BenchRow], op: str, dtype: str, said: Optional[set] = None) -> Table:
    """One op's sweep, one line per (size, placement), compact enough for an 80-column terminal: size, count,
    placement, mean time (the nccl-tests figure), p99 over iterations, coefficient of variation (flagged with '!'
    when high), algbw, busbw, #wrong. Numbers are never cut: on a terminal narrower than the table a cell folds
    onto a second line instead of ending in an ellipsis. Under it, the legend of its marks (`said`: see legend())."""
    rows = sorted((r for r in rows if r.op == op and r.dtype == dtype), key=lambda r: (r.bytes, bool(r.in_place)))
    title = title_line(op, dtype, rows[0] if rows else None)
    t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False, box=None, padding=(0, 1),
              header_style="bold")
    bounded = has_bounds(rows)
    eager = any(graph_timed(r) for r in rows)
    for name, just in _COLUMNS + ((_EAGER_COLUMN,) if eager else ()) + ((_EFF_COLUMN,) if bounded else ()):
        t.add_column(name, justify=just, overflow="fold")
    for r in rows:
        size_cell = Text(str(r.bytes))
        if r.extra.get("requested_bytes") is not None:
            size_cell.append(ROUNDED_MARK, style="yellow")
        p99, cv = _variation(r)
        cells = [size_cell, str(r.count), place_word(r), nccl_time(r.time_us), p99, cv, *bandwidth_cells(r), _wrong(r)]
        if eager:
            cells.append(eager_cell(r))
        if bounded:
            cells.append(efficiency_text(r.extra.get("efficiency"), r.extra.get("bound_trusted")))
        t.add_row(*cells)
    notes = list(efficiency_captions(rows).values()) if bounded else []
    notes += legend(rows, said)
    if notes:
        t.caption = "\n".join(notes)
        t.caption_justify = "left"
    return t


# Streamed rows (one line each, as it is measured): fixed widths, because the widths of a table computed over all its
# rows are not known until the sweep ends. 78 columns for a 1G sweep with times in the millions of microseconds.
# A graph-timed sweep adds the eager column at the end (87 columns): the figure a training step pays is worth them.
_LINE_COLS = ((10, ">"), (10, ">"), (6, "<"), (9, ">"), (9, ">"), (5, ">"), (8, ">"), (8, ">"), (6, ">"), (8, ">"))
_LINE_HEAD = tuple(zip(*(h.split("\n") if "\n" in h else (h, "") for h, _ in _COLUMNS + (_EAGER_COLUMN,))))


def _fixed(cells) -> str:
    return " ".join(f"{c:{a}{w}}" for c, (w, a) in zip(cells, _LINE_COLS)).rstrip()


def place_word(row: BenchRow) -> str:
    """The placement in a narrow column: words.placement(row).word ('out', 'in', 'single')."""
    return placement(row).word


def title_line(op: str, dtype: str, row: Optional[BenchRow] = None) -> str:
    """nccl-tests' header of one op's table; redop and root come with the rows (older saved rows: by op name)."""
    extra = row.extra if row is not None else {}
    redop, root = extra.get("redop", _SAVED_REDOP.get(op, "none")), extra.get("root", _SAVED_ROOT.get(op, -1))
    return f"{op}  type {dtype}  redop {redop}  root {root}"


def row_line(row: BenchRow, eager: Optional[bool] = None) -> str:
    """One measured row as plain text, the columns of bench_table (the eager column when `eager`, by default when
    the row was graph-timed)."""
    st = row.extra.get("iter_stats")
    p99 = nccl_time(st["p99_us"]) if isinstance(st, dict) else "-"
    cv = (f"{100 * st['cv']:.0f}%" + (UNSTEADY_MARK if st.get("high_variation") else "")) if isinstance(st, dict) \
        else "-"
    size = f"{row.bytes}{ROUNDED_MARK if row.extra.get('requested_bytes') is not None else ''}"
    cells = (size, row.count, place_word(row), nccl_time(row.time_us), p99, cv, *bandwidth_cells(row),
             NOT_CHECKED if row.wrong is None else row.wrong)
    return _fixed(cells + ((eager_cell(row),) if (graph_timed(row) if eager is None else eager) else ()))


def wrap_note(note: str, width: Optional[int]) -> list[str]:
    """A legend line as lines of at most `width` columns, broken between words (a terminal's own wrap splits them),
    its continuations indented under its mark; one line when `width` is None."""
    if width is None or len(note) <= width:
        return [note]
    return textwrap.wrap(note, width=max(20, width), subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)


class RowLines:
    """Streamed bench rows as lines: a title and header whenever the (op, dtype) changes, then one line per row; when
    a table ends (the next begins, or close()), the legend of the marks its rows showed (legend(), each once),
    wrapped to `width` columns (None: one line each). The rows themselves are fixed-width and never wrapped."""

    def __init__(self, width: Optional[int] = None) -> None:
        self.width = width  # the observer sets it to its console's width before each call (a terminal resizes)
        self._key: Optional[tuple] = None
        self._eager = False  # whether this table's header has the eager column (its first row was graph-timed)
        self._rows: list = []  # the current table's rows, for its legend
        self._said: set = set()
        self.count = 0

    def lines(self, row: BenchRow) -> list[str]:
        out = []
        if (row.op, row.dtype) != self._key:
            out += self.close()
            self._key = (row.op, row.dtype)
            self._eager = graph_timed(row)
            head = _LINE_HEAD if self._eager else tuple(h[:-1] for h in _LINE_HEAD)
            out += [title_line(row.op, row.dtype, row), *(_fixed(h) for h in head)]
        out.append(row_line(row, self._eager))
        self._rows.append(row)
        self.count += 1
        return out

    def close(self) -> list[str]:
        """The legend of the table streamed last (nothing when it was said already)."""
        rows, self._rows = self._rows, []
        return [line for note in legend(rows, self._said) for line in wrap_note(note, self.width)]


def bench_tables(rows: Iterable[BenchRow]) -> RenderableType:
    """Every (op, dtype) swept, one table each, in the order they ran."""
    rows = list(rows)
    keys = list(dict.fromkeys((r.op, r.dtype) for r in rows))
    if not keys:
        return Text("no bench rows", style="dim")
    said: set = set()  # each mark explained under the first table that shows it
    return Group(*[bench_table(rows, op, dt, said) for op, dt in keys])


_STATUS_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def summary_block(summary: dict, gates: Iterable[CheckResult] = (), stopped: Optional[dict] = None) -> RenderableType:
    """Per op: busbw at the largest size, latency at the smallest, the published reference where one applies;
    then the gates' verdicts and a note when the sweep was cut short."""
    t = Table(title="bench summary", title_justify="left", show_edge=False, pad_edge=False)
    per_op = summary.get("per_op", [])
    bounded = any("bound_gbps" in e for e in per_op)
    cols = [(_C["op"], "left"), (_C["dtype"], "left"), (_C["busbw"], "right"), ("at", "right"),
            (_C["latency"], "right"), ("at", "right")]
    peak = any("peak_busbw_gbps" in e for e in per_op)
    cols += [("best " + _C["busbw"], "right"), ("at", "right")] if peak else []
    eager = any("eager_latency_us" in e for e in per_op)
    cols += [(_C["eager"], "right")] if eager else []
    cols += [(_C["bound"], "right"), (_C["efficiency"], "right")] if bounded else []
    refs = any(e.get("reference") for e in per_op)  # a published figure applies to few setups: no empty column
    for name, just in cols + ([("reference", "left")] if refs else []):
        t.add_column(name, justify=just, overflow="fold")
    for e in per_op:
        busbw = NO_FIGURE if e.get("moves_data") is False else format_gbps(e["busbw_gbps"])
        cells = [e["op"], e["dtype"], busbw, format_bytes(e["largest_bytes"]),
                 format_us(e["latency_us"]), format_bytes(e["smallest_bytes"])]
        if peak:
            cells += ([format_gbps(e["peak_busbw_gbps"]), format_bytes(e["peak_bytes"])] if "peak_busbw_gbps" in e
                      else ["(largest)", ""])
        if eager:
            cells.append(format_us(e.get("eager_latency_us")))
        if bounded:
            b = e.get("bound_gbps")
            cells += [bound_gbps_text(b), efficiency_text(e.get("efficiency"), e.get("bound_trusted"))]
        t.add_row(*cells, *([e.get("reference", "")] if refs else []))
    parts: list[RenderableType] = [t]
    for e in per_op:
        if e.get("bound_by"):
            parts.append(Text(f"{e['op']} bound: {e['bound_by']}", style="dim"))
    if summary.get("note"):
        parts.append(Text(summary["note"], style="dim"))
    for g in gates:
        line = Text(f"{STATUS_WORD[g.status]:5} ", style=_STATUS_STYLE.get(g.status, ""))
        line.append(f"{g.id}: {g.summary}")
        parts.append(line)
    if stopped:
        parts.append(Text(f"partial: {stopped.get('detail') or stopped.get('reason')}", style="yellow"))
    return Group(*parts)


