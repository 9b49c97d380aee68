"""Which figure a bench row's time is (issue 35): the CUDA-graph path on a fake CUDA API, the row built from it, the
rows that move no data, what every renderer shows for them, and --timing at the CLI."""

from __future__ import annotations

import io
import json
from html import escape

import pytest

from ncclcheck.bench import timing as tm
from ncclcheck.bench.collectives import NO_GRAPH, _build_row
from ncclcheck.bench.gates import summarize
from ncclcheck.bench.ops import coll_counts
from ncclcheck.model import BenchRow, Report, WorldInfo
from ncclcheck.options import build_parser
from ncclcheck.render import console
from ncclcheck.render.bench import RowLines
from ncclcheck.render.html import render_html
from ncclcheck.render.markdown import render_markdown
from ncclcheck.render.prometheus import render_prometheus
from ncclcheck.render.words import COLUMN, GRAPH_CAPTION, NO_DATA_NOTE
from tests.bench.fake_cuda import fake_api
from tests.conftest import run_cli

MIB = 1 << 20


def test_one_replay_of_the_captured_calls_is_timed_per_call_after_an_untimed_one():
    calls = [0]
    api, clock = fake_api(per_call_us=1.5, counter=lambda: calls[0])
    graph = tm.capture([lambda: calls.__setitem__(0, calls[0] + 1)], 50, api)
    aligned = []
    us = tm.replay_us(graph, 50, api, lambda: aligned.append(clock.replays))
    assert clock.captured == [50]
    assert us == pytest.approx(1.5)
    # the barrier comes after the untimed replay (the graph's upload) and before the timed one
    assert aligned == [1] and clock.replays == 2


def test_the_captured_calls_take_the_buffer_copies_in_turn():
    seen = []
    api, clock = fake_api(per_call_us=1.0, counter=lambda: len(seen))
    tm.capture([lambda k=k: seen.append(k) for k in range(3)], 7, api)
    assert seen == [0, 1, 2, 0, 1, 2, 0] and clock.captured == [7]


@pytest.mark.parametrize("size, largest, iters, device, copies", [
    (MIB, 1024 * MIB, 50, "cuda:0", 50),  # nccl-tests' offsets over 1 GiB: as many as the iterations touch
    (MIB, 8 * MIB, 50, "cuda:0", 8),  # never more memory than the largest size holds
    (1024 * MIB, 1024 * MIB, 50, "cuda:0", 1),
    (3 * MIB, 4 * MIB, 50, "cuda:1", 1),
    (MIB, 1024 * MIB, 50, "cpu", 1),  # gloo: the socket's figure, no copies
])
def test_buffer_copies_follow_nccl_tests_offsets_on_gpus_only(size, largest, iters, device, copies):
    from ncclcheck.bench.runners import copies_for

    assert copies_for(size, largest, iters, device) == copies


def test_a_capture_that_raises_says_why_in_one_line():
    api, _ = fake_api(fail_on_ranks=(0,), rank=0)
    with pytest.raises(tm.CaptureFailed, match=r"^RuntimeError: CUDA error: operation not permitted") as e:
        tm.capture([lambda: None], 3, api)
    assert "\n" not in str(e.value)


def test_graphs_need_nccl_on_a_gpu_and_graph_is_refused_elsewhere():
    assert tm.graph_unavailable("nccl", "cuda:0") is None
    assert "CUDA graphs need NCCL on a GPU; this run used gloo on cpu" == tm.graph_unavailable("gloo", "cpu")
    assert tm.refusal("graph", "gloo", "cpu").startswith("--timing graph: CUDA graphs need NCCL")
    assert tm.refusal("auto", "gloo", "cpu") is None and tm.refusal("graph", "nccl", "cuda:1") is None


def _per_rank(eager_us, graph_us):
    return [[e, 0.0, 0.0, 0.0, 0.0, g] for e, g in zip(eager_us, graph_us)]


def test_a_graph_timed_row_gates_on_the_replay_and_keeps_the_eager_figure():
    counts = coll_counts("all_gather", 8 * MIB, "float32", 2)
    row = _build_row("all_gather", "float32", False, counts, _per_rank([33.0, 31.0], [8.0, 8.75]), False, 2)
    assert row.time_us == 8.75 and row.rank_time_us == [8.0, 8.75]  # the slowest rank's replay
    assert row.extra["timing"] == "graph"
    assert row.extra["eager_time_us"] == 33.0 and row.extra["eager_overhead_us"] == pytest.approx(24.25)
    assert row.algbw_gbps == pytest.approx(8 * MIB / 8.75e-6 / 1e9, rel=1e-3)


def test_without_a_graph_the_row_is_the_eager_loop_as_before():
    counts = coll_counts("all_gather", 8 * MIB, "float32", 2)
    row = _build_row("all_gather", "float32", False, counts, _per_rank([33.0, 31.0], [8.0, NO_GRAPH]), False, 2)
    assert row.time_us == 33.0 and row.extra["timing"] == "eager"
    assert "eager_time_us" not in row.extra and "moves_data" not in row.extra


@pytest.mark.parametrize("op, in_place", [("all_reduce", False), ("broadcast", False), ("reduce", False),
                                          ("all_gather", True), ("reduce_scatter", True)])
def test_a_call_that_moves_nothing_shows_no_bandwidth(op, in_place):
    counts = coll_counts(op, 1 << 30, "float32", 1)
    row = _build_row(op, "float32", in_place, counts, _per_rank([29.5], [1.2]), False, 1)
    assert row.extra["moves_data"] is False
    assert row.algbw_gbps == 0 and row.busbw_gbps == 0 and row.time_us == 1.2


def test_one_rank_copies_still_have_a_bandwidth():
    counts = coll_counts("all_gather", 1 << 30, "float32", 1)
    row = _build_row("all_gather", "float32", False, counts, _per_rank([716.0], [713.0]), False, 1)
    assert "moves_data" not in row.extra and row.algbw_gbps > 1000


def _rows() -> list[BenchRow]:
    one = lambda op, size, ip: coll_counts(op, size, "float32", 1)  # noqa: E731
    return [
        _build_row("all_reduce", "float32", False, one("all_reduce", MIB, False), _per_rank([30.06], [1.53]), False,
                   1),
        _build_row("all_gather", "float32", False, one("all_gather", MIB, False), _per_rank([30.06], [6.31]), False,
                   1),
        _build_row("all_gather", "float32", False, one("all_gather", 64 * MIB, False), _per_rank([48.13], [48.08]),
                   False, 1),
    ]


def _report(rows) -> Report:
    rep = Report(command="bench", version="0", started="now", world=WorldInfo(world_size=1, backend="nccl"),
                 bench=rows)
    rep.extra["bench_summary"] = summarize(rows, timing={"requested": "auto", "eager_why": None, "no_graph": []})
    return rep


def _console(rep: Report) -> str:
    buf = io.StringIO()
    term = console.make_console(buf, {}, width=400)
    for part in console.render_report(rep):
        term.print(part)
    return buf.getvalue()


def test_every_format_shows_the_eager_figure_and_no_bandwidth_for_a_no_op(validate_report):
    rep = _report(_rows())
    validate_report(rep.to_dict())
    text = _console(rep)
    [line] = [ln for ln in text.splitlines() if ln.split()[:1] == ["1048576"] and "single" in ln]
    cells = line.split()
    assert cells[3] == "1.53" and cells[6:8] == ["-", "-"] and cells[-1] == "30.06"  # time, algbw, busbw, eager
    flat = " ".join(text.split())  # captions wrap at the table's width
    assert GRAPH_CAPTION in flat and NO_DATA_NOTE in flat
    assert "CUDA-graph replays" in flat  # the summary's one sentence on how times were taken
    [summary_ar] = [ln for ln in text.splitlines() if ln.startswith("all_reduce ") and "│" in ln]
    assert summary_ar.split("│")[2].strip() == "-"  # no busbw for the no-op, and its eager latency beside
    assert summary_ar.split("│")[-1].strip() == "30.1 us"
    md = render_markdown(rep)
    head = next(ln for ln in md.splitlines() if ln.startswith(f"| {COLUMN['op']} |"))
    assert f"| {COLUMN['eager']} |" in head
    [ar] = [ln for ln in md.splitlines() if ln.startswith("| all\\_reduce |") or ln.startswith("| all_reduce |")]
    assert "| - | - |" in ar and "30.1 us" in ar
    html = render_html(rep)
    assert f"<th class=\"num\">{COLUMN['eager']}</th>" in html and escape(NO_DATA_NOTE) in html
    prom = render_prometheus(rep)
    assert 'bench_algbw_bytes_per_second{op="all_reduce"' not in prom  # no sample rather than a false one
    assert 'bench_algbw_bytes_per_second{op="all_gather"' in prom
    assert 'bench_eager_time_seconds{op="all_reduce"' in prom


def test_streamed_lines_carry_the_eager_column_when_the_table_is_graph_timed():
    lines = RowLines()
    out = lines.lines(_rows()[1])
    assert out[1].split()[-1] == COLUMN["eager"] and out[-1].split()[-1] == "30.06"
    eager_row = BenchRow.from_json({**_rows()[1].to_json(), "timing": "eager", "op": "reduce_scatter"})
    eager_row.extra.pop("eager_time_us")
    out = lines.lines(eager_row)
    title = next(i for i, line in enumerate(out) if line.startswith("reduce_scatter"))  # after the legend above
    assert COLUMN["eager"] not in out[title + 1].split() and out[-1].split()[-1] != "30.06"


def test_timing_choices_come_from_the_one_table():
    sub = next(a for a in build_parser()._subparsers._group_actions[0].choices["bench"]._actions
               if "--timing" in a.option_strings)
    assert list(sub.choices) == list(tm.TIMINGS)
    for mode in tm.TIMINGS:
        assert mode in sub.help


@pytest.mark.parametrize("args, says", [
    (["--timing", "graph", "--backend", "gloo"], "--timing graph: CUDA graphs need NCCL on a GPU"),
    (["--timing", "fabric"], "invalid choice: 'fabric'"),
])
def test_timing_the_backend_cannot_give_is_a_one_line_usage_error(args, says):
    p = run_cli("bench", "--sizes", "64K", *args, "--json", "-")
    assert p.returncode == 2, p.stderr
    assert says in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not p.stdout.strip() or json.loads(p.stdout)["exit_code"] == 2
