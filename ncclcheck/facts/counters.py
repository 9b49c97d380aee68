"""Cumulative hardware error counters (PCIe replays and AER, NVLink CRC/replay/recovery; the RDMA ports' too) judged
on what changed, never on their lifetime: the one rule for the difference of two reads.

A counter is {device: {counter name: value}}. A counter that went down between the reads was reset (a driver
reload, a reboot, a port reset): its change is unknown, so it is left out rather than read as negative or as its
whole new value.
"""

from __future__ import annotations

from typing import Any


def deltas(before: dict, after: dict) -> dict:
    """{device: {counter: increase}} for every counter read both times that increased (a quiet node: {})."""
    out: dict = {}
    for dev, now in (after or {}).items():
        then = (before or {}).get(dev) or {}
        if not isinstance(now, dict) or not isinstance(then, dict):
            continue
        for name, v in now.items():
            b = then.get(name)
            if _count(v) and _count(b) and v > b:
                out.setdefault(dev, {})[name] = v - b
    return out


def resets(before: dict, after: dict) -> list:
    """[(device, counter)] of the counters that went down between the reads (reset in between)."""
    return [(dev, name) for dev, now in (after or {}).items() if isinstance(now, dict)
            for name, v in now.items()
            if _count(v) and _count(((before or {}).get(dev) or {}).get(name)) and v < before[dev][name]]


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


__all__ = ["deltas", "resets"]
