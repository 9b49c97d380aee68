"""Per-iteration statistics: percentiles as numpy computes them, the coefficient of variation, the slowest rank's
count, and the high-variation flag the console shows."""

from __future__ import annotations

import pytest

from ncclcheck.bench.stats import (
    HIGH_CV,
    MAX_KEPT_ITERS,
    MAX_SAMPLES,
    bucket_sizes,
    iteration_stats,
    per_iteration,
    percentile,
    stride_for,
)


def test_percentile_interpolates_like_numpy():
    xs = [10.0, 20.0, 30.0, 40.0]
    assert percentile(xs, 50) == 25.0
    assert percentile(xs, 0) == 10.0 and percentile(xs, 100) == 40.0
    assert percentile(xs, 99) == pytest.approx(39.7)  # numpy.percentile([10,20,30,40], 99)
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_steady_iterations_are_not_flagged():
    st = iteration_stats([100.0, 101.0, 99.0, 100.0], [0, 1, 1, 1])
    assert (st["iters"], st["min_us"], st["max_us"], st["p50_us"]) == (4, 99.0, 101.0, 100.0)
    assert st["cv"] < 0.01 and st["high_variation"] is False
    assert st["slowest_rank_counts"] == {"0": 1, "1": 3}
    assert st["iter_us"] == [100.0, 101.0, 99.0, 100.0] and st["slowest_rank"] == [0, 1, 1, 1]


def test_one_slow_iteration_moves_p99_and_the_flag_but_not_p50():
    xs = [100.0] * 19 + [1000.0]
    st = iteration_stats(xs, [0] * 19 + [2])
    assert st["p50_us"] == 100.0 and st["p99_us"] > 800.0 and st["max_us"] == 1000.0
    assert st["cv"] > HIGH_CV and st["high_variation"] is True
    assert st["slowest_rank_counts"] == {"0": 19, "2": 1}


def test_long_runs_keep_statistics_but_not_every_iteration():
    st = iteration_stats([5.0] * (MAX_KEPT_ITERS + 1), [0] * (MAX_KEPT_ITERS + 1))
    assert st["iters"] == MAX_KEPT_ITERS + 1 and "iter_us" not in st and "slowest_rank" not in st


def test_no_iterations_give_no_statistics():
    assert iteration_stats([], []) is None


def test_strides_keep_the_sample_count_bounded():
    assert stride_for(20) == 1 and stride_for(MAX_SAMPLES) == 1 and stride_for(MAX_SAMPLES + 1) == 2
    assert bucket_sizes(7, 3) == [3, 3, 1] and bucket_sizes(6, 3) == [3, 3] and bucket_sizes(5, 1) == [1] * 5
    assert len(bucket_sizes(10**6, stride_for(10**6))) <= MAX_SAMPLES
    st = iteration_stats([10.0, 12.0, 11.0], [0, 1, 0], iters=7, stride=3)
    assert st["iters"] == 7 and st["stride"] == 3 and "stride" not in iteration_stats([1.0], [0])


def test_per_iteration_differences_in_microseconds():
    assert per_iteration([1.0, 1.5, 1.75]) == [500000.0, 250000.0]


def test_microsecond_jitter_of_a_launch_bound_loop_is_not_flagged():
    # One H100 rank, 64 MB all_reduce (a no-op): ~45 us per call with a cv of ~25 % is scheduling jitter.
    xs = [45.0, 38.0, 60.0, 41.0, 90.0, 44.0, 39.0, 47.0]
    st = iteration_stats(xs, [0] * len(xs))
    assert st["cv"] > HIGH_CV and st["high_variation"] is False
