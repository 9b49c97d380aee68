"""One self-contained HTML page for a Report. Its first screen is the answer: status and root cause with its fix,
the environment to copy, the checks that failed or warned; then the passes counted by kind and the skips one row per
reason, every check's row in a closed block, per-node facts, bench tables and plots, and the links heatmap.

Self-contained means inline CSS and JS and plots as data: URIs: the page opens from a CI artifact or an e-mail with
no network. Everything shown comes from other machines (summaries, hostnames, env values), so every string goes
through html.escape. The page shows what the report says; it decides nothing.
"""

from __future__ import annotations

import base64
import json
from html import escape
from typing import Any, Optional

from ..hostranges import rank_ranges
from ..model import BenchRow, Report, Status, clean_text
from ..units import format_bytes, format_gbps, format_mbps_link, format_us
from . import plots
from .common import (
    NAMED_NODES,
    NO_CODE_FILES,
    STATUS_WORD,
    aggregated,
    bound_gbps_text,
    bound_groups,
    check_case_name,
    checks_phrase,
    display_checks,
    efficiency_captions,
    efficiency_span,
    efficiency_text,
    hostnames,
    links_pairs,
    links_schedule,
    links_slow_cells,
    name_nodes,
    node_label,
    nodes_text,
    not_measured,
    on_first_screen,
    passes_by_kind,
    skips_by_reason,
    status_headline,
    trust_text,
    wrong_bound_text,
)
from .envfile import render_envfile
from .words import (
    COLUMN,
    EFF_DEFINITION,
    NO_FIGURE,
    SINGLE_FORM,
    SINGLE_FORM_NOTE,
    count,
    efficiency_span_text,
    graph_timed,
    moves_no_data,
    placement,
    table_notes,
    world_phrase,
)

_CSS = """
:root{--fail:#c62828;--warn:#b26a00;--pass:#2e7d32;--skip:#607d8b;--bg:#fafafa;--line:#e0e0e0;--ink:#212121}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);background:var(--bg);
 margin:0;padding:0 24px 40px}
header{margin:0 -24px 16px;padding:18px 24px;border-bottom:4px solid var(--skip);background:#fff}
header.status-fail{border-color:var(--fail)}header.status-warn{border-color:var(--warn)}
header.status-pass{border-color:var(--pass)}
h1{font-size:22px;margin:0 0 6px}h2{font-size:18px;margin:28px 0 8px}h3{font-size:15px;margin:14px 0 6px}
.meta{color:#555;margin:2px 0}
.root-cause{margin:10px 0 0;padding:10px 12px;background:#fdecea;border-left:4px solid var(--fail)}
.note{padding:8px 12px;background:#fff8e1;border-left:4px solid var(--warn)}
.badge{display:inline-block;min-width:46px;text-align:center;padding:1px 7px;border-radius:10px;color:#fff;
 font-size:12px;font-weight:600;vertical-align:middle}
.badge.fail{background:var(--fail)}.badge.warn{background:var(--warn)}.badge.pass{background:var(--pass)}
.badge.skip{background:var(--skip)}
table{border-collapse:collapse;background:#fff;margin:6px 0 10px;width:100%}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0;font-weight:600}
table.checks td:nth-child(-n+3){white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.status-fail td{background:#fff5f5}tr.status-warn td{background:#fffbf0}tr.later{display:none}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#fff;border:1px solid var(--line);padding:10px;overflow-x:auto;white-space:pre-wrap;margin:6px 0}
pre.env{background:#263238;color:#eceff1;border:0}
details{background:#fff;border:1px solid var(--line);border-radius:4px;margin:6px 0;padding:4px 10px}
details>summary{cursor:pointer;font-weight:600;padding:4px 0}
td details{border:0;padding:0;margin:2px 0 0;background:transparent}td details>summary{font-weight:400;color:#555}
.fix{color:#0d47a1}
button.copy{font:inherit;padding:4px 12px;border:1px solid #90a4ae;border-radius:4px;background:#fff;cursor:pointer}
figure.plot{margin:8px 0 16px;background:#fff;border:1px solid var(--line);padding:6px}
figure.plot img{max-width:100%;height:auto;display:block}
figcaption{color:#555;font-size:12px}
table.heatmap{width:auto}table.heatmap td{text-align:center;min-width:78px;font-variant-numeric:tabular-nums}
table.heatmap td.slow{outline:3px solid var(--fail);outline-offset:-3px;font-weight:700}
table.heatmap td.self{background:#eee;color:#999}
table.heatmap th.slow-node{color:var(--fail)}
.wrong{color:var(--fail);font-weight:700}
footer{margin-top:30px;color:#777;font-size:12px}
"""

_JS = """
(function(){
  var button = document.getElementById('copy-env');
  if (!button) return;
  var block = document.getElementById('env-block');
  function done(){ button.textContent = 'Copied'; setTimeout(function(){ button.textContent = 'Copy'; }, 1500); }
  function fallback(){
    var range = document.createRange(); range.selectNodeContents(block);
    var sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
    try { if (document.execCommand('copy')) done(); } catch (e) {}
  }
  button.addEventListener('click', function(){
    var text = block.textContent;
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, fallback);
    else fallback();
  });
})();
"""


def e(value: Any) -> str:
    """Escape anything for HTML text or a quoted attribute (a control character is dropped: text is cleaned where
    it enters, and every writer cleans again what reaches it)."""
    return escape(clean_text("" if value is None else str(value)), quote=True)


def _badge(status: Status) -> str:
    return f'<span class="badge {status.value}">{STATUS_WORD[status]}</span>'


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    """A list from a saved report, or [] when the field is something else (the file may come from anywhere)."""
    return value if isinstance(value, list) else []


def _kv_table(pairs: list[tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in pairs if v not in (None, ""))
    return f'<table class="kv">{rows}</table>' if rows else ""


def _unavailable(group: Any) -> Optional[str]:
    if isinstance(group, dict) and "unavailable" in group:
        return f'<p class="note">unavailable: {e(group["unavailable"])}</p>'
    return None


# ---------------------------------------------------------------- header, checks, recommendations

def _header(report: Report) -> str:
    w = report.world
    parts = [
        f'<header class="status-{report.status.value}">',
        f"<h1>ncclcheck {e(report.command)} {_badge(report.status)}</h1>",
        f'<p class="meta">{e(status_headline(report))} · {e(world_phrase(w))}, backend {e(w.backend)}'
        + (f", master {e(w.master)}" if w.master else "")
        + (f", {e(trust_text(report) or '')}" if report.trust else "")
        + "</p>",
        f'<p class="meta">started {e(report.started)} · {report.duration_s:.1f} s · ncclcheck {e(report.version)}'
        + (f" · log <code>{e(report.log_path)}</code>" if report.log_path else "")
        + "</p>",
    ]
    cause = report.root_cause()
    if cause is not None:
        fix = f'<br><span class="fix">Fix: {e(cause.fix)}</span>' if cause.fix else ""
        parts.append(f'<p class="root-cause" id="root-cause"><strong>Root cause:</strong> '
                     f"<code>{e(check_case_name(cause))}</code> on {e(node_label(cause.node, report))}: "
                     f"{e(cause.summary)}{fix}</p>")
    if report.partial:
        parts.append('<p class="note">The run was cut short: this report holds what was gathered.</p>')
    missing = not_measured(report)
    if missing:
        parts.append('<div class="note" id="not-measured"><strong>Not measured:</strong><ul>'
                     + "".join(f"<li>{e(line)}</li>" for line in missing) + "</ul></div>")
    parts.append("</header>")
    return "\n".join(parts)


EVIDENCE_CHARS = 16_000  # of one check's evidence drawn in the page (cross-node checks hold a value per node)


def _check_row(c, report: Report, cls: str = "check", attr: str = "data-check") -> str:
    more = ""
    if c.detail or c.evidence:
        body = e(c.detail)
        if c.evidence:
            ev = json.dumps(c.evidence, indent=1, sort_keys=True, default=str)
            if len(ev) > EVIDENCE_CHARS:  # a value per node: 3 MB of the page at 4,096 nodes
                ev = ev[:EVIDENCE_CHARS] + f"\n... {len(ev) - EVIDENCE_CHARS:,} more characters: the JSON " \
                                           "report has every value"
            body += ("\n\n" if c.detail else "") + e(ev)
        more = f"<details><summary>details</summary><pre>{body}</pre></details>"
    return (f'<tr class="{cls} status-{c.status.value}" {attr}="{e(c.id)}">'
            f"<td>{_badge(c.status)}</td><td><code>{e(check_case_name(c))}</code></td>"
            f"<td>{e(node_label(c.node, report))}</td><td>{e(c.summary)}"
            + "".join(f"<br>+ {e(m)}" for m in c.more) + f"{more}</td>"
            f'<td class="fix">{e(c.fix)}</td></tr>')


_CHECKS_HEAD = ("<thead><tr><th>status</th><th>check</th><th>node</th><th>summary</th><th>fix</th></tr></thead>")


FOLDED_REASONS = 64  # skip reasons listed in the page before the rest are counted (every row is in the block below)


def _folded(report: Report) -> str:
    """The passes as one row counted by kind, the skips one row per reason (common.skips_by_reason): what the
    first screen says of everything that needs no action."""
    rows = []
    kinds = passes_by_kind(report)
    if kinds:
        rows.append(f'<tr class="folded status-pass"><td>{_badge(Status.PASS)}</td>'
                    f"<td>{e(count(sum(n for _, n in kinds), 'result'))}</td><td>all nodes</td>"
                    f"<td>{e(', '.join(f'{k} {n:,}' for k, n in kinds))}</td></tr>")
    hosts = hostnames(report)
    folds = skips_by_reason(report)
    for f in folds[:FOLDED_REASONS]:  # a reason per node (a hostname in it) at 8,192 nodes: the rest counted
        rows.append(f'<tr class="folded status-skip" data-skipped="{e(" ".join(f.ids))}">'
                    f"<td>{_badge(Status.SKIP)}</td><td>{e(checks_phrase(f.ids))}</td>"
                    f"<td>{e(name_nodes(list(f.nodes), hosts) if f.nodes else 'all nodes')}</td>"
                    f"<td>{e(f.reason)}</td></tr>")
    if len(folds) > FOLDED_REASONS:
        left = folds[FOLDED_REASONS:]
        rows.append(f'<tr class="folded status-skip"><td>{_badge(Status.SKIP)}</td>'
                    f"<td>{e(count(sum(f.results for f in left), 'more result'))}</td><td></td>"
                    f"<td>{e(count(len(left), 'other reason'))}: every row below</td></tr>")
    if not rows:
        return ""
    return ('<table class="checks folded"><thead><tr><th>status</th><th>checks</th><th>node</th><th>result</th>'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _checks(report: Report) -> str:
    """Failures and warnings each a row with its fix, the passes and skips folded, and every row (each check on
    each node) in a closed block a click away."""
    counts = {s: sum(1 for c in report.checks if c.status is s) for s in Status}
    tally = ", ".join(f"{n} {STATUS_WORD[s].lower()}" for s, n in counts.items() if n)
    out = ['<section id="checks">', f"<h2>Checks</h2><p class=\"meta\">{e(tally) or 'no checks ran'}</p>"]
    if report.checks:
        shown = display_checks(report)
        problems = [c for c in shown if on_first_screen(c)]
        if problems:
            out.append(f'<table class="checks problems">{_CHECKS_HEAD}<tbody>'
                       + "".join(_check_row(c, report, "problem", "data-problem") for c in problems)
                       + "</tbody></table>")
        out.append(_folded(report))
        out.append(f'<details class="all-checks" id="all-checks"><summary>Every check: {count(len(shown), "row")}'
                   " (each check on each node; the same skip on several nodes is one row)</summary>"
                   f'<table class="checks">{_CHECKS_HEAD}<tbody>'
                   + "".join(_check_row(c, report) for c in shown) + "</tbody></table></details>")
    out.append("</section>")
    return "\n".join(out)


def _recommendations(report: Report) -> str:
    if not report.recommendations:
        return ('<section id="recommendations"><h2>Recommended environment</h2>'
                "<p>No settings recommended.</p></section>")
    same: dict = {}  # one row per setting; the nodes given the same per-node value share it (ranges at scale)
    for r in report.recommendations:
        same.setdefault((r.name, r.value, r.reason, r.node is None), []).append(r.node)
    rows = "".join(
        f"<tr><td><code>{e(name)}</code></td><td><code>{e(value)}</code></td>"
        f"<td>{e('all nodes' if common else name_nodes(sorted(nodes), hostnames(report)))}</td>"
        f"<td>{e(reason)}</td></tr>"
        for (name, value, reason, common), nodes in same.items()
    )
    return (
        '<section id="recommendations"><h2>Recommended environment</h2>'
        '<p>Source this before launching training (per-node values are chosen by node rank or hostname). '
        '<button class="copy" id="copy-env" type="button">Copy</button></p>'
        f'<pre class="env" id="env-block">{e(render_envfile(report))}</pre>'
        # the block above says each reason as a comment: the table is a click away, the failures stay on screen
        '<details class="why"><summary>Each setting: its value, nodes and reason</summary>'
        "<table><thead><tr><th>name</th><th>value</th><th>node</th><th>reason</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></details></section>"
    )


# ---------------------------------------------------------------- bench and links

def _bench_note(r: BenchRow) -> str:
    """What a reader can act on for one row (the late rank, unsteady iterations, wrong ranks, rounding), or nothing.
    The bench decided each of these; this only words them."""
    parts = []
    if r.extra.get("late_rank") is not None:
        part = f"rank {r.extra['late_rank']} arrived {format_us(r.extra.get('late_by_us') or 0)} late"
        if r.extra.get("arrival_spread_us") is not None:
            part += f" (arrival spread {format_us(r.extra['arrival_spread_us'])})"
        parts.append(part)
    st = r.extra.get("iter_stats") or {}
    if st.get("high_variation"):
        parts.append(f"unsteady: iterations vary by {100 * st['cv']:.0f}% (max {format_us(st['max_us'])})")
    if r.extra.get("rank_wrong"):
        bad = [k for k, w in enumerate(r.extra["rank_wrong"]) if w]  # ranges: 65,536 ranks at 8,192 nodes
        parts.append(f"wrong results on {len(bad):,} rank{'s' * (len(bad) > 1)} {rank_ranges(bad)}"
                     if len(bad) > NAMED_NODES else f"wrong results on rank {', '.join(map(str, bad))}")
    if r.extra.get("requested_bytes") is not None:
        parts.append(f"requested {format_bytes(r.extra['requested_bytes'])}, rounded as nccl-tests does")
    return "; ".join(parts)


def _bench(report: Report) -> str:
    rows: list[BenchRow] = report.bench or []
    out = ['<section id="bench"><h2>Bench</h2>']
    bounded = any("bound_gbps" in r.extra for r in rows)
    ops: dict[str, list[BenchRow]] = {}
    for r in rows:
        ops.setdefault(r.op, []).append(r)
    if plots.plots_available():
        for op, op_rows in ops.items():
            svg = plots.bench_plot_svg(op, op_rows)
            if svg is None:
                continue
            data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
            drawn = plots.plot_marks(op_rows)  # the caption explains only the marks this plot draws
            out.append(f'<figure class="plot" data-op="{e(op)}"><img alt="{e(op)}: busbw and time vs message size" '
                       f'src="data:image/svg+xml;base64,{data}"><figcaption>{e(op)}: bus bandwidth and time per '
                       "operation against message size (log2 axis)"
                       + ("; red circles mark sizes with wrong results" if drawn["wrong"] else "")
                       + ("; the dashed line is the bound of the links crossed" if drawn["bound"] else "")
                       + ".</figcaption></figure>")
    else:
        out.append('<p class="note" id="plots-missing">Plots need matplotlib: '
                   "<code>pip install 'ncclcheck[html]'</code>, then <code>ncclcheck report RUN.json --html "
                   "FILE</code>.</p>")
    c = COLUMN
    heads = [(c["op"], ""), (c["size"], "num"), (c["count"], "num"), (c["dtype"], ""), (c["placement"], ""),
             (c["time"], "num"), (c["p99"], "num")]
    eager = any(graph_timed(r) for r in rows)  # the eager figure beside the graph-timed time
    heads += [(c["eager"], "num")] if eager else []
    heads += [(c["algbw"], "num"), (c["busbw"], "num")]
    heads += [(c["bound"], "num"), (c["efficiency"], "num")] if bounded else []
    heads += [(c["wrong"], "num"), ("rank times", "num"), ("note", "")]
    out.append('<table class="bench"><thead><tr>'
               + "".join(f'<th class="{k}">{e(h)}</th>' if k else f"<th>{e(h)}</th>" for h, k in heads)
               + "</tr></thead><tbody>")
    for op, op_rows in ops.items():
        for r in op_rows:
            if r.wrong is None:
                wrong = "-"
            else:
                wrong = f'<span class="wrong">{r.wrong}</span>' if r.wrong else "0"
            spread = ""
            times = [t for t in r.rank_time_us if isinstance(t, (int, float))]
            if len(times) > 1:
                spread = f"{format_us(min(times))} – {format_us(max(times))}"
            note = _bench_note(r)
            st = r.extra.get("iter_stats") or {}
            p99 = format_us(st["p99_us"]) if "p99_us" in st else "-"
            bw = (NO_FIGURE, NO_FIGURE) if moves_no_data(r) else (format_gbps(r.algbw_gbps), format_gbps(r.busbw_gbps))
            eager_td = ""
            if eager:
                eager_td = (f'<td class="num">'
                            f'{e(format_us(r.extra["eager_time_us"]) if graph_timed(r) else NO_FIGURE)}</td>')
            out.append(
                f'<tr class="{"status-fail" if r.wrong else ""}"><td>{e(op)}</td>'
                f'<td class="num">{e(format_bytes(r.bytes))}</td><td class="num">{r.count}</td><td>{e(r.dtype)}</td>'
                f"<td>{e(placement(r).label)}</td>"
                f'<td class="num">{e(format_us(r.time_us))}</td><td class="num">{e(p99)}</td>{eager_td}'
                f'<td class="num">{e(bw[0])}</td>'
                f'<td class="num">{e(bw[1])}</td>'
                + (f'<td class="num" title="{e(r.extra.get("bound_by") or "")}">'
                   f'{e(bound_gbps_text(r.extra.get("bound_gbps")))}</td>'
                   f'<td class="num">{e(efficiency_text(r.extra.get("efficiency"), r.extra.get("bound_trusted")))}'
                   '</td>' if bounded else "")
                + f'<td class="num">{wrong}</td>'
                f'<td class="num">{e(spread)}</td><td>{e(note)}</td></tr>'
            )
    out.append("</tbody></table>")
    if bounded:  # after the table: a <p> inside a <tbody> is moved out of it by every browser anyway
        out.append(f'<p class="meta">{e(c["bound"])} = what the links crossed can carry (docs/bounds.md); '
                   f"{e(EFF_DEFINITION)}.</p>"
                   + "".join(f'<p class="meta eff-caption">{e(op)} {e(dtype)}: {e(cap)}</p>'
                             for (op, dtype), cap in efficiency_captions(rows).items()))
    if any(placement(r) is SINGLE_FORM for r in rows):
        out.append(f'<p class="meta single-form">{e(SINGLE_FORM_NOTE)}</p>')
    out += [f'<p class="meta timing">{e(note)}</p>' for note in table_notes(rows)]
    out.append(_nccl_captures(report.extra.get("nccl_captures") or {}))
    out.append("</section>")
    return "\n".join(out)


def _nccl_captures(captures: dict) -> str:
    """Links to what NCCL itself wrote on each host during bench --nccl-capture (debug log, topology, graph)."""
    if not captures:
        return ""
    items = []
    for host, c in sorted(captures.items()):
        files = [("debug log", p) for p in _list(c.get("debug"))] + \
                [(k, c[k]) for k in ("topo", "graph") if c.get(k)]
        links = ", ".join(f'<a href="file://{e(p)}">{e(kind)}</a>' for kind, p in files) or "nothing written"
        items.append(f"<li>{e(host)}: {links}</li>")
    return '<h3>NCCL captures</h3><ul class="nccl-captures">' + "".join(items) + "</ul>"


def _cell_colour(value: float, top: float) -> str:
    # Red (low) to green (high) relative to the best link: a colour scale only, the slow verdict is the report's.
    ratio = max(0.0, min(1.0, value / top)) if top > 0 else 0.0
    return f"hsl({120 * ratio:.0f},65%,{88 - 18 * ratio:.0f}%)"


# Above this many nodes a node x node table is too large to read or load (a million cells at 1,024 nodes, mostly
# empty in scale mode): the measured pairs are listed in a sortable table instead.
HEATMAP_MAX_NODES = 32
PAIRS_LISTED = 2000  # more measured pairs than this (full mode at scale): the ones worth reading, the rest summarised


def _heatmap(matrix: list, slow_pairs: set, slow_nodes: set, top: float, report: Report) -> list[str]:
    out = ['<table class="heatmap"><thead><tr><th></th>']
    for j in range(len(matrix)):
        cls = ' class="slow-node"' if j in slow_nodes else ""
        out.append(f"<th{cls}>{e(node_label(j, report))}</th>")
    out.append("</tr></thead><tbody>")
    for i, row in enumerate(matrix):
        cls = ' class="slow-node"' if i in slow_nodes else ""
        cells = [f"<th{cls}>{e(node_label(i, report))}</th>"]
        for j, v in enumerate(row if isinstance(row, list) else []):
            slow = (i, j) in slow_pairs
            if isinstance(v, (int, float)):
                cells.append(f'<td class="{"slow" if slow else "ok"}" style="background:{_cell_colour(v, top)}"'
                             f' title="node {i} to node {j}">{v:.1f}{" ⚠" if slow else ""}</td>')
            else:
                cells.append(f'<td class="{"slow" if slow else "self"}">{"no result ⚠" if slow else "—"}</td>')
        out.append(f"<tr>{''.join(cells)}</tr>")
    out.append("</tbody></table>")
    return out


def _links_pairs(links: dict, report: Report, top: float) -> str:
    """One sortable row per measured pair (a -> b and b -> a), slow directions outlined; past PAIRS_LISTED only the
    pairs worth reading, and one line for the rest."""
    matrix = links["matrix_gbps"]
    measured, worth = links_pairs(links)
    slow = links_slow_cells(links)
    shown = measured if len(measured) <= PAIRS_LISTED else worth

    def cell(a: int, b: int) -> str:
        row = matrix[a]
        v = row[b] if isinstance(row, list) and b < len(row) else None
        if not isinstance(v, (int, float)):
            return '<td class="self">—</td>'
        mark = (a, b) in slow
        return (f'<td class="{"slow" if mark else "ok"}" style="background:{_cell_colour(v, top)}">'
                f'{v:.2f}{" ⚠" if mark else ""}</td>')

    rows = "".join(f"<tr><td>{e(node_label(a, report))}</td><td>{e(node_label(b, report))}</td>{cell(a, b)}"
                   f"{cell(b, a)}</tr>" for a, b in shown)
    note = ""
    if len(shown) < len(measured):
        note = (f'<p class="meta">{len(measured) - len(shown):,} other measured pairs are not listed: none is slow, '
                "re-tested or on a slow or dead node; every value is in the JSON report.</p>")
    return ('<table class="heatmap sortable"><thead><tr><th>node a</th><th>node b</th><th class="num">a → b</th>'
            f'<th class="num">b → a</th></tr></thead><tbody>{rows}</tbody></table>{note}')


def _pair_list(report: Report) -> bool:
    matrix = _dict(report.links).get("matrix_gbps")
    return isinstance(matrix, list) and len(matrix) > HEATMAP_MAX_NODES


def _links(report: Report) -> str:
    links = _dict(report.links)
    matrix = links.get("matrix_gbps") if isinstance(links.get("matrix_gbps"), list) else []
    slow_pairs = set()
    for s in _list(links.get("slow")):
        if isinstance(s, dict):
            slow_pairs.add((s.get("a"), s.get("b")))
            slow_pairs.add((s.get("b"), s.get("a")))
    slow_nodes = set(n for n in _list(links.get("slow_nodes")) if isinstance(n, int))
    values = [v for row in matrix if isinstance(row, list) for v in row if isinstance(v, (int, float))]
    top = max(values) if values else 0.0
    size = links.get("size")
    how = links_schedule(links)
    out = ['<section id="links"><h2>Links</h2>',
           f'<p class="meta">Bandwidth of every node pair at {e(format_bytes(size)) if isinstance(size, int) else "?"}'
           f" (GB/s). Outlined cells are the slow links the run named.{f' {e(how)}.' if how else ''}</p>"]
    n = len(matrix)
    if n > HEATMAP_MAX_NODES:
        out.append(_links_pairs(links, report, top))
    else:
        out.extend(_heatmap(matrix, slow_pairs, slow_nodes, top, report))
    slow = [s for s in _list(links.get("slow")) if isinstance(s, dict)]
    if slow:
        items = "".join(
            f"<li>{e(node_label(s.get('a'), report))} ↔ {e(node_label(s.get('b'), report))}: "
            f"{e(format_gbps(s['gbps'])) if isinstance(s.get('gbps'), (int, float)) else 'no result'}</li>"
            for s in slow
        )
        out.append(f"<h3>Slow links</h3><ul>{items}</ul>")
    if slow_nodes:
        out.append(f"<p><strong>Slow nodes:</strong> {e(name_nodes(sorted(slow_nodes), hostnames(report)))}</p>")
    nb = links.get("node_bounds")
    if isinstance(nb, dict) and nb:
        items = "".join(f"<tr><td>{e(nodes_text(members, hostnames(report)))}</td>"  # one row per distinct bound
                        f'<td class="num">{e(bound_gbps_text(b))}</td><td>{e(by)}</td></tr>'
                        for b, by, members in bound_groups(nb))
        effs, wrong = efficiency_span(links)
        span = f"; {e(efficiency_span_text(efficiency_text(min(effs)), efficiency_text(max(effs))))}" if effs else ""
        span += "".join(f"; <strong>{e(wrong_bound_text(w))}</strong>" for w in wrong)
        out.append('<h3>Bounds</h3><p class="meta">A direction is bounded by the sender\'s egress and the receiver\'s '
                   f"ingress{span}.</p>"
                   '<table class="bounds"><thead><tr><th>nodes</th><th class="num">bound</th><th>set by</th></tr>'
                   f"</thead><tbody>{items}</tbody></table>")
    out.append("</section>")
    return "\n".join(out)


# ---------------------------------------------------------------- per-node facts

def _host(host: Any) -> str:
    h = _dict(host)
    if _unavailable(host):
        return _unavailable(host) or ""
    shm = _dict(h.get("shm"))
    memlock = _dict(h.get("memlock"))
    shm_text = (_unavailable(h.get("shm")) or "") if "unavailable" in shm else (
        f"{e(format_bytes(shm['total_bytes']))} total, {e(format_bytes(shm.get('free_bytes') or 0))} free"
        if isinstance(shm.get("total_bytes"), (int, float)) else "")

    def limit(v: Any) -> str:
        return "unlimited" if v is None else e(format_bytes(v)) if isinstance(v, (int, float)) else e(v)

    port_range = h.get("port_range")
    return _kv_table([
        ("FQDN", e(h.get("fqdn"))),
        ("resolves to", e(", ".join(map(str, _list(h.get("resolves_to")))) or h.get("resolve_error") or "nothing")),
        ("OS / kernel", e(" / ".join(str(x) for x in (h.get("os"), h.get("kernel")) if x))),
        ("container", e("yes" if h.get("in_container") else "no") if "in_container" in h else None),
        ("CPUs / memory", e(f"{h.get('cpu_count', '?')} / {format_bytes(h['mem_total_bytes'])}")
         if isinstance(h.get("mem_total_bytes"), (int, float)) else None),
        ("/dev/shm", shm_text),
        ("memlock (soft / hard)", f"{limit(memlock.get('soft'))} / {limit(memlock.get('hard'))}" if memlock else None),
        ("ephemeral ports", e(f"{port_range[0]}-{port_range[1]}") if isinstance(port_range, list)
         and len(port_range) == 2 else None),
    ])


def _interfaces(ifaces: Any) -> str:
    if _unavailable(ifaces):
        return _unavailable(ifaces) or ""
    if not isinstance(ifaces, list) or not ifaces:
        return "<p>none reported</p>"
    rows = []
    for i in ifaces:
        i = _dict(i)
        state = "running" if i.get("running") else ("up" if i.get("up") else "down")
        addrs = [f"{a.get('address')}/{a.get('prefixlen')}" for a in _list(i.get("ipv4")) + _list(i.get("ipv6"))
                 if isinstance(a, dict)]
        rows.append(
            f"<tr><td><code>{e(i.get('name'))}</code></td><td>{e(i.get('kind'))}</td><td>{e(state)}"
            f" ({e(i.get('operstate'))})</td><td class=\"num\">{e(format_mbps_link(i.get('speed_mbps')))}</td>"
            f'<td class="num">{e(i.get("mtu"))}</td><td>{"<br>".join(e(a) for a in addrs)}</td>'
            f"<td>{e(i.get('driver') or '')}</td><td>{e(i.get('numa_node') if i.get('numa_node') is not None else '')}"
            "</td></tr>"
        )
    return ('<table class="ifaces"><thead><tr><th>interface</th><th>kind</th><th>state</th><th class="num">speed</th>'
            '<th class="num">MTU</th><th>addresses</th><th>driver</th><th>NUMA</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _gpus(gpu: Any) -> str:
    if _unavailable(gpu):
        return _unavailable(gpu) or ""
    g = _dict(gpu)
    head = _kv_table([
        ("GPUs", e(f"{g.get('count', 0)} (from {g.get('source', '?')})")),
        ("why none", e(g.get("reason")) if not g.get("count") else None),
        ("CUDA_VISIBLE_DEVICES", e(g.get("visible_devices"))),
        ("driver / CUDA / NCCL", e(" / ".join(str(g.get(k) or "-") for k in ("driver", "cuda", "nccl")))
         if g.get("count") else None),
    ])
    devices = [d for d in _list(g.get("devices")) if isinstance(d, dict)]
    table = ""
    if devices:
        rows = "".join(
            f"<tr><td>{e(d.get('index'))}</td><td>{e(d.get('name'))}</td><td class=\"num\">"
            f"{e(format_bytes(d['memory_bytes'])) if isinstance(d.get('memory_bytes'), (int, float)) else ''}</td>"
            f"<td><code>{e(d.get('pci_bus_id'))}</code></td><td><code>{e(d.get('uuid'))}</code></td></tr>"
            for d in devices
        )
        table = ('<table><thead><tr><th>#</th><th>name</th><th class="num">memory</th><th>PCI</th><th>UUID</th>'
                 f"</tr></thead><tbody>{rows}</tbody></table>")
    topo = g.get("topology")
    if topo:
        table += f"<details><summary>nvidia-smi topo -m</summary><pre>{e(topo)}</pre></details>"
    return head + table


def _rdma(rdma: Any) -> str:
    if _unavailable(rdma):
        return _unavailable(rdma) or ""
    rows = []
    for d in _list(_dict(rdma).get("devices")):
        d = _dict(d)
        for p in _list(d.get("ports")):
            p = _dict(p)
            rows.append(
                f"<tr><td><code>{e(d.get('name'))}</code></td><td>{e(p.get('port'))}</td><td>{e(p.get('state'))}</td>"
                f"<td>{e(p.get('phys_state'))}</td><td>{e(p.get('rate'))}</td><td>{e(p.get('link_layer'))}</td>"
                f"<td>{e(', '.join(map(str, _list(p.get('netdevs')))))}</td>"
                f"<td>{e(p.get('roce_v2_gid_index') if p.get('roce_v2_gid_index') is not None else '')}</td>"
                f"<td>{e(d.get('fw_ver') or '')}</td></tr>"
            )
    if not rows:
        return "<p>no RDMA devices</p>"
    return ("<table><thead><tr><th>device</th><th>port</th><th>state</th><th>physical</th><th>rate</th>"
            "<th>link layer</th><th>netdevs</th><th>RoCE v2 GID</th><th>firmware</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _versions(facts: dict) -> str:
    v = _dict(facts.get("versions"))
    pk = _dict(facts.get("packages"))
    code = _dict(facts.get("code"))
    pairs = [(k, e(v.get(k))) for k in ("python", "torch", "cuda", "nccl", "driver", "ncclcheck", "platform")]
    if pk:
        pairs.append(("packages", e(f"{pk.get('count', '?')} installed, {pk.get('hash', '')}")))
    if code:
        desc = f"{code.get('path', '?')} ({code.get('kind', '?')})"
        if code.get("git_head"):
            desc += f" at {code['git_head']}" + (" + local changes" if code.get("dirty") else "")
        said = (f": {NO_CODE_FILES}" if code.get("kind") == "tree" and code.get("files") == 0 else
                f", {code['hash']}" if code.get("hash") else "")  # sha256 of nothing identifies no code
        pairs.append(("code", e(desc + said)))
    return _kv_table(pairs) or _unavailable(facts.get("versions")) or ""


def _storage(group: Any) -> str:
    """Each --shared-dir as this node sees it: the filesystem (type, source, device), free space and inodes."""
    rows = []
    for d in _dict(group).get("dirs") or []:
        d, m, sp = _dict(d), _dict(_dict(d).get("mount")), _dict(_dict(d).get("space"))
        free = format_bytes(sp["free_bytes"]) if isinstance(sp.get("free_bytes"), int) else ""
        rows.append(f"<tr><td><code>{e(d.get('path'))}</code></td><td>{e(m.get('fs_type') or d.get('reason'))}</td>"
                    f"<td><code>{e(m.get('source'))}</code></td><td>{e(m.get('device'))}</td>"
                    f"<td><code>{e(m.get('mount_point'))}</code></td><td>{'ro' if m.get('read_only') else 'rw'}</td>"
                    f"<td>{e(free)}</td><td>{e(sp.get('free_inodes', ''))}</td></tr>")
    return ("<table><thead><tr><th>--shared-dir</th><th>filesystem</th><th>source</th><th>device</th>"
            "<th>mount point</th><th>mode</th><th>free</th><th>free inodes</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _env(facts: dict) -> str:
    env = _dict(facts.get("env"))
    variables = _dict(env.get("vars"))
    rows = "".join(f"<tr><td><code>{e(k)}</code></td><td><code>{e(v)}</code></td></tr>"
                   for k, v in sorted(variables.items()))
    redacted = _list(env.get("redacted"))
    text = f"<table><tbody>{rows}</tbody></table>" if rows else "<p>none set</p>"
    if redacted:
        text += f"<p>values withheld (look secret): {e(', '.join(map(str, redacted)))}</p>"
    return text


_SORT_JS = """
(function(){
  document.querySelectorAll('button[data-all-rows]').forEach(function(button){
    button.addEventListener('click', function(){
      var table = document.getElementById(button.getAttribute('data-all-rows'));
      table.removeAttribute('data-page');
      table.querySelectorAll('tr.later').forEach(function(r){ r.classList.remove('later'); });
      button.remove();
    });
  });
  document.querySelectorAll('table.sortable').forEach(function(table){
    table.querySelectorAll('th').forEach(function(th, col){
      th.style.cursor = 'pointer';
      th.addEventListener('click', function(){
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute('data-dir') === 'asc' ? -1 : 1;
        th.setAttribute('data-dir', dir === 1 ? 'asc' : 'desc');
        rows.sort(function(a, b){
          var x = a.cells[col].getAttribute('data-key') || a.cells[col].textContent;
          var y = b.cells[col].getAttribute('data-key') || b.cells[col].textContent;
          var nx = parseFloat(x), ny = parseFloat(y);
          if (!isNaN(nx) && !isNaN(ny)) return dir * (nx - ny);
          return dir * x.localeCompare(y);
        });
        rows.forEach(function(r){ body.appendChild(r); });
        var page = parseInt(table.getAttribute('data-page') || '0', 10);
        if (page) rows.forEach(function(r, i){ r.classList.toggle('later', i >= page); });
      });
    });
  });
})();
"""

_SEVERITY = {Status.FAIL: 0, Status.WARN: 1, Status.PASS: 2, Status.SKIP: 3}
MAX_NODE_DETAILS = 64  # nodes shown with all their facts on a large run (the odd ones first); the JSON has all
NODE_ROWS_SHOWN = 256  # per-node table rows drawn before "Show all" (every row is in the page, the rest hidden)


def _node_table(report: Report) -> str:
    """Large runs: one sortable row per node (its worst status and what did not pass), inside a collapsible block."""
    per: dict[int, list] = {}
    for c in report.checks:
        if c.node is not None:
            per.setdefault(c.node, []).append(c)
    rows = []
    for n in report.nodes:
        cs = per.get(n.node_rank, [])
        worst = max((c.status for c in cs), key=lambda st: st.rank, default=Status.PASS)
        odd = "; ".join(f"{c.id}: {c.summary}" for c in cs if c.status in (Status.FAIL, Status.WARN))
        f = _dict(n.facts)
        v = _dict(f.get("versions"))
        rows.append((_SEVERITY[worst], n.node_rank,
                     f'<tr class="status-{worst.value}"><td class="num">{e(n.node_rank)}</td><td>{e(n.hostname)}</td>'
                     f'<td data-key="{_SEVERITY[worst]}">{_badge(worst)}</td>'
                     f'<td class="num">{e(_dict(f.get("gpu")).get("count"))}</td><td>{e(v.get("torch"))}</td>'
                     f'<td>{e(v.get("nccl"))}</td><td>{e(odd)}</td></tr>'))
    rows.sort(key=lambda r: (r[0], r[1]))
    bad = sum(1 for r in rows if r[0] < 2)
    # open when the few odd nodes are the point; collapsed when thousands would be (the summary above says why)
    op = " open" if 0 < bad <= MAX_NODE_DETAILS else ""
    # Paged: the first NODE_ROWS_SHOWN rows (the odd nodes first) are drawn, the rest wait for the button, so
    # opening the block lays out a page and not 8,192 rows; sorting sorts them all and shows the first page again.
    paged = len(rows) > NODE_ROWS_SHOWN
    body = "".join(r[2] if i < NODE_ROWS_SHOWN else r[2].replace('">', ' later">', 1)
                   for i, r in enumerate(rows))
    more = (f'<p><button class="copy" type="button" data-all-rows="node-rows">Show all {len(rows):,} rows</button> '
            f"(the first {NODE_ROWS_SHOWN:,} are shown)</p>") if paged else ""
    return (f'<details class="node-table"{op}><summary>Per-node results: {len(rows):,} nodes, '
            f"{bad:,} with a failure or warning (click a column to sort)</summary>"
            f'<table class="sortable" id="node-rows"{f" data-page={NODE_ROWS_SHOWN}" if paged else ""}><thead><tr>'
            '<th class="num">node</th><th>host</th><th>status</th>'
            '<th class="num">GPUs</th><th>torch</th><th>NCCL</th><th>not passing</th></tr></thead><tbody>'
            + body + f"</tbody></table>{more}</details>")


def _nodes(report: Report) -> str:
    if not any(n.facts for n in report.nodes):  # bench/links name the node that measured, without its facts
        return ""
    out = ['<section id="nodes"><h2>Nodes</h2>']
    nodes = report.nodes
    if aggregated(report):
        out.append(_node_table(report))
        odd = {c.node for c in report.checks if c.node is not None and c.status in (Status.FAIL, Status.WARN)}
        nodes = ([n for n in nodes if n.node_rank in odd] or nodes[:1])[:MAX_NODE_DETAILS]
        out.append(f"<p class=\"meta\">All facts below for {count(len(nodes), 'node')} "
                   f"{'that did not pass' if odd else '(the first)'}; the JSON report has every node's.</p>")
    for n in (n for n in nodes if n.facts):
        f = _dict(n.facts)
        gpu = _dict(f.get("gpu"))
        title = f"node {n.node_rank}: {n.hostname}"
        if gpu.get("count"):
            title += f" · {gpu['count']} GPU(s)"
        out.append(f'<details class="node" id="node-{e(n.node_rank)}"><summary>{e(title)}</summary>')
        out.append("<h3>Host</h3>" + _host(f.get("host")))
        out.append("<h3>Interfaces</h3>" + _interfaces(f.get("interfaces")))
        route = _dict(f.get("route"))
        if route.get("interface"):
            out.append(f"<p>Route to {e(route.get('target'))}: via <code>{e(route.get('interface'))}</code> "
                       f"from {e(route.get('source'))}</p>")
        out.append("<h3>GPUs</h3>" + _gpus(f.get("gpu")))
        out.append("<h3>RDMA</h3>" + _rdma(f.get("rdma")))
        if _dict(f.get("storage")).get("dirs"):
            out.append("<h3>Storage</h3>" + _storage(f.get("storage")))
        out.append("<h3>Versions</h3>" + _versions(f))
        out.append("<h3>Environment</h3>" + _env(f))
        out.append("<details><summary>all facts (JSON)</summary><pre>"
                   f"{e(json.dumps(f, indent=1, sort_keys=True, default=str))}</pre></details>")
        out.append("</details>")
    out.append("</section>")
    return "\n".join(out)


def render_html(report: Report) -> str:
    """The whole page as one string."""
    from .postmortem import CSS as PM_CSS
    from .postmortem import html_section

    # The first screen is the answer: the verdict and root cause (header), what to set, then what failed or
    # warned; the passes and skips folded, every row a click away (_checks).
    sections = [_header(report), html_section(report)]
    css = _CSS + (PM_CSS if report.command == "diagnose" else "")
    if report.recommendations or report.command in ("preflight", "recommend"):
        sections.append(_recommendations(report))
    sections.append(_checks(report))
    if report.bench:
        sections.append(_bench(report))
    if report.links is not None:
        sections.append(_links(report))
    sections.append(_nodes(report))
    sections.append(f"<footer>ncclcheck {e(report.version)} · schema ncclcheck.report/1 · "
                    f"render this again with <code>ncclcheck report RUN.json --html FILE</code></footer>")
    title = f"ncclcheck {report.command}: {STATUS_WORD[report.status]}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><style>{css}</style></head>\n<body>\n"
        + "\n".join(s for s in sections if s)
        + f"\n<script>{_JS}{_SORT_JS if aggregated(report) or _pair_list(report) else ''}</script>\n</body></html>\n"
    )
