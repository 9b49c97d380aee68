"""A collective that outlasts watch's pause between its two looks is not a hang.

watch calls a job hung when no rank's progress counters moved between its two looks, Budget.live_confirm_s apart.
A job whose step is longer than that pause can hold one collective for longer: in the lab's 2 s job with h3's link
at a fifth of the others' rate, the all_reduce through h3 took ~3.3 s, no rank completed anything in the 2 s, and
watch said "a stall inside the transport" of a job that was stepping every ~4 s. So a rank is overdue only once
OUTLAST_GAPS times the longest its recorder shows it going between two collective calls has passed since its newest
call, on its own clock; until then watch looks at its progress again every live_confirm_s, within
Budget.live_outlast_s. The longest gap, not the step's median: a young job's window repeats no pattern yet, and the
median time between consecutive calls of a job that all-reduces twice a 3 s step is a few ms. A job hung since long
before the look is overdue at once and costs no wait.
"""

from __future__ import annotations

import time
from typing import Optional

from ..rendezvous.budget import Budget
from .fetch import Asker, fetch_all
from .kept import Kept

OUTLAST_GAPS = 2.0  # a rank is overdue once this many of its longest gaps between calls passed since its newest one:
# one slower step (a straggler's, a link's, begun inside the window) stays under two
GAP_ENTRIES = 64  # the newest entries of a rank's recorder its gaps are read from


def counters(doc: Optional[dict]) -> dict:
    """{pg: (enqueued, completed)} of a reply's progress."""
    prog = doc.get("progress") if isinstance(doc, dict) else None
    out = {}
    for pg, v in (prog.items() if isinstance(prog, dict) else ()):
        if isinstance(v, dict):
            out[str(pg)] = tuple(x if type(x) is int else -1 for x in (v.get("enqueued"), v.get("completed")))
    return out


def moved(first: dict, second: dict) -> list:
    """The ranks whose counters changed between two looks."""
    return sorted(r for r, a in second.items() if a.doc is not None and r in first and first[r].doc is not None
                  and counters(a.doc) != counters(first[r].doc))


def calls_s(entries: object, newest: int = GAP_ENTRIES) -> list:
    """The times (s, the rank's wall clock) of the `newest` collective calls of a flight recorder's entries, oldest
    first: what a rank's gaps and how long it has been stuck (watch.stuck_s) are read from."""
    return sorted(e["time_created_ns"] / 1e9 for e in (entries if isinstance(entries, list) else [])[-newest:]
                  if isinstance(e, dict) and type(e.get("time_created_ns")) is int)


def _entries(doc: Optional[dict]) -> object:
    """A first look's answer's flight-recorder entries."""
    fr = doc.get("flight") if isinstance(doc, dict) else None
    return fr.get("entries") if isinstance(fr, dict) else None


def due_in(first: dict, second: dict, ranks: list) -> float:
    """Seconds until every one of `ranks` is overdue: OUTLAST_GAPS of the longest gap between two of its calls past
    its newest call, measured from the time its second answer says (its own clock: no offset between hosts enters).
    0 where a rank's calls (two at least) or its time are unknown (watch judges as it did), or every rank is overdue
    already."""
    left = 0.0
    for r in ranks:
        a, b = first.get(r), second.get(r)
        made = calls_s(_entries(a.doc)) if a is not None else []
        now = (b.doc or {}).get("time") if b is not None and b.doc else None
        if len(made) < 2 or type(now) not in (int, float):
            continue
        gap = max(y - x for x, y in zip(made, made[1:]))
        left = max(left, made[-1] + OUTLAST_GAPS * gap - now)
    return left


def look_until(records: dict, first: dict, second: dict, asker: Asker, budget: Budget,
               kept: Optional[Kept] = None) -> tuple[dict, float]:
    """(the latest progress answer of each rank, seconds looked past the pause): the ranks that did not move between
    the two looks are asked again every live_confirm_s until they moved or are overdue (due_in), within
    live_outlast_s. Only a rank's newer answer replaces its second one: one that did not answer keeps what it said."""
    latest = dict(second)
    went = set(moved(first, latest))
    still = sorted(r for r, a in latest.items() if a.doc is not None and r not in went)
    wait = min(due_in(first, latest, still), budget.live_outlast_s)
    if not still or wait <= 0:
        return latest, 0.0
    t0 = budget.now()
    end = budget.deadline(wait)
    while still and budget.remaining(end) > 0:
        time.sleep(min(budget.live_confirm_s, budget.remaining(end)))
        got = fetch_all({r: records[r] for r in still}, "progress", asker, budget, kept=kept)
        latest.update({r: a for r, a in got.items() if a.doc is not None})
        went = set(moved(first, latest))
        still = [r for r in still if r not in went]
    return latest, budget.since(t0)

