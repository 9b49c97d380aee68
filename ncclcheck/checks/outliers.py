"""The robust low-outlier rule (issue 13), shared by links (slow links and nodes) and storage (slow mounts).

The reference is the median of the measurements after setting aside clear low outliers: values below `relative` x
the median that sit below a gap (the next value up is at least GAP times larger) are set aside and the median is
taken again, until no such group is left. A healthy spread (a continuum) keeps the plain median, so one fast value
cannot inflate it; a slow minority (or 2/3 of the links of 3 nodes with one bad NIC) is set aside.

Tight (issue 44 item 3, opt-in: `tight=True`, links only, and only where its links measure a network bound): when the
values above a cut agree within TIGHT_SPREAD (at least TIGHT_MIN of them), they are not a CPU-bound scatter but one
rate (a shaper's, a line rate's), and a smaller gap (TIGHT_GAP) below a higher share (TIGHT_FACTOR x relative) of
them is clear: a host at half the others' rate sits exactly on GAP and RELATIVE and was let through. A wide spread
keeps the rules above.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import NamedTuple, Optional

# A low group is a clear outlier only when the next value up is at least this many times larger. 2, not 1.5: on the
# lab's shared 2-core machine CPU-bound transfers of healthy hosts varied up to 3x, and 1.5 made 2 of 10 healthy
# 4-host runs name a slow link or node (scripts/links_rates.py); the faults to find are 5-100x.
GAP = 2.0
MAJORITY_GAP = 2.5  # ... and this many when the low group is most of the measurements (a noisy machine's spread is
# within 2x: issue 13 saw 0.73-0.85 GB/s against a best link of 1.87)
RELATIVE = 0.5  # the default share of the reference below which a clearly separated value is slow (links --relative)
# Tight: the lab's 1 Gbit-shaped healthy links agree within 1.01x (0.1191-0.1204 GB/s), a half-rate host measures
# 0.50x; 1.25 leaves room for real NICs' spread, 1.6 for a half-rate host's own noise (it still needs 1.6x, not 2x).
TIGHT_SPREAD = 1.25
TIGHT_MIN = 3  # values in the faster group: two (one link's two directions) say nothing about a spread
TIGHT_GAP = 1.6
TIGHT_FACTOR = 1.4  # x relative: 0.7 of the reference with the default 0.5


class Cut(NamedTuple):
    """What `cut` found: the reference, the lowest value kept when some were set aside (0.0 when none was), the
    share of the reference below which a set-aside value is slow, and whether the tight rule made a cut."""

    ref: Optional[float]
    ceiling: float
    share: float
    tight: bool


def reference(values: Sequence[float], relative: float) -> tuple[Optional[float], float]:
    """(reference, outlier ceiling): the median after setting aside clear low outliers, and the lowest value kept
    when some were set aside (0.0 when none was). See the module's rules."""
    c = cut(values, relative)
    return c.ref, c.ceiling


def tight_share(relative: float) -> float:
    return min(0.9, relative * TIGHT_FACTOR)


def cut(values: Sequence[float], relative: float, tight: bool = False) -> Cut:
    """The module's rules on `values`; tight=True allows the tight rule (the caller knows the values measure a
    bound, not a CPU)."""
    keep = sorted(values)
    if not keep:
        return Cut(None, 0.0, relative, False)
    ceiling, used = 0.0, False
    while True:
        ref = statistics.median(keep)
        at, at_tight = None, False
        for i in range(len(keep) - 1):
            if _clear_cut(keep, i, relative, ref):
                at, at_tight = i, False
            elif tight and _tight_cut(keep, i, relative, ref):
                at, at_tight = i, True
        if at is None:
            return Cut(ref, ceiling, tight_share(relative) if used else relative, used)
        used = used or at_tight
        ceiling = keep[at + 1]
        keep = keep[at + 1:]


def is_low_outlier(value: float, ref: Optional[float], ceiling: float, relative: float) -> bool:
    """Was `value` set aside by `cut` (below the ceiling, and below relative x the reference; pass Cut.share)?"""
    return ref is not None and value < ceiling and value < relative * ref


def low_outliers(values: Mapping, relative: float = RELATIVE) -> tuple[Optional[float], list]:
    """(reference, sorted keys of the clear low outliers) of {key: measurement}."""
    ref, ceiling = reference(list(values.values()), relative)
    return ref, sorted(k for k, v in values.items() if is_low_outlier(v, ref, ceiling, relative))


def _clear_cut(keep: list, i: int, relative: float, ref: float) -> bool:
    """Is keep[:i+1] a clear low outlier group? A minority needs a GAP and to be below relative x the median; a
    majority (2/3 of the links of 3 nodes with one bad NIC) needs a wider MAJORITY_GAP below at least two faster
    measurements, so that the one fast pair of a noisy machine is never taken for "normal"."""
    low, high = keep[i], keep[i + 1:]
    ratio = high[0] / low if low > 0 else float("inf")
    if len(high) * 2 > len(keep):
        return low < relative * ref and ratio >= GAP
    enough = len(high) >= min(2, len(keep) // 2)  # two faster measurements (one with only 2 nodes' 2 directions)
    return enough and ratio >= MAJORITY_GAP and low < relative * statistics.median(high)


def _tight_cut(keep: list, i: int, relative: float, ref: float) -> bool:
    """The tight rule: the values above keep[i] are at least TIGHT_MIN within TIGHT_SPREAD of each other, the next
    one up is TIGHT_GAP above keep[i], and keep[i] is below the tight share of the reference (of the faster group's
    median when the low group is not a minority)."""
    low, high = keep[i], keep[i + 1:]
    if len(high) < TIGHT_MIN or high[0] <= 0 or high[-1] / high[0] > TIGHT_SPREAD:
        return False
    ratio = high[0] / low if low > 0 else float("inf")
    base = ref if len(high) * 2 > len(keep) else statistics.median(high)
    return ratio >= TIGHT_GAP and low < tight_share(relative) * base
