"""scripts/slow_matrix.py --lab run small: one cell (a 100 ms step, compute as long as communication) on a real
torchrun job of 3 lab hosts, its four faults watched once each; every line printed with its correctness fields
(right K/N, the job's own ratio), a bad --lab cell a one-line usage error. Never the seconds (timings).

Marked long (scripts/long_tests.py runs it): one job and four faults' watches, 2-3 minutes, past the lab lane's
budget for one test. The whole matrix: `python3 scripts/slow_matrix.py --lab`."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

pytestmark = [pytest.mark.lab, pytest.mark.long]


def test_one_lab_cell_prints_each_fault_right_with_the_jobs_own_ratio():
    p = subprocess.run([sys.executable, "scripts/slow_matrix.py", "--lab", "--steps-ms", "100", "--ratios", "1",
                        "--runs", "1"], capture_output=True, text=True, timeout=1200, cwd=REPO, env=cli_env())
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("step=")]
    assert [re.match(r"step=100ms ratio=1 fault=(\w+) right=(\d)/1", ln).group(1) for ln in lines] == \
        ["none", "compute", "link", "both"], p.stdout[-4000:] + p.stderr[-2000:]
    assert p.returncode == 0 and all("right=1/1" in ln for ln in lines), p.stdout[-4000:]
    assert p.stdout.splitlines()[-1].startswith("cells_right=4/4 runs_right=4/4 lab=1 cells_missing=0"), p.stdout
    assert "its all_reduce" in lines[0]  # the ratio the job's own records show, beside the cell it was meant for


def test_a_lab_cell_the_jobs_do_not_have_is_a_usage_error():
    p = subprocess.run([sys.executable, "scripts/slow_matrix.py", "--lab", "--ratios", "0.3"], capture_output=True,
                       text=True, timeout=60, cwd=REPO, env=cli_env())
    assert p.returncode == 2 and "--lab: its jobs' cells only" in p.stderr and "Traceback" not in p.stderr
