"""Multi-node `ncclcheck bench` on a 2-host lab: the sweep runs across nodes and --check finds no wrong elements."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.lab

PORT = 29500
TIMEOUT = 60


def test_two_node_bench_all_reduce_checked(lab):
    lab2 = lab(2)
    common = ["bench", "--sizes", "1M-4M", "--ops", "all_reduce", "--nnodes", "2", "--master-addr", lab2.ip("h1"),
              "--master-port", str(PORT), "--nproc-per-node", "1", "--iters", "5", "--warmup", "1", "--check",
              "--timeout", str(TIMEOUT)]
    runs = lab2.ncclcheck({h: [*common, "--node-rank", str(i)] for i, h in enumerate(lab2.hosts)},
                          deadline=TIMEOUT + 30)
    detail = "\n".join(f"--- {h} rc={r.rc} {r.elapsed:.1f}s\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
                       for h, r in runs.items())
    assert all(r.rc == 0 for r in runs.values()), detail
    rows = runs["h1"].report["bench"]
    assert {r["bytes"] for r in rows if r["op"] == "all_reduce"} == {1 << 20, 2 << 20, 4 << 20}, rows
    for row in rows:
        assert row["wrong"] == 0, row
        assert row["busbw_gbps"] > 0, row
