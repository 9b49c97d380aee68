"""The links renderer: a node x node matrix with slow cells marked and the findings named; never prints."""

from __future__ import annotations

import io
import json
import pathlib
import re

import jsonschema
from rich.console import Console

from ncclcheck.links.analyze import analyze
from ncclcheck.render.links import matrix_table, render_links


def _text(renderables, color=False) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=120, force_terminal=color, color_system="standard" if color else None)
    for r in renderables:
        console.print(r)
    return buf.getvalue()


def _section():
    m = [[None if a == b else 10.0 for b in range(4)] for a in range(4)]
    for y in (0, 2, 3):
        m[1][y] = 1.0
    m[0][3] = 0.5
    return analyze(m, size=64 << 20, hosts=["a", "b", "c", "d"], extra={"iters": 5, "rounds": [[], [], []]}).section


def test_matrix_and_findings_name_the_slow_node_and_link():
    out = _text(render_links(_section()))
    assert "64 MiB x 5" in out and "3 rounds" in out
    assert "slow node node 1 (b)" in out
    assert "slow link node 0 (a) <-> node 3 (d): 0.50 GB/s" in out
    lines = out.splitlines()
    row0 = next(line for line in lines if line.startswith("0 a"))
    assert row0.split()[-1] == "0.50" and "10.00" in row0


def test_slow_cells_are_highlighted_and_healthy_ones_are_not():
    out = _text([matrix_table(_section())], color=True)
    red = re.escape("\x1b[1;31m") + r"\s*"
    assert re.search(red + r"0\.50", out) and re.search(red + r"1\.00", out)
    assert not re.search(red + r"10\.00", out)


def test_healthy_section_says_nothing_is_slow():
    m = [[None, 5.0], [5.0, None]]
    out = _text(render_links(analyze(m, size=1 << 20).section))
    assert "no slow node or link" in out


def test_dead_node_and_saved_runs_without_extra_keys():
    sec = {"size": 1 << 20, "matrix_gbps": [[None, 1.0, None], [1.0, None, None], [None, None, None]],
           "slow": [], "slow_nodes": [], "dead": [2]}
    out = _text(render_links(sec))
    assert "dead node 2" in out
    # the minimal DESIGN.md section renders too (no hosts, no slow_cells, no thresholds)
    minimal = {"size": 67108864, "matrix_gbps": [[None, 1.0], [0.1, None]], "slow": [{"a": 0, "b": 1, "gbps": 0.1}],
               "slow_nodes": [1]}
    assert "slow link node 0 <-> node 1" in _text(render_links(minimal))
    assert render_links(None) == []


def test_renderer_does_not_print(capsys):
    render_links(_section())
    assert capsys.readouterr().out == ""


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
    jsonschema.validate(json.loads(json.dumps(rep.to_json())), json.loads(schema.read_text()))
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
