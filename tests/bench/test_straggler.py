"""Straggler naming: the late rank has the SHORTEST time; the ranks with long times are its victims."""

from __future__ import annotations

import random

from ncclcheck.bench.straggler import annotate_row, find_stragglers
from ncclcheck.model import Status

T = 2000.0  # the collective's own time, us
LATE = 5000.0  # rank 2 arrives 5 ms late every time


def rows_with_late_rank(late=2, n=4, rows=8, jitter=50.0, seed=0, arrivals=True):
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        arrival = [rng.uniform(0, jitter) for _ in range(n)]
        arrival[late] += LATE
        leave = max(arrival) + T
        row = {"rank_time_us": [leave - a + rng.uniform(0, jitter) for a in arrival]}
        if arrivals:
            row["arrival_us"] = arrival
        out.append(row)
    return out


def test_rank_arriving_5ms_late_every_time_is_named_not_the_long_durations():
    rows = rows_with_late_rank()
    longest = max(range(4), key=lambda r: rows[0]["rank_time_us"][r])
    assert longest != 2 and min(range(4), key=lambda r: rows[0]["rank_time_us"][r]) == 2
    res = find_stragglers(rows, node_of={0: 0, 1: 0, 2: 1, 3: 1})
    assert res.straggler == 2
    [c] = res.checks
    assert c.id == "bench.stragglers" and c.status is Status.WARN and c.node == 1
    assert "rank 2 (node 1)" in c.summary and "8 of 8" in c.summary
    assert "SHORTEST" in c.detail
    assert abs(c.evidence["median_late_us"] - LATE) < 200
    assert all(n["late_rank"] == 2 and n["source"] == "arrival" for n in res.rows)
    # the annotation says who waited how long: everybody but rank 2 waited about 5 ms
    w = res.rows[0]["wait_us"]
    assert w[2] == 0 and all(abs(w[r] - LATE) < 200 for r in (0, 1, 3))


def test_without_arrival_times_the_shortest_duration_is_the_straggler():
    res = find_stragglers(rows_with_late_rank(arrivals=False))
    assert res.straggler == 2 and res.rows[0]["source"] == "duration"
    assert "inferred" in res.checks[0].detail


def test_balanced_ranks_pass():
    res = find_stragglers([{"arrival_us": [0, 20, 40, 10], "rank_time_us": [T + 40, T + 20, T, T + 30]}] * 6)
    assert res.straggler is None and res.checks[0].status is Status.PASS
    assert all(n["late_rank"] is None for n in res.rows)


def test_an_occasional_late_rank_is_not_a_straggler():
    rows = rows_with_late_rank(rows=3) + [
        {"arrival_us": [0, 10, 20, 5], "rank_time_us": [T] * 4} for _ in range(5)]
    res = find_stragglers(rows)
    assert res.straggler is None and res.checks[0].status is Status.PASS
    assert res.checks[0].evidence["late_counts"] == {"2": 3}


def test_lateness_must_matter_relative_to_the_collective():
    # 150 us late on a 100 ms collective is noise; on a 200 us one it is not
    big = {"arrival_us": [0, 0, 150, 0], "rank_time_us": [100_150, 100_150, 100_000, 100_150]}
    small = {"arrival_us": [0, 0, 150, 0], "rank_time_us": [350, 350, 200, 350]}
    assert annotate_row(big)["late_rank"] is None
    assert annotate_row(small)["late_rank"] == 2


def test_nothing_recorded_is_a_skip():
    res = find_stragglers([{"rank_time_us": [5.0]}, {}])
    assert res.checks[0].status is Status.SKIP and res.straggler is None
