"""Pair schedules: every link measured exactly once, pairs in a round disjoint, re-tests decide the endpoint."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from ncclcheck.links import schedule
from ncclcheck.links.schedule import Pair, circle_rounds, quick_rounds, retest_rounds


def pairs_of(rounds: Iterable[Sequence[Pair]]) -> list[Pair]:
    return [p for r in rounds for p in r]


def _disjoint(rnd) -> bool:
    nodes = [x for p in rnd for x in p]
    return len(nodes) == len(set(nodes))


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=40))
def test_circle_covers_every_pair_exactly_once_in_disjoint_rounds(n):
    rounds = circle_rounds(n)
    pairs = pairs_of(rounds)
    assert sorted(pairs) == [(a, b) for a in range(n) for b in range(a + 1, n)]
    assert all(_disjoint(r) for r in rounds)
    assert all(a < b for a, b in pairs)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=2, max_value=40))
def test_round_count_is_n_minus_1_even_and_n_odd_with_one_bye(n):
    rounds = circle_rounds(n)
    if n % 2 == 0:
        assert len(rounds) == n - 1 and all(len(r) == n // 2 for r in rounds)
    else:
        assert len(rounds) == n and all(len(r) == (n - 1) // 2 for r in rounds)
        # each node sits out exactly once
        byes = [set(range(n)) - {x for p in r for x in p} for r in rounds]
        assert sorted(b.pop() for b in byes) == list(range(n))


def test_small_worlds():
    assert circle_rounds(0) == [] and circle_rounds(1) == []
    assert circle_rounds(2) == [[(0, 1)]]
    assert len(circle_rounds(8)) == 7


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=2, max_value=30), st.integers(min_value=1, max_value=5), st.integers(0, 1000))
def test_quick_rounds_disjoint_no_repeats_seeded(n, count, seed):
    rounds = quick_rounds(n, count, seed)
    assert len(rounds) == min(count, len(circle_rounds(n)))
    assert all(_disjoint(r) for r in rounds)
    pairs = pairs_of(rounds)
    assert len(pairs) == len(set(pairs))
    assert rounds == quick_rounds(n, count, seed)  # same seed, same plan on every node


def test_retest_pairs_each_member_of_a_slow_pair_with_a_good_node():
    rounds = retest_rounds([(0, 1)], good_nodes=[2, 3, 4, 5])
    pairs = pairs_of(rounds)
    assert len(rounds) == 1 and _disjoint(rounds[0])
    partners = {x: ({a, b} - {x}).pop() for a, b in pairs for x in (a, b) if x in (0, 1)}
    assert set(partners) == {0, 1} and set(partners.values()) <= {2, 3, 4, 5}


def test_retest_skips_members_already_measured_against_a_good_node():
    assert pairs_of(retest_rounds([(0, 1)], good_nodes=[2, 3], measured=[(0, 2)])) in ([(1, 2)], [(1, 3)])
    assert retest_rounds([(0, 1)], good_nodes=[2], measured=[(0, 2), (1, 2)]) == []


def test_retest_without_good_nodes_plans_nothing():
    assert retest_rounds([(0, 1), (2, 3)], good_nodes=[]) == []


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=4, max_value=20), st.data())
def test_retest_rounds_are_disjoint_and_use_only_good_partners(n, data):
    nodes = list(range(n))
    bad = data.draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=n // 2, unique=True))
    good = [x for x in nodes if x not in bad]
    suspects = [(min(b, g), max(b, g)) for b, g in zip(bad, reversed(nodes)) if b != g]
    rounds = retest_rounds(suspects, good)
    assert all(_disjoint(r) for r in rounds)
    for a, b in pairs_of(rounds):
        assert a in good or b in good
    tested = {x for p in pairs_of(rounds) for x in p}
    for a, b in suspects:
        for x in (a, b):
            if any(g != x for g in good):
                assert x in tested


def test_again_rounds_packs_suspect_pairs_into_disjoint_rounds():
    from ncclcheck.links.schedule import again_rounds

    rounds = again_rounds([(1, 0), (1, 2), (1, 3), (2, 3)])
    assert sorted(pairs_of(rounds)) == [(0, 1), (1, 2), (1, 3), (2, 3)]
    assert all(_disjoint(r) for r in rounds) and len(rounds) == 3  # node 1 is in three pairs
    assert again_rounds([]) == []
def test_scalable_mode_needs_at_most_four_rounds_whatever_n():
    from ncclcheck.links.schedule import SCALE_MAX_ROUNDS, auto_mode, scale_first_round, scale_retest_rounds

    for n in (16, 101, 1024):
        first = scale_first_round(n, seed=3)
        assert len(first) == 1 and len({x for p in first[0] for x in p}) >= n - 1  # a perfect matching
        slow = first[0][:min(5, n // 8)]  # a few slow pairs
        members = {x for p in slow for x in p}
        good = [x for x in range(n) if x not in members]
        re = scale_retest_rounds(slow, good, measured=first[0])
        assert 1 + len(re) <= SCALE_MAX_ROUNDS
        for rd in re:
            flat = [x for p in rd for x in p]
            assert len(flat) == len(set(flat))  # disjoint pairs in a round
            assert all((a in members) != (b in members) for a, b in rd)  # a suspect meets a good node
        partners = {m: {b if a == m else a for rd in re for a, b in rd if m in (a, b)} for m in members}
        assert all(len(p) == 2 for p in partners.values())  # two witnesses each: slow node vs slow link
    assert auto_mode(8) == "full" and auto_mode(16) == "scale" and auto_mode(1024, "full") == "full"


def test_scalable_retest_leaves_out_what_does_not_fit_instead_of_adding_rounds():
    from ncclcheck.links.schedule import scale_retest_rounds

    re = scale_retest_rounds([(0, 1), (2, 3), (4, 5)], good_nodes=[6], partners=2, max_rounds=3)
    assert len(re) <= 3 and all(len(rd) == 1 for rd in re)


def test_scalable_retest_measures_the_node_that_sat_out_and_leaves_a_round_to_confirm():
    from ncclcheck.links.schedule import SCALE_MAX_ROUNDS, scale_first_round, scale_retest_rounds

    first = scale_first_round(17, seed=1)
    [bye] = set(range(17)) - {x for p in first[0] for x in p}
    re = scale_retest_rounds([], [x for x in range(17) if x != bye], measured=first[0], unmeasured_nodes=[bye])
    assert len(re) == 2 and all(len(rd) == 1 and bye in rd[0] for rd in re)
    # by default the re-tests leave the last of the 4 rounds to confirm_rounds
    many = scale_retest_rounds([(0, 1), (2, 3), (4, 5)], good_nodes=[6])
    assert 1 + len(many) + 1 <= SCALE_MAX_ROUNDS


def test_confirm_rounds_measure_candidate_pairs_again_within_the_limit():
    from ncclcheck.links.schedule import confirm_rounds

    assert confirm_rounds([(3, 1), (0, 2)]) == [[(0, 2), (1, 3)]]  # disjoint: one round
    assert confirm_rounds([(0, 1), (1, 2)], max_rounds=1) == [[(0, 1)]]  # what does not fit is left out
    assert confirm_rounds([(0, 1)], max_rounds=0) == [] and confirm_rounds([]) == []


def test_scale_retest_measures_the_node_that_sat_out_even_with_no_good_partner():
    # 3 nodes: round 1 paired 1-2 (slow), node 0 sat out. Nobody is "good" yet; without a fallback node 0 was never
    # measured and nothing could be said of anyone (issue 32's sweep in the Slurm lab).
    rounds = schedule.scale_retest_rounds([(1, 2)], [], measured=[(1, 2)], max_rounds=2, unmeasured_nodes=[0],
                                          others=[0, 1, 2])
    assert rounds == [[(0, 1)], [(0, 2)]]
