"""Presentation helpers shared by the file renderers: check ordering, labels and the text of the env block.

Only ordering and wording live here. Every verdict (status, gate, slow link) is read from the Report as it is.
"""

from __future__ import annotations

from typing import Optional

from ..model import CheckResult, Report, Status

# Failures first, then warnings, skips, passes: the order people read a report in.
_DISPLAY_ORDER = {Status.FAIL: 0, Status.WARN: 1, Status.SKIP: 2, Status.PASS: 3}

STATUS_WORD = {Status.PASS: "PASS", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "SKIP"}


def checks_for_display(report: Report) -> list[CheckResult]:
    """Checks sorted failures first; within a status the report's own (dependency) order is kept."""
    return sorted(report.checks, key=lambda c: _DISPLAY_ORDER.get(c.status, 9))


def hostnames(report: Report) -> dict[int, str]:
    return {n.node_rank: n.hostname for n in report.nodes}


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


def one_line(text: object) -> str:
    """Collapse whitespace so a summary from another machine cannot break a table row or a comment."""
    return " ".join(str(text).split())


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
                out.append(f"{m.get('op')}{' in-place' if m.get('in_place') else ''} "
                           f"{format_size_short(int(m.get('bytes') or 0))}: {m.get('reason')}")
    links = report.links if isinstance(report.links, dict) else {}
    for pair in links.get("unmeasured") or []:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            out.append(f"link {pair[0]} <-> {pair[1]}: not measured (the run was cut short)")
    return out
