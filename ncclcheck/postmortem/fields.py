"""The fields of a flight-recorder entry normalised for comparison: sizes, dtypes and the op of its profiling name,
each bounded (a hostile dump is as likely as a real one). flight.py (the per-group view) and match.py (torch's
matching rules) both read entries through these; neither imports the other for them."""

from __future__ import annotations

from typing import Any

from .bound import clip

MAX_ID = (1 << 63) - 1  # sequence and record ids are int64 in torch: a larger integer is not one


def sizes(v: Any) -> tuple:
    """[[1024], [8, 4]] -> ((1024,), (8, 4)); anything unhashable or odd -> (). Hot: a 1,024-rank job with 2,000
    entries each is 2M calls, so the common shape takes the C path."""
    if type(v) is list or type(v) is tuple:
        try:
            t = tuple(map(tuple, v[:64]))
        except TypeError:
            return ()
        # ints within int64 only: a 10^5000 dimension is not one and cannot be printed as JSON
        if all(type(n) is int and -MAX_ID <= n <= MAX_ID for s in t for n in s):
            return t
    return ()


_SEEN: dict = {}  # dtype lists and profiling names repeat across 2M entries: check each distinct one once


def dtypes(v: Any) -> tuple:
    if type(v) is str:  # torch's analyzer tests write one dtype as a bare string ("float32")
        v = [v]
    if type(v) is not list and type(v) is not tuple:
        return ()
    try:
        key = tuple(v[:64])
        hit = _SEEN.get(key)
    except TypeError:
        return ()
    if hit is None:
        hit = tuple(x[:40] if type(x) is str else "?" for x in key)
        if len(_SEEN) < 10_000:
            _SEEN[key] = hit
    return hit


def op(prof: Any) -> tuple:
    """"nccl:all_reduce" -> ("nccl", "all_reduce")."""
    hit = _SEEN.get(prof) if type(prof) is str else ("", "?")
    if hit is None:
        lib, _, name = clip(prof, 200).partition(":")
        hit = (lib, name) if name else ("", clip(prof, 200) or "?")
        if len(_SEEN) < 10_000:
            _SEEN[prof] = hit
    return hit
