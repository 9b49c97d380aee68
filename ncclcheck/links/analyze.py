"""From a directed bandwidth matrix, decide which links and which nodes are slow, and say what to inspect.

Pure: numbers in, the report's `links` section and CheckResults out. `matrix[a][b]` is the measured a->b bandwidth
in GB/s (1e9 bytes/s), or None where it was not measured.

Rules (issue 13: robust against a noisy machine, where the best link is not "normal"):
- the reference is the median of all measured directions, after dropping clear low outliers: values below
  `relative` x the median that sit below a gap (the next value up is at least GAP times larger) are set aside and
  the median is taken again, until no such group is left. A healthy spread (a continuum) keeps the plain median,
  so one fast link cannot inflate it; a slow node's links (even 2/3 of them with 3 nodes) are set aside;
- a direction is slow only as such a clear outlier (set aside above), or when below `min_gbps`;
- an unordered link is slow when either direction is slow (egress shaping slows one direction only);
- a node is slow when it has at least two measured links and more than half of them are slow, and at least one
  partner on those slow links is fine with its other peers; counted greedily: once a node is named, its links no
  longer count against its partners; a node with no fast link is slow;
- a link is reported on its own only when neither endpoint is a slow node (the node explains it);
- `--min-gbps` is a gate: links.min_gbps fails for any measured link below it;
- a direction is also slow when it is below its `floors` figure (links/efficiency.floors: `relative` x the share of
  a TRUSTED bound a healthy run reaches), whatever its peers measured: when every measured link is equally slow
  (round 1 paired each slow node with a good one) there is no contrast, and the bound is the only witness (issue
  32). Such a direction convicts a node only by the partner rule above, never by "no fast link": when every node
  has two or more links and all of them are below their bound, no node is at fault but the fabric (or the bound),
  and links.slow fails saying so (`fabric_slow`) instead of naming every node.
- where most of the directions it keeps as normal reach AT_LIMIT of a real limit on either side
  (links/efficiency.limits: they measure a shaper or a line rate, not a CPU), the tight rule of checks/outliers.py
  also applies: the faster links agreeing within 1.25x, a 1.6x gap below 0.7 x the reference is clear, so a host
  at half the others' rate is named (issue 44 item 3).
With two nodes, or an endpoint that has no other measured link, nobody can tell which endpoint is at fault: the
link is named and the check says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional

from ..checks.outliers import TIGHT_GAP, TIGHT_SPREAD, cut, is_low_outlier, tight_share
from ..config import LinksConfig
from ..model import CheckResult, failed, passed, skipped, warned

Matrix = Sequence[Sequence[Optional[float]]]

_DEFAULT = LinksConfig()  # --relative's default lives in config.LinksConfig
CHECK_SLOW = "links.slow"
CHECK_DEAD = "links.dead"
CHECK_PAIR_ERROR = "links.pair_error"
CHECK_INCOMPLETE = "links.incomplete"
CHECK_MIN_GBPS = "links.min_gbps"
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
    bound_cells: list = field(default_factory=list)  # [(a, b)] slow only by their trusted-bound floor
    fabric: bool = False  # every node's links are all slow by their bounds and no node explains them
    weak_links: list = field(default_factory=list)  # [(a, b)] not slow, but below the lowest floor of a slow cell
    tight: bool = False  # the tight rule (checks/outliers.py) set the slow cells apart: links at a bound, in agreement


@dataclass(frozen=True)
class LinksAnalysis:
    section: dict  # the report's "links" section
    checks: list = field(default_factory=list)  # list[CheckResult]


def _measured(x: object) -> bool:
    return isinstance(x, (int, float)) and x == x and x >= 0


def classify(matrix: Matrix, relative: float = _DEFAULT.relative, min_gbps: Optional[float] = None,
             floors: Optional[Matrix] = None, limits: Optional[Matrix] = None) -> Classification:
    """floors: per direction the GB/s below which it is slow whatever its peers measured (None: no absolute
    judgement there: an unknown, virtual or untrusted bound). limits: per direction the lowest real limit known on
    either side (links/efficiency.limits), which decides whether the tight rule may judge (`_at_limits`)."""
    n = len(matrix)
    cells = [(a, b, float(matrix[a][b])) for a in range(n) for b in range(n) if a != b and _measured(matrix[a][b])]
    if not cells:
        return Classification(None, None, None, [], [], [], {}, {}, [])
    median = statistics.median(v for _, _, v in cells)
    values = [v for _, _, v in cells]
    c = cut(values, relative, tight=bool(limits))
    if c.tight and not _at_limits([x for x in cells if not is_low_outlier(x[2], c.ref, c.ceiling, c.share)], limits):
        c = cut(values, relative)  # the links the tight rule kept as normal do not run at a real limit: the wide rule
    ref, ceiling, share = c.ref, c.ceiling, c.share
    threshold = share * ref
    if min_gbps is not None:
        threshold = max(threshold, min_gbps)
    hard_cells = sorted((a, b) for a, b, v in cells
                        if is_low_outlier(v, ref, ceiling, share) or (min_gbps is not None and v < min_gbps))
    bound_cells = sorted((a, b) for a, b, v in cells
                         if (a, b) not in set(hard_cells) and _below_floor(v, floors, a, b))
    slow_cells = sorted(hard_cells + bound_cells)
    links = sorted({(min(a, b), max(a, b)) for a, b, _ in cells})
    slow_links = sorted({(min(a, b), max(a, b)) for a, b in slow_cells})
    hard_links = sorted({(min(a, b), max(a, b)) for a, b in hard_cells})
    # A link that is not slow but slower than the lowest floor a bound set is no witness that its ends are fine:
    # with 2 of 3 nodes slow, their link measures their own (shown) shaper's rate and is "fine" at 10% of the
    # healthy node's bound, which would otherwise convict the healthy node whose egress met them both.
    lowest = min((float(floors[a][b]) for a, b in bound_cells), default=None)
    best = {lk: max(v for a, b, v in cells if (min(a, b), max(a, b)) == lk) for lk in links}
    weak = {lk for lk in links if lowest is not None and best[lk] < lowest}
    slow_nodes = _slow_nodes(n, links, slow_links, hard_links, weak)
    raw = _counts(n, links, slow_links, set())
    counts = _counts(n, links, slow_links, set(slow_nodes))
    good = sorted(x for x, (s, m) in raw.items() if s == 0)
    # No node explains the slow links and every node has at least two, all slow by their bounds: the fabric (a
    # switch, its uplinks, a shaper no host shows) or the bound itself, not a node to drain.
    fabric = (bool(bound_cells) and not slow_nodes and len(raw) >= 3
              and all(m >= 2 and s == m for s, m in raw.values()))
    return Classification(median, ref, threshold, slow_cells, slow_links, slow_nodes, counts, raw, good,
                          bound_cells, fabric, sorted(weak), c.tight)


AT_LIMIT = 0.8  # of its limit: the direction ran at a shaper's or a line rate, not at what a busy CPU could push


def _at_limits(cells: list, limits: Optional[Matrix]) -> bool:
    """Did most of these directions (those the tight rule kept as normal) reach AT_LIMIT of a real limit
    (links/efficiency.limits)? Then their agreement is one rate, a shaper's or a line rate, not a CPU's pace
    (unshaped veth has no real limit: never), and the tight rule of checks/outliers.py may judge against them."""
    if not limits:
        return False

    def at(a: int, b: int, v: float) -> bool:
        f = limits[a][b] if a < len(limits) and b < len(limits[a]) else None
        return _measured(f) and f > 0 and v >= AT_LIMIT * f

    return sum(1 for a, b, v in cells if at(a, b, v)) * 2 > len(cells)


def _below_floor(v: float, floors: Optional[Matrix], a: int, b: int) -> bool:
    if not floors or a >= len(floors) or b >= len(floors[a]):
        return False
    f = floors[a][b]
    return _measured(f) and f > 0 and v < f


def _slow_nodes(n: int, links: list, slow_links: list, hard_links: Optional[list] = None,
                weak: frozenset | set = frozenset()) -> list:
    """Greedy: name the node with the largest share of slow links whose partners are fine elsewhere, then stop
    counting its links against its partners (a slow node explains them), and look again. hard_links: the slow links
    judged against their peers or --min-gbps (not only by a bound), the only ones the "no fast link" rule counts;
    weak: links that do not show their ends to be fine (classify)."""
    named: list[int] = []
    while True:
        counts = _counts(n, links, slow_links, set(named))
        cand = [(s / m, s, -x) for x, (s, m) in counts.items()
                if x not in named and m >= 2 and s * 2 > m
                and _a_partner_is_fine(x, links, slow_links, set(named), weak)]
        if not cand:
            break
        named.append(-max(cand)[2])
    raw = _counts(n, links, slow_links if hard_links is None else hard_links, set(named))
    # A node none of whose links is fast is slow whatever its partners are (a cluster below --min-gbps everywhere),
    # its links to nodes named above left out: a good node met only slow ones is no slower than they are. Not by
    # bounds alone: a fabric below its bounds everywhere is no node's fault (Classification.fabric).
    return sorted(set(named) | {x for x, (s, m) in raw.items() if m >= 2 and s == m})


def _a_partner_is_fine(x: int, links: list, slow_links: list, named: set, weak: frozenset | set = frozenset()
                       ) -> bool:
    """Some partner y on x's slow links has mostly fast links to the others (or no other link to judge by): then
    x, not y, explains the slow links. Without it, two nodes sharing one bad path could blame each other. A weak
    link (below every floor a bound set) counts against y here: it does not show y to be fine."""
    slow = set(slow_links) | set(weak)
    partners = [(set(lk) - {x}).pop() for lk in slow_links if x in lk and not (set(lk) - {x}) & named]
    for y in partners:
        other = [lk for lk in links if y in lk and x not in lk and not (set(lk) - {y}) & named]
        if not other or sum(lk in slow for lk in other) * 2 <= len(other):
            return True
    return False


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
    relative: float = _DEFAULT.relative,
    min_gbps: Optional[float] = None,
    hosts: Optional[Sequence[str]] = None,
    dead: Iterable[int] = (),
    errors: Sequence[dict] = (),
    unmeasured: Sequence[Sequence[int]] = (),
    unit: str = "node",
    extra: Optional[dict] = None,
    floors: Optional[Matrix] = None,
    limits: Optional[Matrix] = None,
) -> LinksAnalysis:
    """Name slow nodes and links. `errors` are {"a", "b", "error"} for pairs that failed (not on a dead node);
    `unmeasured` are pairs never attempted (deadline); `extra` keys are copied into the section (rounds, iters...);
    `floors` per direction the GB/s below which it is slow by its trusted bound (links/efficiency.floors); `limits`
    per direction the lowest real limit known on either side (links/efficiency.limits: the tight rule's gate)."""
    v = _build(matrix, size, relative, min_gbps, hosts, sorted(set(dead)), list(errors), unmeasured, unit, extra,
               floors, limits)
    checks: list[CheckResult] = []
    checks += [_dead_check(v, x) for x in v.dead]
    checks += [_pair_error_check(v, e) for e in v.errors]
    if v.c.median_gbps is None:
        # A links run that measured nothing did not do what was asked: never a pass, whatever the reason.
        if len(matrix) < 2:
            checks.append(warned(CHECK_SLOW, f"nothing measured: links needs at least 2 {unit}s and this world has "
                                 f"{len(matrix)}", fix="Run it across 2+ nodes, or with --nproc-per-node 2 or more "
                                 "on one host (one GPU per rank with NCCL)."))
        else:
            checks.append(skipped(CHECK_SLOW, "no pair could be measured"))
    elif v.c.fabric:
        checks.append(_fabric_check(v))
    else:
        checks += [_slow_node_check(v, x) for x in v.c.slow_nodes]
        checks += [_slow_link_check(v, item) for item in v.slow_items]
        if not v.c.slow_nodes and not v.slow_items:
            checks.append(_healthy_check(v))
    if min_gbps is not None:
        checks.append(_min_gbps_check(v))
    if unmeasured:
        checks.append(_incomplete_check(v))
    return LinksAnalysis(v.section, checks)


@dataclass
class _View:
    """What every verdict function reads: the matrix, its classification, the section, and how to name things."""

    matrix: Matrix
    c: Classification
    section: dict
    slow_items: list
    dead: list
    errors: list
    unmeasured: Sequence[Sequence[int]]
    unit: str
    relative: float
    min_gbps: Optional[float]
    hosts: Optional[Sequence[str]]
    one_host: bool

    def name(self, x: int) -> str:
        return _name(x, self.hosts, self.unit)

    @property
    def verdict(self):
        # Every unit on one host (a standalone run: ranks stand in for nodes over loopback): the matrix measures
        # CPU scheduling, not a network, so a slow verdict is a warning that says so, never a failure.
        return warned if self.one_host else failed

    @property
    def loopback_note(self) -> str:
        return (" All of these run on one host over loopback: the differences are CPU scheduling, not a network."
                if self.one_host else "")

    @property
    def rule(self) -> str:
        c = self.c
        share = tight_share(self.relative) if c.tight else self.relative
        text = f"{_fmt(c.threshold_gbps)} ({share:g} x the typical link, {_fmt(c.reference_gbps)}, and " \
               "set apart from it by a clear gap"
        text += f"; or --min-gbps {self.min_gbps:g}" if self.min_gbps is not None else ""
        if c.tight:
            text += (f", or {TIGHT_GAP:g}x where the other links agree within {TIGHT_SPREAD:g}x and run at "
                     "a real limit (one rate, not a busy CPU's scatter)")
        if self.c.bound_cells:
            text += (f"; or, whatever the other links measured, below {self.relative:g} x the share of its trusted "
                     "bound a healthy link reaches (floor_gbps)")
        return text + ")"


def _build(matrix: Matrix, size: int, relative: float, min_gbps: Optional[float], hosts: Optional[Sequence[str]],
           dead: list, errors: list, unmeasured: Sequence[Sequence[int]], unit: str,
           extra: Optional[dict], floors: Optional[Matrix] = None, limits: Optional[Matrix] = None) -> _View:
    """The classification and the report's section; the verdict functions below turn it into checks."""
    n = len(matrix)
    c = classify(matrix, relative, min_gbps, floors, limits)
    one_host = n > 1 and bool(hosts) and len(hosts) >= n and all(hosts[:n]) and len(set(hosts[:n])) == 1
    slow_set = set(c.slow_nodes)
    slow_items = []
    for a, b in c.slow_links:
        if a in slow_set or b in slow_set:
            continue
        ab, ba = _cell(matrix, a, b), _cell(matrix, b, a)
        gbps = min(x for x in (ab, ba) if x is not None)
        # Ambiguous: an endpoint has no other measured link, so its health is unknown apart from this link.
        ambiguous = c.link_counts.get(a, (0, 0))[1] < 2 or c.link_counts.get(b, (0, 0))[1] < 2
        # ... or its other links are too slow to show it fine (weak: below every floor a bound set)
        ambiguous = ambiguous or any(_weak_elsewhere(matrix, c, x, (a, b)) for x in (a, b))
        slow_items.append({"a": a, "b": b, "gbps": gbps, "gbps_ab": ab, "gbps_ba": ba, "ambiguous": ambiguous})
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
        # what the bounds judged (links/efficiency.floors): the floor per direction, the cells slow by it alone
        "floor_gbps": [[_cell(floors, a, b) if floors and a != b and a < len(floors) and b < len(floors[a])
                        else None for b in range(n)] for a in range(n)],
        "slow_by_bound": [list(x) for x in c.bound_cells],
        "fabric_slow": c.fabric,
        "dead": dead,
        "errors": errors,
        "unmeasured": [list(p) for p in unmeasured],
    }
    if hosts:
        section["hosts"] = list(hosts)
        if one_host:  # every rank on one host: its loopback, not a network link (said by the text renderer)
            section["one_host"] = hosts[0]
    if extra:
        section.update(extra)
    return _View(matrix, c, section, slow_items, dead, errors, unmeasured, unit, relative, min_gbps, hosts, one_host)


def _weak_elsewhere(matrix: Matrix, c: Classification, x: int, link: tuple) -> bool:
    """x's other measured links are all slow or weak, one weak at least: none shows x to be fine."""
    n = len(matrix)
    other = [(min(x, y), max(x, y)) for y in range(n) if y != x and (min(x, y), max(x, y)) != link
             and (_cell(matrix, x, y) is not None or _cell(matrix, y, x) is not None)]
    weak, slow = set(c.weak_links), set(c.slow_links)
    return bool(other) and any(lk in weak for lk in other) and all(lk in weak or lk in slow for lk in other)


def _fabric_check(v: _View) -> CheckResult:
    """Every node's links are all far below their trusted bounds and none is fine with anyone: no single node is
    at fault, and none is healthy either (issue 32: never "Healthy" at 10% of a trusted bound)."""
    c, m = v.c, v.matrix
    nodes = sorted(c.raw_counts)
    cells = [(a, b) for a, b in c.bound_cells]
    worst_a, worst_b = min(cells, key=lambda ab: _cell(m, *ab) / _cell(v.section["floor_gbps"], *ab))
    worst, floor = _cell(m, worst_a, worst_b), _cell(v.section["floor_gbps"], worst_a, worst_b)
    # A warning, not a failure: with no contrast anywhere, a CPU transport that cannot fill a fast NIC (gloo on
    # 100GbE reads a fraction of line rate) looks exactly like a slow fabric, and no node is at fault either way.
    # The nodes stay `suspect` in sweep (never healthy, never drained), which is what the evidence supports.
    return warned(
        CHECK_SLOW,
        f"every link is far below its bound, with no node at fault: {len(c.slow_links)} of "
        f"{sum(mm for _, mm in c.raw_counts.values()) // 2} links slow, every {v.unit} slow with every partner "
        f"(worst {v.name(worst_a)} -> {v.name(worst_b)} {_fmt(worst)}, floor {_fmt(floor)}): the fabric or the "
        "bound",
        detail=f"No {v.unit} is fine with any partner, so no single {v.unit} explains the slow links (none is drained; "
               f"none is healthy either): the fabric between them (switch ports, uplinks, a shaper or policer that "
               f"no host shows), or the bound ncclcheck read is higher than what this fabric was built to carry, "
               f"or a --size too small to reach it ({v.section['size']} bytes). "
               f"Slow means below {v.rule}. {v.unit.capitalize()}s: {', '.join(v.name(x) for x in nodes)}."
               + v.loopback_note,
        fix="compare the switch ports' configured speed and QoS/policers with the NICs' (bound_by in the JSON); "
            "if the fabric is meant to be this slow, the bound is wrong: shape the hosts' interfaces to the real "
            "rate (tc) so that ncclcheck reads it; " + INSPECT_NODE.format(who="any one node"),
        evidence={"nodes": nodes, "slow_links": [list(x) for x in c.slow_links], "worst_gbps": worst,
                  "floor_gbps": floor},
    )


def _dead_check(v: _View, x: int) -> CheckResult:
    return failed(
        CHECK_DEAD,
        f"{v.name(x)} stopped answering during the links run; its pairs were not measured",
        detail="Its process exited, hung, or lost the network mid-round; the other nodes finished without it.",
        fix=f"read {v.name(x)}'s log and `dmesg` (OOM kill, crash), and check that it still reaches the other "
            f"nodes (`ncclcheck preflight`)",
        node=x,
        evidence={"node": x},
    )


def _pair_error_check(v: _View, e: dict) -> CheckResult:
    a, b = e.get("a"), e.get("b")
    return failed(
        CHECK_PAIR_ERROR,
        f"pair {a}-{b} could not be measured: {e.get('error', '?')}",
        detail="Both nodes stayed up, but the transfer between them failed or exceeded the timeout.",
        fix=f"check that {v.name(a)} and {v.name(b)} reach each other on ephemeral TCP ports (firewall, "
            f"GLOO/NCCL_SOCKET_IFNAME); a link slower than size/timeout also ends here: try a smaller --size",
        evidence=dict(e),
    )


def _slow_node_check(v: _View, x: int) -> CheckResult:
    c, m, n = v.c, v.matrix, len(v.matrix)
    slow_cells = set(c.slow_cells)
    s, total = c.raw_counts[x]
    mine = [_cell(m, x, y) for y in range(n) if y != x] + [_cell(m, y, x) for y in range(n) if y != x]
    worst = min(val for val in mine if val is not None)
    out_slow = sum((x, y) in slow_cells for y in range(n))
    in_slow = sum((y, x) in slow_cells for y in range(n))
    peers = [y for y in range(n) if y != x and (_cell(m, x, y) is not None or _cell(m, y, x) is not None)]
    rates = "; ".join(f"{v.name(y)} {_fmt(_cell(m, x, y))} / {_fmt(_cell(m, y, x))}" for y in peers[:8])
    rates += f"; and {len(peers) - 8} more" if len(peers) > 8 else ""
    side = ""
    if out_slow and not in_slow:
        side = " Only its outgoing traffic is slow: egress shaping (tbf/htb) or its transmit path."
    elif in_slow and not out_slow:
        side = " Only its incoming traffic is slow: its receive path or ingress policing."
    return v.verdict(
        CHECK_SLOW,
        f"{v.name(x)} is slow: {s} of its {total} links are below {_fmt(c.threshold_gbps)} (worst {_fmt(worst)})",
        detail=f"Slow means below {v.rule}. A node is slow when more than half of its links are, and its partners "
               f"are fine with their other peers.{side} Its links, out and back: {rates}; the typical link "
               f"{_fmt(c.reference_gbps)}." + v.loopback_note,
        fix=INSPECT_NODE.format(who=v.name(x)),
        node=x,
        evidence={"node": x, "slow_links": s, "links": total, "worst_gbps": worst,
                  "reference_gbps": c.reference_gbps, "threshold_gbps": c.threshold_gbps,
                  "rates_gbps": {str(y): [_cell(m, x, y), _cell(m, y, x)] for y in peers}},
    )


def _slow_link_check(v: _View, item: dict) -> CheckResult:
    c, n, unit = v.c, len(v.matrix), v.unit
    a, b = item["a"], item["b"]
    hint = _direction_hint(set(c.slow_cells), a, b, v.name)
    if item["ambiguous"]:
        lonely = [x for x in (a, b) if c.link_counts.get(x, (0, 0))[1] < 2]
        why = (f"With only 2 {unit}s," if n == 2 else
               f"{' and '.join(v.name(x) for x in lonely)} {'has' if len(lonely) == 1 else 'have'} "
               "no other measured link, so")
        detail = (f"{why} ncclcheck can't tell which endpoint is at fault: re-run with a third {unit} "
                  f"(a known-good one) to decide. Slow means below {v.rule}.")
        fix = (INSPECT_NODE.format(who=f"both {v.name(a)} and {v.name(b)}") + "; or "
               + INSPECT_LINK.format(a=v.name(a), b=v.name(b)))
    else:
        detail = (f"Both {unit}s are fine with their other peers, so the path between them is at fault. "
                  f"Slow means below {v.rule}.")
        fix = INSPECT_LINK.format(a=v.name(a), b=v.name(b))
    return v.verdict(
        CHECK_SLOW,
        f"link {a}-{b} is slow: {_fmt(item['gbps'])} ({v.name(a)} -> {v.name(b)} {_fmt(item['gbps_ab'])}, "
        f"back {_fmt(item['gbps_ba'])}; threshold {_fmt(c.threshold_gbps)})"
        + (" - can't tell which endpoint" if item["ambiguous"] else ""),
        detail=detail + hint + v.loopback_note,
        fix=fix,
        evidence=dict(item),
    )


def _healthy_check(v: _View) -> CheckResult:
    c = v.c
    links = sum(m for _, m in c.raw_counts.values()) // 2
    one = v.section.get("one_host")
    return passed(
        CHECK_SLOW,
        f"no slow {v.unit} or link: {links} links measured, median {_fmt(c.median_gbps)}, "
        f"none below {_fmt(c.threshold_gbps)}" + (f"; every rank on {one}: loopback between ranks of one host, no "
                                                  "network link" if one else ""),
        evidence={"median_gbps": c.median_gbps, "threshold_gbps": c.threshold_gbps, "links": links},
    )


def _min_gbps_check(v: _View) -> CheckResult:
    """--min-gbps is a gate: any measured direction below it fails the run (one host or not); nothing measured
    means the gate could not be evaluated, which fails too."""
    need, m, n = v.min_gbps, v.matrix, len(v.matrix)
    cells = [(a, b, _cell(m, a, b)) for a in range(n) for b in range(n) if a != b and _cell(m, a, b) is not None]
    ev = {"min_gbps": need, "below": [[a, b, x] for a, b, x in cells if x < need]}
    if not cells:
        return failed(CHECK_MIN_GBPS, f"--min-gbps {need:g}: no link was measured, the gate cannot be evaluated",
                      evidence=ev, fix="see the other links checks for why nothing was measured")
    low = [(a, b, x) for a, b, x in cells if x < need]
    if not low:
        worst = min(cells, key=lambda t: t[2])
        return passed(CHECK_MIN_GBPS, f"every measured link reaches --min-gbps {need:g} (lowest "
                      f"{v.name(worst[0])} -> {v.name(worst[1])} {_fmt(worst[2])})", evidence=ev)
    a, b, x = min(low, key=lambda t: t[2])
    return failed(CHECK_MIN_GBPS, f"{len(low)} of {len(cells)} measured directions are below --min-gbps {need:g} "
                  f"(lowest {v.name(a)} -> {v.name(b)} {_fmt(x)})",
                  detail="; ".join(f"{v.name(p)} -> {v.name(q)} {_fmt(y)}" for p, q, y in low),
                  evidence=ev, fix="see links.slow for which node or link to inspect" + v.loopback_note)


def _incomplete_check(v: _View) -> CheckResult:
    return warned(
        CHECK_INCOMPLETE,
        f"{len(v.unmeasured)} pairs were not measured before the deadline",
        detail="The run was cut short; the verdicts above use only the pairs that were measured.",
        fix="raise --timeout, or use a smaller --size or fewer --iters",
        evidence={"pairs": [list(p) for p in v.unmeasured]},
    )
