"""Where in a step the ranks work outside collectives (issue 56): what tells a step's compute from its communication
whichever takes longer, for postmortem/slow.py.

Two records say it, read here:
- watch's samples of a rank's progress counters (live/pace.py's "phase": each change of the flight recorder's last
  enqueued and last completed collective, with the moments around it, on the rank's host clock): collective k+1 was
  called that long after collective k ended;
- NCCL with TORCH_NCCL_ENABLE_TIMING: each entry's `duration_ms`, the GPU's own time inside the collective; the
  latest rank waits least, so the shortest of the ranks' durations is the collective's own time, and the rest of the
  gap to the next collective's latest call is work.
gloo's flight recorder has neither an end nor a duration per collective (time_discovered_* are 0): between two calls
it cannot tell "worked" from "was inside the collective", so without samples the step is cut at the longest gap and
slow.py says so.
"""

from __future__ import annotations

import math
from typing import Any, Optional

MAX_ROWS = 4096  # rows per process group read from a dump (live/pace.PHASE_MAX_ROWS)
MAX_GROUPS = 64
MAX_NS = 1 << 62


def of_doc(doc: Any, rank: int, live_key: str) -> Optional[dict]:
    """The phase samples watch wrote into a rank's --dump ({pg: rows}), None when there are none; rows that are not
    four bounded integers, or out of order, are dropped (a dump may be hostile)."""
    me = doc.get(live_key) if isinstance(doc, dict) else None
    got = me.get("phase") if isinstance(me, dict) and me.get("rank") == rank else None
    return rows_of(got)


def rows_of(got: Any) -> Optional[dict]:
    """{pg: [[before_ns, at_ns, enqueued, completed], ...]} from a reply or a dump, validated and bounded."""
    if not isinstance(got, dict):
        return None
    out: dict = {}
    for pg, rows in list(got.items())[:MAX_GROUPS]:
        if not isinstance(pg, str) or not isinstance(rows, list):
            continue
        keep, last = [], None
        for row in rows[-MAX_ROWS:]:
            if not (isinstance(row, list) and len(row) == 4 and all(type(x) is int for x in row)):
                continue
            before, at, enq, done = row
            if not (0 < before <= at < MAX_NS and -1 <= done <= enq < MAX_NS):
                continue
            if last is not None and (at < last[1] or enq < last[2] or done < last[3]):
                continue
            keep.append(row)
            last = row
        if keep:
            out[pg[:64]] = keep
    return out or None


def _mid(row: list) -> float:
    return (row[0] + row[1]) / 2


def outside_from_samples(rows: list) -> dict:
    """{seq k+1: ns the rank worked after collective k ended before calling k+1} from one rank's rows of one group:
    the change that showed k completed and the change that showed k+1 called, each at the middle of its two samples
    (the same sample when the rank called k+1 at once: 0). Only collectives whose end and next call both fell within
    the sampling (the first row is a start, not a change)."""
    out: dict = {}
    done_at: dict = {}
    for prev, row in zip(rows, rows[1:]):
        for k in range(prev[3] + 1, row[3] + 1):
            done_at[k] = row
        for k in range(prev[2] + 1, row[2] + 1):  # called k between the two samples
            end = done_at.get(k - 1)
            if end is not None:
                out[k] = max(0.0, _mid(row) - _mid(end)) if end is not row else 0.0
    return out


def outside_from_durations(colls: list, latest: list) -> Optional[list]:
    """[ns worked before calling collective i, None for i = 0] from the ranks' entries of each collective ([[entry of
    each rank] per collective]) and the latest rank's call times, when every entry has the GPU's duration_ms; None
    otherwise (the newest collective's own duration is not needed: it may still run)."""
    dur = []
    for entries in colls[:-1]:
        ds = [e.get("duration_ms") for e in entries]
        if not ds or not all(type(d) in (int, float) and math.isfinite(d) and 0 <= d < 1e9 for d in ds):
            return None
        dur.append(min(ds) * 1e6)
    return [None] + [max(0.0, latest[i] - latest[i - 1] - dur[i - 1]) for i in range(1, len(latest))]
