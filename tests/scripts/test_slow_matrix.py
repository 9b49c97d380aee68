"""scripts/slow_matrix.py run small: every cell of a few step times x ratios x faults right, its correctness fields
printed; a bad flag is a one-line usage error. (The whole matrix: `python3 scripts/slow_matrix.py`.)"""

from __future__ import annotations

import subprocess
import sys

from ncclcheck_lab import slow_matrix
from tests.conftest import REPO, cli_env


def test_the_matrix_script_prints_every_cell_right_small():
    p = subprocess.run([sys.executable, "scripts/slow_matrix.py", "--steps-ms", "10,2000", "--ratios", "0.2,5",
                        "--runs", "1"], capture_output=True, text=True, timeout=300, cwd=REPO, env=cli_env())
    lines = p.stdout.splitlines()
    assert p.returncode == 0, p.stdout + p.stderr
    assert len([ln for ln in lines if ln.startswith("step=")]) == 2 * 2 * 4
    assert all(ln.endswith("right=1/1") for ln in lines if ln.startswith("step=")), p.stdout
    assert lines[-1].startswith("cells_right=16/16 runs_right=16/16 sim_errors=0"), lines[-1]


def test_a_cell_is_wrong_when_the_kind_or_the_fix_is():
    v = {"named": [("rank", slow_matrix.CULPRIT, "compute")], "fix": "find what rank 3 (host h2) does"}
    assert slow_matrix.right("compute", v)
    assert not slow_matrix.right("compute", {**v, "named": [("rank", 3, "communication")]})
    assert not slow_matrix.right("compute", {**v, "fix": v["fix"] + "; and check h3's links"})
    assert not slow_matrix.right("none", v) and slow_matrix.right("none", {"named": [], "fix": ""})


def test_a_bad_flag_is_a_usage_error():
    p = subprocess.run([sys.executable, "scripts/slow_matrix.py", "--faults", "gremlins"], capture_output=True,
                       text=True, timeout=60, cwd=REPO, env=cli_env())
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 3, p.stderr
