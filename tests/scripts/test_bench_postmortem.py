"""scripts/bench_postmortem.py run small (--saved: the kill scenario's kept dumps instead of a fresh 4-rank job, and
a synthetic set of 16 ranks x 20 entries): its own correctness fields, the last line's ours=N of scenarios=N (diagnose
named the culprit of each), the synthetic line's culprit named ('right'), and exit 0; never its seconds. The
torchfrtrace columns are torch's analyzer's, reported, not asserted."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.slow  # torchfrtrace imports torch in a child: ~4 s of CPU


def test_the_kept_kill_scenario_and_a_synthetic_set_name_their_culprits():
    p = subprocess.run([sys.executable, "scripts/bench_postmortem.py", "--saved", "--scenarios", "kill", "--ranks",
                        "16", "--entries", "20"], capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=300)
    lines = p.stdout.strip().splitlines()
    fields = dict(kv.split("=", 1) for kv in lines[-1].split())
    assert p.returncode == 0, p.stdout + p.stderr
    assert fields["scenarios"] == "1" and fields["ours"] == "1", lines[-1]
    synthetic = next(ln for ln in lines if ln.startswith("synthetic:"))
    assert "culprit rank 13: ncclcheck named [13]" in synthetic and "(right;" in synthetic, synthetic


def test_an_unknown_scenario_is_a_one_line_usage_error():
    p = subprocess.run([sys.executable, "scripts/bench_postmortem.py", "--saved", "--scenarios", "nope"],
                       capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=120)
    assert p.returncode == 2 and "unknown scenario 'nope'" in p.stderr and "Traceback" not in p.stderr, p.stderr
