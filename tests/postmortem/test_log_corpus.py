"""Every log of the log corpus (tests/postmortem/fixtures/pasted: one log each, as users paste them) gets the verdict a
diligent expert gives from that text alone (issue 61): its cause, "the job failed; the cause is not in this text", a
warning for a program that stopped showing progress, or nothing wrong. Each case is read here in-process with the
classifier and the report's items that scripts/bench_accuracy.py uses (its `--only diag-log` runs the same cases
through the CLI and prints the figures beside the naive baseline's)."""

from __future__ import annotations

import os

import pytest

from ncclcheck.postmortem.diagnose import diagnose
from ncclcheck_lab import accuracy_corpus as ac
from ncclcheck_lab import bench_accuracy as ba

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = ac.log_cases(ROOT)


def _verdict(case: ac.LogCase) -> tuple:
    rep = diagnose([os.path.join(ROOT, case.file)])
    items, wrong = ba.merge([rep.to_dict()])
    return ac.classify(ac.log_expect(case), ac.Outcome({"diagnose": rep.exit_code}, items, wrong)), rep


def _param(c: ac.LogCase):
    """A case ncclcheck still misses is said so where it is scored (its `open`: why), strict: fixed, it must pass."""
    return pytest.param(c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=c.open)] if c.open else [])


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_each_pasted_log_gets_the_experts_verdict(case):
    (cls, why), rep = _verdict(case)
    assert cls == ac.RIGHT, f"{case.name}: {cls}: {why}; root: {rep.checks[0].summary[:300]}"


def test_the_corpus_holds_what_the_issue_asks():
    """At least 150 logs, 25 of them from public threads (each with its address), healthy jobs among them, and every
    case's proof a piece of its own log (what the baseline is scored by)."""
    assert len(CASES) >= 150 and sum(c.tier == "thread" for c in CASES) >= 25
    assert all(c.source.startswith("https://") for c in CASES if c.tier == "thread")
    assert sum(c.expect == "healthy" for c in CASES) >= 15 and sum(c.expect == "failed" for c in CASES) >= 10
    for c in CASES:
        with open(os.path.join(ROOT, c.file), errors="replace") as f:
            text = f.read()
        assert not c.proof or c.proof in text, c.name
        assert c.expect in ("cause", "failed", "stopped", "healthy") and c.tier in ac.LOG_TIERS, c.name


def test_the_baseline_is_scored_as_the_issue_defines_it():
    cause = ac.LogCase("x", "program", "x.log", "", "cause", "duplicate_gpu", proof="Duplicate GPU detected")
    text = "h:1:2 [0] init.cc:1 NCCL WARN Duplicate GPU detected : rank 1 and rank 0\nRuntimeError: NCCL Error 5\n"
    assert ac.baseline_line(text).startswith("RuntimeError") and not ac.baseline_right(cause, text)
    assert ac.baseline_right(cause, text.splitlines()[0])
    healthy = ac.LogCase("y", "program", "y.log", "", "healthy")
    assert ac.baseline_right(healthy, "step 1 loss 0.3\n") and not ac.baseline_right(healthy, "val Error 0.1\n")


def test_every_fresh_batch_has_its_first_score_kept():
    """A batch of public threads enters the corpus with the score ncclcheck gave it before anything was changed for it
    (issue 74: the figure a user should expect); its cases are the ones it was scored on."""
    scores = ba.first_scores()
    batches = {c.batch for c in CASES if c.batch}
    assert batches <= set(scores), sorted(batches - set(scores))
    for b in batches:
        mine = [c for c in CASES if c.batch == b]
        assert scores[b]["of"] == len(mine) and set(scores[b]["missed"]) <= {c.name for c in mine}, b
        assert all(c.tier == "thread" and c.source.startswith("https://") for c in mine), b
