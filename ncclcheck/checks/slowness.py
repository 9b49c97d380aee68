"""The one rule for "this rank / host / job is slow" (issue 47; links and diagnose to share it, issue 48): a unit is
slow when the share of the job's time it costs stays at or above a stated floor, consistently, over enough samples.
Never from one sample.

A sample is one step of the job (live/watch and diagnose: a stretch of collectives between two of the job's own
compute gaps, postmortem/slow.py), and a unit's share in it is the part of that step the job lost to the unit. The
unit is slow since sample i when every stretch of MIN_SAMPLES consecutive samples from i to the newest has the share
at or above the floor in at least CONSISTENT of its samples; i is the first such sample that is itself at or above
the floor (the slowdown "began then"). A stretch that ended names nothing: the newest MIN_SAMPLES samples are not
consistently slow, and neither are the newest 2 x MIN_SAMPLES together. (The newest stretch alone may dip: a unit that
costs the job 8 % of a step against a 5 % floor, in a job whose ranks jitter by a few percent, is at the floor in
about 1 step of 8, and 8 samples fail the 75 % in ~7 % of looks: issue 65's lab straggler, unnamed in 1 watch of 5.
Twice the samples halve that noise; a slowdown that ended leaves the newest 16 within 5 steps.)

Floors (stated in every verdict that uses them):
- FLOOR, 5 %: a rank or host is slow only when it costs the job at least 5 % of each step, measured against the
  other ranks of the same step (what the job would have saved had it arrived with the latest of the others). Random
  jitter costs the job the gap between the latest and the next-latest rank, spread over every rank in turn: a rank
  that is latest by 5 % in 3 steps of 4 is not jitter. A data-dependent step (a different rank slow each step) is
  latest in 1 step of n.
- JOB_FLOOR, 10 %: the job against its own best stretch (the lowest median over MIN_SAMPLES consecutive steps):
  that reference is itself a low statistic of noisy steps (on a job with +-20 % jitter per rank it sits ~4 % below
  the typical step), so the floor is twice a unit's.
NVIDIA Resiliency Extension's two scores (relative to the best unit, relative to the unit's own best) are `scores`:
reported as history beside the verdict, never the verdict, because "relative to the best" is relative to an extreme
of noisy samples.

links (checks/outliers.py's low-outlier rule) judges one measurement per link, where a slow link is 5-100x off:
a single sample, so this rule's MIN_SAMPLES keeps them apart until links measures repeatedly (then its shares are
1 - bandwidth / reference per round, judged here).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

FLOOR = 0.05
JOB_FLOOR = 0.10
CONSISTENT = 0.75
MIN_SAMPLES = 8
# A unit the rule does not name but that passes it at this share of the floor over the newest 2 x MIN_SAMPLES samples
# is late consistently, under the floor: said (a warning with its share), never a silent pass. The lab's 1.5x compute
# straggler in a ~125 ms step bound by communication cost its job ~6 % of each step, and the others' jitter put 1 step
# in 4 or more under 5 %: named in 2 watches of 3, the third passed. Random jitter costs a unit a share at half the
# floor in few steps of each (the latest rank changes), so this names only a unit that leads step after step.
UNDER_FLOOR = 0.5


@dataclass(frozen=True)
class Verdict:
    """What `judge` found: slow since sample `since` (None: not slow), over `samples` samples, the median share and
    the share of samples at or above the floor since then."""

    slow: bool
    since: Optional[int] = None
    samples: int = 0
    share: float = 0.0
    consistent: float = 0.0
    floor: float = FLOOR

    def to_json(self) -> dict:
        return {"slow": self.slow, "since": self.since, "samples": self.samples, "share": round(self.share, 4),
                "consistent": round(self.consistent, 4), "floor": self.floor}


def judge(shares: Sequence[float], floor: float = FLOOR, consistent: float = CONSISTENT,
          min_samples: int = MIN_SAMPLES) -> Verdict:
    """The rule, on one unit's shares, oldest first (see the module)."""
    n = len(shares)
    if n < min_samples or min_samples < 1:
        return Verdict(False, floor=floor)
    above = [1 if s >= floor else 0 for s in shares]
    prefix = [0]
    for a in above:
        prefix.append(prefix[-1] + a)
    need = consistent * min_samples

    def ok(i: int) -> bool:
        return prefix[i + min_samples] - prefix[i] >= need

    i = n - min_samples
    if not ok(i):
        # the newest stretch dipped: still slow when the newest two stretches together are consistent and the one
        # before the newest held (its walk back from there)
        i -= min_samples
        if i < 0 or not ok(i) or prefix[n] - prefix[i] < consistent * 2 * min_samples:
            return Verdict(False, floor=floor)
    while i > 0 and ok(i - 1):
        i -= 1
    while not above[i]:
        i += 1
    since = shares[i:]
    return Verdict(True, i, len(since), statistics.median(since), sum(above[i:]) / len(since), floor)


def under_floor(shares: Sequence[float], floor: float = FLOOR) -> Optional[Verdict]:
    """A unit the rule leaves unnamed that still costs the job a share at UNDER_FLOOR of the floor consistently over
    its newest 2 x MIN_SAMPLES samples (the rule at that floor): its verdict there; None otherwise, or when named."""
    if judge(shares, floor).slow:
        return None
    v = judge(shares[-2 * MIN_SAMPLES:], floor * UNDER_FLOOR)
    return v if v.slow else None


def last_slow(shares: Sequence[float], floor: float = FLOOR, consistent: float = CONSISTENT,
              min_samples: int = MIN_SAMPLES) -> Optional[int]:
    """The newest sample at or above the floor inside the newest stretch of `min_samples` that passes the rule: the
    last slow step of the newest slowdown, whether it still lasts or ended (watch --follow says a slowdown's end as
    that step's time); None when no stretch passes."""
    n = len(shares)
    if n < min_samples or min_samples < 1:
        return None
    above = [s >= floor for s in shares]
    run = sum(above[n - min_samples:])
    need = consistent * min_samples
    for i in range(n - min_samples, -1, -1):  # stretch [i, i + min_samples), newest first
        if i < n - min_samples:
            run += above[i] - above[i + min_samples]
        if run >= need:
            return max(j for j in range(i, i + min_samples) if above[j])
    return None


def own_best_shares(times: Sequence[float], block: int = MIN_SAMPLES) -> tuple[Optional[float], list]:
    """(the best stretch's median time, each sample's share lost against it: 1 - best / time) for a unit's times per
    sample (the job's step times): its own best is the lowest median of `block` consecutive samples."""
    if len(times) < block or block < 1:
        return None, []
    best = min(statistics.median(times[i:i + block]) for i in range(0, len(times) - block + 1))
    return best, [max(0.0, 1.0 - best / t) if t > 0 else 0.0 for t in times]


def scores(times: Mapping, block: int = MIN_SAMPLES) -> dict:
    """NVRx's two scores per unit from {unit: its busy time per sample, oldest first}: relative (the best unit's
    recent median / this unit's) and individual (this unit's best stretch / its recent median); 1.0 is as fast as the
    best, lower is slower. Recent: the newest `block` samples. Units with fewer samples are left out."""
    recent = {u: statistics.median(t[-block:]) for u, t in times.items() if len(t) >= block}
    if not recent:
        return {}
    best = min(recent.values())
    out = {}
    for u, r in recent.items():
        own, _ = own_best_shares(times[u], block)
        out[u] = {"relative": round(best / r, 4) if r > 0 else 1.0,
                  "individual": round(own / r, 4) if own is not None and r > 0 else 1.0}
    return out
