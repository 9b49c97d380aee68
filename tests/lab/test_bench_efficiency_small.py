"""scripts/bench_efficiency.py run small (its two unshaped-veth scenarios, bench and links on 2 hosts, 1 MiB): its
own correctness field on its last line, bound_right=2 of scenarios=2: a veth's 10 Gb/s is the kernel's fixed figure,
so the report gives no bound and says why (issue 44 E), and the script expects exactly that; never the efficiencies
(timings: docs/bounds.md quotes them from a quiet machine)."""

from __future__ import annotations

import pytest

from ncclcheck_lab import bench_efficiency

# long: test_bounds_lab.py runs the unshaped-veth links case in CI; this one runs the script over it (long_tests.py)
pytestmark = [pytest.mark.lab, pytest.mark.long]


def test_unshaped_veth_scenarios_give_no_bound_and_the_script_agrees(capsys):
    rc = bench_efficiency.main(["--only", "2 hosts unshaped veth", "--size", "1M", "--iters", "2", "--timeout", "60"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "scenarios=2 bound_right=2" and rc == 0, lines
    rows = [ln for ln in lines if "unshaped veth" in ln]
    assert len(rows) == 2 and all("veth/virtual" in ln for ln in rows), rows
