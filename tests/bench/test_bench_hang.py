"""A collective that does not complete within --timeout is a hang the sweep names: op, size, the absent rank."""

from __future__ import annotations

import pytest

from ncclcheck.bench.collectives import bench_config_to_payload, rows_from_result
from ncclcheck.bench.gates import outcome
from ncclcheck.config import BenchConfig
from ncclcheck.model import Status
from tests.dist_harness import run_world

pytestmark = pytest.mark.slow


def test_a_hung_collective_names_op_size_and_the_rank_that_never_arrived():
    cfg = BenchConfig(sizes=(4096, 65536), ops=("all_reduce",), iters=2, warmup=1)
    stall = {"rank": 1, "op": "all_reduce", "bytes": 65536, "sleep_s": 10}
    run = run_world("tests.bench.jobs.bench_with_stall", {"cfg": bench_config_to_payload(cfg), "stall": stall},
                    world_size=2, nproc_per_node=2, timeout_s=3.0, bound_s=60)
    res = run.results[0]
    stopped = res["stopped"]
    assert stopped["reason"] == "hang" and stopped["op"] == "all_reduce" and stopped["bytes"] == 65536, stopped
    assert stopped["ranks_absent"] == [1] and "within --timeout 3 s" in stopped["detail"], stopped
    rows = rows_from_result(res)
    assert [r.bytes for r in rows] == [4096]  # what was measured before the hang is kept
    checks, _, partial = outcome(cfg, rows, res["skipped"], stopped)
    cov = [c for c in checks if c.id == "bench.coverage"][0]
    assert partial and cov.status is Status.WARN and "rank(s) 1 never arrived" in cov.detail
