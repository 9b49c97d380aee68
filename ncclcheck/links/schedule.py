"""Which node pairs to measure in which round: circle-method rounds, quick random pairings, and re-test plans.

Pure functions of node counts and node ids; no torch, no I/O. A round is a list of disjoint pairs `(a, b)` with
`a < b`: every pair in a round runs at the same time, so a round costs about one pair's time and the full schedule
about (n-1) pair times instead of n(n-1)/2.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

Pair = tuple[int, int]
Round = list[Pair]


def _norm(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


def circle_rounds(n: int) -> list[Round]:
    """Round-robin (circle method): n nodes -> n-1 rounds of n/2 disjoint pairs, every unordered pair exactly once.

    Odd n gets a phantom node: each round one real node sits out (a bye), so there are n rounds of (n-1)/2 pairs.
    """
    if n < 2:
        return []
    m = n + (n % 2)  # the phantom node m-1 == n when n is odd
    ring = list(range(m))
    rounds: list[Round] = []
    for _ in range(m - 1):
        pairs = [_norm(ring[i], ring[m - 1 - i]) for i in range(m // 2)]
        rounds.append(sorted(p for p in pairs if p[1] < n))
        # Node ring[0] stays put; everyone else moves one seat round the table.
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def quick_rounds(n: int, count: int = 3, seed: int = 0) -> list[Round]:
    """`count` rounds of disjoint pairs with no pair repeated: circle rounds over a seeded random relabelling.

    Each node meets `count` different partners (one fewer in a round where it has the bye). With count >= n-1 this
    is the full schedule.
    """
    if n < 2 or count <= 0:
        return []
    rng = random.Random(seed)
    label = list(range(n))
    rng.shuffle(label)
    full = circle_rounds(n)
    chosen = rng.sample(range(len(full)), min(count, len(full)))
    return [sorted(_norm(label[a], label[b]) for a, b in full[i]) for i in sorted(chosen)]


def _members(pairs: Iterable[Pair]) -> list[int]:
    """The nodes of the given pairs, each once, in first-seen order."""
    return list(dict.fromkeys(x for a, b in pairs for x in (a, b)))


def retest_rounds(
    suspect_pairs: Iterable[Pair],
    good_nodes: Iterable[int],
    measured: Iterable[Pair] = (),
) -> list[Round]:
    """Rounds that test each member of each slow pair against a node known to be good.

    A member already measured against a good node needs no re-test (that measurement already says whether it is
    bad). Good partners are spread so that the tests pack into as few rounds as possible; a member for which no good
    partner exists is left out (the analysis then says it could not tell which endpoint is at fault).
    """
    good = sorted(set(good_nodes))
    done = {_norm(a, b) for a, b in measured}
    members = _members(suspect_pairs)
    todo = [x for x in members if not any(_norm(x, g) in done for g in good if g != x)]
    rounds: list[Round] = []
    busy: list[set[int]] = []
    for x in todo:
        placed = False
        for i in range(len(rounds) + 1):
            if i == len(rounds):
                rounds.append([])
                busy.append(set())
            if x in busy[i]:
                continue
            partners = [g for g in good if g != x and g not in busy[i] and _norm(x, g) not in done]
            if not partners:
                continue
            # The good node with the fewest re-tests so far, so no single good node becomes the bottleneck.
            load = {g: sum(g in r for r in busy) for g in partners}
            g = min(partners, key=lambda p: (load[p], p))
            rounds[i].append(_norm(x, g))
            busy[i].update((x, g))
            done.add(_norm(x, g))
            placed = True
            break
        if not placed and rounds and not rounds[-1]:
            rounds.pop()
            busy.pop()
    return [sorted(r) for r in rounds if r]


def again_rounds(pairs: Iterable[Pair]) -> list[Round]:
    """The given pairs once more, packed greedily into rounds of disjoint pairs (full mode's re-test of suspects:
    a pair slowed by a passing hiccup measures normal the second time, a slow link or node does not)."""
    rounds: list[Round] = []
    busy: list[set[int]] = []
    for a, b in sorted({_norm(a, b) for a, b in pairs}):
        for i in range(len(rounds) + 1):
            if i == len(rounds):
                rounds.append([])
                busy.append(set())
            if a not in busy[i] and b not in busy[i]:
                rounds[i].append((a, b))
                busy[i] |= {a, b}
                break
    return rounds
# ---------------------------------------------------------------------------------------------------------------
# Scalable mode: a number of rounds that does not grow with n

SCALE_FROM = 16  # nodes; from here on `links` uses the scalable mode unless --rounds says otherwise
SCALE_MAX_ROUNDS = 4  # one pairing round, two re-test rounds, one confirming round


# --rounds: the choices, the CLI's included (auto: full below SCALE_FROM nodes, scale from there)
ROUNDS = ("auto", "full", "quick", "scale")


def auto_mode(n: int, requested: str = "auto") -> str:
    """'full' | 'quick' | 'scale': what --rounds asked for, or for 'auto' full below SCALE_FROM nodes, else scale."""
    if requested in ROUNDS[1:]:
        return requested
    return "scale" if n >= SCALE_FROM else "full"


def scale_first_round(n: int, seed: int = 0) -> list[Round]:
    """Round 1 of the scalable mode: one seeded random perfect matching (one node sits out when n is odd)."""
    return quick_rounds(n, 1, seed)


def scale_next_rounds(n: int, seed: int = 0, count: int = 2) -> list[Round]:
    """The `count` circle rounds after scale_first_round's, over the same relabelling: new disjoint pairs, none
    measured yet, every node in each (but a bye), computed one round at a time (no n^2 schedule at 8,192 nodes).
    What suspects are re-paired along when there are too few good nodes (links/plan.py)."""
    if n < 2 or count <= 0:
        return []
    rng = random.Random(seed)  # the same draws, in the same order, as quick_rounds(n, 1, seed)
    label = list(range(n))
    rng.shuffle(label)
    m = n + (n % 2)
    [first] = rng.sample(range(m - 1), 1)
    out = []
    for j in range(1, min(count, m - 2) + 1):
        k = (first + j) % (m - 1)
        tail = list(range(1, m))
        tail = tail[-k:] + tail[:-k] if k else tail  # the circle method's ring after k moves
        ring = [0, *tail]
        out.append(sorted(_norm(label[ring[i]], label[ring[m - 1 - i]]) for i in range(m // 2)
                          if ring[i] < n and ring[m - 1 - i] < n))
    return out


def scale_retest_rounds(
    suspect_pairs: Iterable[Pair],
    good_nodes: Iterable[int],
    measured: Iterable[Pair] = (),
    partners: int = 2,
    max_rounds: int = SCALE_MAX_ROUNDS - 2,
    unmeasured_nodes: Iterable[int] = (),
    others: Iterable[int] = (),
    fallback: Iterable[Round] = (),
) -> list[Round]:
    """Re-test every member of every slow pair against `partners` different good nodes, in at most max_rounds.

    Two good partners per member tell a slow node (slow with both) from a slow link (fine with both), and a bad
    "good" partner cannot convict a good node on its own. `unmeasured_nodes` (the node that sat out round 1 when n
    is odd) are measured against good partners the same way, so no node goes untested. Each good node serves at
    most one re-test per round, so the rounds stay disjoint; members that do not fit (more suspects than good nodes
    can serve) are left out and the analysis says it could not tell (never a guess). The default leaves one round
    of SCALE_MAX_ROUNDS for confirm_rounds. An unmeasured node with no good partner left is measured against
    `others` (any live node): on 3 nodes whose one pair was slow, the node that sat out has no good partner, and
    without this it would never be measured at all (issue 32's sweep). So is a member still short of `partners`
    once the good nodes are spent: when every link of round 1 is slow by its bound (each slow node paired with a
    good one, all equally slow), no node is "good" yet, and re-pairing the members with each other and the others
    is what names the common node (a fast link clears both ends; slow with two partners names the member).
    """
    good = sorted(set(good_nodes))
    done = {_norm(a, b) for a, b in measured}
    members = _members(suspect_pairs)
    members += [x for x in dict.fromkeys(unmeasured_nodes) if x not in members]
    rounds: list[Round] = [[] for _ in range(max_rounds)]
    busy: list[set[int]] = [set() for _ in range(max_rounds)]
    load = {g: 0 for g in good}
    spare = [o for o in dict.fromkeys(others) if o not in load]
    unmeasured = set(unmeasured_nodes)

    def place(x: int, pool: Callable[[int], list]) -> bool:
        """x with the least used node of pool(round) in the first round where both are free."""
        for i in range(max_rounds):
            options = [] if x in busy[i] else [o for o in pool(i) if o != x and o not in busy[i]
                                                    and _norm(x, o) not in done]
            if options:
                g = min(options, key=lambda p: (load.get(p, 0), p))
                rounds[i].append(_norm(x, g))
                busy[i].update((x, g))
                done.add(_norm(x, g))
                load[g] = load.get(g, 0) + 1
                return True
        return False

    got = {x: 0 for x in members}
    # Everyone's first partner before anyone's second: the node that sat out (no measurement at all) must not be
    # left out because the suspects took every good node twice.
    for _ in range(partners):
        for x in members:
            if got[x] < partners and place(x, lambda i, x=x: good or (spare if x in unmeasured else [])):
                got[x] += 1

    def short(x: int) -> bool:
        return x in got and sum(x in p for rd in rounds for p in rd) < partners

    # Members short of partners (too few good nodes): first the `fallback` rounds' pairs (the circle rounds after
    # round 1: fresh pairs that pack every node into every round), then any live node not yet met, least used first.
    live = set(others) | set(good)
    for i, rd in enumerate(list(fallback)[:max_rounds]):
        for a, b in rd:
            if (short(a) or short(b)) and a in live and b in live and not {a, b} & busy[i] and _norm(a, b) not in done:
                rounds[i].append(_norm(a, b))
                busy[i].update((a, b))
                done.add(_norm(a, b))
    for x in members:
        while short(x) and place(x, lambda i: spare + good):
            pass
    return [sorted(r) for r in rounds if r]


def top_up_rounds(
    need: dict,
    good_nodes: Iterable[int],
    measured: Iterable[Pair] = (),
    others: Iterable[int] = (),
    rounds: Iterable[Round] = (),
    max_rounds: int = 1,
    fallback: Iterable[Round] = (),
) -> list[Round]:
    """`rounds` (the confirming round) with, where both ends are free, each node x of `need` paired with need[x]
    more nodes it has not met, good nodes first, then any of `others`: in scale mode's last round, a member of a
    slow pair that met only one other node (the good nodes were busy) or a node still unmeasured gets its missing
    witness instead of staying "can't tell". Never more than max_rounds rounds."""
    good = sorted(set(good_nodes))
    spare = [o for o in dict.fromkeys(others) if o not in set(good)]
    done = {_norm(a, b) for a, b in measured}
    out: list[list[Pair]] = [list(r) for r in rounds][:max(0, max_rounds)]
    out += [[] for _ in range(max(0, max_rounds) - len(out))]
    busy = [{x for p in r for x in p} for r in out]
    left = dict(need)
    live = set(good) | set(spare)
    # Fresh pairs of the circle rounds first (they pair needy nodes with each other and everyone else without
    # repeating a pair), then the good nodes and the others.
    for rd in fallback:
        for a, b in rd:
            for i, r in enumerate(out):
                if (left.get(a, 0) > 0 or left.get(b, 0) > 0) and {a, b} <= live | set(left) \
                        and not {a, b} & busy[i] and _norm(a, b) not in done:
                    r.append(_norm(a, b))
                    busy[i].update((a, b))
                    done.add(_norm(a, b))
                    for x in (a, b):
                        if x in left:
                            left[x] -= 1
                    break
    for x, k in left.items():
        for _ in range(max(0, k)):
            placed = False
            for i, r in enumerate(out):
                options = [] if x in busy[i] else [o for o in good + spare if o != x and o not in busy[i]
                                                        and _norm(x, o) not in done]
                if options:
                    g = options[0]
                    r.append(_norm(x, g))
                    busy[i].update((x, g))
                    done.add(_norm(x, g))
                    placed = True
                    break
            if not placed:
                break
    return [sorted(r) for r in out if r]


def confirm_rounds(candidate_links: Iterable[Pair], max_rounds: int = 1) -> list[Round]:
    """The scalable mode's last round: measure once more each slow pair whose members were both fine with their
    good partners. A slow path is slow again; a pair slowed by a passing hiccup (a busy CPU, a burst of other
    traffic) measures normal, so a hiccup is never reported as a slow link. The candidates of one pairing round are
    disjoint, so they fit in one round; whatever does not fit in max_rounds is left out."""
    return again_rounds(candidate_links)[:max(0, max_rounds)]
