"""The sweep on real local gloo worlds: every op and dtype exact with --check on 2 and 3 ranks, a corrupted output
caught, a deadline honoured, rows emitted as they land and valid against the report schema.

One spawned world per rank count runs every scenario (the machine has 2 cores; spawning is the slow part)."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

from ncclcheck.bench.collectives import bench_config_to_payload, rows_from_result
from ncclcheck.bench.gates import correctness, evaluate, summarize
from ncclcheck.bench.ops import DTYPES, OPS
from ncclcheck.config import BenchConfig
from ncclcheck.model import Report, Status, WorldInfo
from tests.dist_harness import run_job

pytestmark = pytest.mark.slow  # real worlds of spawned processes: the slow tier (a marker, not a folder)

SIZES = (4096, 65536)


def _cfg(**kw) -> dict:
    base = dict(sizes=SIZES, ops=tuple(OPS), iters=2, warmup=1, in_place=True, check=True)
    base.update(kw)
    return bench_config_to_payload(BenchConfig(**base))


def _runs() -> list[dict]:
    runs = [{"cfg": _cfg(dtype=dt)} for dt in DTYPES]
    runs.append({"cfg": _cfg(ops=("all_reduce", "all_gather"), dtype="bfloat16", in_place=False),
                 "corrupt": {"rank": 1, "op": "all_reduce"}})
    # 7 iterations, at most 3 timestamps: samples are means of 3, 3 and 1 iterations.
    runs.append({"cfg": _cfg(ops=("all_reduce",), dtype="float32", in_place=False, iters=7, sizes=(4096,)),
                 "max_samples": 3})
    return runs


@pytest.fixture(scope="module", params=[2, 3], ids=["2ranks", "3ranks"])
def world(request):
    n = request.param
    res = run_job("tests.bench.jobs.sweeps", {"runs": _runs()}, nranks=n, timeout=240)
    return n, res


def _dtype_runs(res):
    return res[0]["result"]["runs"][:len(DTYPES)]


def test_every_op_and_dtype_is_exact_or_skipped_with_a_reason(world):
    n, res = world
    for dtype, run in zip(DTYPES, _dtype_runs(res)):
        rows = run["rows"]
        done = {(r["op"], r["in_place"]) for r in rows}
        skipped = {(s["op"], s["in_place"]): s["reason"] for s in run["skipped"]}
        for op in OPS:
            for in_place in (False, True):
                key = (op, in_place)
                assert key in done or skipped.get(key), f"{op} {dtype} in_place={in_place}: neither run nor skipped"
        # in-place all_to_all and sendrecv have no in-place form: skipped with a reason, never crashed
        assert "no in-place form" in skipped[("all_to_all", True)]
        for r in rows:
            assert r["wrong"] == 0, (dtype, r)
            assert r["dtype"] == dtype and len(r["rank_time_us"]) == n
            assert r["time_us"] == max(r["rank_time_us"])
            assert len(r["arrival"]["barrier_wait_us"]) == n
            st = r["iter_stats"]  # every timed iteration, slowest rank each, summarised
            assert st["iters"] == 2 and len(st["iter_us"]) == 2 and all(0 <= k < n for k in st["slowest_rank"])
            assert st["min_us"] <= st["p50_us"] <= st["p99_us"] <= st["max_us"] == max(st["iter_us"])
            assert sum(st["slowest_rank_counts"].values()) == 2 and st["cv"] >= 0
            assert r["arrival_spread_us"] >= 0
        assert run["stopped"] is None


def test_rows_are_emitted_as_they_land_and_only_rank0_reports(world):
    n, res = world
    emitted = [d for kind, d in res[0]["events"] if kind == "bench_row"]
    all_rows = [r for run in res[0]["result"]["runs"] for r in run["rows"]]
    assert emitted == all_rows
    for other in res[1:]:
        assert other["events"] == [] and all(run["rows"] == [] for run in other["result"]["runs"])


def test_progress_reaches_its_total_on_rank0_only(world):
    n, res = world
    for run in _dtype_runs(res):
        assert run["progress"] == {"total": len(run["rows"]), "advanced": len(run["rows"]), "stopped": True}
    assert res[1]["result"]["runs"][0]["progress"]["total"] is None  # never started on other ranks


def test_chunked_sizes_report_the_rounding(world):
    n, res = world
    rows = _dtype_runs(res)[0]["rows"]  # float32
    ag = next(r for r in rows if r["op"] == "all_gather" and r["requested_bytes" if n == 3 else "bytes"] == 4096)
    if n == 3:
        assert (ag["bytes"], ag["count"]) == (4080, 340)  # 1024 floats / 3 = 341 -> 340 per rank (16-byte chunks)
    else:
        assert "requested_bytes" not in ag and ag["bytes"] == 4096


def test_corrupted_output_is_caught(world):
    n, res = world
    run = res[0]["result"]["runs"][len(DTYPES)]
    bad = [r for r in run["rows"] if r["wrong"]]
    assert bad and all(r["op"] == "all_reduce" for r in bad)
    assert bad[0]["rank_wrong"][1] > 0 and bad[0]["rank_wrong"][0] == 0
    rows = rows_from_result(run)
    verdict = correctness(rows, BenchConfig(check=True))
    assert verdict.status is Status.FAIL and "all_reduce 4K bfloat16" in verdict.summary


def test_long_loops_are_sampled_per_stride(world):
    n, res = world
    (row,) = res[0]["result"]["runs"][len(DTYPES) + 1]["rows"]
    st = row["iter_stats"]
    assert (st["iters"], st["stride"], len(st["iter_us"]), len(st["slowest_rank"])) == (7, 3, 3, 3)
    assert st["min_us"] <= st["p50_us"] <= st["max_us"]


def test_report_from_real_rows_validates(world):
    n, res = world
    schema = json.loads(resources.files("ncclcheck").joinpath("schema/report-1.schema.json").read_text())
    run = _dtype_runs(res)[2]
    rows = rows_from_result(run)
    cfg = BenchConfig(sizes=SIZES, ops=tuple(OPS), dtype="bfloat16", check=True, min_busbw_gbps=1e-9)
    rep = Report(command="bench", version="0", started="now", world=WorldInfo(world_size=n, backend="gloo"),
                 checks=evaluate(rows, cfg, run["skipped"]), bench=rows)
    rep.extra["bench_summary"] = summarize(rows)
    doc = rep.to_dict()
    jsonschema.validate(doc, schema)
    assert doc["status"] == "pass"
