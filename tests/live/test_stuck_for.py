"""watch says how long a hung job has been stuck: from the newest collective call the frozen ranks recorded to the
time each answered, on each rank's own clock."""

from __future__ import annotations

from ncclcheck.live.fetch import Answer
from ncclcheck.live.watch import stuck_s
from ncclcheck.postmortem import flight


def _doc(now_s: float, created_s: list) -> dict:
    return {"entries": [{"time_created_ns": int(t * 1e9)} for t in created_s], flight.LIVE_KEY: {"time": now_s}}


def test_the_stall_is_measured_from_the_newest_call_any_frozen_rank_made():
    # rank 0 entered all_reduce #6 at t=105 and waits; rank 1 made its last call at t=100 and sleeps
    docs = {0: _doc(120.0, [100.0, 105.0]), 1: _doc(120.0, [95.0, 100.0])}
    assert stuck_s(docs, {}, [0, 1]) == 15.0
    later = Answer(0)
    later.doc = {"time": 125.0}  # the second look's answer is the later "now"
    assert stuck_s(docs, {0: later}, [0]) == 20.0


def test_no_figure_without_both_times():
    assert stuck_s({0: {"entries": [], flight.LIVE_KEY: {"time": 1.0}}}, {}, [0]) is None
    assert stuck_s({0: {"entries": [{"time_created_ns": 5}], flight.LIVE_KEY: {}}}, {}, [0]) is None
    assert stuck_s({}, {}, [0]) is None
