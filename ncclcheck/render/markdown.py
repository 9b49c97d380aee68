"""A Markdown summary of a Report for `$GITHUB_STEP_SUMMARY`, pull-request comments and wikis.

Status line and root cause, the checks table (failures and warnings first), the recommended environment as a code
block, the bench table and the slow links. Cell text comes from other machines, so it is escaped for Markdown and
HTML (GitHub renders inline HTML).
"""

from __future__ import annotations

import re

from ..envnames import assignment
from ..model import Report, Status
from ..units import format_bytes, format_gbps, format_us
from .common import (
    STATUS_WORD,
    aggregated,
    bound_gbps_text,
    bound_groups,
    check_case_name,
    display_checks,
    efficiency_captions,
    efficiency_span,
    efficiency_text,
    hostnames,
    links_schedule,
    name_nodes,
    node_label,
    nodes_text,
    not_measured,
    one_line,
    status_headline,
    trust_text,
    wrong_bound_text,
)
from .envfile import render_envfile, render_exports
from .words import (
    COLUMN,
    NO_FIGURE,
    SINGLE_FORM,
    SINGLE_FORM_NOTE,
    efficiency_span_text,
    graph_timed,
    moves_no_data,
    placement,
    table_notes,
    world_phrase,
)

_ICON = {Status.PASS: "✅", Status.WARN: "⚠️", Status.FAIL: "❌", Status.SKIP: "⏭️"}
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|])")


def md_text(text: object) -> str:
    """Escape one line of untrusted text for a Markdown table cell or paragraph."""
    s = one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def md_code(text: object) -> str:
    """Untrusted text as an inline code span (backslashes do not escape inside one, so backticks are replaced)."""
    return "`" + one_line(text).replace("`", "'") + "`"


def _fence(body: str) -> str:
    # A fence longer than any backtick run inside, so a value cannot close the block early.
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    return "`" * max(3, longest + 1)


def _checks(report: Report) -> list[str]:
    if not report.checks:
        return ["_No checks ran._"]
    out = ["| status | check | node | summary | fix |", "|---|---|---|---|---|"]
    for c in display_checks(report):
        out.append(
            f"| {_ICON[c.status]} {STATUS_WORD[c.status]} | {md_code(check_case_name(c))}"
            f" | {md_text(node_label(c.node, report))} | {md_text(c.summary)}"
            + "".join(f"<br>+ {md_text(m)}" for m in c.more)
            + f" | {md_text(c.fix) if c.status in (Status.FAIL, Status.WARN) else ''} |"
        )
    return out


def _bench(report: Report) -> list[str]:
    rows = report.bench or []
    bounded = any("bound_gbps" in r.extra for r in rows)
    c = COLUMN
    eager = any(graph_timed(r) for r in rows)  # the eager figure beside the graph-timed time
    heads = [c["op"], c["size"], c["dtype"], c["placement"], c["time"]] + ([c["eager"]] if eager else [])
    heads += [c["algbw"], c["busbw"], c["wrong"]]
    heads += [c["bound"], c["efficiency"], c["bound_by"]] if bounded else []
    out = ["| " + " | ".join(md_text(h) for h in heads) + " |",
           "|---|---:|---|---|---:|" + ("---:|" if eager else "") + "---:|---:|---:|"
           + ("---:|---:|---|" if bounded else "")]
    for r in rows:
        wrong = "-" if r.wrong is None else (f"**{r.wrong}**" if r.wrong else "0")
        bw = (NO_FIGURE, NO_FIGURE) if moves_no_data(r) else (format_gbps(r.algbw_gbps), format_gbps(r.busbw_gbps))
        line = (f"| {md_text(r.op)} | {format_bytes(r.bytes)} | {md_text(r.dtype)} | {md_text(placement(r).label)}"
                f" | {format_us(r.time_us)} |")
        if eager:
            line += f" {format_us(r.extra['eager_time_us']) if graph_timed(r) else NO_FIGURE} |"
        line += f" {bw[0]} | {bw[1]} | {wrong} |"
        if bounded:
            line += (f" {bound_gbps_text(r.extra.get('bound_gbps'))} |"
                     f" {efficiency_text(r.extra.get('efficiency'), r.extra.get('bound_trusted'))} |"
                     f" {md_text(r.extra.get('bound_by') or '')} |")
        out.append(line)
    if bounded:  # the caption under the table, one per op as the terminal's
        out += [""] + [f"{md_text(op)} {md_text(dtype)}: {md_text(cap)}  "
                       for (op, dtype), cap in efficiency_captions(rows).items()]
    if any(placement(r) is SINGLE_FORM for r in rows):
        out += ["", md_text(SINGLE_FORM_NOTE)]
    out += [x for note in table_notes(rows) for x in ("", md_text(note))]
    return out


def _links(report: Report) -> list[str]:
    links = report.links or {}
    size = links.get("size")
    out = [f"Pairwise bandwidth at {format_bytes(size)}." if isinstance(size, int) else "Pairwise bandwidth."]
    how = links_schedule(links)
    if how:
        out[0] += f" {md_text(how)}."
    slow = links.get("slow") or []
    if not slow:
        out += ["", "No slow links."]
    else:
        out.append("")
        for s in slow:
            gbps = s.get("gbps")
            out.append(f"- node {md_text(s.get('a'))} ↔ node {md_text(s.get('b'))}: "
                       f"{format_gbps(gbps) if isinstance(gbps, (int, float)) else 'no result'}")
    slow_nodes = sorted(n for n in links.get("slow_nodes") or [] if isinstance(n, int))
    if slow_nodes:
        out += ["", "**Slow nodes:** " + md_text(name_nodes(slow_nodes, hostnames(report)))]
    nb = links.get("node_bounds")
    if isinstance(nb, dict) and nb:
        out += ["", "| nodes | bound | set by |", "|---|---:|---|"]
        for b, by, members in bound_groups(nb):  # one row per distinct bound, not one per node
            out.append(f"| {md_text(nodes_text(members, hostnames(report)))} | {bound_gbps_text(b)} | {md_text(by)} |")
        effs, wrong = efficiency_span(links)
        if effs:
            out += ["", md_text(efficiency_span_text(efficiency_text(min(effs)), efficiency_text(max(effs))))
                    + " (a direction's bound: the sender's egress, the receiver's ingress)."]
        for w in wrong:
            out += ["", f"**Wrong bound:** {md_text(wrong_bound_text(w))}"]
    return out


def render_markdown(report: Report) -> str:
    """The whole summary as one Markdown string."""
    out = [f"## {_ICON[report.status]} ncclcheck {md_text(report.command)}: {status_headline(report)}", ""]
    world = report.world
    out.append(
        f"{md_text(world_phrase(world))}, backend {md_text(world.backend)} · ncclcheck {md_text(report.version)} · "
        f"{md_text(report.started)} · {report.duration_s:.1f} s"
        + (f" · {md_text(trust_text(report) or '')}" if report.trust else "")
    )
    cause = report.root_cause()
    if cause is not None:
        out += ["", f"**Root cause:** {md_code(check_case_name(cause))}: {md_text(cause.summary)}"]
        if cause.fix:
            out.append(f"**Fix:** {md_text(cause.fix)}")
    if report.log_path:
        out += ["", f"Log: {md_code(report.log_path)}"]
    from .postmortem import markdown_lines

    out += markdown_lines(report, md_text)
    out += ["", "### Checks", ""] + _checks(report)
    missing = not_measured(report)
    if missing:
        out += ["", "### Not measured", ""] + [f"- {md_text(line)}" for line in missing]
    if report.recommendations:
        per_node = [r for r in report.recommendations if r.node is not None]
        # A large run's per-node settings would be a `case` arm per node (thousands): the summary groups them by
        # value as host ranges and points at the sourceable file, which keeps the per-node `case`.
        grouped = aggregated(report) and per_node
        body = render_exports(report) if grouped else render_envfile(report)
        fence = _fence(body)
        out += ["", "### Recommended environment"]
        if body.strip():
            out += ["", f"{fence}bash", body.rstrip("\n"), fence]
        if grouped:
            same: dict = {}
            for r in per_node:
                same.setdefault((r.name, r.value, one_line(r.reason)), []).append(r.node)
            out += ["", "Per node:", ""] + [
                f"- {md_code(assignment(name, value))} on {md_text(name_nodes(sorted(nodes), hostnames(report)))}: "
                f"{md_text(reason)}" for (name, value, reason), nodes in same.items()]
            out += ["", "The file to source on every node (per-node values chosen by node rank): "
                        "`ncclcheck report RUN.json --env-out FILE`."]
    if report.bench:
        out += ["", "### Bench", ""] + _bench(report)
    if report.links is not None:
        out += ["", "### Links", ""] + _links(report)
    return "\n".join(out) + "\n"
