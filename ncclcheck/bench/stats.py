"""Per-iteration statistics of one bench row: pure functions of the per-iteration times every rank measured.

An iteration of a synchronous collective is as slow as its slowest rank, so the per-iteration figure is the
maximum over ranks (the same rule the row's mean follows). The row's mean (`time_us`, the nccl-tests figure) is
not recomputed here: it stays the slowest rank's mean over the timed loop.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Optional

# Coefficient of variation above which a row's iterations are called unsteady: the mean then hides iterations
# much slower than it (noisy neighbours, CPU contention, a flapping link), and p99 is the figure to look at.
HIGH_CV = 0.2
# ...and whose standard deviation is above this: a spread of a few microseconds is the host's own scheduling jitter
# on a launch-bound loop (seen: cv 20-30 % at ~45 us per call on an idle H100, every size up to 64 MB on one rank),
# not a neighbour or a link, which cost tens of microseconds or more per slow iteration.
JITTER_FLOOR_US = 50.0
# Per-iteration arrays kept in the JSON up to this many iterations; statistics always use every sample.
MAX_KEPT_ITERS = 1000
# Timestamps per timed loop at most: past this, one stamp per `stride` iterations and each sample is the mean of
# its stride (a million CUDA events, or an 8 MB all_reduce per row, would cost more than they tell).
MAX_SAMPLES = 10000


def stride_for(iters: int) -> int:
    return max(1, -(-iters // MAX_SAMPLES))


def bucket_sizes(iters: int, stride: int) -> list[int]:
    """Iterations per sample: `stride` each, the last one what is left."""
    full, rest = divmod(iters, stride)
    return [stride] * full + ([rest] if rest else [])


def percentile(xs: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not xs:
        raise ValueError("percentile of no values")
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def iteration_stats(iter_us: Sequence[float], slowest_rank: Sequence[int], iters: Optional[int] = None,
                    stride: int = 1) -> Optional[dict]:
    """p50/p99/min/max/cv of the per-iteration times (slowest rank per iteration), the slowest rank's count per
    rank, and whether the variation is high. With stride > 1 each sample is the mean of `stride` iterations.
    None when no iteration was timed."""
    xs = [float(x) for x in iter_us]
    if not xs:
        return None
    mean = statistics.fmean(xs)
    sd = statistics.pstdev(xs)
    cv = sd / mean if mean > 0 else 0.0
    counts: dict[str, int] = {}
    for r in slowest_rank:
        counts[str(int(r))] = counts.get(str(int(r)), 0) + 1
    out: dict = {
        "iters": iters if iters is not None else len(xs),
        "p50_us": round(percentile(xs, 50), 3),
        "p99_us": round(percentile(xs, 99), 3),
        "min_us": round(min(xs), 3),
        "max_us": round(max(xs), 3),
        "cv": round(cv, 4),
        "high_variation": cv > HIGH_CV and sd > JITTER_FLOOR_US,
        "slowest_rank_counts": dict(sorted(counts.items(), key=lambda kv: int(kv[0]))),
    }
    if stride > 1:
        out["stride"] = stride
    if len(xs) <= MAX_KEPT_ITERS:
        out["iter_us"] = [round(x, 3) for x in xs]
        out["slowest_rank"] = [int(r) for r in slowest_rank]
    return out


def per_iteration(timestamps: Sequence[float]) -> list[float]:
    """Consecutive differences of iters+1 timestamps (seconds) -> per-iteration microseconds."""
    return [(b - a) * 1e6 for a, b in zip(timestamps, timestamps[1:])]


__all__ = ["HIGH_CV", "JITTER_FLOOR_US", "MAX_KEPT_ITERS", "MAX_SAMPLES", "stride_for", "bucket_sizes", "percentile",
           "iteration_stats", "per_iteration"]
