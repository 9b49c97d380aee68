"""One verdict per node from a links section: healthy, bad (proven: slow with the good partners it was re-paired
with), suspect (on a slow link that could not be pinned on it), unknown (a pair it was in could not be measured,
and the failure cannot be put on its partner) or no results (it died, or was never measured).

Unmeasured is never healthy (issue 32: a node every pair of which timed out was printed `Healthy` and put in the
`sbatch -w` list, because the other direction of one pair had been measured): a node is healthy only when every pair
it was in was measured both ways, or when the partner of each pair that failed measured with nobody at all (the
failure is that partner's) while this node measured fine with someone else.

A fabric slow everywhere (links' `fabric_slow`: every link of every node far below its trusted bound, none fine
with anyone) leaves every node suspect: none is proven bad, none healthy, and links.slow warns naming them all.

Pure: the links section and the nodes' Slurm names in, verdicts out. Only `bad` nodes are drained: links' scale mode
re-pairs each member of a slow pair with two nodes that passed, and analyze names a node slow only when most of its
links are slow while a partner is fine elsewhere, so a node is never convicted by one bad partner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..health.drain import reason as drain_reason

HEALTHY, BAD, SUSPECT, NO_RESULTS, UNKNOWN = "healthy", "bad", "suspect", "no_results", "unknown"


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

    def cell(a: int, b: int, mat: Optional[list] = None) -> Optional[float]:
        mat = m if mat is None else mat
        row = mat[a] if a < len(mat) and isinstance(mat[a], list) else []
        v = row[b] if b < len(row) else None
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    floor_m = section.get("floor_gbps") if isinstance(section.get("floor_gbps"), list) else []
    by_bound = [tuple(c) for c in section.get("slow_by_bound") or [] if isinstance(c, list) and len(c) == 2]

    def floor(a: int, b: int) -> Optional[float]:
        return cell(a, b, floor_m)

    complete = {x: {y for y in range(n) if y != x and cell(x, y) is not None and cell(y, x) is not None}
                for x in range(n)}
    failed: dict = {x: {} for x in range(n)}  # node -> {partner: why}
    for e in section.get("errors") or []:
        a, b = e.get("a") if isinstance(e, dict) else None, e.get("b") if isinstance(e, dict) else None
        if isinstance(a, int) and isinstance(b, int) and 0 <= a < n and 0 <= b < n and a != b:
            why = str(e.get("error") or "failed")[:200]
            failed[a].setdefault(b, why)
            failed[b].setdefault(a, why)
    for p in section.get("unmeasured") or []:
        if isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(v, int) and 0 <= v < n for v in p):
            failed[p[0]].setdefault(p[1], "not measured before the deadline")
            failed[p[1]].setdefault(p[0], "not measured before the deadline")
    for x in range(n):  # one direction measured, the other not: half a pair is no evidence either
        for y in range(n):
            if y != x and (cell(x, y) is None) != (cell(y, x) is None) and y not in complete[x]:
                failed[x].setdefault(y, "only one direction was measured")

    out = []
    for x in range(n):
        mine = [(y, v) for y in range(n) if y != x for v in (cell(x, y), cell(y, x)) if v is not None]
        # failures that are not the partner's: the partner measured with someone, or this node with nobody
        open_fails = {y: why for y, why in failed[x].items() if complete[y] or not complete[x]}
        if x in dead:
            out.append(NodeVerdict(x, names[x], NO_RESULTS, "stopped answering during the sweep"))
        elif not mine:
            y = min(failed[x], default=None)
            out.append(NodeVerdict(x, names[x], NO_RESULTS, "never measured" + (
                f": pair with {names[y]} failed: {failed[x][y]}" if y is not None else "")))
        elif x in slow_nodes:
            peers = sorted({y for y, _ in mine})
            slow_peers = sorted({y for y in peers if (min(x, y), max(x, y)) in slow_links
                                 or _below(cell(x, y), thr) or _below(cell(y, x), thr)})
            worst = min(v for _, v in mine)
            expect = f"expected >= {_gbps(thr)} GB/s (typical link {_gbps(ref)} GB/s)"
            floors = [f for y in peers for f in (floor(x, y), floor(y, x)) if f is not None]
            if any(x in c for c in by_bound) and floors:
                # slow by its bound (every link equally slow: no typical link to compare with)
                expect = f"expected >= {_gbps(min(floors))} GB/s from its link's bound (floor_gbps)"
            detail = (f"links.slow: measured {_gbps(worst)} GB/s (worst), slow with {len(slow_peers)} of "
                      f"{len(peers)} peers ({', '.join(names[y] for y in slow_peers)}); {expect}")
            why = drain_reason("links.slow", detail.split(": ", 1)[1])
            out.append(NodeVerdict(x, names[x], BAD, why, why))
        elif open_fails:
            y, why = sorted(open_fails.items())[0]
            more = f" (+{len(open_fails) - 1} more pairs)" if len(open_fails) > 1 else ""
            out.append(NodeVerdict(x, names[x], UNKNOWN, f"not proven healthy: pair with {names[y]} could not be "
                                   f"measured: {why}{more}"))
        else:
            partners = sorted(y for a, b in slow_links if x in (a, b) for y in (a, b) if y != x)
            if partners and section.get("fabric_slow") is True:
                out.append(NodeVerdict(x, names[x], SUSPECT, "every link of every node far below its bound: the "
                                       "fabric or the bound, not this node alone (see links.slow)"))
            elif partners:
                out.append(NodeVerdict(x, names[x], SUSPECT, "slow link to " + ", ".join(names[y] for y in partners)
                                       + " not pinned on either node (see links.slow)"))
            elif all(y in slow_nodes for y, _ in mine):
                # its links are explained by the slow nodes it met: nothing shows it fine (issue 32)
                out.append(NodeVerdict(x, names[x], SUSPECT, "measured only with nodes found slow ("
                                       + ", ".join(sorted({names[y] for y, _ in mine})) + "): not proven healthy"))
            else:
                out.append(NodeVerdict(x, names[x], HEALTHY))
    return out


def _below(v: Optional[float], thr: Optional[float]) -> bool:
    return v is not None and thr is not None and v < thr
