"""Every place a renderer names nodes (console, Markdown, JUnit, HTML: checks, recommendations, links findings and
bounds, bench notes) words many of them as Slurm host ranges and a count, never a list of thousands of ids; only the
HTML's per-node section lists nodes one by one, by design (collapsed)."""

from __future__ import annotations

import io
import re

from ncclcheck import hostranges
from ncclcheck.model import BenchRow, NodeInfo, Recommendation, Report, WorldInfo, failed, passed
from ncclcheck.render.console import make_console, render_report
from ncclcheck.render.html import render_html
from ncclcheck.render.junit import render_junit
from ncclcheck.render.markdown import render_markdown

N = 2048
NODE_ID = re.compile(r"\b(?:node|rank) \d+\b")


def _console(report: Report) -> str:
    buf = io.StringIO()
    con = make_console(buf, {}, width=160)
    for part in render_report(report):
        con.print(part)
    return buf.getvalue()


def _outside_node_section(html: str) -> str:
    start = html.find('<section id="nodes">')
    return html if start < 0 else html[:start] + html[html.index("</section>", start):]


def _most_ids_in_a_line(text: str) -> int:
    """The most node or rank ids in one line, table row, list item or paragraph."""
    return max((len(NODE_ID.findall(line)) for line in re.split(r"\n|<tr|<li|<p", text)), default=0)


def _hosts(ranks) -> list:
    return [(r, f"gpu{r:04d}") for r in ranks]


def _preflight() -> Report:
    nodes = [NodeInfo(r, f"gpu{r:04d}", {"versions": {"torch": "2.13.0"}}) for r in range(N)]
    checks = []
    for r in range(N):
        checks.append(failed("host.shm", "/dev/shm is 64 MiB", node=r, fix="--shm-size=8g") if 100 <= r < 400
                      else passed("host.shm", "/dev/shm is 16 GiB", node=r))
    checks.append(failed("code.consistent", f"code differs on {hostranges.who(_hosts(range(1000, 1100)))}"))
    recs = [Recommendation("NCCL_SOCKET_IFNAME", "=ens1" if r < N // 2 else "=ens2", "the interface every node "
                           "reached", node=r) for r in range(N)]
    return Report(command="preflight", version="t", started="", world=WorldInfo(nnodes=N, world_size=N),
                  nodes=nodes, checks=checks, recommendations=recs)


def _links(n: int = 64) -> Report:
    matrix = [[None if a == b else (0.5 if a >= 40 or b >= 40 else 10.0) for b in range(n)] for a in range(n)]
    bounds = {str(r): {"bound_gbps": 12.5 if r % 2 else 25.0, "bound_by": f"eth0 {'100' if r % 2 else '200'}G"}
              for r in range(n)}
    links = {"size": 1 << 26, "matrix_gbps": matrix, "slow": [], "slow_nodes": list(range(40, 60)),
             "dead": list(range(60, 64)), "node_bounds": bounds, "threshold_gbps": 5.0, "reference_gbps": 10.0,
             "errors": [{"a": a, "b": a + 1, "error": "timeout after 30 s"} for a in range(0, 40, 2)]}
    nodes = [NodeInfo(r, f"gpu{r:04d}") for r in range(n)]
    return Report(command="links", version="t", started="", world=WorldInfo(nnodes=n, world_size=n),
                  nodes=nodes, checks=[failed("links.slow", "20 slow nodes")], links=links)


def test_checks_and_recommendations_read_as_ranges_in_every_renderer():
    rep = _preflight()
    outputs = {"console": _console(rep), "markdown": render_markdown(rep), "junit": render_junit(rep),
               "html": _outside_node_section(render_html(rep))}
    outputs["markdown"] = outputs["markdown"].replace("\\[", "[").replace("\\]", "]")  # Markdown's escapes
    for name, text in outputs.items():
        assert "300 nodes gpu[0100-0399] (node ranks 100-399)" in text, name
        assert "100 nodes gpu[1000-1099] (node ranks 1000-1099)" in text, name
        assert _most_ids_in_a_line(text) <= 8, name
    for name in ("console", "html", "markdown"):  # per-node settings: one group per value, not a block per node
        assert "1,024 nodes gpu[0000-1023] (node ranks 0-1023)" in outputs[name], name
        assert "1,024 nodes gpu[1024-2047] (node ranks 1024-2047)" in outputs[name], name
    assert outputs["console"].count("export NCCL_SOCKET_IFNAME") == 2


def test_links_findings_and_bounds_read_as_ranges_and_one_row_per_bound():
    rep = _links()
    console, html = _console(rep), render_html(rep)
    md = render_markdown(rep).replace("\\[", "[").replace("\\]", "]")  # Markdown's escapes
    slow = "20 nodes gpu[0040-0059] (node ranks 40-59)"
    assert slow in console and slow in md and slow in html
    assert "32 nodes gpu[0000,0002,0004" in md and "(node ranks 0,2,4," in md  # the even nodes' 25 GB/s bound
    assert md.count("| eth0 ") == 2 and html.count("<td>eth0 ") == 2  # one row per distinct bound
    assert "20 failed pairs 0-1, 2-3" in " ".join(console.split()) and "timeout after 30 s" in console
    for text in (console, md, html):
        assert _most_ids_in_a_line(text) <= 8


def test_a_bench_note_names_many_wrong_ranks_as_ranges():
    row = BenchRow("all_reduce", 1 << 20, 1 << 18, "float32", False, 10.0, 1.0, 1.0, wrong=300,
                   rank_time_us=[10.0] * 512, extra={"rank_wrong": [1 if 64 <= k < 364 else 0 for k in range(512)]})
    rep = Report(command="bench", version="t", started="", world=WorldInfo(nnodes=64, world_size=512), bench=[row])
    assert "wrong results on 300 ranks 64-363" in render_html(rep)


def test_junit_keeps_a_cross_node_checks_evidence_short_and_says_where_the_rest_is():
    rep = _preflight()
    big = failed("versions.consistent", "NCCL differs on node 7 (gpu0007)",
                 evidence={"by_node": {str(r): {"nccl": "2.21.5", "torch": "2.13.0"} for r in range(N)}})
    xml = render_junit(Report(command="preflight", version="t", started="", world=rep.world, nodes=rep.nodes,
                              checks=[big]))
    assert len(xml) < 10_000 and "more characters: the JSON has them" in xml
