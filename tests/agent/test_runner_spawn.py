"""Local ranks start as fresh interpreters that never import the caller's __main__ (issue 34; the README block run
as a script, a heredoc and a REPL is tests/api/test_api_in_scripts.py). Where no interpreter can be started, the
report says why in one line, with the fix, instead of a traceback."""

from __future__ import annotations

import sys

from ncclcheck.agent.launchers import detect_placement
from ncclcheck.agent.runner import run_job
from ncclcheck.config import Config, WorldConfig
from ncclcheck.rendezvous.budget import Budget
from tests.jobs_for_tests import allreduce_job


def test_no_usable_interpreter_is_one_line_per_rank_with_the_fix(monkeypatch):
    monkeypatch.setattr(sys, "executable", "")
    w = WorldConfig(nproc_per_node=2, timeout_s=5)
    out = run_job(w, detect_placement({}, w), allreduce_job, {}, budget=Budget.of(Config("t", world=w)))
    assert not out.ok and [f["rank"] for f in out.failures] == [0, 1]
    reason = out.failures[0]["reason"]
    assert "\n" not in reason and "no usable sys.executable" in reason and "torchrun" in reason
