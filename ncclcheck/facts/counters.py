"""The fabric's error counters read twice inside one run: every RDMA port's (rdma.counter_snapshot) and every
physical netdev's carrier changes (net.carrier_snapshot), first when a command starts reading facts and again when it
is done, at least FIXED.counter_window_s apart. checks/counters.py judges what changed between the two reads (and,
with --baseline, between a saved run's last read and this run's first): a counter's lifetime value says nothing
about now (a link that flapped last month keeps its link_downed forever)."""

from __future__ import annotations

import time
from typing import Callable, Optional

from . import host, net, rdma


def snapshot(clock: Callable[[], float] = time.monotonic) -> dict:
    """One read of every counter: {"at" (epoch s), "mono" (monotonic s, for this run's window), "ports", "netdevs"}."""
    return {"at": time.time(), "mono": clock(), "ports": rdma.counter_snapshot(), "netdevs": net.carrier_snapshot()}


def window(first: Optional[dict], min_s: float = 0.0, sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic) -> dict:
    """The `counters` fact group: {"boot_id", "interval_s", "first", "last"} with the second read taken now, after
    waiting out what is left of min_s (the caller's FIXED.counter_window_s) since the first. No counter, no wait. A
    first read that failed ({"unavailable"} or None) leaves only this read: {"first": None} (nothing judged in-run)."""
    ok = isinstance(first, dict) and "unavailable" not in first and "mono" in first
    if ok and (first.get("ports") or first.get("netdevs")):
        left = min_s - (clock() - first["mono"])
        if left > 0:
            sleep(min(left, min_s))
    last = snapshot(clock)
    interval = last["mono"] - first["mono"] if ok else None
    return {"boot_id": host.boot_id(), "interval_s": round(interval, 3) if interval is not None else None,
            "first": _public(first) if ok else None, "last": _public(last)}


def _public(snap: dict) -> dict:
    """A read as the report keeps it: a monotonic clock means nothing outside this process."""
    return {k: v for k, v in snap.items() if k != "mono"}
