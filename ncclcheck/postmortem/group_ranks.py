"""A process group's global ranks as a flight-recorder document's pg_config says them: torch's "ranks" (a string
"[0, 1, ...]" in its JSON dumps, a list in pickles), or the responder's compact "ranks_runs".

Every rank of a job repeats the groups it belongs to, so the default group's list is n ranks in each of n documents:
at 4,096 ranks, 24 KB of every rank's reply to watch (over the share of one look's memory each rank gets, so watch
named nobody, issue 56) and 16M ints once parsed. So the responder sends a long list as runs ([first, last, step]:
the default group is [[0, 4095, 1]], a data-parallel group with stride 8 [[3, 4091, 8]]), and a value is parsed once
however many documents repeat it; the lists handed out are shared, never changed by their readers.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

MAX_WORLD = 1_000_000  # ranks of one job (the largest run on ~100k GPUs): a rank number at or past it is not one
RUNS = "ranks_runs"  # pg_config's compact form, beside (or instead of) torch's "ranks"
MIN_RUN = 3  # members in arithmetic progression that are worth a run; fewer are runs of one


def runs_of(ranks: list) -> list:
    """[[first, last, step], ...] that expand, in order, to `ranks` (ints): [0..4095] -> [[0, 4095, 1]]."""
    out, i, n = [], 0, len(ranks)
    while i < n:
        j = i
        if i + 1 < n and ranks[i + 1] > ranks[i]:
            step = ranks[i + 1] - ranks[i]
            while j + 1 < n and ranks[j + 1] - ranks[j] == step:
                j += 1
        if j - i + 1 >= MIN_RUN:
            out.append([ranks[i], ranks[j], ranks[i + 1] - ranks[i]])
            i = j + 1
        else:
            out.append([ranks[i], ranks[i], 1])
            i += 1
    return out


def compact(config: Any) -> Any:
    """pg_config with each group's "ranks" replaced by its runs where they are shorter (a new dict; the groups not
    changed are the same objects); anything unreadable is left as it was, for the reader to judge."""
    if not isinstance(config, dict):
        return config
    out = {}
    for name, cfg in config.items():
        raw = cfg.get("ranks") if isinstance(cfg, dict) and RUNS not in cfg else None
        # a responder builds a reply a few times a second: the same string's runs found once
        runs = _memo(("runs", raw), len(raw) // 8, lambda r=raw: _shorter_runs(r)) if isinstance(raw, str) else \
            _shorter_runs(raw) if raw is not None else None
        if runs is not None:
            cfg = {k: v for k, v in cfg.items() if k != "ranks"} | {RUNS: runs}
        out[name] = cfg
    return out


def _shorter_runs(raw: Any) -> Optional[list]:
    """The runs of a "ranks" value where they say it in fewer values than its list, else None."""
    ranks = ranks_of({"ranks": raw})
    runs = runs_of(ranks) if ranks is not None else None
    return runs if runs is not None and 3 * len(runs) < len(ranks) else None


def ranks_of(cfg: Any) -> Optional[list]:
    """The group's global ranks: distinct ints in [0, MAX_WORLD), at most MAX_WORLD of them, in the group's order;
    None for anything else (a nested string, a rank past any job, a run that is not three ints)."""
    if not isinstance(cfg, dict):
        return None
    runs = cfg.get(RUNS)
    if runs is not None:
        try:
            key = tuple(tuple(r) if type(r) is list else r for r in runs) if type(runs) is list else None
            return _memo(key, len(key), lambda: _from_runs(key)) if key is not None and len(key) <= MAX_WORLD \
                else None
        except TypeError:  # a run holding something unhashable is not three ints
            return None
    ranks = cfg.get("ranks")
    if isinstance(ranks, str):
        return _memo(ranks, len(ranks) // 8, lambda: _from_text(ranks)) if len(ranks) <= 16 * MAX_WORLD else None
    if type(ranks) is list:
        return _checked(ranks)
    return None


def _checked(ranks: Any) -> Optional[list]:
    if type(ranks) is list and 0 < len(ranks) <= MAX_WORLD and all(type(r) is int and 0 <= r < MAX_WORLD
                                                                   for r in ranks):
        return list(dict.fromkeys(ranks))
    return None


_MEMO: dict = {}  # a pg_config value -> its ranks
MEMO_SIZE = 1 << 22  # what the memo holds at most, in ranks and 8-byte words of its keys (~64 MB): then it starts over
_held = [0]


def _memo(key: Any, key_size: int, parse: Callable[[], Optional[list]]) -> Optional[list]:
    """parse()'s answer for `key`, parsed once while the memo holds it; a hostile document's many distinct values only
    make it start over."""
    if key in _MEMO:
        return _MEMO[key]
    out = parse()
    size = key_size + (len(out) if out else 0)
    if _held[0] + size > MEMO_SIZE:
        _MEMO.clear()
        _held[0] = 0
    if size <= MEMO_SIZE:
        _MEMO[key] = out
        _held[0] += size
    return out


def _from_text(text: str) -> Optional[list]:
    try:
        return _checked(json.loads(text))
    except (ValueError, RecursionError):
        return None


def _from_runs(runs: tuple) -> Optional[list]:
    out: list = []
    for run in runs:
        if type(run) is not tuple or len(run) != 3 or any(type(x) is not int for x in run):
            return None
        first, last, step = run
        if not (0 <= first <= last < MAX_WORLD and step >= 1) or len(out) + (last - first) // step + 1 > MAX_WORLD:
            return None
        out.extend(range(first, last + 1, step))
    return _checked(out) if out else None
