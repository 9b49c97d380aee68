"""Each measured row reaches the console the moment it exists, on a pipe as on a terminal (issue 24, item 2), and
what goes into a pipe is plain: no trailing spaces, no wrapped header, no empty columns, each check once."""

from __future__ import annotations

import io

from ncclcheck.agent.relay import StoreObserver, progress_journal, replay
from ncclcheck.model import BenchRow, CheckResult, NodeInfo, Report, Status, WorldInfo
from ncclcheck.render.bench import row_line
from ncclcheck.render.console import make_console, render_report
from ncclcheck.render.progress import LineObserver
from ncclcheck.render.words import SINGLE_FORM
from tests.agent.test_progress_relay import FakeStore


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes: list[str] = []

    def flush(self) -> None:
        self.flushes.append(self.getvalue())


def _row(op="all_reduce", size=1 << 20, in_place=False, **extra) -> dict:
    return BenchRow(op, size, size // 4, "float32", in_place, 150.25, 6.99, 6.99, None, [150.0, 150.25],
                    extra).to_json()


def test_each_row_is_written_and_flushed_as_it_arrives():
    out = CountingStream()
    obs = LineObserver(out)
    obs.start(3, "bench")
    obs.row("bench_row", _row())
    assert out.flushes and "1048576" in out.flushes[-1]  # on its way before the next row exists
    obs.advance()
    obs.row("bench_row", _row(size=2 << 20))
    obs.row("bench_row", _row("all_gather"))
    obs.stop()
    lines = out.getvalue().splitlines()
    assert sum(1 for ln in lines if ln.startswith("all_reduce  type float32")) == 1  # a header per op, once
    assert sum(1 for ln in lines if ln.startswith("all_gather  type float32")) == 1
    assert sum(1 for ln in lines if "150.2" in ln) == 3 and obs.streamed == 3
    assert lines[-1] == "bench: 1 of 3"
    assert all(ln == ln.rstrip() for ln in lines)


def test_links_pairs_stream_too():
    out = io.StringIO()
    obs = LineObserver(out)
    obs.row("links_row", {"round": 0, "a": 0, "b": 1, "gbps_ab": 12.345, "gbps_ba": 11.5, "error": None})
    obs.row("links_row", {"round": 1, "a": 2, "b": 3, "gbps_ab": None, "gbps_ba": None, "error": "node 3 died"})
    assert out.getvalue() == "round 1  0 -> 1 12.35 GB/s, 1 -> 0 11.50 GB/s\nround 2  2 <-> 3  node 3 died\n"


def test_rows_travel_from_a_spawned_rank_0_through_the_store():
    st, out = FakeStore(), io.StringIO()
    StoreObserver(st).row("bench_row", _row())
    replay(progress_journal(st), LineObserver(out))
    assert "1048576" in out.getvalue()


def test_a_single_form_op_says_so_and_a_1g_row_fits_80_columns():
    one = BenchRow.from_json(_row(in_place_call=True))
    assert f" {SINGLE_FORM.word} " in row_line(one)
    big = BenchRow("all_gather", 1 << 30, 1 << 28, "float32", True, 1234567.8, 1234.56, 2469.12, 0, [1.0],
                   {"iter_stats": {"p99_us": 2345678.9, "cv": 0.5, "high_variation": True},
                    "requested_bytes": (1 << 30) + 3})
    assert len(row_line(big)) <= 80 and "1073741824*" in row_line(big) and "50%!" in row_line(big)


def _bench_report() -> Report:
    checks = [CheckResult("bench.coverage", Status.PASS, "every requested op x size was measured (1 of 1)"),
              CheckResult("bench.unsupported", Status.SKIP, "1 op/dtype/placement combination not run")]
    hosts = [NodeInfo(i, f"gpu-node-{i:03d}.cluster.invalid") for i in range(5)]
    return Report("bench", "0", "", world=WorldInfo(5, 10, "gloo", "198.18.0.1:29500"), nodes=hosts, checks=checks,
                  bench=[BenchRow.from_json(_row())], extra={"bench_summary": {"per_op": [{
                      "op": "all_reduce", "dtype": "float32", "largest_bytes": 1 << 20, "busbw_gbps": 6.99,
                      "algbw_gbps": 6.99, "smallest_bytes": 1 << 20, "latency_us": 150.25}]}})


def _piped(report: Report, **kw) -> str:
    buf = io.StringIO()
    term = make_console(buf, {})
    for part in render_report(report, **kw):
        term.print(part)
    return buf.getvalue()


def test_a_piped_report_has_no_trailing_spaces_nor_an_empty_column_and_each_check_once():
    text = _piped(_bench_report())
    lines = text.splitlines()
    assert all(ln == ln.rstrip() for ln in lines), [ln for ln in lines if ln != ln.rstrip()]
    assert "reference" not in text  # no published figure applies: no always-empty column
    assert text.count("bench.coverage") == 1 and text.count("bench.unsupported") == 1
    assert lines[0].startswith("ncclcheck bench 5 nodes, 10 ranks")
    assert lines[0].endswith("gpu-node-003 +1 more]")  # one line
    assert "1048576" in text


def test_rows_already_streamed_are_not_printed_again():
    assert "1048576" in _piped(_bench_report()) and "1048576" not in _piped(_bench_report(), rows_shown=True)


def test_pass_is_listed_above_skip_on_the_console():
    text = _piped(_bench_report())
    assert text.index("pass ") < text.index("skip ")
