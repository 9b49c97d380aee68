"""Presentation helpers shared by the renderers: check ordering, labels, and the aggregation that keeps a 1,024-node
report readable (one row per check: "pass on 1,021 nodes; fail on node 17 (gpu017): ...").

Only ordering, grouping and wording live here. Every verdict (status, gate, slow link) is read from the Report as it is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from .. import hostranges
from ..model import ABOVE_LIMIT_NOISE, LARGE_FROM_NODES, CheckResult, Report, Status, clean_text
from ..units import format_gbps
from .words import BOUND_WRONG, GBPS, IN_PLACE, NO_FIGURE, STATUS_WORD, UNKNOWN, count, efficiency_caption, placement

# Failures first, then warnings, passes, skips (what did not run, least to act on): the order people read a report
# in, and the console's, so the terminal, HTML, Markdown and JUnit agree.
_DISPLAY_ORDER = {Status.FAIL: 0, Status.WARN: 1, Status.PASS: 2, Status.SKIP: 3}

__all__ = ["STATUS_WORD"]  # re-exported: the words themselves live in render/words.py


def checks_for_display(report: Report) -> list[CheckResult]:
    """Checks sorted failures first; within a status the report's own (dependency) order is kept."""
    return sorted(report.checks, key=lambda c: _DISPLAY_ORDER.get(c.status, 9))


def hostnames(report: Report) -> dict[int, str]:
    """Node rank -> hostname for every node of the run the report knows: its nodes, and for a links run the
    hostnames every node published (a links report saved before its nodes were listed names only node 0 in
    `nodes`, and its header read `[h1]` on two nodes)."""
    out: dict[int, str] = {}
    links = report.links if isinstance(report.links, dict) else {}
    if links.get("unit", "node") == "node" and isinstance(links.get("hosts"), list):
        out.update({i: h for i, h in enumerate(links["hosts"]) if isinstance(h, str) and h})
    out.update({n.node_rank: n.hostname for n in report.nodes})
    return out


def node_label(node: Optional[int], report: Report) -> str:
    """'node 1 (h2)', 'node 1' when the hostname is unknown, 'all nodes' for a cross-node result."""
    if node is None:
        return "all nodes"
    host = hostnames(report).get(node)
    return f"node {node} ({host})" if host else f"node {node}"


def check_case_name(check: CheckResult) -> str:
    """The name a check goes by in CI: 'net.socket_ifname[node 1]'; an op-scoped bench gate adds '[all_reduce]'."""
    name = check.id
    op = check.evidence.get("op") if isinstance(check.evidence, dict) else None
    if isinstance(op, str) and op:
        name += f"[{op}]"
    if check.node is not None:
        name += f"[node {check.node}]"
    return name


def placement_label(row) -> str:
    """How a bench row was placed, where there is room: the label of words.placement(row)."""
    return placement(row).label


NO_CODE_FILES = "no files to hash (an empty folder, or only job outputs and folders the hash skips)"


def code_text(code: dict) -> str:
    """The code a job would run as the env table says it: 'tree PATH sha256:... (12 files)', git's HEAD hash, or,
    for a tree with no file the hash covers, that and no digest (sha256 of nothing is the same for every empty
    folder: no identity of any code)."""
    files = code.get("files") if code.get("kind") == "tree" else None  # a git tree is its HEAD and diff
    if files == 0:
        return f"{code.get('kind')} {code.get('path')}: {NO_CODE_FILES}; --code PATH names the tree to compare"
    said = f" ({count(files, 'file')})" if isinstance(files, int) else ""
    return f"{code.get('kind')} {code.get('path')} {str(code.get('hash'))[:19]}{said}"


def one_line(text: object) -> str:
    """Collapse whitespace and drop control characters so a summary, hostname or version from another machine or
    a file cannot break a table row, a comment, or a line of shell."""
    return " ".join(clean_text(str(text)).split())


def trust_text(report: Report) -> Optional[str]:
    """'trust: munge' and, when there were any, the store records this process ignored and the token warning: one
    line, the same words in every renderer. None for a run that crossed no store."""
    t = report.trust
    if not t:
        return None
    out = f"trust: {t.get('level', 'none')}"
    ignored = t.get("ignored") or []
    if ignored:
        out += f"; {len(ignored)} store record(s) ignored, first: {ignored[0]}"
    if t.get("warning"):
        out += f"; warning: {t['warning']}"
    return clean_text(out).replace("\n", " ")


def status_headline(report: Report) -> str:
    """'FAIL (exit 1)', with 'partial' when the run was cut short."""
    head = f"{STATUS_WORD[report.status]} (exit {report.exit_code})"
    if report.strict and report.status is Status.WARN:
        head += " [strict: warnings fail]"
    if report.partial:
        head += " [partial: the run was cut short]"
    return head


def not_measured(report: Report) -> list[str]:
    """One line per measurement the run was asked for and did not make, with why (bench op x size, links pairs).

    Every renderer lists these: a run cut short must say what it did not measure (issue 13)."""
    from ..units import format_size_short

    out: list[str] = []
    for c in report.checks:
        items = c.evidence.get("not_measured") if isinstance(c.evidence, dict) else None
        for m in items or []:
            if isinstance(m, dict) and not m.get("unsupported"):
                where = f" {IN_PLACE.label}" if m.get("in_place") else ""
                out.append(f"{m.get('op')}{where} "
                           f"{format_size_short(int(m.get('bytes') or 0))}: {m.get('reason')}")
    links = report.links if isinstance(report.links, dict) else {}
    for pair in links.get("unmeasured") or []:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            out.append(f"link {pair[0]} <-> {pair[1]}: not measured (the run was cut short)")
    return out
# ---------------------------------------------------------------------------------------------------------------
# Aggregation: one line per check however many nodes ran it ("pass on 1,021 nodes; fail on node 17 (gpu017): ...")

NAMED_NODES = 8  # nodes named per (status, summary) before "and N more"


@dataclass(frozen=True)
class CheckGroup:
    """Every result of one check id, in report order: per-node results and the cross-node one (node None)."""

    id: str
    results: tuple

    @property
    def status(self) -> Status:
        return max((c.status for c in self.results), key=lambda s: s.rank)

    @property
    def per_node(self) -> list[CheckResult]:
        return [c for c in self.results if c.node is not None]

    @property
    def cross(self) -> list[CheckResult]:
        return [c for c in self.results if c.node is None]

    def nodes_with(self, status: Status) -> list[int]:
        return sorted(c.node for c in self.per_node if c.status is status)

    @property
    def fix(self) -> str:
        for c in sorted(self.results, key=lambda c: -c.status.rank):
            if c.fix:
                return c.fix
        return ""


def group_checks(checks: list[CheckResult]) -> list[CheckGroup]:
    """Results grouped by check id, groups in order of first appearance."""
    by_id: dict[str, list[CheckResult]] = {}
    for c in checks:
        by_id.setdefault(c.id, []).append(c)
    return [CheckGroup(cid, tuple(rs)) for cid, rs in by_id.items()]


def groups_for_display(checks: list[CheckResult]) -> list[CheckGroup]:
    """Groups sorted failures first; within a status the report's own (dependency) order is kept."""
    return sorted(group_checks(checks), key=lambda g: _DISPLAY_ORDER.get(g.status, 9))


def _count(n: int, what: str = "node") -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def name_nodes(nodes: list[int], hosts: dict[int, str], limit: int = NAMED_NODES) -> str:
    """'node 17 (gpu017), node 230 (gpu230)'; past the limit every node as host ranges and a count
    ('130 nodes gpu[0001-0128,0131] (node ranks 1-128,131)'), never thousands of ids nor an 'and 12 more'."""
    if len(nodes) > limit:
        return hostranges.who((r, hosts.get(r) or "?") for r in nodes)
    return ", ".join(f"node {r} ({hosts[r]})" if hosts.get(r) else f"node {r}" for r in nodes)


def bound_groups(node_bounds: object) -> list[tuple[object, str, list]]:
    """A links section's node_bounds as (bound_gbps, set by, [node ranks]) rows, one per distinct bound, the slowest
    first: 8,192 nodes on one kind of NIC are one row, not 8,192. Keys that are not node ranks stay rows of their
    own (their key as the only member)."""
    rows: dict = {}
    for k, v in (node_bounds.items() if isinstance(node_bounds, dict) else ()):
        if not isinstance(v, dict):
            continue
        b = v.get("bound_gbps") if isinstance(v.get("bound_gbps"), (int, float)) else None
        member = int(k) if str(k).isdigit() else str(k)
        key = (b, str(v.get("bound_by") or "")) if isinstance(member, int) else (b, str(v.get("bound_by") or ""), k)
        rows.setdefault(key, []).append(member)
    return sorted(((key[0], key[1], sorted(m, key=str) if any(isinstance(x, str) for x in m) else sorted(m))
                   for key, m in rows.items()), key=lambda r: (r[0] is None, r[0] or 0, r[1]))


def nodes_text(members: list, hosts: dict[int, str]) -> str:
    """A bound_groups row's members for a table cell: node ranks through name_nodes, other keys as they are."""
    ranks = [m for m in members if isinstance(m, int)]
    return ", ".join(([name_nodes(ranks, hosts)] if ranks else []) + [str(m) for m in members if isinstance(m, str)])


def group_summary(group: CheckGroup, hosts: dict[int, str], limit: int = NAMED_NODES) -> str:
    """One line for a whole check: the cross-node verdict, then 'pass on N nodes; fail on node 17 (h): why'."""
    parts = [one_line(c.summary) for c in group.cross]
    per = group.per_node
    if not per:
        return "; ".join(parts)
    for st in (Status.PASS, Status.SKIP):
        if (nodes := group.nodes_with(st)) and (st is Status.PASS or len(nodes) > limit):
            parts.append(f"{st.value} on {_count(len(nodes))}")
    for st in (Status.FAIL, Status.WARN, Status.SKIP):
        bad = [c for c in per if c.status is st]
        if st is Status.SKIP and len(bad) > limit:
            continue
        by_text: dict[str, list[int]] = {}
        for c in bad:
            by_text.setdefault(one_line(c.summary), []).append(c.node)
        if len(by_text) > limit:  # a text per node (its name, address, numbers in it): every node as host ranges
            first = min(bad, key=lambda c: c.node)  # and a count, and one node's own words as the example
            parts.append(f"{st.value} on {name_nodes(sorted(c.node for c in bad), hosts, 0)}, "
                         f"{len(by_text):,} different texts, e.g. {one_line(first.summary)}")
            continue
        named, left = 0, 0
        for text, nodes in sorted(by_text.items(), key=lambda kv: (-len(kv[1]), min(kv[1]))):
            if named >= limit:  # per-node texts differ (numbers in them): name a few, count the rest
                left += len(nodes)
                continue
            parts.append(f"{st.value} on {name_nodes(sorted(nodes), hosts, limit - named)}: {text}")
            named += min(len(nodes), limit - named)
        if left:
            parts.append(f"{st.value} on {_count(left, 'more node')}")
    return "; ".join(parts)


AGGREGATE_FROM_NODES = LARGE_FROM_NODES  # from this many nodes one row per check, not one per node per check


def aggregated(report: Report) -> bool:
    return max(len(report.nodes), report.world.nnodes or 0) >= AGGREGATE_FROM_NODES


def group_row(group: CheckGroup, hosts: dict[int, str]) -> CheckResult:
    """One result standing for a whole group: worst status, 'pass on N nodes; fail on node 17 (h): ...'."""
    if len(group.results) == 1:
        return group.results[0]
    nodes = {st.value: group.nodes_with(st)[:64] for st in Status if group.nodes_with(st)}
    counts = {st.value: len(group.nodes_with(st)) for st in Status if group.nodes_with(st)}
    detail = "; ".join(one_line(c.detail) for c in group.cross if c.detail)
    return CheckResult(group.id, group.status, group_summary(group, hosts), detail=detail, fix=group.fix, node=None,
                       evidence={"aggregated": True, "nodes": nodes, "counts": counts},
                       findings=tuple(f for c in group.cross for f in c.more))


def same_skips_once(report: Report) -> list[CheckResult]:
    """The report's checks with a skip that says the same thing on several nodes shown once, where its first one
    was: node None ("all") when every node of the run said it, else its nodes named in the summary. A CPU run of
    two nodes said "no NVIDIA GPU" once per node for each GPU check (the JSON keeps every node's)."""
    nodes = sorted({n.node_rank for n in report.nodes} | {c.node for c in report.checks if c.node is not None})
    said: dict = {}
    for c in report.checks:
        if c.status is Status.SKIP and c.node is not None:
            said.setdefault((c.id, c.summary), []).append(c.node)
    out, done = [], set()
    for c in report.checks:
        key = (c.id, c.summary)
        on = said.get(key) if c.status is Status.SKIP and c.node is not None else None
        if not on or len(on) < 2:
            out.append(c)
            continue
        if key in done:
            continue
        done.add(key)
        every = sorted(set(on)) == nodes
        out.append(dataclasses.replace(c, node=None) if every else
                   dataclasses.replace(c, summary=f"{c.summary} (nodes {', '.join(map(str, sorted(set(on))))})"))
    return out


def display_checks(report: Report, ordered: bool = True, same_skips: bool = True) -> list[CheckResult]:
    """The rows a renderer shows: every check on a small run; one row per check id from AGGREGATE_FROM_NODES
    nodes (per-node detail stays in the JSON and the HTML node table). Failures first unless ordered is False.
    same_skips: a skip that says the same thing on several nodes once (same_skips_once); JUnit keeps each node's
    test case."""
    if not aggregated(report):
        shown = same_skips_once(report) if same_skips else list(report.checks)
        return sorted(shown, key=lambda c: _DISPLAY_ORDER.get(c.status, 9)) if ordered else shown
    hosts = hostnames(report)
    groups = groups_for_display(report.checks) if ordered else group_checks(report.checks)
    return [group_row(g, hosts) for g in groups]


# ---------------------------------------------------------------------------------------------------------------
# The first screen: passes counted by kind, skips one row per reason (the full table is --verbose / a click away)

FOLDED_SKIPS = 12  # skip reasons listed on the first screen before "and N more"


# Checks whose passing row says what the run did to the cluster (drained or resumed a node, or would under --dry-run):
# part of the answer, so never folded into the pass count.
ACTION_CHECKS = frozenset({"slurm.drain"})


def on_first_screen(check: CheckResult) -> bool:
    """A row of its own on the first screen: a failure, a warning, or what the run did (ACTION_CHECKS)."""
    return check.status in (Status.FAIL, Status.WARN) or check.id in ACTION_CHECKS


def check_kind(check_id: str) -> str:
    """'gpu' for gpu.xid: the family a check belongs to, what the passes are counted by."""
    return check_id.split(".", 1)[0]


def passes_by_kind(report: Report) -> list[tuple[str, int]]:
    """(kind, passing results) in the order each kind first appears: every node's result counts, so with the rows
    on_first_screen() keeps they add up to the verdict's 'N passed'."""
    out: dict[str, int] = {}
    for c in report.checks:
        if c.status is Status.PASS and not on_first_screen(c):
            out[check_kind(c.id)] = out.get(check_kind(c.id), 0) + 1
    return list(out.items())


@dataclass(frozen=True)
class SkipFold:
    """Every check that skipped for the same reason on the same nodes: one row on the first screen."""

    reason: str
    ids: tuple  # check ids, in report order
    nodes: tuple  # node ranks that said it; () when every node did (or the checks are cross-node)
    results: int  # results folded in (one per node per check)


def skips_by_reason(report: Report) -> list[SkipFold]:
    """Skips folded by what they say: 11 GPU checks skipped on both nodes of a CPU run for "no NVIDIA GPU" are one
    row. Rows with the most checks first, then in report order."""
    every = {n.node_rank for n in report.nodes} | {c.node for c in report.checks if c.node is not None}
    per: dict[tuple, set] = {}
    results: dict[tuple, int] = {}
    for c in report.checks:
        if c.status is Status.SKIP:
            key = (c.id, one_line(c.summary))
            per.setdefault(key, set()).add(c.node)
            results[key] = results.get(key, 0) + 1
    rows: dict[tuple, list] = {}
    for (cid, reason), nodes in per.items():
        where = () if None in nodes or nodes >= every else tuple(sorted(nodes))
        rows.setdefault((reason, where), []).append((cid, results[(cid, reason)]))
    folds = [SkipFold(reason, tuple(dict.fromkeys(i for i, _ in ids)), where, sum(n for _, n in ids))
             for (reason, where), ids in rows.items()]
    first = {f: i for i, f in enumerate(folds)}
    return sorted(folds, key=lambda f: (-len(f.ids), first[f]))


def checks_phrase(ids: tuple) -> str:
    """'gdr.support', 'gdr.support and ib.firmware', '11 gpu checks', '5 checks (gpu 3, gdr 2)'."""
    if len(ids) == 1:
        return ids[0]
    if len(ids) == 2:
        return f"{ids[0]} and {ids[1]}"
    kinds: dict[str, int] = {}
    for i in ids:
        kinds[check_kind(i)] = kinds.get(check_kind(i), 0) + 1
    if len(kinds) == 1:
        return f"{len(ids)} {next(iter(kinds))} checks"
    return f"{len(ids)} checks ({', '.join(f'{k} {n}' for k, n in kinds.items())})"


_LINKS_MODE = {
    "full": "each pair in turn",
    "quick": "a few random pairings, then re-tests of slow pairs against nodes that passed",
    "scale": "one pairing, re-tests of slow pairs' members against nodes that passed, one confirming round; "
             "at most 4 whatever the node count",
}


def links_schedule(links: dict) -> str:
    """How a links run chose its pairs, from its section: 'Scale mode: 3 rounds of disjoint pairs (...); 12 of 120
    links measured'. '' for a section that does not record its rounds (a report from before they were recorded)."""
    rounds = links.get("rounds")
    if not isinstance(rounds, list):
        return ""
    mode = links.get("mode") if isinstance(links.get("mode"), str) else "full"
    matrix = links.get("matrix_gbps") if isinstance(links.get("matrix_gbps"), list) else []
    n = len(matrix)
    measured = sum(1 for a in range(n) for b in range(a + 1, n) if _has(matrix, a, b) or _has(matrix, b, a))
    text = f"{mode.capitalize()} mode: {_count(len(rounds), 'round')} of disjoint pairs"
    if mode in _LINKS_MODE:
        text += f" ({_LINKS_MODE[mode]})"
    text += f"; {measured:,} of {_count(n * (n - 1) // 2, 'link')} measured" if n > 1 else ""
    if mode in ("quick", "scale") and isinstance(links.get("seed"), int):
        text += f" (pairing seed {links['seed']}: --seed picks another)"
    t = links.get("min_time_s")
    if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0:
        # the header's "x iters" is then a least count: short transfers were repeated to fill the time
        text += f"; each direction timed for at least {t:g} s (--min-time)"
    return text


def links_slow_cells(links: dict) -> set:
    """Directed cells the analysis marked slow; for saved runs without them, both directions of named links/nodes."""
    if isinstance(links.get("slow_cells"), list):
        return {(c[0], c[1]) for c in links["slow_cells"] if isinstance(c, list) and len(c) == 2}
    cells = set()
    for s in links.get("slow") or []:
        if isinstance(s, dict):
            cells |= {(s.get("a"), s.get("b")), (s.get("b"), s.get("a"))}
    n = len(links.get("matrix_gbps") or [])
    for x in links.get("slow_nodes") or []:
        if isinstance(x, int):
            cells |= {(x, y) for y in range(n)} | {(y, x) for y in range(n)}
    return cells


def links_pairs(links: dict) -> tuple[list, list]:
    """(measured, worth): the node pairs (a < b) measured in either direction, and of those the ones worth a row in
    a large run: re-tested, slow in a direction, or touching a slow or dead node."""
    matrix = links.get("matrix_gbps") if isinstance(links.get("matrix_gbps"), list) else []
    n = len(matrix)
    slow = links_slow_cells(links)
    marked = {x for x in list(links.get("slow_nodes") or []) + list(links.get("dead") or []) if isinstance(x, int)}
    measured = [(a, b) for a in range(n) for b in range(a + 1, n) if _has(matrix, a, b) or _has(matrix, b, a)]
    rounds = links.get("rounds") if isinstance(links.get("rounds"), list) else []
    retested = {tuple(sorted(p)) for rd in rounds[1:] if isinstance(rd, list) for p in rd
                if isinstance(p, list) and len(p) == 2}
    worth = [p for p in measured if p in retested or (p[0], p[1]) in slow or (p[1], p[0]) in slow or set(p) & marked]
    return measured, worth


def _has(matrix: list, a: int, b: int) -> bool:
    row = matrix[a]
    return isinstance(row, list) and b < len(row) and isinstance(row[b], (int, float))


WRONG_BOUND = BOUND_WRONG  # the name renderers imported before words.py


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def efficiency_text(eff: object, trusted: object = None) -> str:
    """A figure / its bound as a percentage; '-' when the bound is unknown; 'bound wrong' when the figure beat it
    (trusted False, or a report written before bounds were checked with an efficiency above 1 + noise): an
    efficiency above 1 is never shown."""
    if trusted is False or (_number(eff) and eff > 1 + ABOVE_LIMIT_NOISE):
        return BOUND_WRONG
    return f"{100 * eff:.0f}%" if _number(eff) else NO_FIGURE


def efficiency_span(links: object) -> tuple:
    """(the trusted efficiencies of a links section, [wrong bound entries]): the span a renderer may show, and the
    directions whose figure beat their bound (`wrong_bounds`, or for an older report, efficiencies above 1 + noise)."""
    if not isinstance(links, dict):
        return [], []
    trusted = links.get("bound_trusted") if isinstance(links.get("bound_trusted"), list) else []
    effs, wrong = [], [w for w in links.get("wrong_bounds") or [] if isinstance(w, dict)]
    for a, row in enumerate(links.get("efficiency") or []):
        if not isinstance(row, list):
            continue
        for b, x in enumerate(row):
            t = trusted[a][b] if a < len(trusted) and isinstance(trusted[a], list) and b < len(trusted[a]) else None
            if not _number(x) or t is False:
                continue
            if x > 1 + ABOVE_LIMIT_NOISE:
                wrong.append({"a": a, "b": b, "efficiency": x})
            else:
                effs.append(x)
    return effs, wrong


def wrong_bound_text(w: dict, label=lambda x: f"node {x}") -> str:
    """One wrong bound, as the finding reads: never as a percentage."""
    head = f"bound of {label(w.get('a'))} -> {label(w.get('b'))} is wrong"
    if _number(w.get("gbps")) and _number(w.get("bound_gbps")):
        return (f"{head}: measured {format_gbps(w['gbps'])} > bound {format_gbps(w['bound_gbps'])}"
                + (f" ({w['bound_by']})" if isinstance(w.get("bound_by"), str) else ""))
    return f"{head}: the measured figure beat it"


def bound_gbps_text(gbps: object) -> str:
    """A bound with its unit, 'unknown' when there is none: every renderer's one way to show a bound, in GB/s as the
    figures beside it, to 3 significant digits (a 200 Mb/s shaper is 0.025 GB/s, not '0.03 GB/s'). What sets it
    (bound_by) names no figure of its own (nccl/bounds.py)."""
    if not isinstance(gbps, (int, float)) or isinstance(gbps, bool):
        return UNKNOWN
    return format_gbps(gbps) if gbps >= 1 else f"{gbps:.3g} {GBPS}"


def efficiency_captions(rows) -> dict:
    """(op, dtype) -> the efficiency caption under its table ('eff = busbw / bound; bound unknown (...)'), for the
    ops whose rows carry a bound: the first bound and the first 'set by' of the op's rows, in every renderer."""
    out: dict = {}
    for key in dict.fromkeys((r.op, r.dtype) for r in rows if "bound_gbps" in r.extra):
        mine = [r for r in rows if (r.op, r.dtype) == key and "bound_gbps" in r.extra]
        by = next((r.extra.get("bound_by") for r in mine if r.extra.get("bound_by")), None)
        out[key] = efficiency_caption(mine[0].extra.get("bound_gbps"), by)
    return out
