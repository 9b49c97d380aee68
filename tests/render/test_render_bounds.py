"""Bounds in every renderer, on reports kept from real lab runs (tests/data/bounds, made by
scripts/bench_efficiency.py): console, Markdown, HTML (the bound line on the busbw plot), JUnit and the schema."""

from __future__ import annotations

import io
import json
import pathlib
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from ncclcheck.model import Report
from ncclcheck.render import plots
from ncclcheck.render.console import make_console, render_report
from ncclcheck.render.html import render_html
from ncclcheck.render.junit import render_junit
from ncclcheck.render.markdown import render_markdown

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "bounds"
SCHEMA = json.loads((ROOT / "ncclcheck" / "schema" / "report-1.schema.json").read_text())
BENCH = "bench_3_hosts_h3_at_200mbit"  # h3 shaped to 200 Mb/s, h1 and h2 to 1 Gb/s
LINKS = "links_3_hosts_h2_at_200mbit"
VETH = "links_2_hosts_unshaped_veth"


def load(name: str) -> Report:
    return Report.from_json(json.loads((DATA / f"{name}.json").read_text()))


def console_text(report: Report) -> str:
    buf = io.StringIO()
    con = make_console(buf, {}, width=100)
    for part in render_report(report):
        con.print(part)
    return buf.getvalue()


@pytest.mark.parametrize("name", [BENCH, LINKS, VETH])
def test_kept_reports_validate(name):
    jsonschema.validate(json.loads((DATA / f"{name}.json").read_text()), SCHEMA)


def test_console_bench_has_the_efficiency_column_and_names_the_bound():
    text = console_text(load(BENCH))
    row = load(BENCH).bench[0]
    assert f"{100 * row.extra['efficiency']:.0f}%" in text
    assert "eff = busbw / bound; bound 0.025 GB/s (node 2 eth0: tbf 200 Mb/s)" in " ".join(text.split())
    assert "all_reduce bound: node 2 eth0: tbf 200 Mb/s" in text


def test_console_links_lists_each_nodes_bound_and_the_efficiency_span():
    text = " ".join(console_text(load(LINKS)).split())
    assert "node 1 (h2): 0.025 GB/s (node 1 eth0: tbf 200 Mb/s)" in text  # its bound_by as saved then
    assert "measured directions reached" in text and "of their bound" in text


def test_markdown_bench_and_links():
    md = render_markdown(load(BENCH))
    assert "| bound | eff | bound by |" in md and "node 2 eth0: tbf 200 Mb/s" in md
    md = render_markdown(load(VETH))
    assert "| nodes | bound | set by |" in md and "veth/virtual" in md


def test_html_bench_table_and_links_bounds():
    html = render_html(load(BENCH))
    assert '<th class="num">bound</th><th class="num">eff</th>' in html and "tbf 200 Mb/s" in html
    html = render_html(load(LINKS))
    assert "<h3>Bounds</h3>" in html and "node 1 eth0: tbf 200 Mb/s" in html


@pytest.mark.skipif(not plots.plots_available(), reason="matplotlib is the `html` extra")
def test_busbw_plot_draws_the_bound_line():
    rows = load(BENCH).bench
    svg = plots.bench_plot_svg("all_reduce", rows)
    assert "bound 0.025 GB/s (node 2 eth0: tbf 200 Mb/s)" in svg
    assert "dashed line is the bound" in render_html(load(BENCH))


def test_junit_efficiency_case_carries_the_figures():
    root = ET.fromstring(render_junit(load(BENCH)).encode())
    case = next(c for c in root.iter("testcase") if c.get("name") == "bench.efficiency[all_reduce]")
    out = case.find("system-out").text
    assert '"bound_gbps": 0.025' in out and "node 2 eth0: tbf 200 Mb/s" in out


def test_old_reports_keep_their_columns():
    rep = load(BENCH)
    for r in rep.bench:
        for k in ("bound_gbps", "bound_by", "efficiency"):
            r.extra.pop(k)
    rep.extra["bench_summary"]["per_op"] = [{k: v for k, v in e.items() if not k.startswith(("bound", "eff",
                                                                                           "expected"))}
                                            for e in rep.extra["bench_summary"]["per_op"]]
    text = console_text(rep)  # the bench table, after the verdict and the checks (whose bench.efficiency row stays)
    assert "eff" not in text[text.index("all_reduce  type"):text.index("bench summary")]
    assert "bound" not in render_markdown(rep).split("### Bench")[1]


def wrong_bound_report() -> Report:
    """The kept unshaped-veth links run (1.42 GB/s, 113% of 10 Gb/s) evaluated as if eth0 were a physical 10 Gb/s NIC
    (a line rate that is not what carried the traffic): its bound is wrong, named, and never a percentage. A veth
    sets no bound at all (test_a_veth_sets_no_bound)."""
    from ncclcheck.links import efficiency as LE

    rep = load(VETH)
    m = rep.links["matrix_gbps"]
    facts = {"netdevs": [{"name": "eth0", "speed_mbps": 10000, "shaper": {"qdiscs": []}}],
             "default_interface": "eth0"}
    fields, checks = LE.evaluate(m, {0: facts, 1: facts}, "gloo", "node", ["h1", "h2"], None)
    import dataclasses

    return dataclasses.replace(rep, links={**rep.links, **fields},
                               checks=[c for c in rep.checks if c.id != "links.efficiency"] + checks)


def test_a_veth_sets_no_bound():
    """Issue 44: the kernel's 10 Gb/s of a veth is not a line rate: the same run gives no bound, no wrong bound, and
    links.efficiency says the bound is unknown and why (skip, so --strict passes a healthy veth run)."""
    from ncclcheck.links import efficiency as LE

    rep = load(VETH)
    facts = {"netdevs": [{"name": "eth0", "speed_mbps": 10000, "virtual": "veth", "shaper": {"qdiscs": []}}],
             "default_interface": "eth0"}
    fields, checks = LE.evaluate(rep.links["matrix_gbps"], {0: facts, 1: facts}, "gloo", "node", ["h1", "h2"], None)
    assert fields["bound_gbps"][1][0] is None and not fields["wrong_bounds"]
    [eff] = [c for c in checks if c.id == "links.efficiency"]
    assert eff.status.value == "skip" and "bound unknown" in eff.summary and "veth/virtual" in eff.summary, eff
    assert "not a line rate" in eff.detail


def test_a_wrong_bound_is_named_in_every_renderer_and_never_shown_as_a_percentage(tmp_path):
    rep = wrong_bound_report()
    assert rep.links["efficiency"][1][0] is None and rep.links["bound_trusted"][1][0] is False
    # JSON keeps the raw figures, and marks the bound not trusted
    jsonschema.validate(json.loads(rep.to_json()), SCHEMA)
    assert rep.links["wrong_bounds"][0]["gbps"] == pytest.approx(1.41567, rel=1e-3)
    texts = {"console": " ".join(console_text(rep).split()), "markdown": render_markdown(rep),
             "html": render_html(rep), "junit": render_junit(rep)}
    for name, text in texts.items():
        assert "113%" not in text and "is wrong" in text, name
    assert "bound of node 1 (h2) -> node 0 (h1) is wrong: measured 1.42 GB/s > bound 1.25 GB/s" in texts["console"]


def test_a_report_kept_before_bounds_were_checked_shows_no_efficiency_above_1():
    from ncclcheck.render.common import efficiency_span, efficiency_text
    from ncclcheck.render.links import bounds_text

    rep = load(VETH)  # its links section holds efficiency 1.13254 (written before this rule)
    effs, wrong = efficiency_span(rep.links)
    assert effs == [pytest.approx(0.733294)] and [(w["a"], w["b"]) for w in wrong] == [(1, 0)]
    line = bounds_text(rep.links).plain
    assert "113%" not in line and "beat their bound" in line
    assert efficiency_text(3.81) == "bound wrong" and efficiency_text(0.95) == "95%"
