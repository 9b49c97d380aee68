"""The agent's own process limits for the world it joins: raise the soft RLIMIT_NOFILE towards the hard limit when
node 0 must hold a connection per node, and say what a limit still too low means (the check host.nofile reads it).

The limit is read in facts/host.py (like every other fact); raising it changes this process, which is the agent's
job (it prepares the process that will host or join the world), not a fact collector's.
"""

from __future__ import annotations

import resource
from typing import Callable, Optional

from ..facts.host import nofile

# Descriptors one ncclcheck process holds whatever the world's size: Python and torch's own files (~40 measured),
# the mesh listener and its wake pipe (4), the probes in flight (probe.probe_peers' max_workers, 64), the log and
# progress pipes, and the probers' connections the listener is answering (~k+2 = 14): rounded up with room.
BASE_FDS = 256
# Node 0 hosts the TCPStore: one accepted connection per node (each node's leader keeps one client open).
STORE_FDS_PER_NODE = 1


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
