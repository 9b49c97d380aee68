"""Host names -> a Slurm hostlist ('gpu[01-04,07],cpu1'), for `sbatch -w` / `--exclude` from a sweep's verdicts.

The collector half of Slurm's hostlist grammar (the expander lives in agent/launchers.py, moving to
agent/hostlist.py): written here as one small pure function so the two can be unified in one module. Names are
grouped by their prefix and the width of their trailing number, so zero padding survives ('gpu007'), numbers keep
their order, and names without a trailing number stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TAIL = re.compile(r"^(.*?)(\d+)$")


def compress_hostlist(names: Iterable[str]) -> str:
    """['h1', 'h2', 'h3', 'h5', 'login'] -> 'h[1-3,5],login'. Duplicates collapse; groups appear in first-seen
    order. A name holding hostlist syntax itself (',', '[', ']') is kept verbatim and would not round-trip: Slurm
    node names never contain those characters."""
    unique = list(dict.fromkeys(names))
    # Zero-padded widths per prefix: 'gpu10' joins 'gpu[01-09]' as 'gpu[01-10]'; 'h9' and 'h10' share 'h[9-10]'.
    padded = {(m.group(1), len(m.group(2))) for m in map(_TAIL.match, unique) if m and m.group(2).startswith("0")}
    groups: dict[tuple[str, int], list[int]] = {}
    order: list = []
    for name in unique:
        m = _TAIL.match(name)
        if not m or any(c in name for c in ",[]"):
            order.append(name)
            continue
        prefix, digits = m.group(1), m.group(2)
        key = (prefix, len(digits)) if (prefix, len(digits)) in padded else (prefix, 0)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    parts = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, width = item
        nums = sorted(set(groups[item]))
        if len(nums) == 1:
            parts.append(f"{prefix}{nums[0]:0{width}d}")
            continue
        ranges, start = [], nums[0]
        for prev, cur in zip(nums, nums[1:] + [None]):
            if cur is not None and cur == prev + 1:
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            start = cur
        parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)
