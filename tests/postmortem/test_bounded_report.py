"""Everything diagnose copies from its inputs into the report is bounded per item (cut with a visible mark) and in
all (rank lists and per-rank tables cut, their count kept): the accuracy corpus's hostile-absurd-failure-table (a
torchrun table naming rank 10^23, a 200,000-character traceback) beside the real kill fixture made a 569 MiB report
(18 MiB after MAX_RANK_CAUSES) from 217 KiB of inputs. Each case here is a long or absurd line beside that real
fixture: the report stays small, and its exit code and root cause are the fixture's own."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ncclcheck.postmortem.bound import MAX_ITEM_CHARS, MAX_LISTED_RANKS, MAX_REPORT_ROWS, clip
from ncclcheck.postmortem.diagnose import diagnose

KILL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "kill")
LONG = "A" * 200_000

CASES = {
    # scripts/bench_accuracy.py's hostile_file("failure-table"), as the corpus writes it
    "absurd-table": ("launcher2.log", "Failures:\n  <NO_OTHER_FAILURES>\nRoot Cause (first observed failure):\n[0]:\n"
                     "  time      : not-a-time\n  host      : \x1b[31mevil\x07\n"
                     "  rank      : 99999999999999999999999 (local_rank: -5)\n"
                     "  exitcode  : -99999999999999999999 (pid: 1) (SIGBOGUS)\n"
                     "  error_file: /etc/shadow\n  traceback : " + LONG + "\n"),
    # a failure table whose fields (a real rank) are 200,000 characters each
    "long-table-fields": ("launcher2.log", "Failures:\n[1]:\n  time      : " + LONG + "\n  host      : " + LONG +
                          "\n  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 7)\n  error_file: " + LONG +
                          "\n  traceback : " + LONG + "\n"),
    # one rank's exception and an NCCL WARN, each a 200,000-character line
    "long-log-lines": ("rank1.log", "[rank1]: Traceback (most recent call last):\n[rank1]: RuntimeError: " + LONG +
                       "\n[rank1]: localhost:1:1 [1] NCCL WARN " + LONG + "\n"),
    # an error file whose message is 200,000 characters
    "long-error-file": ("error_1.json", json.dumps({"message": {"message": "RuntimeError: " + LONG,
                                                                "extraInfo": {"timestamp": LONG}}})),
    # srun naming a million tasks in one line: one line, a million failure records
    "srun-million-tasks": ("srun.log", "srun: error: h1: tasks " + ",".join(f"{i}-{i + 99_999}" for i in
                                                                             range(0, 1_000_000, 100_000))
                           + ": Killed\n"),
}


def _report(d) -> tuple:
    rep = diagnose([str(d)])
    return rep.exit_code, json.dumps(rep.to_json()), rep.extra["postmortem"]


@pytest.fixture(scope="module")
def plain():
    return _report(KILL)


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.long) if c == "srun-million-tasks" else c
                                  for c in sorted(CASES)])  # a million tasks' table: ~20 s, long
def test_a_long_or_absurd_line_beside_a_real_fixture_keeps_the_report_small(tmp_path, plain, case):
    name, text = CASES[case]
    d = tmp_path / "in"
    shutil.copytree(KILL, d)
    (d / name).write_text(text)
    code, doc, pm = _report(d)
    want_code, want_doc, want = plain
    assert code == want_code == 1
    root, want_root = pm["causes"][0], want["causes"][0]
    assert (root["kind"], root["ranks"], root["cause"]) == (want_root["kind"], want_root["ranks"], True)
    added = len(doc) - len(want_doc)
    # a long line adds a handful of items of at most MAX_ITEM_CHARS each; a million ranks add two tables of at most
    # MAX_REPORT_ROWS rows (ranks, the launcher's failures; ~300 characters a row indented) and MAX_LISTED_RANKS ranks
    most = 3 * MAX_REPORT_ROWS * 300 if case == "srun-million-tasks" else 16 * MAX_ITEM_CHARS
    assert added < most, f"{case}: the report grew by {added:,} characters"
    assert "A" * (MAX_ITEM_CHARS + 1) not in doc
    if case != "srun-million-tasks" and case != "absurd-table":
        assert "more characters]" in doc  # a cut is said, never silent
    for c in pm["causes"]:
        assert len(c["ranks"]) <= MAX_LISTED_RANKS


def test_an_absurd_rank_on_a_failure_table_is_not_a_rank(tmp_path):
    """Rank 10^23 made a world of a million ranks (flight.MAX_WORLD): one table block, an 18 MiB report."""
    name, text = CASES["absurd-table"]
    d = tmp_path / "in"
    shutil.copytree(KILL, d)
    (d / name).write_text(text)
    pm = _report(d)[2]
    assert pm["world_size"] == 4
    assert all(f["rank"] < 4 for f in pm["launcher"]["failures"])


def test_a_million_ranks_are_listed_with_their_count(tmp_path):
    """srun's tasks 0-999999: the cause for the ranks past MAX_RANK_CAUSES lists MAX_LISTED_RANKS of them and
    says how many there are; the launcher's table keeps its first rows and its count."""
    name, text = CASES["srun-million-tasks"]
    d = tmp_path / "in"
    shutil.copytree(KILL, d)
    (d / name).write_text(text)
    pm = _report(d)[2]
    rest = [c for c in pm["causes"] if c.get("ranks_total")]
    assert rest and rest[0]["ranks_total"] > 900_000 and len(rest[0]["ranks"]) == MAX_LISTED_RANKS
    assert pm["launcher"]["failures_total"] >= 1_000_000 and len(pm["launcher"]["failures"]) == MAX_REPORT_ROWS


def test_clip_says_what_it_cut():
    assert clip("abc", 5) == "abc"
    assert clip("x" * 10, 4) == "xxxx ... [cut: 6 more characters]"
