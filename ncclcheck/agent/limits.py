"""The agent's own process limits for the world it joins: raise the soft RLIMIT_NOFILE towards the hard limit when
node 0 must hold a connection per node, and say what a limit still too low means (the check host.nofile reads it);
space out Python's cycle collector while node 0 holds a large world.

The limit is read in facts/host.py (like every other fact); raising it changes this process, which is the agent's
job (it prepares the process that will host or join the world), not a fact collector's.
"""

from __future__ import annotations

import gc
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Callable, Optional

from ..facts.host import nofile

# Descriptors one ncclcheck process holds whatever the world's size: Python and torch's own files (~40 measured),
# the mesh listener and its wake pipe (4), the probes in flight (probe.probe_peers' max_workers, 64), the log and
# progress pipes, and the probers' connections the listener is answering (~k+2 = 14): rounded up with room.
BASE_FDS = 256
# Node 0 hosts the TCPStore: one accepted connection per node (each node's leader keeps one client open).
STORE_FDS_PER_NODE = 1
# Node 0 of a large world holds every node's facts, probe rows and checks (1.3 GB at 16,384 nodes), and a look of
# watch every rank's decoded recorder (millions of objects at 4,096 ranks). At Python's default thresholds (a pass
# every 700 net allocations, the oldest generation every hundredth) the cycle collector walked that heap over and over:
# a sixth of node 0's CPU at 16,384 nodes (perf on scripts/bench_scale.py), a tenth of watch's at 4,096 ranks. From
# this many nodes (or ranks) on, the youngest generation waits for COLLECTOR_GEN0 allocations while the world is held.
COLLECTOR_NODES = 256
COLLECTOR_GEN0 = 100_000


def nofile_needed(nnodes: int, hosts_store: bool) -> int:
    """Descriptors this process needs: a constant, plus one per node where it hosts the store."""
    return BASE_FDS + (STORE_FDS_PER_NODE * max(1, nnodes) if hosts_store else 0)


def ensure_nofile(nnodes: int, hosts_store: bool, getrlimit: Optional[Callable] = None,
                  setrlimit: Optional[Callable] = None) -> dict:
    """Raise the soft RLIMIT_NOFILE to what the world needs, never above the hard limit. Returns what the check
    host.nofile reads: {"needed", "soft_before", "soft", "hard", "raised", "error"} (None limits: unlimited)."""
    need = nofile_needed(nnodes, hosts_store)
    before = nofile(getrlimit)
    soft, hard = before["soft"], before["hard"]
    out = {"needed": need, "soft_before": soft, "soft": soft, "hard": hard, "raised": False, "error": None,
           "hosts_store": hosts_store, "nnodes": nnodes}
    if soft is None or soft >= need:
        return out
    target = need if hard is None else min(hard, need)
    if target <= soft:
        return out
    try:
        (setrlimit or resource.setrlimit)(resource.RLIMIT_NOFILE,
                                          (target, resource.RLIM_INFINITY if hard is None else hard))
    except (OSError, ValueError) as e:
        out["error"] = f"{type(e).__name__}: {e}"
        return out
    after = nofile(getrlimit)
    out.update(soft=after["soft"], raised=True)
    return out


@contextmanager
def spaced_collector(nnodes: int, holds_world: bool = True, bounded: bool = False) -> Iterator[None]:
    """While this process holds a world of COLLECTOR_NODES or more (node 0 hosting it, watch looking at its ranks), the
    cycle collector runs COLLECTOR_GEN0 / 700 times less often; its thresholds are put back after, whatever ran it
    (guard() and the API's watch() run inside the user's process). bounded: the hold ends within its own bound of
    seconds (one look of watch), so the collector does not run at all until it ends (enabled again after when it
    was before): spaced, its older generations still walked the look's own decoded recorders, 0.17 s and 0.99 s of two
    looks at 4,096 ranks, all of it finding nothing, for what refcounting frees; a cycle made meanwhile waits for the
    collector's next pass."""
    if not holds_world or nnodes < COLLECTOR_NODES:
        yield
        return
    if bounded:
        was = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if was:
                gc.enable()
        return
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], COLLECTOR_GEN0), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
