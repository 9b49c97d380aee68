"""A new user's bench (issue 53, item 7): every mark the printed table shows is explained in the output."""

from __future__ import annotations

from ncclcheck.render import words
from tests.conftest import run_cli


def test_bench_explains_the_marks_it_prints():
    res = run_cli("bench", "--sizes", "64K-128K", "--ops", "all_reduce,all_gather", "--iters", "3", "--warmup", "1",
                  timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    rows = [ln for ln in out.splitlines() if ln.strip()[:1].isdigit()]
    assert rows and all(ln.split()[-1] == words.NOT_CHECKED for ln in rows)  # no --check
    flat = " ".join(out.split())  # legend lines are wrapped to the output's width (tests/test_warts_round5.py)
    assert flat.count(words.NOT_CHECKED_NOTE) == 1 and flat.count(words.SINGLE_FORM_LEGEND) == 1
    assert (words.UNSTEADY_NOTE in flat) == any("%" + words.UNSTEADY_MARK in ln for ln in rows)
