"""The links renderer at scale: every view says how the pairs were chosen, and a run too large for a node x node
matrix lists its measured pairs instead."""

from __future__ import annotations

import json
import pathlib

import jsonschema

from ncclcheck.links.analyze import analyze
from ncclcheck.render.links import render_links
from tests.render.test_render_links import _text


def _scale_section():
    """16 nodes, scale mode: the pairing of 8 pairs, node 6 re-tested against 0 and 1 (its pair with 7 slow)."""
    pairs = [(0, 8), (1, 9), (2, 5), (3, 14), (4, 10), (6, 7), (11, 12), (13, 15)]
    m = [[None] * 16 for _ in range(16)]
    for a, b in [*pairs, (0, 6), (1, 6), (2, 7), (3, 7)]:
        slow = 6 in (a, b)
        m[a][b] = m[b][a] = 0.01 if slow else 0.12
    rounds = [pairs, [(0, 6), (2, 7)], [(1, 6), (3, 7)]]
    return analyze(m, size=4 << 20, extra={"mode": "scale", "iters": 3, "rounds": rounds}).section


def test_every_view_says_how_the_pairs_were_chosen_and_how_many_links_were_measured():
    from ncclcheck.model import Report
    from ncclcheck.render.html import render_html
    from ncclcheck.render.markdown import render_markdown

    sec = _scale_section()
    assert sec["slow_nodes"] == [6]
    out = " ".join(_text(render_links(sec)).split())
    assert "Scale mode: 3 rounds of disjoint pairs" in out and "at most 4 whatever the node count" in out
    assert "12 of 120 links measured" in out
    rep = Report(command="links", version="0", started="now", links=sec)
    md = render_markdown(rep)
    assert "Scale mode: 3 rounds of disjoint pairs" in md and "12 of 120 links measured" in md
    assert "Scale mode: 3 rounds of disjoint pairs" in render_html(rep)
    # the section's mode and rounds are declared in the schema and validate
    schema = pathlib.Path(__file__).parents[2] / "ncclcheck/schema/report-1.schema.json"
    jsonschema.validate(json.loads(json.dumps(rep.to_dict())), json.loads(schema.read_text()))
    one = {**sec, "rounds": [sec["rounds"][0]]}
    assert "1 round of disjoint pairs" in " ".join(_text(render_links(one)).split())


def test_a_report_that_does_not_record_its_rounds_renders_without_them():
    from ncclcheck.model import Report
    from ncclcheck.render.markdown import render_markdown

    sec = {k: v for k, v in _scale_section().items() if k not in ("rounds", "mode")}
    assert "mode:" not in _text(render_links(sec))
    assert "mode:" not in render_markdown(Report(command="links", version="0", started="now", links=sec))


def test_a_large_run_lists_its_measured_pairs_instead_of_a_matrix_that_cannot_fit():
    from ncclcheck.render.links import MATRIX_MAX_NODES, PAIRS_SHOWN

    out = _text(render_links(_scale_section()))
    assert "row sends to column" not in out and 16 > MATRIX_MAX_NODES
    lines = out.splitlines()
    assert any("node 6 <-> node 7" in line and line.split()[-2:] == ["0.01", "0.01"] for line in lines)
    assert any("node 11 <-> node 12" in line for line in lines)  # few pairs: every one gets a row
    # 1,024 nodes, one pairing of 512 pairs, one of them slow: that one gets a row, the others a summary line
    n = 1024
    m = [[None] * n for _ in range(n)]
    for a in range(0, n, 2):
        m[a][a + 1] = m[a + 1][a] = 0.01 if a == 10 else 0.12
    sec = analyze(m, size=4 << 20, extra={"mode": "scale", "rounds": [[[a, a + 1] for a in range(0, n, 2)]]}).section
    out = _text(render_links(sec))
    assert "node 10 <-> node 11" in out and "node 12 <-> node 13" not in out and 512 > PAIRS_SHOWN
    assert "511 other pairs measured: 0.12-0.12 GB/s, median 0.12" in out
    assert len(out.splitlines()) < 20


def test_html_lists_the_pairs_of_a_large_run_instead_of_a_million_cell_table():
    from ncclcheck.model import Report
    from ncclcheck.render.html import HEATMAP_MAX_NODES, render_html

    n = 1024
    m = [[None] * n for _ in range(n)]
    for a in range(0, n, 2):
        m[a][a + 1] = m[a + 1][a] = 0.01 if a == 10 else 0.12
    sec = analyze(m, size=4 << 20, extra={"mode": "scale", "rounds": [[[a, a + 1] for a in range(0, n, 2)]]}).section
    html = render_html(Report(command="links", version="0", started="now", links=sec))
    assert n > HEATMAP_MAX_NODES and "table.sortable" in html  # the sort script comes with the pair table
    assert html.count("<tr><td>node") == 512  # every measured pair: one row each, no n x n table
    assert "0.01 ⚠" in html and len(html) < 300_000
    small = render_html(Report(command="links", version="0", started="now", links=_scale_section()))
    assert 'title="node 6 to node 7"' in small and "<tr><td>node" not in small  # 16 nodes: the heatmap still


def test_the_pairing_seed_is_recorded_and_said_and_the_cli_takes_another():
    from ncclcheck.cli import build_parser, config_from_args
    from ncclcheck.links.job import payload_from_config

    sec = {**_scale_section(), "seed": 7}
    assert "(pairing seed 7: --seed picks another)" in " ".join(_text(render_links(sec)).split())
    args = build_parser().parse_args(["links", "--seed", "7"])
    assert payload_from_config(config_from_args(args, env={}).links)["seed"] == 7
