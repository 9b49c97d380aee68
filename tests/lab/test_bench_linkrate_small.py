"""scripts/bench_linkrate.py run small (one rate, 500mbit, a 1 MiB all_reduce twice): its own correctness field,
measured=1/1 on its last line (bench exited 0 on both hosts with a busbw above 0); never the ratio to the link rate
(a timing: docs quote it from a quiet machine)."""

from __future__ import annotations

import pytest

from ncclcheck_lab import bench_linkrate

pytestmark = pytest.mark.lab


def test_one_shaped_rate_is_measured_on_both_hosts(capsys):
    rc = bench_linkrate.main(["--rates", "500mbit", "--size", "1M", "--iters", "2", "--timeout", "60"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and lines[-1] == "measured=1/1", lines
    assert any(ln.split()[:1] == ["500mbit"] for ln in lines), lines
