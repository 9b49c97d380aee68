"""scripts/bench_startup.py, run small by the default suite: its own correctness fields, never its timings (the
figures are for a quiet machine: docs/contracts.md quotes them with the command)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.slow  # torch's collect_env and torchrun --help, twice each


def test_one_round_prints_both_ratios_and_help_never_imports_torch():
    p = subprocess.run([sys.executable, "scripts/bench_startup.py", "--rounds", "1"], capture_output=True, text=True,
                       cwd=REPO, env=cli_env(), timeout=240)
    last = p.stdout.strip().splitlines()[-1]
    fields = dict(kv.split("=", 1) for kv in last.split())
    assert p.returncode == 0, p.stdout + p.stderr
    assert fields["help_imports_torch"] == "0" and fields["preflight_exit"] == "0" and fields["failures"] == "0"
    for name in ("help_ratio", "preflight_ratio", "help_s", "torchrun_help_s", "preflight_s", "collect_env_s"):
        assert re.fullmatch(r"\d+\.\d{3}", fields[name]) and float(fields[name]) > 0, (name, last)
    assert fields["rounds"] == "1"
