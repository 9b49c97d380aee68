"""A rank's collective call times in one value each: what a slow job's analysis (postmortem/slow.py) reads of the
flight-recorder entries that did not fit whole in a live reply.

At scale a look's memory is shared by every rank (live/fetch.py's Allowance: ~12 KB and ~600 JSON values a rank at
4,096 ranks), and a whole entry is ~30 values (more with its frames): ~20 entries a rank. The look reaches its ranks
over seconds while the job runs, so the newest 20 of a rank asked first and of one asked last overlap by a few
collectives, fewer than the slow rule needs. The series carries, per process group, the newest collectives' call
times (time_created_ns) and what each collective was (its signature, an index into a small table): ~1 value each, so
the same share holds a window of a hundred collectives. The responder sends it beside the entries it kept
(live/responder.py), watch keeps it with the rank's own word in --dump (flight.LIVE_KEY), and decode() checks every
value (a reply may be hostile).

    {group name: {"last": seq of the newest, "t": [call ns, oldest first; null for a seq not held],
                  "sig": [index into sigs per seq; -1 for a seq not held], "sigs": [[profiling name, input sizes]]}}
"""

from __future__ import annotations

from typing import Any, Optional

from .fields import MAX_ID

MAX_CALLS = 1024  # per group: postmortem/slow.py's MAX_WINDOW
MAX_SIGS = 256  # distinct collectives per group's series
MAX_GROUPS = 64  # groups per series (the newest-calling first)
SIG_CHARS = 200
CALL_BYTES = 24  # one collective's bytes in a series: a 19-digit time, its signature's index, two commas


def sig(e: dict) -> tuple:
    """What a collective is, as a step's repeating pattern compares it: its profiling name and its input sizes, as
    text (the same from a whole entry and from a series)."""
    return str(e.get("profiling_name"))[:SIG_CHARS], str(e.get("input_sizes"))[:SIG_CHARS]


def group_of(e: dict) -> str:
    """The group's name as flight.normalise reads it (the first of process_group, else the pg_id)."""
    pg = e.get("process_group")
    if type(pg) is list and pg and type(pg[0]) is str:  # torch's JSON: the common case, read at once
        return pg[0][:SIG_CHARS]
    if isinstance(pg, (list, tuple)) and pg:
        return pg[0][:SIG_CHARS] if isinstance(pg[0], str) else ""
    pid = e.get("pg_id")
    return str(pid if type(pid) is int else 0)


def fitting(entries: list, nbytes: int, items: int) -> dict:
    """The series of the entries (encode) within `nbytes` and `items` JSON values: each group an equal part. The
    groups are those among the newest entries the room could hold at all (counting every entry's group cost a rank
    0.3 ms of its 2,000-entry recorder per reply, where the series holds ~150 calls): one that called nothing since
    holds only calls older than every one kept."""
    cap = max(0, min(nbytes // CALL_BYTES, items // 2))
    window = [group_of(e) if type(e) is dict else None for e in entries[len(entries) - cap:]] if cap else []
    groups = min(len(set(window) - {None}) or 1, MAX_GROUPS)
    return encode(entries, cap // groups, [None] * (len(entries) - len(window)) + window, groups)


class _Series:
    """One group's series as encode reads the entries back: newest first."""

    __slots__ = ("last", "t", "sig", "sigs")

    def __init__(self, last: int) -> None:
        self.last = last  # the newest seq
        self.t: list = []  # a call time per seq from the newest back, None for a seq not held
        self.sig: list = []  # ... and its signature's index, -1 for a seq not held
        self.sigs: dict = {}  # signature -> its index


def encode(entries: list, keep: int, names: Optional[list] = None, groups: int = MAX_GROUPS) -> dict:
    """The series of the newest `keep` collectives of each group (`groups`, at most MAX_GROUPS) among torch's entries
    (oldest first, as a dump holds them; `names`: each entry's group_of where the caller has it, None where not). A
    coalesced group's ops share one seq: its closing (last) entry stands for it, as flight.normalise keeps it. The
    newest entries are read back only until every group seen is full: a group seen first past that point holds only
    collectives older than every other group's window, and is left out. Its cost is in the rank's reply, so it is a
    plain loop."""
    keep = max(0, min(keep, MAX_CALLS))
    groups = min(groups, MAX_GROUPS)
    out: dict = {}
    if keep == 0 or groups <= 0:
        return out
    filling = 0  # groups seen and not yet full
    for i in range(len(entries) - 1, -1, -1):
        if out and not filling:
            break
        e = entries[i]
        if type(e) is not dict:
            continue
        get = e.get
        if get("is_p2p") is True:
            continue
        seq, t = get("collective_seq_id"), get("time_created_ns")
        if type(seq) is not int or type(t) is not int or not 0 < seq <= MAX_ID or t <= 0:
            continue
        name = names[i] if names is not None else None
        if name is None:
            name = group_of(e)
        s = out.get(name)
        if s is None:
            if len(out) >= groups:
                continue
            s = out[name] = _Series(seq)
            filling += 1
        ts = s.t
        n = len(ts)
        want = s.last - n  # the seq the next value stands for
        if seq > want or n >= keep:
            continue  # a coalesced group's earlier op, or the series is full
        if want > seq:  # seqs this rank does not hold (evicted, or another form)
            gap = min(want - seq, keep - n)
            ts.extend([None] * gap)
            s.sig.extend([-1] * gap)
            n += gap
        if n < keep:
            k = sig(e)
            known = s.sigs.get(k)
            if known is None and len(s.sigs) < MAX_SIGS:
                known = s.sigs[k] = len(s.sigs)
            ts.append(t if known is not None else None)
            s.sig.append(known if known is not None else -1)
            n += 1
        if n >= keep:
            filling -= 1
    return {name: {"last": s.last, "t": s.t[::-1], "sig": s.sig[::-1], "sigs": [list(k) for k in s.sigs]}
            for name, s in out.items()}


_INT = {int}


def _whole(xs: list, lo: int, hi: int) -> bool:
    """Is every one of xs (not empty) an int (not a bool) in [lo, hi]?"""
    return set(map(type, xs)) == _INT and lo <= min(xs) and max(xs) <= hi


def decode(series: Any) -> dict:
    """{group name: {seq: (time_created_ns, sig)}} from a series as sent, every value checked; what is malformed is
    left out (never raises)."""
    out: dict = {}
    for name, s in (series.items() if isinstance(series, dict) else ()):
        if len(out) >= MAX_GROUPS:
            break
        if not isinstance(name, str) or not isinstance(s, dict):
            continue
        last, t, ix, sigs = s.get("last"), s.get("t"), s.get("sig"), s.get("sigs")
        if type(last) is not int or not 0 < last <= MAX_ID or not isinstance(t, list) or not isinstance(ix, list) \
                or not isinstance(sigs, list) or len(t) != len(ix) or len(t) > MAX_CALLS or len(sigs) > MAX_SIGS:
            continue
        table = [(x[0], x[1]) if isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) and len(y) <= SIG_CHARS
                                                                              for y in x) else None for x in sigs]
        first = last - len(t) + 1
        if t and first > 0 and _whole(t, 1, MAX_ID) and _whole(ix, 0, len(table) - 1) and None not in table:
            # every value good (a series with no hole, the usual one): checked and paired in bulk, at C speed (per
            # value, the checks were a fifth of watch's reading of a slow job's 4,096 recorders)
            calls = dict(zip(range(first, first + len(t)), zip(t, map(table.__getitem__, ix))))
        else:
            calls = {first + i: (ti, table[k]) for i, (ti, k) in enumerate(zip(t, ix))
                     if first + i > 0 and type(ti) is int and 0 < ti <= MAX_ID and type(k) is int
                     and 0 <= k < len(table) and table[k] is not None}
        if calls:
            out[name[:SIG_CHARS]] = calls
    return out
