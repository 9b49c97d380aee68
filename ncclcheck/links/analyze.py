"""From a directed bandwidth matrix, decide which links and which nodes are slow, and say what to inspect.

Pure: numbers in, the report's `links` section and CheckResults out. `matrix[a][b]` is the measured a->b bandwidth
in GB/s (1e9 bytes/s), or None where it was not measured.

Rules:
- the reference is the median over nodes of each node's best measured direction: equal to the median of all links
  on a healthy cluster, but not dragged down when one node's links are all slow (with 3 nodes a bad NIC slows 2/3
  of the links, and the plain median would then call the slow value normal);
- a direction is slow when it is below `relative` x the reference, or below `min_gbps`;
- an unordered link is slow when either direction is slow (egress shaping slows one direction only);
- a node is slow when it has at least two measured links and more than half of them are slow, counting greedily:
  once a node is named, its links no longer count against its partners; a node with no fast link is slow;
- a link is reported on its own only when neither endpoint is a slow node (the node explains it).
With two nodes, or an endpoint that has no other measured link, nobody can tell which endpoint is at fault: the
link is named and the check says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional

from ..model import CheckResult, failed, passed, skipped, warned

Matrix = Sequence[Sequence[Optional[float]]]

CHECK_SLOW = "links.slow"
CHECK_DEAD = "links.dead"
CHECK_PAIR_ERROR = "links.pair_error"
CHECK_INCOMPLETE = "links.incomplete"

INSPECT_NODE = (
    "inspect on {who}: the NIC's negotiated speed (/sys/class/net/<if>/speed, `ethtool <if>`), traffic shaping "
    "(`tc qdisc show dev <if>`: a tbf/htb rate limit or QoS policy), the cable/transceiver, the switch port (errors, "
    "speed, flow control), and CPU/IRQ load on that node"
)
INSPECT_LINK = (
    "inspect the path between {a} and {b}: per-destination shaping or QoS (`tc qdisc show`, `tc filter show` on both "
    "ends: an htb class with a u32 `match ip dst`), the switch ports and uplinks on that route (errors, ECMP hashing "
    "onto a degraded uplink), routes (`ip route get <peer address>`) and MTU on both ends"
)


@dataclass(frozen=True)
class Classification:
    """The intermediate verdict, also used by the job to plan quick-mode re-tests."""

    median_gbps: Optional[float]  # of all measured directions (shown to the user)
    reference_gbps: Optional[float]  # what "normal" is: median over nodes of their best direction
    threshold_gbps: Optional[float]
    slow_cells: list  # [(a, b)] directed measurements that are slow
    slow_links: list  # [(a, b)] a < b, slow in at least one direction (including those a slow node explains)
    slow_nodes: list  # [node]
    link_counts: dict  # node -> (slow links, measured links), links to slow nodes left out
    raw_counts: dict  # node -> (slow links, measured links), all of them
    good_nodes: list  # nodes with measured links, none of them slow


@dataclass(frozen=True)
class LinksAnalysis:
    section: dict  # the report's "links" section
    checks: list = field(default_factory=list)  # list[CheckResult]


def _measured(x: object) -> bool:
    return isinstance(x, (int, float)) and x == x and x >= 0


def classify(matrix: Matrix, relative: float = 0.5, min_gbps: Optional[float] = None) -> Classification:
    n = len(matrix)
    cells = [(a, b, float(matrix[a][b])) for a in range(n) for b in range(n) if a != b and _measured(matrix[a][b])]
    if not cells:
        return Classification(None, None, None, [], [], [], {}, {}, [])
    median = statistics.median(v for _, _, v in cells)
    best: dict[int, float] = {}
    for a, b, v in cells:
        for x in (a, b):
            best[x] = max(best.get(x, 0.0), v)
    reference = statistics.median(best.values())
    threshold = relative * reference
    if min_gbps is not None:
        threshold = max(threshold, min_gbps)
    slow_cells = sorted((a, b) for a, b, v in cells if v < threshold)
    links = sorted({(min(a, b), max(a, b)) for a, b, _ in cells})
    slow_links = sorted({(min(a, b), max(a, b)) for a, b in slow_cells})
    slow_nodes: list[int] = []
    # Greedy: name the node with the largest share of slow links, then stop counting its links against its
    # partners (a slow node explains them), and look again. Without this, a slow node plus one unrelated slow link
    # makes the link's endpoints look like slow nodes too.
    while True:
        counts = _counts(n, links, slow_links, set(slow_nodes))
        cand = [(s / m, s, -x) for x, (s, m) in counts.items() if x not in slow_nodes and m >= 2 and s * 2 > m]
        if not cand:
            break
        slow_nodes.append(-max(cand)[2])
    raw = _counts(n, links, slow_links, set())
    # A node none of whose links is fast is slow whatever its partners are (a cluster below --min-gbps everywhere).
    slow_nodes = sorted(set(slow_nodes) | {x for x, (s, m) in raw.items() if m >= 2 and s == m})
    good = sorted(x for x, (s, m) in raw.items() if s == 0)
    return Classification(median, reference, threshold, slow_cells, slow_links, slow_nodes, counts, raw, good)


def _counts(n: int, links: list, slow_links: list, explained: set) -> dict[int, tuple[int, int]]:
    """node -> (slow links, measured links), leaving out links to nodes in `explained`."""
    slow = set(slow_links)
    out: dict[int, tuple[int, int]] = {}
    for x in range(n):
        mine = [lk for lk in links if x in lk and not (set(lk) - {x}) & explained]
        if mine:
            out[x] = (sum(lk in slow for lk in mine), len(mine))
    return out


def _name(node: int, hosts: Optional[Sequence[str]], unit: str = "node") -> str:
    host = hosts[node] if hosts and node < len(hosts) and hosts[node] else None
    return f"{unit} {node} ({host})" if host else f"{unit} {node}"


def _fmt(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3g} GB/s"


def _cell(matrix: Matrix, a: int, b: int) -> Optional[float]:
    v = matrix[a][b]
    return float(v) if _measured(v) else None


def _direction_hint(slow_cells: set, a: int, b: int, name) -> str:
    ab, ba = (a, b) in slow_cells, (b, a) in slow_cells
    if ab and not ba:
        return f" Only {name(a)} -> {name(b)} is slow: look at {name(a)}'s transmit side (egress shaping) first."
    if ba and not ab:
        return f" Only {name(b)} -> {name(a)} is slow: look at {name(b)}'s transmit side (egress shaping) first."
    return ""


def analyze(
    matrix: Matrix,
    *,
    size: int,
    relative: float = 0.5,
    min_gbps: Optional[float] = None,
    hosts: Optional[Sequence[str]] = None,
    dead: Iterable[int] = (),
    errors: Sequence[dict] = (),
    unmeasured: Sequence[Sequence[int]] = (),
    unit: str = "node",
    extra: Optional[dict] = None,
) -> LinksAnalysis:
    """Name slow nodes and links. `errors` are {"a", "b", "error"} for pairs that failed (not on a dead node);
    `unmeasured` are pairs never attempted (deadline); `extra` keys are copied into the section (rounds, iters...)."""
    n = len(matrix)
    dead = sorted(set(dead))
    name = lambda x: _name(x, hosts, unit)  # noqa: E731
    c = classify(matrix, relative, min_gbps)
    # Every unit on one host (a standalone run: ranks stand in for nodes over loopback): the matrix measures CPU
    # scheduling, not a network, so a slow verdict is a warning that says so, never a failure.
    one_host = n > 1 and bool(hosts) and len(hosts) >= n and all(hosts[:n]) and len(set(hosts[:n])) == 1
    verdict = warned if one_host else failed
    loopback_note = (" All of these run on one host over loopback: the differences are CPU scheduling, not a "
                     "network." if one_host else "")
    slow_cells = set(c.slow_cells)
    slow_set = set(c.slow_nodes)

    slow_items = []
    for a, b in c.slow_links:
        if a in slow_set or b in slow_set:
            continue
        ab, ba = _cell(matrix, a, b), _cell(matrix, b, a)
        gbps = min(v for v in (ab, ba) if v is not None)
        # Ambiguous: an endpoint has no other measured link, so its health is unknown apart from this link.
        ambiguous = c.link_counts.get(a, (0, 0))[1] < 2 or c.link_counts.get(b, (0, 0))[1] < 2
        slow_items.append({"a": a, "b": b, "gbps": round(gbps, 6), "gbps_ab": ab, "gbps_ba": ba,
                           "ambiguous": ambiguous})

    section = {
        "size": int(size),
        "unit": unit,
        "matrix_gbps": [[_cell(matrix, a, b) if a != b else None for b in range(n)] for a in range(n)],
        "slow": slow_items,
        "slow_nodes": list(c.slow_nodes),
        "median_gbps": c.median_gbps,
        "reference_gbps": c.reference_gbps,
        "threshold_gbps": c.threshold_gbps,
        "relative": relative,
        "min_gbps": min_gbps,
        "slow_cells": [list(x) for x in c.slow_cells],
        "dead": dead,
        "errors": list(errors),
        "unmeasured": [list(p) for p in unmeasured],
    }
    if hosts:
        section["hosts"] = list(hosts)
    if extra:
        section.update(extra)

    checks: list[CheckResult] = []
    for x in dead:
        checks.append(failed(
            CHECK_DEAD,
            f"{name(x)} stopped answering during the links run; its pairs were not measured",
            detail="Its process exited, hung, or lost the network mid-round; the other nodes finished without it.",
            fix=f"read {name(x)}'s log and `dmesg` (OOM kill, crash), and check that it still reaches the other "
            f"nodes (`ncclcheck preflight`)",
            node=x,
            evidence={"node": x},
        ))
    for e in errors:
        a, b = e.get("a"), e.get("b")
        checks.append(failed(
            CHECK_PAIR_ERROR,
            f"pair {a}-{b} could not be measured: {e.get('error', '?')}",
            detail="Both nodes stayed up, but the transfer between them failed or exceeded the timeout.",
            fix=f"check that {name(a)} and {name(b)} reach each other on ephemeral TCP ports (firewall, "
            f"GLOO/NCCL_SOCKET_IFNAME); a link slower than size/timeout also ends here: try a smaller --size",
            evidence=dict(e),
        ))

    if c.median_gbps is None:
        reason = f"nothing measured: needs at least 2 {unit}s" if n < 2 else "no pair could be measured"
        checks.append(skipped(CHECK_SLOW, reason))
    else:
        rule = f"{_fmt(c.threshold_gbps)} ({relative:g} x the typical node's best link, {_fmt(c.reference_gbps)}"
        rule += f", --min-gbps {min_gbps:g})" if min_gbps is not None else ")"
        for x in c.slow_nodes:
            s, m = c.raw_counts[x]
            mine = [_cell(matrix, x, y) for y in range(n) if y != x] + [_cell(matrix, y, x) for y in range(n) if y != x]
            worst = min(v for v in mine if v is not None)
            out_slow = sum((x, y) in slow_cells for y in range(n))
            in_slow = sum((y, x) in slow_cells for y in range(n))
            side = ""
            if out_slow and not in_slow:
                side = " Only its outgoing traffic is slow: egress shaping (tbf/htb) or its transmit path."
            elif in_slow and not out_slow:
                side = " Only its incoming traffic is slow: its receive path or ingress policing."
            checks.append(verdict(
                CHECK_SLOW,
                f"{name(x)} is slow: {s} of its {m} links are below {_fmt(c.threshold_gbps)} (worst {_fmt(worst)})",
                detail=f"Slow means below {rule}. A node is slow when more than half of its links are.{side}"
                       + loopback_note,
                fix=INSPECT_NODE.format(who=name(x)),
                node=x,
                evidence={"node": x, "slow_links": s, "links": m, "worst_gbps": worst,
                          "reference_gbps": c.reference_gbps, "threshold_gbps": c.threshold_gbps},
            ))
        for item in slow_items:
            a, b = item["a"], item["b"]
            hint = _direction_hint(slow_cells, a, b, name)
            if item["ambiguous"]:
                lonely = [x for x in (a, b) if c.link_counts.get(x, (0, 0))[1] < 2]
                why = (f"With only 2 {unit}s," if n == 2 else
                       f"{' and '.join(name(x) for x in lonely)} {'has' if len(lonely) == 1 else 'have'} "
                       "no other measured link, so")
                detail = (f"{why} ncclcheck can't tell which endpoint is at fault: re-run with a third {unit} "
                          f"(a known-good one) to decide. Slow means below {rule}.")
                fix = (INSPECT_NODE.format(who=f"both {name(a)} and {name(b)}") + "; or "
                       + INSPECT_LINK.format(a=name(a), b=name(b)))
            else:
                detail = (f"Both {unit}s are fine with their other peers, so the path between them is at fault. "
                          f"Slow means below {rule}.")
                fix = INSPECT_LINK.format(a=name(a), b=name(b))
            checks.append(verdict(
                CHECK_SLOW,
                f"link {a}-{b} is slow: {_fmt(item['gbps'])} ({name(a)} -> {name(b)} {_fmt(item['gbps_ab'])}, "
                f"back {_fmt(item['gbps_ba'])}; threshold {_fmt(c.threshold_gbps)})"
                + (" - can't tell which endpoint" if item["ambiguous"] else ""),
                detail=detail + hint + loopback_note,
                fix=fix,
                evidence=dict(item),
            ))
        if not c.slow_nodes and not slow_items:
            links = sum(m for _, m in c.raw_counts.values()) // 2
            checks.append(passed(
                CHECK_SLOW,
                f"no slow {unit} or link: {links} links measured, median {_fmt(c.median_gbps)}, "
                f"none below {_fmt(c.threshold_gbps)}",
                evidence={"median_gbps": c.median_gbps, "threshold_gbps": c.threshold_gbps, "links": links},
            ))
    if unmeasured:
        checks.append(warned(
            CHECK_INCOMPLETE,
            f"{len(unmeasured)} pairs were not measured before the deadline",
            detail="The run was cut short; the verdicts above use only the pairs that were measured.",
            fix="raise --timeout, or use a smaller --size or fewer --iters",
            evidence={"pairs": [list(p) for p in unmeasured]},
        ))
    return LinksAnalysis(section, checks)

