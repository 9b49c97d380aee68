"""Gates pass and fail as a CI user expects, naming op and size; the summary never averages small sizes in."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest

from ncclcheck.bench.gates import (
    baseline,
    correctness,
    evaluate,
    load_baseline,
    min_busbw,
    reference_note,
    summarize,
    unsupported,
)
from ncclcheck.config import BenchConfig
from ncclcheck.errors import UsageError
from ncclcheck.model import BenchRow, Report, Status, WorldInfo

M = 1 << 20


def row(op="all_reduce", size=M, busbw=10.0, time_us=100.0, wrong=0, in_place=False, dtype="float32", **extra):
    return BenchRow(op=op, bytes=size, count=size // 4, dtype=dtype, in_place=in_place, time_us=time_us,
                    algbw_gbps=busbw / 2, busbw_gbps=busbw, wrong=wrong, rank_time_us=[time_us, time_us * 0.9],
                    extra=extra)


CFG = BenchConfig(sizes=(1024, M, 64 * M), ops=("all_reduce", "all_gather"), check=True)
ROWS = [row(size=1024, busbw=0.1, time_us=20.0), row(size=M, busbw=5.0), row(size=64 * M, busbw=40.0),
        row("all_gather", 1024, 0.1, 25.0), row("all_gather", M, 4.0), row("all_gather", 64 * M, 30.0)]


def test_correctness_passes_on_exact_rows_and_fails_naming_op_size_dtype():
    assert correctness(ROWS, CFG).status is Status.PASS
    bad = ROWS + [row("all_gather", M, wrong=7, in_place=True, rank_wrong=[0, 7])]
    r = correctness(bad, CFG)
    assert r.status is Status.FAIL
    assert "all_gather 1M float32 in-place: 7 wrong elements" in r.summary
    assert "per rank [0, 7]" in r.detail
    assert correctness(ROWS, BenchConfig(check=False)).status is Status.SKIP


def test_min_busbw_at_largest_size():
    assert min_busbw(ROWS, CFG) is None
    ok = min_busbw(ROWS, BenchConfig(**{**CFG.__dict__, "min_busbw_gbps": 25.0}))
    assert ok.status is Status.PASS
    r = min_busbw(ROWS, BenchConfig(**{**CFG.__dict__, "min_busbw_gbps": 35.0}))
    assert r.status is Status.FAIL
    assert r.summary == "all_gather at 64M: 30.00 GB/s < required 35.00 GB/s"
    assert r.evidence["measured"] == {"all_reduce": 40.0, "all_gather": 30.0}


def test_min_busbw_at_gate_size_and_rounded_rows():
    cfg = BenchConfig(**{**CFG.__dict__, "min_busbw_gbps": 4.5, "gate_size": M})
    r = min_busbw(ROWS, cfg)
    assert r.status is Status.FAIL and "all_gather at 1M: 4.00 GB/s" in r.summary
    # a row rounded by nccl-tests' rule still answers for the size the user asked for
    rounded = [row("all_gather", M - 48, 9.0, requested_bytes=M), row(size=M, busbw=9.0)]
    assert min_busbw(rounded, cfg).status is Status.PASS


def test_min_busbw_fails_when_gate_size_was_never_measured():
    cfg = BenchConfig(**{**CFG.__dict__, "min_busbw_gbps": 1.0})
    r = min_busbw([x for x in ROWS if x.bytes < 64 * M], cfg)
    assert r.status is Status.FAIL and "not measured" in r.summary


def test_baseline_regression_names_op_and_size():
    base = [row(size=M, busbw=5.0), row(size=64 * M, busbw=50.0), row("all_gather", 64 * M, 30.0)]
    r = baseline(ROWS, base, 0.1, "old.json")
    assert r.status is Status.FAIL
    assert r.summary.startswith("all_reduce 64M float32: 40.00 GB/s vs baseline 50.00 GB/s (20% slower")
    assert len(r.evidence["absent_in_baseline"]) == 3  # 1024 B for both ops, all_gather 1M
    assert "3 rows absent in the baseline" in r.detail
    assert baseline(ROWS, base, 0.25, "old.json").status is Status.PASS
    # nothing comparable: warn, not pass
    assert baseline(ROWS, [row("broadcast")], 0.1).status is Status.WARN


def _report(rows, status_checks=()):
    rep = Report(command="bench", version="0.0", started="2026-01-01T00:00:00Z",
                 world=WorldInfo(world_size=2, backend="gloo"), checks=list(status_checks), bench=rows)
    rep.extra["bench_summary"] = summarize(rows)
    return rep


def test_load_baseline_reads_a_saved_report(tmp_path):
    p = tmp_path / "run.json"
    p.write_text(json.dumps(_report(ROWS).to_dict()))
    got = load_baseline(str(p))
    assert [(r.op, r.bytes, r.busbw_gbps) for r in got] == [(r.op, r.bytes, r.busbw_gbps) for r in ROWS]
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "other"}')
    with pytest.raises(UsageError, match="not an ncclcheck report"):
        load_baseline(str(bad))
    with pytest.raises(UsageError, match="cannot read"):
        load_baseline(str(tmp_path / "missing.json"))


def test_evaluate_collects_the_gates_that_apply(tmp_path):
    p = tmp_path / "run.json"
    p.write_text(json.dumps(_report(ROWS).to_dict()))
    cfg = BenchConfig(**{**CFG.__dict__, "min_busbw_gbps": 1.0, "baseline": str(p)})
    skips = [{"op": "all_to_all", "dtype": "float32", "in_place": True, "reason": "no in-place form"}]
    got = evaluate(ROWS, cfg, skips)
    assert [c.id for c in got] == ["bench.correctness", "bench.min_busbw", "bench.baseline", "bench.unsupported"]
    assert [c.status for c in got] == [Status.PASS, Status.PASS, Status.PASS, Status.SKIP]
    assert unsupported([]) is None


def test_summary_uses_largest_and_smallest_sizes_only():
    s = summarize(ROWS + [row(size=64 * M, busbw=45.0, in_place=True)])
    ar = next(e for e in s["per_op"] if e["op"] == "all_reduce")
    assert (ar["largest_bytes"], ar["busbw_gbps"], ar["in_place_busbw_gbps"]) == (64 * M, 40.0, 45.0)
    assert (ar["smallest_bytes"], ar["latency_us"]) == (1024, 20.0)
    assert "not averaged" in s["note"]


def test_reference_note_only_for_matching_hardware():
    h100 = {"gpu_name": "NVIDIA H100 80GB HBM3", "gpus_per_node": 8, "nnodes": 1}
    assert "~370 GB/s" in reference_note("all_reduce", h100)
    assert "~366 GB/s" in reference_note("all_reduce", {**h100, "gpu_name": "NVIDIA H200"})
    assert reference_note("all_gather", h100) is None
    assert reference_note("all_reduce", {**h100, "gpus_per_node": 4}) is None
    assert reference_note("all_reduce", {"gpu_name": "NVIDIA A100", "gpus_per_node": 8}) is None
    assert "48 GB/s" in reference_note("all_reduce", {"nnodes": 2, "nic_gbit": 400})
    assert reference_note("all_reduce", None) is None


def test_report_with_bench_rows_validates_against_the_schema():
    from importlib import resources

    schema = json.loads(resources.files("ncclcheck").joinpath("schema/report-1.schema.json").read_text())
    rows = ROWS + [row("sendrecv", M, 3.0, wrong=None, requested_bytes=M + 3,
                       arrival={"barrier_wait_us": [1.0, 2.0], "start_offset_us": [0.1, 0.1],
                                "wall_start_s": [1.7e9, 1.7e9]})]
    checks = evaluate(rows, BenchConfig(**{**CFG.__dict__, "min_busbw_gbps": 100.0}))
    doc = _report(rows, checks).to_dict()
    jsonschema.validate(doc, schema)
    assert doc["status"] == "fail" and doc["exit_code"] == 1


def test_outcome_marks_a_stopped_sweep_partial():
    from ncclcheck.bench.gates import outcome

    stopped = {"reason": "deadline", "op": "all_gather", "bytes": 64 * M, "detail": "stopped before all_gather"}
    checks, extra, partial = outcome(BenchConfig(**{**CFG.__dict__, "min_busbw_gbps": 1.0}), ROWS[:4], [], stopped)
    assert partial and extra["bench_stopped"] == stopped
    # issue 13: a run cut short also says what it did not measure (bench.coverage), failing when a gate is lost
    assert [c.id for c in checks] == ["bench.correctness", "bench.min_busbw", "bench.coverage"]
    assert checks[1].status is Status.FAIL and "all_gather at 64M: not measured" in checks[1].summary
    cov = checks[2]
    assert cov.status is Status.FAIL and "2 of 6" in cov.summary
    assert [(m["op"], m["bytes"]) for m in cov.evidence["not_measured"]] == [("all_gather", M), ("all_gather", 64 * M)]
    assert all("stopped at all_gather 64M: deadline" in m["reason"] for m in cov.evidence["not_measured"])


def test_cut_short_without_a_gate_warns_and_every_renderer_lists_what_was_not_measured():
    from ncclcheck.bench.gates import outcome
    from ncclcheck.render.html import render_html
    from ncclcheck.render.junit import render_junit
    from ncclcheck.render.markdown import render_markdown

    stopped = {"reason": "hang", "op": "all_gather", "bytes": 64 * M, "ranks_absent": [1],
               "detail": "all_gather at 64M did not complete within --timeout 5 s; rank(s) 1 never arrived"}
    checks, extra, partial = outcome(CFG, ROWS[:5], [], stopped)
    cov = [c for c in checks if c.id == "bench.coverage"][0]
    assert cov.status is Status.WARN and "rank(s) 1 never arrived" in cov.detail
    rep = dataclasses.replace(_report(ROWS[:5], checks), partial=partial)
    assert rep.status is not Status.PASS and rep.to_dict()["status"] == "warn"
    md = render_markdown(rep)
    assert "### Not measured" in md and "gather 64M: the run stopped at all" in md and "64M: hang" in md
    assert "all_gather 64M: the run stopped at all_gather 64M: hang" in render_html(rep)
    junit = render_junit(rep)
    assert 'name="bench.measure[all_gather 64M]"' in junit and "not measured: the run stopped" in junit


def test_a_complete_sweep_passes_coverage():
    from ncclcheck.bench.gates import outcome

    checks, _, partial = outcome(CFG, ROWS, [], None)
    cov = [c for c in checks if c.id == "bench.coverage"][0]
    assert cov.status is Status.PASS and not partial and cov.evidence["measured"] == 6


def test_summary_says_what_one_rank_measures():
    one = [BenchRow(op="all_reduce", bytes=64 * M, count=16 * M, dtype="float32", in_place=False, time_us=40.0,
                    algbw_gbps=1600.0, busbw_gbps=0.0, rank_time_us=[40.0])]
    assert "1 rank: nothing crosses a link, so busbw is 0" in summarize(one)["note"]
    assert "1 rank" not in summarize(ROWS)["note"]


def test_the_summary_puts_the_best_size_beside_a_noisy_largest_one():
    """On a loaded node the largest size's one row can be its noisiest: the best size's figure is said beside it
    (the gates keep judging the largest), and nothing is added where the largest is the best."""
    noisy = [row(size=M, busbw=5.0), row(size=16 * M, busbw=9.0), row(size=64 * M, busbw=3.0)]
    [e] = summarize(noisy)["per_op"]
    assert (e["busbw_gbps"], e["largest_bytes"]) == (3.0, 64 * M)
    assert (e["peak_busbw_gbps"], e["peak_bytes"]) == (9.0, 16 * M)
    [e] = summarize([row(size=M, busbw=5.0), row(size=64 * M, busbw=40.0)])["per_op"]
    assert "peak_busbw_gbps" not in e
