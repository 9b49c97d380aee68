"""One verdict per node from a links section: healthy, bad (proven: slow with the good partners it was re-paired
with), suspect (on a slow link that could not be pinned on it) or no results (it died, or was never measured).

Pure: the links section and the nodes' Slurm names in, verdicts out. Only `bad` nodes are drained: links' scale mode
re-pairs each member of a slow pair with two nodes that passed, and analyze names a node slow only when most of its
links are slow while a partner is fine elsewhere, so a node is never convicted by one bad partner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..health.drain import reason as drain_reason

HEALTHY, BAD, SUSPECT, NO_RESULTS = "healthy", "bad", "suspect", "no_results"


@dataclass(frozen=True)
class NodeVerdict:
    node: int  # node rank in the sweep
    name: str  # the Slurm node name (what scontrol and sbatch -w take)
    status: str
    message: str = ""  # why, one line
    drain_reason: Optional[str] = None  # for BAD

    def to_json(self) -> dict:
        return {"node": self.node, "name": self.name, "status": self.status, "message": self.message,
                "drain_reason": self.drain_reason}


def _gbps(x: Optional[float]) -> str:
    return "?" if x is None else f"{x:.3g}"


def node_verdicts(section: Optional[dict], names: list) -> list:
    """A verdict for each of len(names) nodes (names[i] is node rank i)."""
    section = section or {}
    m = section.get("matrix_gbps") or []
    n = len(names)
    slow_nodes = set(section.get("slow_nodes") or [])
    dead = set(section.get("dead") or [])
    slow_links = {(s["a"], s["b"]) for s in section.get("slow") or []}
    thr, ref = section.get("threshold_gbps"), section.get("reference_gbps")

    def cell(a: int, b: int) -> Optional[float]:
        v = m[a][b] if a < len(m) and b < len(m[a]) else None
        return v if isinstance(v, (int, float)) else None

    out = []
    for x in range(n):
        mine = [(y, v) for y in range(n) if y != x for v in (cell(x, y), cell(y, x)) if v is not None]
        if x in dead:
            out.append(NodeVerdict(x, names[x], NO_RESULTS, "stopped answering during the sweep"))
        elif not mine:
            out.append(NodeVerdict(x, names[x], NO_RESULTS, "never measured"))
        elif x in slow_nodes:
            peers = sorted({y for y, _ in mine})
            slow_peers = sorted({y for y in peers if (min(x, y), max(x, y)) in slow_links
                                 or _below(cell(x, y), thr) or _below(cell(y, x), thr)})
            worst = min(v for _, v in mine)
            detail = (f"links.slow: measured {_gbps(worst)} GB/s (worst), slow with {len(slow_peers)} of "
                      f"{len(peers)} peers ({', '.join(names[y] for y in slow_peers)}); expected >= {_gbps(thr)} "
                      f"GB/s (typical link {_gbps(ref)} GB/s)")
            why = drain_reason("links.slow", detail.split(": ", 1)[1])
            out.append(NodeVerdict(x, names[x], BAD, why, why))
        else:
            partners = sorted(y for a, b in slow_links if x in (a, b) for y in (a, b) if y != x)
            if partners:
                out.append(NodeVerdict(x, names[x], SUSPECT, "slow link to " + ", ".join(names[y] for y in partners)
                                       + " not pinned on either node (see links.slow)"))
            else:
                out.append(NodeVerdict(x, names[x], HEALTHY))
    return out


def _below(v: Optional[float], thr: Optional[float]) -> bool:
    return v is not None and thr is not None and v < thr
