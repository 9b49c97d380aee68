"""live/outlast.py: a rank that did not move between watch's two looks is overdue only once twice the longest gap its
recorder shows between two calls has passed since its newest call, on its own clock."""

from __future__ import annotations

from ncclcheck.live.fetch import Answer
from ncclcheck.live.outlast import due_in


def _first(calls_s: list) -> Answer:
    return Answer(0, {"flight": {"entries": [{"time_created_ns": int(t * 1e9)} for t in calls_s]}})


def _second(now_s: float) -> Answer:
    return Answer(0, {"time": now_s, "progress": {}})


def test_a_rank_inside_a_step_as_long_as_its_others_is_not_overdue_yet():
    # two calls a 3 s step, 10 ms apart: the longest gap is 2.99 s, not the median's 10 ms; overdue at 112.01 + 2 x 2.99
    calls = [t for s in range(5) for t in (100.0 + 3 * s, 100.01 + 3 * s)]
    assert abs(due_in({0: _first(calls)}, {0: _second(calls[-1] + 2.5)}, [0]) - 3.48) < 1e-6


def test_a_rank_hung_long_before_the_look_is_overdue_at_once():
    calls = [100.0 + 0.1 * i for i in range(20)]
    assert due_in({0: _first(calls)}, {0: _second(calls[-1] + 60)}, [0]) == 0.0


def test_the_latest_rank_sets_the_wait_and_what_is_unknown_sets_none():
    a, b = [10.0, 11.0, 12.0], [10.0, 14.0]
    first, second = {0: _first(a), 1: _first(b), 2: _first([5.0])}, {0: _second(12.5), 1: _second(15.0),
                                                                      2: _second(6.0)}
    assert due_in(first, second, [0, 1, 2]) == 14.0 + 2 * 4.0 - 15.0  # rank 1; rank 2 has one call: no gap known
    assert due_in({0: _first(a)}, {0: Answer(0, {"progress": {}})}, [0]) == 0.0  # no time said
    assert due_in({0: Answer(0, None)}, {0: _second(12.5)}, [0]) == 0.0
