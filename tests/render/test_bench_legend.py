"""Every mark a bench table shows is explained under it, once (issue 53, item 7: `74%!`, `single` and `N/A` were
unexplained, in the rows streamed as they are measured as in the table of a saved run)."""

from __future__ import annotations

import io

from rich.console import Console

from ncclcheck.model import BenchRow
from ncclcheck.render import words
from ncclcheck.render.bench import RowLines, bench_tables, legend
from ncclcheck.render.progress import LineObserver


def _stats(cv: float, high: bool) -> dict:
    return {"iters": 20, "p50_us": 100.0, "p99_us": 180.0, "min_us": 90.0, "max_us": 190.0, "cv": cv,
            "high_variation": high}


def _row(op: str, size: int, *, unsteady=False, wrong=None, single=False, rounded=False) -> BenchRow:
    extra = {"iter_stats": _stats(0.42 if unsteady else 0.03, unsteady)}
    if single:
        extra["in_place_call"] = True
    if rounded:
        extra["requested_bytes"] = size + 3
    return BenchRow(op, size, size // 4, "float32", False, 100.0, 1.0, 1.0, wrong, [100.0, 90.0], extra)


ALL_MARKS = [_row("all_reduce", 1 << 20, unsteady=True, single=True, rounded=True),
             _row("all_reduce", 2 << 20, single=True)]
NOTES = (words.UNSTEADY_NOTE, words.SINGLE_FORM_LEGEND, words.NOT_CHECKED_NOTE, words.ROUNDED_NOTE)


def _text(renderable) -> str:
    c = Console(width=100, file=io.StringIO(), record=True)
    c.print(renderable)
    return " ".join(c.export_text().split())


def test_each_mark_shown_is_explained_and_none_that_is_not():
    text = _text(bench_tables(ALL_MARKS))
    assert "42%!" in text and " single " in text and " N/A" in text and f"{1 << 20}*" in text
    for note in NOTES:
        assert note in text
    plain = [_row("all_gather", 1 << 20, wrong=0)]  # checked, steady, out of place, as asked
    assert legend(plain) == [] and not any(note in _text(bench_tables(plain)) for note in NOTES)


def test_streamed_tables_carry_each_note_once_under_the_first_table_that_needs_it():
    lines, out = RowLines(), []
    for r in ALL_MARKS + [_row("all_gather", 1 << 20, unsteady=True), _row("all_gather", 2 << 20, wrong=0)]:
        out += lines.lines(r)
    out += lines.close()
    gather = next(i for i, line in enumerate(out) if line.startswith("all_gather"))
    for note in NOTES:  # all under the all_reduce table, none repeated under all_gather's
        assert out.count(note) == 1 and out.index(note) < gather
    assert lines.close() == []


def test_a_pipe_gets_the_legend_before_the_phase_line():
    buf = io.StringIO()
    obs = LineObserver(buf)
    obs.start(2, "bench")
    for r in ALL_MARKS:
        obs.row("bench_row", r.to_json())
        obs.advance()
    obs.stop()
    lines = buf.getvalue().splitlines()
    assert lines[-1] == "bench: 2 of 2" and set(NOTES) <= set(lines[:-1])
