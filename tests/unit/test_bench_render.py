"""Bench renderers return rich renderables that show nccl-tests' columns, rounding marks and the summary."""

from __future__ import annotations

from rich.console import Console

from ncclcheck.bench.gates import correctness, summarize
from ncclcheck.config import BenchConfig
from ncclcheck.model import BenchRow
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
    for word in ("size (B)", "count (elements)", "redop", "out-of-place", "in-place", "busbw", "#wrong",
                 "all_reduce (float32)", "1048576", "150.2", "12.50", "6.99", "sum", "N/A"):
        assert word in out, word
    assert "1048560*" in out and "rounded down" in out  # the all_gather row was rounded


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
