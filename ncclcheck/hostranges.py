"""Host names as Slurm-style ranges, both ways (`gpu[0001-0128,0131]`): python-hostlist expands and collects; this
module adds the one-line errors and the report's wording ("130 nodes gpu[0001-0128,0131] (node ranks 1-128,131)")."""

from __future__ import annotations

from collections.abc import Iterable

import hostlist as _hl

NAMED_ONE_BY_ONE = 4  # up to this many nodes a summary names each as `node 7 (gpu0007)`; beyond, ranges and a count


def expand(text: str) -> list[str]:
    """'gpu[01-04,07],cpu1' -> host names in order (Slurm's padding: [08-10] -> 08 09 10). ValueError if malformed."""
    text = (text or "").strip()
    if not text:
        return []
    depth = 0
    item = ""
    for ch in text + ",":  # python-hostlist skips empty items and empty brackets; Slurm rejects them, so do we
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            if not item.strip():
                raise ValueError(f"empty host in host list {text!r}")
            item = ""
            continue
        if depth > 1:
            raise ValueError(f"nested brackets in host list {text!r}")
        item += ch
    if "[]" in text:
        raise ValueError(f"empty range in host list {text!r}")
    try:
        return _hl.expand_hostlist(text, allow_duplicates=True)
    except _hl.BadHostlist as e:
        raise ValueError(f"bad host list {text!r}: {e}") from None


def collect(names: Iterable[str]) -> str:
    """Host names -> the shortest Slurm host list python-hostlist finds (sorted, runs merged, padding kept)."""
    names = [n for n in names if n]
    return _hl.collect_hostlist(names) if names else ""


def rank_ranges(ranks: Iterable[int]) -> str:
    """[1, 2, 3, 4, 7] -> '1-4,7'."""
    out: list[str] = []
    rs = sorted(set(ranks))
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(out)


def who(nodes: Iterable[tuple[int, str]]) -> str:
    """[(node rank, hostname)] -> `node 3 (gpu0003), node 9 (gpu0009)` for a few, else
    `130 nodes gpu[0001-0128,0131] (node ranks 1-128,131)`: a person reads a range, not thousands of ids."""
    nodes = sorted(set(nodes))
    if len(nodes) <= NAMED_ONE_BY_ONE:
        return ", ".join(f"node {r} ({h})" for r, h in nodes)
    hosts = collect(h for _, h in nodes if h and h != "?")
    return f"{len(nodes):,} nodes {hosts or '?'} (node ranks {rank_ranges(r for r, _ in nodes)})"
