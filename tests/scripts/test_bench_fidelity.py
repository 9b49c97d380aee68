"""scripts/bench_fidelity.py run small (gloo, 2 local ranks, all_reduce and all_gather of 64 KiB, 2 iterations, one
repeat): its own correctness field on its last line, pairs=2/2 (each op timed by ncclcheck's bench and by the bare
loop, a bandwidth above 0 from both), and exit 0; never the ratio (a timing: docs quote it from a quiet machine)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.slow  # two spawned ranks import torch: ~10 s of CPU


def test_both_ops_timed_by_the_bench_and_by_the_bare_loop():
    p = subprocess.run([sys.executable, "scripts/bench_fidelity.py", "--sizes", "64K", "--ops", "all_reduce,all_gather",
                        "--iters", "2", "--warmup", "1", "--repeats", "1", "--nranks", "2"],
                       capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=300)
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines[-1] == "pairs=2/2", p.stdout + p.stderr
    rows = [ln.split() for ln in lines if ln.startswith(("all_reduce ", "all_gather "))]
    assert sorted(r[0] for r in rows) == ["all_gather", "all_reduce"] and all(r[1] == "64K" for r in rows), lines
