"""checks/slowness.py: the one slow-unit rule: consistent over a stretch, above a stated floor, never one sample."""

from __future__ import annotations

import pytest

from ncclcheck.checks import slowness


def test_a_unit_slow_in_every_sample_is_slow_since_the_first():
    v = slowness.judge([0.3] * 20)
    assert v.slow and v.since == 0 and v.samples == 20 and v.share == 0.3 and v.floor == slowness.FLOOR


def test_never_from_one_sample_or_a_short_stretch():
    assert not slowness.judge([0.0] * 19 + [0.9]).slow
    assert not slowness.judge([0.9] * (slowness.MIN_SAMPLES - 1)).slow


def test_a_slowdown_that_began_mid_way_is_named_from_then():
    v = slowness.judge([0.0] * 30 + [0.2] * 20)
    assert v.slow and v.since == 30 and v.samples == 20


def test_below_the_floor_or_not_consistent_is_not_slow():
    assert not slowness.judge([slowness.FLOOR * 0.9] * 40).slow
    # slow one sample in two (a different unit slow each step): never 3 in 4
    assert not slowness.judge([0.5, 0.0] * 20).slow


def test_a_slowdown_that_ended_is_not_named():
    assert not slowness.judge([0.3] * 30 + [0.0] * slowness.MIN_SAMPLES).slow


def test_own_best_and_the_nvrx_scores():
    best, shares = slowness.own_best_shares([100.0] * 10 + [150.0] * 10)
    assert best == 100.0 and shares[0] == 0.0 and abs(shares[-1] - 1 / 3) < 1e-9
    sc = slowness.scores({0: [100.0] * 10, 1: [100.0] * 5 + [200.0] * 10})
    assert sc[0] == {"relative": 1.0, "individual": 1.0}
    assert sc[1] == {"relative": 0.5, "individual": 0.5}


def test_the_last_slow_step_of_a_slowdown_that_ended_or_lasts():
    """watch --follow says a slowdown ended at its last slow step (not the look that saw it end)."""
    slow, ok = 0.2, 0.0
    ended = [ok] * 5 + [slow] * 12 + [ok] * 10
    assert slowness.last_slow(ended) == 16 and not slowness.judge(ended).slow
    lasting = [ok] * 5 + [slow] * 12
    assert slowness.last_slow(lasting) == 16 and slowness.judge(lasting).slow
    assert slowness.last_slow([ok, slow] * 10) is None  # never 3 of every 4
    assert slowness.last_slow([slow] * 7) is None  # too few samples
    gap = [slow] * 9 + [ok] + [slow] * 2 + [ok] * 9  # a hole inside the stretch: still its last slow step
    assert slowness.last_slow(gap) == 11


def test_a_newest_stretch_that_dips_is_not_an_end_when_the_newest_two_hold():
    """Issue 65: a unit above the floor in ~7 steps of 8 for 40 steps whose newest 8 hold only 5 is still slow (the
    newest 16 hold 13: 81 %), from the start of its slowdown; an end is still an end: the newest 8 all under the floor
    (16 hold 8), or 16 that hold 11 (69 %)."""
    hi, lo = 0.09, 0.03
    slow_for = [hi, hi, hi, lo, hi, hi, hi, hi] * 5
    dipped = [0.0] * 10 + slow_for + [hi, lo, hi, lo, hi, lo, hi, hi]
    v = slowness.judge(dipped)
    assert v.slow and v.since == 10 and v.samples == len(dipped) - 10, v
    assert not slowness.judge([0.0] * 10 + slow_for + [lo] * 8).slow  # ended
    assert not slowness.judge([0.0] * 10 + slow_for[:-8] + [hi, lo, hi, lo, hi, hi, lo, hi]
                              + [lo, hi, lo, hi, lo, hi, lo, hi]).slow  # 16 that hold 11: not consistent
    assert not slowness.judge([hi, lo] * 20).slow  # half the steps, never consistent


def test_under_the_floor_is_the_rule_at_half_the_floor_over_the_newest_steps():
    late = [0.045, 0.06, 0.03, 0.055, 0.04, 0.06, 0.035, 0.05] * 2  # 4.5 % typical, under 5 % in 1 step of 2
    assert not slowness.judge(late).slow
    v = slowness.under_floor(late)
    assert v is not None and v.slow and v.samples == 16 and v.share == pytest.approx(0.0475)
    assert slowness.under_floor([0.08] * 16) is None  # named by the rule: not said again
    assert slowness.under_floor([0.03, 0.0, 0.0, 0.01, 0.0, 0.0, 0.02, 0.0] * 2) is None  # jitter: late in few steps
