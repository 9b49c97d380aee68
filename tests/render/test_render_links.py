"""The links renderer: a node x node matrix with slow cells marked and the findings named; never prints."""

from __future__ import annotations

import io
import re

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


def test_the_header_says_each_direction_was_timed_for_min_time():
    sec = {**_section(), "min_time_s": 0.25}
    out = _text(render_links(sec)).replace("\n", " ")
    assert "at least 0.25 s (--min-time)" in out
    # exactly --iters transfers (--min-time 0), and a saved run from before min_time_s was recorded, say nothing
    assert "--min-time" not in _text(render_links({**_section(), "min_time_s": 0}))
    assert "--min-time" not in _text(render_links(_section()))


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
    # the minimal section (docs/contracts.md: size and matrix_gbps) renders too (no hosts, no slow_cells, no thresholds)
    minimal = {"size": 67108864, "matrix_gbps": [[None, 1.0], [0.1, None]], "slow": [{"a": 0, "b": 1, "gbps": 0.1}],
               "slow_nodes": [1]}
    assert "slow link node 0 <-> node 1" in _text(render_links(minimal))
    assert render_links(None) == []


def test_renderer_does_not_print(capsys):
    render_links(_section())
    assert capsys.readouterr().out == ""


def test_one_rank_section_says_nothing_was_measured():
    out = _text(render_links(analyze([[None]], size=1 << 20, unit="rank").section))
    assert "nothing measured" in out and "no slow node or link" not in out
