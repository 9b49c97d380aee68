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
    v = {"named": [("rank", slow_matrix.CULPRIT, "compute")], "fix": "find what rank 3 (host h2) does",
         "under_floor": []}
    assert slow_matrix.right("compute", v)
    assert not slow_matrix.right("compute", {**v, "named": [("rank", 3, "communication")]})
    assert not slow_matrix.right("compute", {**v, "fix": v["fix"] + "; and check h3's links"})
    assert not slow_matrix.right("none", v) and slow_matrix.right("none", {"named": [], "fix": "", "under_floor": []})
    # a healthy job's rank said late under the floor is a wrong cell too
    assert not slow_matrix.right("none", {"named": [], "fix": "", "under_floor": [("rank", 0)]})


def test_a_bad_flag_is_a_usage_error():
    p = subprocess.run([sys.executable, "scripts/slow_matrix.py", "--faults", "gremlins"], capture_output=True,
                       text=True, timeout=60, cwd=REPO, env=cli_env())
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 3, p.stderr


def test_a_fast_jobs_short_compute_is_placed_where_its_sampling_paces_by_its_cpu(monkeypatch):
    """Issue 65's lab job stepping every ~25 ms with a 4 ms compute: its ranks' recorder reads cost ~0.1 ms, so a 2 s
    sampling window paced itself to ~4.5 ms a sample (the window within one burst of its Spend); the compute fell
    between two samples in half the steps, its median read 0 and the straggler's kind went untold. The simulated job
    is sampled at the pace the responder takes for that CPU (slow_matrix.SAMPLE_COST_S): over PHASE_FAST_STEPS of its
    steps its compute straggler is "compute"; over the whole 2 s pause (the old window) it is not told."""
    from ncclcheck.live import straggle

    job = slow_matrix.job_of(10, 0.2, "compute", 0)
    assert slow_matrix.verdict(job)["named"] == [("rank", slow_matrix.CULPRIT, "compute")]
    monkeypatch.setattr(straggle, "phase_window", lambda seconds, step_us: seconds)
    assert slow_matrix.verdict(job)["named"] == [("rank", slow_matrix.CULPRIT, "untold")]


def test_the_sampling_window_holds_a_few_dozen_steps_of_a_fast_job_and_three_of_a_slow_one():
    from ncclcheck.live import straggle

    assert straggle.phase_window(2.0, None) == 2.0  # step unknown: the pause
    assert straggle.phase_window(2.0, 25_000) == round(straggle.PHASE_FAST_STEPS * 0.025, 3)
    assert straggle.phase_window(2.0, 1_000) == straggle.PHASE_MIN_S
    assert straggle.phase_window(2.0, 100_000) == 2.0  # 20 steps fill the pause
    assert straggle.phase_window(2.0, 1_000_000) == 3.0  # three steps
    assert straggle.phase_window(2.0, 10_000_000) == straggle.FIXED_PHASE_MAX_S
