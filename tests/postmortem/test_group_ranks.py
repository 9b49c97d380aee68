"""postmortem/group_ranks.py: a group's ranks as torch writes them ("ranks") or as a responder compacts them
("ranks_runs"), read the same; anything that is not a list of ranks refused, never expanded past MAX_WORLD."""

from __future__ import annotations

import json

import pytest

from ncclcheck.postmortem import flight
from ncclcheck.postmortem.group_ranks import MAX_WORLD, RUNS, compact, ranks_of, runs_of


@pytest.mark.parametrize("ranks", [list(range(4096)), list(range(3, 4096, 8)), [5, 1, 2, 3, 4, 9, 11, 13, 0],
                                   [7], [2, 0]])
def test_runs_expand_to_the_same_ranks_in_the_same_order(ranks):
    assert ranks_of({RUNS: runs_of(ranks)}) == ranks


def test_the_default_group_of_4096_ranks_travels_as_one_run_and_a_short_list_as_it_was():
    config = {"": {"name": "", "ranks": json.dumps(list(range(4096)))}, "1": {"name": "1", "ranks": "[0, 8]"}}
    out = compact(config)
    assert out[""] == {"name": "", RUNS: [[0, 4095, 1]]}
    assert out["1"] is config["1"]  # two ranks: their runs say nothing shorter
    assert ranks_of(out[""]) == list(range(4096)) == ranks_of(config[""])


@pytest.mark.parametrize("runs", [[[0, 9, 0]], [[5, 1, 1]], [[0, MAX_WORLD, 1]], [[0, 1]], [["0", 1, 1]],
                                  [[0, 1, 1.0]], [[-1, 2, 1]], [[0, MAX_WORLD - 1, 1], [0, 0, 1]], "[[0, 3, 1]]",
                                  [[[0], 1, 1]], [{"a": 1}], []])
def test_runs_that_are_not_a_group_of_ranks_are_refused(runs):
    # a zero or backward step, past the world, not three ints, too many ranks in all, nothing
    assert ranks_of({RUNS: runs}) is None


def test_a_dump_with_runs_gives_the_group_the_same_ranks_as_torchs_list():
    base = {"version": "2.10", "entries": [], "pg_status": {"0": {"last_enqueued_collective": "1",
                                                                 "last_completed_collective": "1"}}}
    listed = flight.normalise({**base, "pg_config": {"": {"name": "", "ranks": json.dumps(list(range(64)))}}}, 0,
                              "x", "json")
    runs = flight.normalise({**base, "pg_config": {"": {"name": "", RUNS: [[0, 63, 1]]}}}, 0, "x", "json")
    assert [g.ranks for g in listed.groups.values()] == [g.ranks for g in runs.groups.values()] == [list(range(64))]
