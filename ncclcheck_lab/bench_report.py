#!/usr/bin/env python3
"""The report at scale, measured: JSON bytes per node and what dominates them (by key path), each renderer's size
and render time, and the HTML's load + layout time in headless Chromium (file:// only, no network).

Input is a real report: a saved run (`--json` of `ncclcheck preflight`, or `scripts/bench_scale.py --json-out FILE`),
or `--nodes N` to make one with bench_scale (its simulator, N virtual nodes; at 4,096 or more run this under
`flock /tmp/ncclcheck-heavy.lock`). `--scale-to N` builds a larger report from a real one (for sizes the simulator
cannot reach on this machine): node i copies node i mod n's facts and per-node results with its rank and hostname
(`gpu%05d`) put in and, from the second copy on, its IPv4 addresses shifted (second octet + copy number) so that
no two nodes share an address; the cross-node results stay the real run's; the figures then say "scaled".

    python3 scripts/bench_report.py /tmp/r8192.json --out /tmp/r8192
    python3 scripts/bench_report.py --nodes 1024
    python3 scripts/bench_report.py /tmp/r1024.json --scale-to 8192

Prints the JSON as `ncclcheck` writes it now and as it was written before facts were shared (indented, every
node's facts inline), bytes per node by key path (`nodes[].facts.packages`, `checks[host.shm, per node]`, ...),
each renderer's bytes and seconds (console, Markdown, JUnit, HTML), and Chromium's figures for the HTML: the
navigation's DOMContentLoaded and load events, a forced layout of the whole page after load, and the elements in
the DOM, then every collapsed block opened and laid out again (what a reader who opens them all waits for; a
script timing these is added to a copy of the page; the page itself is not changed). The last line is
`nodes=N json_bytes_per_node=B html_bytes=H html_load_layout_ms=L`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from io import StringIO

from ncclcheck.model import CheckResult, NodeInfo, Report
from ncclcheck.render.validate import load_report

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# Added to a copy of the page: after the load event, force a layout of everything and put the figures in the title,
# which --dump-dom prints (no DevTools connection, no network).
TIMING_JS = """<script>window.addEventListener('load', function(){
  var nav = performance.getEntriesByType('navigation')[0] || {};
  var t0 = performance.now(); var h = document.documentElement.scrollHeight; var t1 = performance.now();
  var all = document.querySelectorAll('details');
  for (var i = 0; i < all.length; i++) all[i].open = true;
  var t2 = performance.now(); var h2 = document.documentElement.scrollHeight; var t3 = performance.now();
  document.title = 'NCCLCHECK_TIMING ' + JSON.stringify({dcl_ms: nav.domContentLoadedEventEnd || 0,
    load_ms: nav.loadEventStart || 0, layout_ms: t1 - t0, total_ms: t1, height_px: h,
    open_all_ms: t3 - t1, open_height_px: h2, elements: document.getElementsByTagName('*').length});
});</script>"""


def compact(v) -> int:
    return len(json.dumps(v, separators=(",", ":"), default=str))


def breakdown(doc: dict) -> Counter:
    """Bytes of the compact JSON by key path: nodes[].facts.<group>, nodes[] (rank, hostname, keys), checks[<id>,
    per node | cross-node], shared.facts.<group>, and each other top-level field."""
    out: Counter = Counter()
    for n in doc.get("nodes") or []:
        facts = n.get("facts") or {}
        for k, v in facts.items():
            ref = isinstance(v, dict) and "$ref" in v
            out[f"nodes[].facts.{k}{' (reference)' if ref else ''}"] += compact(v) + len(k) + 4
        out["nodes[] (rank, hostname, keys)"] += compact(n) - compact(facts)
    for c in doc.get("checks") or []:
        out[f"checks[{c.get('id')}, {'per node' if c.get('node') is not None else 'cross-node'}]"] += compact(c)
    for k, v in ((doc.get("shared") or {}).get("facts") or {}).items():
        out[f"shared.facts.{k}"] += compact(v)
    for k, v in doc.items():
        if k not in ("nodes", "checks", "shared"):
            out[k] += compact(v)
    return out


def old_layout(rep: Report) -> str:
    """The JSON as written before facts were shared: indented, every node's facts inline."""
    d = rep.to_dict()
    d["nodes"] = [n.to_json() for n in rep.nodes]
    d.pop("shared", None)
    return json.dumps(d, indent=2, default=str) + "\n"


IPV4 = re.compile(r"\b(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\b")


def scaled(rep: Report, n: int) -> Report:
    """Node i is a copy of node i mod len(rep.nodes), its rank and hostname put in; cross-node results unchanged."""
    import dataclasses

    base = rep.nodes
    width = max(5, len(str(n - 1)))
    per: dict = {}
    for c in rep.checks:
        if c.node is not None:
            per.setdefault(c.node, []).append(c)
    nodes, checks = [], [c for c in rep.checks if c.node is None]
    for i in range(n):
        b = base[i % len(base)]
        host = f"gpu{i:0{width}d}"

        copy = i // len(base)

        def sub(text: str, b=b, host=host, i=i, copy=copy) -> str:
            text = re.sub(rf"\bnode {b.node_rank}\b", f"node {i}", text.replace(b.hostname, host))
            if copy:  # the copy's addresses differ from its original's, as a real node's would
                text = IPV4.sub(lambda m: f"{m[1]}.{(int(m[2]) + copy) % 256}.{m[3]}.{m[4]}", text)
            return text

        facts = json.loads(sub(json.dumps(b.facts)))
        nodes.append(NodeInfo(i, host, facts))
        for c in per.get(b.node_rank, []):
            checks.append(CheckResult(c.id, c.status, sub(c.summary), sub(c.detail), sub(c.fix), i,
                                      json.loads(sub(json.dumps(c.evidence)))))
    world = dataclasses.replace(rep.world, nnodes=n, world_size=n * rep.world.world_size // max(1, len(base)))
    return dataclasses.replace(rep, nodes=nodes, checks=checks, world=world)


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def render_console(rep: Report) -> str:
    from ncclcheck.render.console import make_console, render_report

    buf = StringIO()
    console = make_console(buf, {"NO_COLOR": "1"}, width=160)
    for part in render_report(rep):
        console.print(part)
    return buf.getvalue()


def browser() -> str | None:
    for b in BROWSERS:
        if shutil.which(b):
            return shutil.which(b)
    return None


def chromium_timing(html_path: str, work: str) -> dict:
    """Chromium's figures for one page (see TIMING_JS), plus the browser process's own wall time."""
    exe = browser()
    if exe is None:
        return {"error": "no chromium installed (apt-get install -y chromium)"}
    with open(html_path, encoding="utf-8") as f:
        page = f.read()
    probe = os.path.join(work, "timed.html")
    with open(probe, "w", encoding="utf-8") as f:
        f.write(page.replace("</body>", TIMING_JS + "</body>", 1) if "</body>" in page else page + TIMING_JS)
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-extensions", f"--user-data-dir={os.path.join(work, 'profile')}", "--window-size=1280,2000",
           "--dump-dom", "file://" + os.path.abspath(probe)]
    t = time.perf_counter()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return {"error": "chromium did not finish within 300 s"}
    wall = time.perf_counter() - t
    m = re.search(r"NCCLCHECK_TIMING (\{.*?\})</title>", res.stdout)
    if not m:
        return {"error": f"no timing in chromium's DOM (exit {res.returncode}): {res.stderr.strip()[-200:]}"}
    out = json.loads(m.group(1).replace("&quot;", '"'))
    out["process_wall_s"] = wall
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", nargs="?", help="a saved report (JSON)")
    ap.add_argument("--nodes", type=int, help="make the report with scripts/bench_scale.py at this many nodes")
    ap.add_argument("--scale-to", type=int, help="build a larger report from the real one (see the top)")
    ap.add_argument("--out", help="keep the rendered files here (report.json, .md, .xml, .html, console.txt)")
    ap.add_argument("--no-browser", action="store_true", help="skip the Chromium timing")
    ap.add_argument("--top", type=int, default=14, help="key paths shown")
    a = ap.parse_args()
    if bool(a.report) == bool(a.nodes):
        ap.error("give a report JSON or --nodes N (one of them)")
    work = tempfile.mkdtemp(prefix="ncclcheck-bench-report-")
    out_dir = a.out or work
    os.makedirs(out_dir, exist_ok=True)
    path = a.report
    if a.nodes:
        path = os.path.join(work, "generated.json")
        rc = subprocess.call([sys.executable, "-m", "ncclcheck_lab.bench_scale", "--nodes", str(a.nodes),
                              "--no-world", "none", "--json-out", path])
        if not os.path.exists(path):
            print(f"bench_scale.py wrote no report (exit {rc})", file=sys.stderr)
            return 1
    in_bytes = os.path.getsize(path)
    rep, load_s = timed(load_report, path)
    label = "real"
    if a.scale_to:
        rep = scaled(rep, a.scale_to)
        label = f"scaled from {len(load_report(path).nodes):,} real nodes"
    n = max(1, len(rep.nodes))
    print(f"report: {path} ({in_bytes:,} bytes as read), {n:,} nodes ({label}), {len(rep.checks):,} results; "
          f"read and validated in {load_s:.2f} s")

    text, json_s = timed(rep.to_json)
    old = old_layout(rep)
    with open(os.path.join(out_dir, "report.json"), "w", encoding="utf-8") as f:
        f.write(text)
    doc = json.loads(text)
    back, back_s = timed(Report.from_json, text)
    same = [x.facts for x in back.nodes] == [x.facts for x in rep.nodes] and back.checks == rep.checks
    print(f"JSON: {len(text):,} bytes ({len(text) / n:,.0f} B/node) in {json_s:.2f} s; before shared facts and "
          f"one line per record: {len(old):,} bytes ({len(old) / n:,.0f} B/node); read back in {back_s:.2f} s, "
          f"every fact and result equal: {same}")
    parts = breakdown(doc)
    total = sum(parts.values())
    print(f"  what the bytes are (compact JSON, {total:,} bytes; B/node = bytes / {n:,}):")
    for k, v in parts.most_common(a.top):
        print(f"    {k:52} {v:>12,} B  {v / n:>8,.0f} B/node  {100 * v / total:5.1f}%")
    per_node = sum(v for k, v in parts.items() if "per node" in k)
    print(f"    per-node check results together: {per_node / n:,.0f} B/node; node facts (inline + references): "
          f"{sum(v for k, v in parts.items() if k.startswith('nodes[]')) / n:,.0f} B/node; shared table "
          f"{sum(v for k, v in parts.items() if k.startswith('shared.')):,} B once")

    renders = {}
    from ncclcheck.render.html import render_html
    from ncclcheck.render.junit import render_junit
    from ncclcheck.render.markdown import render_markdown

    for name, fn, ext in (("console", render_console, "console.txt"), ("Markdown", render_markdown, "report.md"),
                          ("JUnit", render_junit, "report.xml"), ("HTML", render_html, "report.html")):
        body, secs = timed(fn, rep)
        renders[name] = (len(body.encode("utf-8")), secs)
        with open(os.path.join(out_dir, ext), "w", encoding="utf-8") as f:
            f.write(body)
    print("renderers: " + ", ".join(f"{k} {b:,} B in {s:.2f} s" for k, (b, s) in renders.items())
          + f" (files in {out_dir})")
    ms = float("nan")
    if not a.no_browser:
        t = chromium_timing(os.path.join(out_dir, "report.html"), work)
        if "error" in t:
            print(f"chromium: {t['error']}")
        else:
            ms = t["total_ms"]
            print(f"chromium (headless, file://): DOMContentLoaded {t['dcl_ms']:,.0f} ms, load {t['load_ms']:,.0f} ms, "
                  f"forced layout of the whole page {t['layout_ms']:,.0f} ms, load + layout {ms:,.0f} ms; "
                  f"{t['elements']:,} elements, page {t['height_px']:,} px tall; every <details> opened and laid "
                  f"out again: {t['open_all_ms']:,.0f} ms, {t['open_height_px']:,} px; browser process "
                  f"{t['process_wall_s']:.1f} s wall including its start")
    if not a.out:
        shutil.rmtree(work, ignore_errors=True)
    print(f"nodes={n} json_bytes_per_node={len(text) / n:.0f} html_bytes={renders['HTML'][0]} "
          f"html_load_layout_ms={ms:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
