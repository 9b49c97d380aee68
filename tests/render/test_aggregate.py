"""A 1,024-node report stays readable: one row per check in console, Markdown and HTML, one JUnit testcase per check
naming the failing nodes, and per-node detail in a sortable, collapsible HTML table."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ncclcheck.model import NodeInfo, Report, WorldInfo, failed, passed
from ncclcheck.render.html import render_html
from ncclcheck.render.junit import render_junit
from ncclcheck.render.markdown import render_markdown

N = 1024


def _report() -> Report:
    checks = []
    for r in range(N):
        shm = failed("host.shm", "/dev/shm is 64 MiB", node=r, fix="--shm-size=8g") if r in (17, 230) else \
            passed("host.shm", "/dev/shm is 16 GiB", node=r)
        checks += [shm, passed("host.memlock", "unlimited", node=r)]
    checks.append(failed("code.consistent", "code differs on node 5 (gpu0005)"))
    nodes = [NodeInfo(r, f"gpu{r:04d}", {"versions": {"torch": "2.13.0"}}) for r in range(N)]
    return Report(command="preflight", version="t", started="", world=WorldInfo(nnodes=N, world_size=N),
                  nodes=nodes, checks=checks)


def test_markdown_has_one_row_per_check_naming_the_odd_nodes():
    md = render_markdown(_report())
    rows = [line for line in md.splitlines() if line.startswith("| ") and "host." in line]
    assert len(rows) == 2
    shm = next(r for r in rows if "host.shm" in r)
    assert "pass on 1,022 nodes; fail on node 17 (gpu0017), node 230 (gpu0230): /dev/shm is 64 MiB" in shm
    assert len(md) < 20_000


def test_junit_has_one_testcase_per_check_whose_failure_names_the_nodes():
    root = ET.fromstring(render_junit(_report()).split("\n", 1)[1])
    cases = root.findall(".//testcase")
    assert sorted(c.get("name") for c in cases) == ["code.consistent", "host.memlock", "host.shm"]
    shm = next(c for c in cases if c.get("name") == "host.shm")
    assert "node 17 (gpu0017), node 230 (gpu0230)" in shm.find("failure").get("message")
    assert root.get("failures") == "2"


def test_html_aggregates_checks_and_keeps_a_sortable_per_node_table():
    html = render_html(_report())
    assert html.count('<table class="sortable"') == 1 and html.count("<tr class=\"status-") >= N
    assert html.count(' later">') == N - 256 and "Show all 1,024 rows" in html  # paged: 256 rows drawn at first
    assert "2 with a failure or warning" in html and "table.sortable" in html
    assert html.count('<details class="node" ') == 2  # all facts only for the odd nodes
    assert html.index("gpu0017") < html.index("gpu0003")  # failing nodes first
