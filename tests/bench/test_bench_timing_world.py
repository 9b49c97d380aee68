"""The graph timing path inside a real 2-rank gloo sweep, on a fake CUDA API (tests/bench/fake_cuda.py): which
figure a row's time is, the eager figure beside it, one capture failure (on one rank only) falling back for every
rank and said once, --timing graph refusing a row it cannot time, and gloo without a GPU keeping today's timing."""

from __future__ import annotations

import pytest

from ncclcheck.bench.collectives import bench_config_to_payload
from ncclcheck.config import BenchConfig
from tests.dist_harness import run_job

pytestmark = pytest.mark.slow  # a spawned world

SIZES = (4096, 65536, 1 << 20)
ITERS = 4
PER_CALL_US = 2.5


def _cfg(**kw) -> dict:
    base = dict(sizes=SIZES, ops=("all_reduce", "all_gather"), iters=ITERS, warmup=1)
    base.update(kw)
    return bench_config_to_payload(BenchConfig(**base))


@pytest.fixture(scope="module")
def runs():
    res = run_job("tests.bench.jobs.graph_sweeps", {"runs": [
        {"cfg": _cfg(), "fake": {"per_call_us": PER_CALL_US}},
        {"cfg": _cfg(), "fake": {"per_call_us": PER_CALL_US, "fail_on_ranks": [1]}},
        {"cfg": _cfg(timing="graph"), "fake": {"per_call_us": PER_CALL_US, "fail_on_ranks": [1]}},
        {"cfg": _cfg(), "fake": None},
        {"cfg": _cfg(timing="eager"), "fake": {"per_call_us": PER_CALL_US}},
    ]}, nranks=2, timeout=240)
    return [r["result"]["runs"] for r in res]


def test_graph_rows_report_the_replay_and_the_eager_figure_beside_it(runs):
    run = runs[0][0]
    assert len(run["rows"]) == len(SIZES) * 2
    for row in run["rows"]:
        assert row["timing"] == "graph"
        assert row["time_us"] == pytest.approx(PER_CALL_US)  # one replay of ITERS calls, per call
        assert row["rank_time_us"] == [pytest.approx(PER_CALL_US)] * 2
        # the eager figure is the real gloo loop's, and the busbw comes from the graph figure
        assert row["eager_time_us"] > 0
        assert row["eager_overhead_us"] == pytest.approx(row["eager_time_us"] - row["time_us"], rel=1e-3)
        assert row["algbw_gbps"] == pytest.approx(row["bytes"] / (PER_CALL_US * 1e-6) / 1e9, rel=1e-3)
    # every rank captured ITERS calls per row and replayed each graph twice (one untimed, one timed)
    for rank_runs in runs:
        assert rank_runs[0]["fake"]["captured"] == [ITERS] * len(SIZES) * 2
        assert rank_runs[0]["fake"]["replays"] == 2 * len(SIZES) * 2
    assert run["timing"] == {"requested": "auto", "eager_why": None, "no_graph": []}


def test_a_capture_that_fails_on_one_rank_falls_back_on_every_rank_and_is_said_once(runs):
    run = runs[0][1]
    assert {r["timing"] for r in run["rows"]} == {"eager"}
    assert all("eager_time_us" not in r for r in run["rows"])
    # once per op, not once per row; the reason is rank 1's own words, first line only
    whys = run["timing"]["no_graph"]
    assert [w["op"] for w in whys] == ["all_reduce", "all_gather"]
    assert "operation not permitted when stream is capturing" in whys[0]["reason"]
    assert "more lines" not in whys[0]["reason"]
    # no rank replayed a graph (a replay on rank 0 alone would wait for rank 1 forever on a GPU), and after the
    # first failure of an op no further capture of it was tried
    for rank_runs in runs:
        assert rank_runs[1]["fake"]["replays"] == 0
        assert rank_runs[1]["fake"]["captured"] == [ITERS, ITERS]


def test_timing_graph_refuses_a_row_it_cannot_time_graph(runs):
    run = runs[0][2]
    assert run["rows"] == []
    assert {s["op"] for s in run["skipped"]} == {"all_reduce", "all_gather"}
    assert all("CUDA-graph capture failed" in s["reason"] for s in run["skipped"])


def test_gloo_without_a_gpu_keeps_the_eager_loop_and_says_why_once(runs):
    run = runs[0][3]
    assert {r["timing"] for r in run["rows"]} == {"eager"}
    assert "CUDA graphs need NCCL on a GPU" in run["timing"]["eager_why"]
    assert "gloo" in run["timing"]["eager_why"]
    eager = runs[0][4]  # --timing eager: no capture even where one could be made
    assert {r["timing"] for r in eager["rows"]} == {"eager"} and eager["timing"]["eager_why"] is None
    assert runs[0][4]["fake"]["captured"] == []
