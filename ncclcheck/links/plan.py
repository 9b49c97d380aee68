"""Which rounds links runs, one at a time, each re-test stage planned from what the rounds before it measured.

Pure: the matrix so far, the dead nodes and the bounds' floors in, the next round's pairs out. links/job.py's
coordinator runs the rounds it returns; tests drive the same object with synthetic measurements.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Optional

from . import schedule
from .analyze import Matrix, classify


class RoundPlan:
    """The rounds of one links run. Suspects are measured again before any verdict: in quick mode against nodes
    that passed, in scale mode against two good partners each (or, when there are too few, against each other and
    any other node: issue 32, every link of round 1 equally slow by its bound) and then, for a pair whose members
    both passed, the pair itself once more; in full mode (between real nodes; ranks on one host only measure CPU
    scheduling) the suspect pairs themselves."""

    def __init__(self, n: int, mode: str, unit: str = "node", quick_rounds: int = 3, seed: int = 0,
                 relative: float = 0.5, min_gbps: Optional[float] = None):
        self.n, self.unit, self.relative, self.min_gbps, self.seed = n, unit, relative, min_gbps, seed
        self.mode = schedule.auto_mode(n, mode)
        if self.mode == "quick":
            self.rounds = schedule.quick_rounds(n, quick_rounds, seed)
            if quick_rounds >= n - 1:
                self.rounds = schedule.circle_rounds(n)  # quick would cover everything anyway
        elif self.mode == "scale":
            self.rounds = schedule.scale_first_round(n, seed)
        else:
            self.rounds = schedule.circle_rounds(n)
        if self.mode == "scale":
            self.stages = 2
        elif self.mode == "full":
            self.stages = 0 if unit != "node" else 1
        else:
            self.stages = 0 if len(self.rounds) == len(schedule.circle_rounds(n)) else 1
        self.stage = 0
        self.next = 0  # index of the next round to hand out

    def next_round(self, matrix: Matrix, dead: Container[int] = (),
                   floors: Optional[Matrix] = None) -> Optional[list]:
        """The next round's pairs, or None when the run is complete."""
        while self.next == len(self.rounds) and self.stage < self.stages:
            self.rounds += self._retest(self.stage, len(self.rounds), matrix, dead, floors)
            self.stage += 1
        if self.next >= len(self.rounds):
            return None
        self.next += 1
        return list(self.rounds[self.next - 1])

    def _retest(self, stage: int, planned: int, matrix: Matrix, dead: Container[int],
                floors: Optional[Matrix]) -> list:
        """The rounds of re-test stage `stage`, planned from the matrix so far; `planned` rounds are already run."""
        n = self.n
        c = classify(matrix, self.relative, self.min_gbps, floors)
        alive = [x for x in range(n) if x not in dead]
        suspects = [p for p in c.slow_links if p[0] not in dead and p[1] not in dead]
        if self.mode == "full":
            return schedule.again_rounds(suspects)
        measured = [(a, b) for a in range(n) for b in range(a + 1, n)
                    if matrix[a][b] is not None or matrix[b][a] is not None]
        good = [g for g in c.good_nodes if g not in dead]
        if self.mode == "quick":
            return schedule.retest_rounds(suspects, good, measured)
        left = schedule.SCALE_MAX_ROUNDS - planned
        if stage == 0:
            # The node that sat out the pairing (odd n) is measured too: otherwise nothing would be known of it.
            untested = [x for x in alive if x not in c.raw_counts]
            return schedule.scale_retest_rounds(suspects, good, measured, max_rounds=left - 1,
                                                unmeasured_nodes=untested, others=alive,
                                                fallback=schedule.scale_next_rounds(n, self.seed, left - 1))
        # Confirm: a slow pair neither of whose members is slow and both of which were re-tested (links to nodes
        # found slow do not count: they show nothing of the other end).
        slow_nodes = set(c.slow_nodes)
        fine = {x for x, (s, m) in c.link_counts.items() if s < m}  # fine with some partner not found slow
        candidates = [(a, b) for a, b in suspects if a not in slow_nodes and b not in slow_nodes
                      and c.link_counts.get(a, (0, 0))[1] >= 2 and c.link_counts.get(b, (0, 0))[1] >= 2
                      and a in fine and b in fine]
        rounds = schedule.confirm_rounds(candidates, max_rounds=left)
        # ... and in the same round(s), a witness more for each node that is still undecided: on a slow link no
        # slow node explains, with fewer than two measured links (or none at all).
        need = {}
        for x in (x for x in alive if x not in slow_nodes):
            total = c.link_counts.get(x, (0, 0))[1]  # its links to nodes not found slow
            unexplained = [lk for lk in suspects if x in lk and not set(lk) & slow_nodes]
            met_good = any(matrix[x][y] is not None or matrix[y][x] is not None
                           for y in range(n) if y != x and y not in slow_nodes)
            if not met_good:  # measured with nobody, or only with nodes found slow: nothing shows it fine
                need[x] = 1 if total else 2
            elif unexplained and total < 2:
                need[x] = 2 - total
            elif unexplained and x not in fine:  # slow with everyone it met and nobody named: one more witness
                need[x] = 1
        # witnesses: good nodes first, then any node not found slow (a slow one could only be slow again)
        others = [y for y in alive if y not in slow_nodes]
        return schedule.top_up_rounds(need, good, measured, others, rounds, max_rounds=left,
                                      fallback=schedule.scale_next_rounds(self.n, self.seed, planned - 1 + left))
