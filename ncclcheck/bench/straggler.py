"""Name the rank that keeps a synchronous collective waiting (a straggler), from per-rank timing of bench rows.

Pure: numbers in, a CheckResult and per-row annotations out. Inside a synchronous collective every rank leaves at
about the same moment, so the rank that ARRIVES last shows the SHORTEST time inside the collective, and the ranks
with the longest times are the ones waiting for it. Naming the rank with the longest time would blame a victim.

Input per row (a dict, e.g. built from a BenchRow and its extra):
- "arrival_us": per rank, when it entered the collective relative to a common reference (for instance each rank's
  own exit from the preceding barrier), averaged over the timed iterations; None/missing when not recorded;
- "rank_time_us" (or "duration_us"): per rank, the time spent inside the collective.
With arrivals, lateness is read off them directly; without, it is inferred from the durations (the waiting ranks'
extra time is the late rank's lateness), and the annotation says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ..model import passed, sig, skipped, warned
from ..units import count_noun

CHECK_ID = "bench.stragglers"

FIX = (
    "find what rank {r}{where} does before each collective: CPU contention or bad pinning on its node (other jobs, "
    "data-loader workers, IRQs on the same cores), a slower or throttled GPU (`nvidia-smi -q -d PERFORMANCE,CLOCK`), "
    "host-to-device copies or synchronisation it alone does, or a slower PCIe/NUMA placement; then re-run bench"
)


@dataclass(frozen=True)
class StragglerAnalysis:
    checks: list  # [model.CheckResult]: exactly one bench.stragglers result
    rows: list  # per input row: {"late_rank", "late_by_us", "wait_us", "source"}
    straggler: Optional[int] = None  # the rank named, if any
    evidence: dict = field(default_factory=dict)


def _floats(xs: Any) -> Optional[list[float]]:
    if not isinstance(xs, Sequence) or isinstance(xs, str) or not xs:
        return None
    if any(not isinstance(x, (int, float)) or x != x for x in xs):
        return None
    return [float(x) for x in xs]


def annotate_row(row: Mapping, min_late_us: float = 100.0, relative: float = 0.1) -> dict:
    """Which rank (if any) arrived significantly late to this row's collective, and how long each rank waited.

    Significant: later than the median rank by at least `min_late_us` and by `relative` x the collective's own time
    (the late rank's time, which it did not spend waiting)."""
    arrival = _floats(row.get("arrival_us"))
    durations = _floats(row.get("rank_time_us", row.get("duration_us")))
    out: dict = {"late_rank": None, "late_by_us": 0.0, "wait_us": None, "source": None}
    if arrival is not None and len(arrival) >= 2:
        late = max(range(len(arrival)), key=lambda r: arrival[r])
        late_by = arrival[late] - statistics.median(arrival)
        out["wait_us"] = [sig(arrival[late] - a) for a in arrival]
        out["source"] = "arrival"
        own = durations[late] if durations is not None and len(durations) == len(arrival) else 0.0
    elif durations is not None and len(durations) >= 2:
        late = min(range(len(durations)), key=lambda r: durations[r])
        own = durations[late]
        late_by = statistics.median(durations) - own
        out["wait_us"] = [sig(d - own) for d in durations]
        out["source"] = "duration"
    else:
        return out
    out["late_by_us"] = sig(max(0.0, late_by))
    if late_by >= min_late_us and late_by >= relative * own:
        out["late_rank"] = late
    return out


def find_stragglers(
    rows: Sequence[Mapping],
    *,
    min_late_us: float = 100.0,
    relative: float = 0.1,
    majority: float = 0.5,
    node_of: Optional[Mapping[int, int]] = None,
    labels: Optional[Sequence[str]] = None,
) -> StragglerAnalysis:
    """A rank is a straggler when it is the significantly late rank in more than `majority` of the rows."""
    notes = [annotate_row(r, min_late_us, relative) for r in rows]
    judged = [n for n in notes if n["source"] is not None]
    if not judged:
        return StragglerAnalysis([skipped(CHECK_ID, "no per-rank timing recorded (needs at least 2 ranks)")], notes)
    counts: dict[int, int] = {}
    for n in judged:
        if n["late_rank"] is not None:
            counts[n["late_rank"]] = counts.get(n["late_rank"], 0) + 1
    inferred = all(n["source"] == "duration" for n in judged)
    how = "inferred from per-rank times (no arrival times recorded)" if inferred else "from arrival times"
    worst = max((n["late_by_us"] for n in judged), default=0.0)
    top = max(counts, key=lambda r: (counts[r], -r)) if counts else None
    if top is None or counts[top] <= majority * len(judged):
        ev = {"rows": len(judged), "late_counts": {str(k): v for k, v in sorted(counts.items())},
              "max_late_us": worst, "source": "duration" if inferred else "arrival"}
        return StragglerAnalysis(
            [passed(CHECK_ID, f"no rank arrives late consistently ({count_noun(len(judged), 'row')}, {how})",
                    evidence=ev)],
            notes, None, ev)
    late_rows = [i for i, n in enumerate(notes) if n["late_rank"] == top]
    late_by = statistics.median(notes[i]["late_by_us"] for i in late_rows)
    node = node_of.get(top) if node_of else None
    where = f" (node {node})" if node is not None else ""
    waiting = sorted(r for r in range(len(notes[late_rows[0]]["wait_us"] or [])) if r != top)
    ev = {"rank": top, "node": node, "late_rows": len(late_rows), "rows": len(judged), "median_late_us": late_by,
          "late_counts": {str(k): v for k, v in sorted(counts.items())},
          "source": "duration" if inferred else "arrival"}
    if labels:
        ev["late_row_labels"] = [labels[i] for i in late_rows if i < len(labels)]
    check = warned(
        CHECK_ID,
        f"rank {top}{where} arrives late in {len(late_rows)} of {count_noun(len(judged), 'row')} "
        f"(median {late_by / 1000:.2f} ms after the others): every collective waits for it",
        detail=(f"Lateness {how}. Inside a synchronous collective the late rank shows the SHORTEST time; the ranks "
                f"with the longest times ({', '.join(map(str, waiting))}) are waiting for rank {top}, not slow "
                "themselves. The reported time of each row includes this wait."),
        fix=FIX.format(r=top, where=where),
        node=node,
        evidence=ev,
    )
    return StragglerAnalysis([check], notes, top, ev)
