"""The diagnose report's own sections: the verdict, the causes in order, and a per-rank timeline of the last
collectives (HTML) or a table of where each rank was (Markdown). Draws the `postmortem` section; computes nothing."""

from __future__ import annotations

from html import escape

from ..model import Report, clean_text

TIMELINE_RANKS = 256  # rows drawn; the JSON keeps every rank

CSS = """
.tl{border-collapse:collapse;font:12px ui-monospace,monospace}
.tl td{border:1px solid var(--line);padding:2px 6px;white-space:nowrap}
.tl .done{background:#e8f5e9}.tl .open{background:#fff3e0;font-weight:bold}.tl .odd{background:#f3e5f5}
.tl .gone{background:#ffebee;color:var(--fail)}.tl .failed{background:#ffcdd2;color:var(--fail);font-weight:bold}
"""


def _e(v: object) -> str:
    return escape(clean_text(str(v)), quote=True)


def _cell(c: dict, odd: set) -> str:
    key = (c["pg"], c["seq"])
    cls = "odd" if key in odd else "failed" if c.get("failed") else "done" if c["done"] else "open"
    shapes = ", ".join("x".join(str(n) for n in s) for s in c.get("input_sizes") or [])
    label = f"{c['op']} #{c['seq']}"
    state = ("failed: the job stopped here (the verdict)" if c.get("failed") else
             "completed" if c["done"] else "not completed")
    title = f"group {c['pg']} {c.get('desc') or ''}: {c['op']}({shapes}) {'/'.join(c.get('input_dtypes') or [])}" \
            f" {state}"
    return f'<td class="{cls}" title="{_e(title)}">{_e(label)}</td>'


def html_section(report: Report) -> str:
    pm = report.extra.get("postmortem")
    if not isinstance(pm, dict):
        return ""
    out = ["<section><h2>Diagnosis</h2>"]
    out.append(f"<p><b>{_e(pm.get('verdict') or 'Nothing wrong found in what the job left.')}</b></p>")
    causes = pm.get("causes") or []
    if causes:
        out.append("<ol>" + "".join(f"<li>{'<b>cause</b>' if c['cause'] else 'consequence'}: {_e(c['text'])}"
                                    + (f"<br><small>fix: {_e(c['fix'])}</small>" if c.get("fix") else "") + "</li>"
                                    for c in causes[:20]) + "</ol>")
    timeline = pm.get("timeline") or {}
    ranks = {r["rank"]: r for r in pm.get("ranks") or []}
    odd = {(g["pg"], g["mismatch"]["seq"]) for g in pm.get("groups") or [] if g.get("mismatch")}
    if timeline or ranks:
        out.append("<h3>Last collectives per rank</h3><p><small>newest on the right; green: completed, orange: "
                   "not completed, red: failed (where the verdict says the job stopped) or no dump, purple: where "
                   "the ranks disagree</small></p><table class='tl'>")
        for r in sorted(ranks)[:TIMELINE_RANKS]:
            info = ranks[r]
            who = f"rank {r}" + (f" · {info['host']}" if info.get("host") else "")
            if info.get("signal") or info.get("exitcode") not in (None, 0):
                who += f" · {info.get('signal') or 'exit ' + str(info.get('exitcode'))}"
            cells = "".join(_cell(c, odd) for c in timeline.get(str(r), []))
            if not info.get("dump"):
                cells = '<td class="gone">no dump</td>'
            out.append(f"<tr><td>{_e(who)}</td>{cells}</tr>")
        out.append("</table>")
    inputs = pm.get("inputs") or []
    out.append(f"<details><summary>{len(inputs)} input file(s)</summary><ul>"
               + "".join(f"<li>{_e(i['kind'])}: <code>{_e(i['path'])}</code> {_e(i.get('note') or '')}</li>"
                         for i in inputs[:500]) + "</ul></details>")
    out.append("</section>")
    return "\n".join(out)


def markdown_lines(report: Report, md_text) -> list[str]:
    pm = report.extra.get("postmortem")
    if not isinstance(pm, dict):
        return []
    out = ["", "### Diagnosis", "", f"**{md_text(pm.get('verdict') or 'Nothing wrong found in what the job left.')}**"]
    for c in (pm.get("causes") or [])[:20]:
        out.append(f"1. {'cause' if c['cause'] else 'consequence'}: {md_text(c['text'])}")
    rows = [r for r in pm.get("ranks") or []][:64]
    if rows:
        out += ["", "| rank | host | last collective | dump | exit |", "|---|---|---|---|---|"]
        for r in rows:
            last = r.get("last")
            where = f"group {last[0]} #{last[1]}" if last else "-"
            ended = r.get("signal") or (r.get("exitcode") if r.get("exitcode") is not None else "-")
            out.append(f"| {r['rank']} | {md_text(r.get('host') or '?')} | {md_text(where)} | "
                       f"{'yes' if r.get('dump') else 'no'} | {md_text(ended)} |")
    return out
