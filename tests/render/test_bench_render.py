"""Bench renderers return rich renderables that show nccl-tests' columns, rounding marks and the summary."""

from __future__ import annotations

from rich.console import Console

from ncclcheck.bench.gates import correctness, summarize
from ncclcheck.config import BenchConfig
from ncclcheck.model import BenchRow
from ncclcheck.render import words
from ncclcheck.render.bench import bench_tables, nccl_time, summary_block
from ncclcheck.render.progress import RichObserver


def _text(renderable) -> str:
    c = Console(record=True, width=200, color_system=None)
    c.print(renderable)
    return c.export_text()


def _row(op, size, t, busbw, wrong, in_place=False, **extra):
    return BenchRow(op, size, size // 4, "float32", in_place, t, busbw, busbw, wrong, [t, t], extra)


ROWS = [
    _row("all_reduce", 1024, 12.5, 0.08, 0), _row("all_reduce", 1024, 12.0, 0.09, 0, True),
    _row("all_reduce", 1 << 20, 150.25, 6.99, 0), _row("all_reduce", 1 << 20, 140.0, 7.5, 2, True),
    _row("all_gather", 1048560, 20000.4, 0.05, None, requested_bytes=1 << 20),
]


def test_table_has_nccl_tests_columns_and_values():
    out = _text(bench_tables(ROWS))
    # Issue 15 changed the layout: placement is a column ("out"/"in" rows) and type/redop/root moved to the title.
    for word in ("size", "count", "redop sum", "place", "busbw", "#wrong", "p99", "all_reduce  type float32",
                 "1048576", "150.2", "12.50", "6.99", "sum", "N/A"):
        assert word in out, word
    lines = out.splitlines()
    assert any(" out " in ln and "150.2" in ln for ln in lines) and any(" in " in ln and "140.0" in ln for ln in lines)
    assert "1048560*" in out and "rounded down" in out  # the all_gather row was rounded


def _stats(p99, cv, high=False):
    return {"iters": 20, "p50_us": p99 / 2, "p99_us": p99, "min_us": 1.0, "max_us": p99, "cv": cv,
            "high_variation": high}


def _lines80(renderable) -> list[str]:
    c = Console(record=True, width=80, color_system=None)
    c.print(renderable)
    return c.export_text().splitlines()


def test_80_columns_never_cut_a_number_or_header():
    """The sizes and counts of a 1G sweep, times in the millions of us: every digit on one line at 80 columns."""
    rows = []
    for size in (4, 16777216, 1 << 30):
        for in_place in (False, True):
            rows.append(BenchRow("all_reduce", size, size, "int8", in_place, 1234567.8, 1234.56, 2469.12, 0,
                                 [1.0, 2.0], {"iter_stats": _stats(2345678.9, 0.05)}))
    lines = _lines80(bench_tables(rows))
    text = "\n".join(lines)
    assert "…" not in text and max(len(ln) for ln in lines) <= 80
    for token in ("16777216", "1073741824", "1234568", "2345679", "1234.56", "2469.12", "(elts)", "(GB/s)",
                  "#wrong"):
        assert token in text, token


def test_p99_and_high_variation_are_shown_and_flagged():
    rows = [BenchRow("all_gather", 1 << 20, 1 << 18, "float32", False, 100.0, 1.0, 1.0, None, [100.0, 90.0],
                     {"iter_stats": _stats(950.0, 0.42, True)}),
            BenchRow("all_gather", 2 << 20, 1 << 19, "float32", False, 200.0, 1.0, 1.0, None, [200.0, 190.0],
                     {"iter_stats": _stats(210.0, 0.03)})]
    text = "\n".join(_lines80(bench_tables(rows)))
    assert "950.0" in text and "42%!" in text and "3%" in text and "3%!" not in text
    legend = " ".join(text.split())
    assert words.UNSTEADY_NOTE in legend and legend.count(words.UNSTEADY_MARK + " after var") == 1


def test_rows_without_iteration_stats_render_dashes():
    text = "\n".join(_lines80(bench_tables(ROWS[:1])))
    assert "12.50" in text and " - " in text


def test_nccl_time_format():
    assert (nccl_time(5.123), nccl_time(150.25), nccl_time(20000.4)) == ("5.12", "150.2", "20000")


def test_summary_block_shows_largest_busbw_and_gates():
    s = summarize(ROWS)
    g = correctness(ROWS, BenchConfig(check=True))
    out = _text(summary_block(s, [g], stopped={"detail": "stopped before all_gather at 1G"}))
    assert "6.99 GB/s" in out and "1 MiB" in out and "12.5 us" in out
    assert "FAIL" in out and "bench.correctness" in out and "stopped before all_gather at 1G" in out


def test_progress_observer_runs_without_a_terminal():
    c = Console(record=True, width=100, force_terminal=False)
    obs = RichObserver(console=c)
    obs.start(3, "bench")
    obs.advance("all_reduce 1M")
    obs.advance()
    obs.stop()
    obs.stop()  # idempotent
    obs.advance("after stop is ignored")
