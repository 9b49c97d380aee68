"""What ncclcheck.guard() adds to a healthy job's log under a real torchrun (2 ranks, CPU/gloo): at most one line of
its own, and nothing of c10d's (each c10d store request that times out prints two `[c10d] waitForInput ... timed out`
lines: the guard's sliced waits and its join grace printed them in every job)."""

from __future__ import annotations

import re

import pytest

from tests.training.test_guard_torchrun import torchrun, why

pytestmark = pytest.mark.slow  # torchrun worlds of real processes

C10D = re.compile(r"\[c10d\]|waitForInput|socket\.cpp")


def _lines(p) -> list:
    """The job's lines. Two processes write the job's stderr: torchrun's own warning and a rank's line can land on
    one line (CI saw 'Setting OMP_NUM_THREADS ...ncclcheck preflight ...: PASS'), so the guard's line is cut off
    where it begins."""
    text = re.sub(r"(?<!^)(?<!\n)(ncclcheck preflight \d+ node)", r"\n\1", p.stdout + p.stderr)
    return [ln for ln in text.splitlines() if ln.strip()]


def _ours(lines: list) -> list:
    """The lines that differ between the guarded and the unguarded run: neither the fixture's GUARD-OK nor torch's."""
    return [ln for ln in lines if not ln.startswith(("GUARD-OK", "TRAINED", "*****", "Setting OMP_NUM_THREADS"))]


@pytest.fixture(scope="module")
def unguarded():
    p = torchrun("train_ddp.py", {"NCCLCHECK_GUARD": "0"})
    assert p.returncode == 0 and "TRAINED world=2" in p.stdout, why(p)
    return p


def test_a_healthy_guarded_job_gains_one_line_and_no_c10d_warning(unguarded):
    p = torchrun("train_ddp.py", {})
    assert p.returncode == 0 and "TRAINED world=2" in p.stdout, why(p)
    lines = _lines(p)
    assert not [ln for ln in lines if C10D.search(ln)], why(p)
    assert len(lines) <= len(_lines(unguarded)) + 1, why(p)
    ours = _ours(lines)
    assert len(ours) == 1 and re.match(r"ncclcheck preflight 1 node, 2 ranks, launched by torchrun, .*: PASS \(",
                                       ours[0]), (ours, why(p))


def test_arming_the_post_mortem_stays_on_that_one_line(unguarded, tmp_path):
    p = torchrun("train_ddp.py", {"GUARD_POSTMORTEM": str(tmp_path / "pm")})
    assert p.returncode == 0 and "TRAINED world=2" in p.stdout, why(p)
    ours = [ln for ln in _ours(_lines(p)) if "is deprecated" not in ln]  # torch's: the next test's
    assert len(ours) == 1 and "PASS" in ours[0] and "armed the post-mortem under" in ours[0], why(p)


def test_the_post_mortem_the_guard_arms_makes_torch_print_no_deprecation(tmp_path):
    """The guard sets recommend/postmortem.py's names, nothing else: none of them may be one torch warns about."""
    p = torchrun("train_ddp.py", {"GUARD_POSTMORTEM": str(tmp_path / "pm")})
    assert p.returncode == 0, why(p)
    assert "deprecated" not in p.stdout + p.stderr, why(p)
