"""scripts/bench_arm.py run small (10 all_reduces, one run per mode, 2 gloo ranks under torchrun): its own
correctness fields, clean_runs=4/4 (the healthy job exited 0 unarmed, env-armed, armed without and with the watch
responder, printed its time and left no dump) and a line per mode; never the ratios (timings: docs quote them from a
quiet machine).

Marked long (scripts/long_tests.py runs it): four torchrun launches of two ranks each import torch twelve times, about
40 s of CPU, past the default suite's budget for one test."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.long


def test_a_healthy_job_runs_clean_unarmed_env_armed_and_armed():
    p = subprocess.run([sys.executable, "scripts/bench_arm.py", "--iters", "10", "--repeats", "1", "--nproc", "2"],
                       capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=600)
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines[-1] == "clean_runs=4/4", p.stdout + p.stderr
    modes = [ln.split()[0] for ln in lines if "us/op" in ln]
    assert modes == ["unarmed", "env", "nolive", "armed"], lines
