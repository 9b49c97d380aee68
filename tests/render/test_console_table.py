"""The console view prints no table header over no rows, and the guard's one line for a run that passed."""

from __future__ import annotations

import io

from ncclcheck.model import NodeInfo, Report, WorldInfo, passed, skipped
from ncclcheck.render import console


def _passing() -> Report:
    return Report(command="preflight", version="0", started="2026-01-01T00:00:00Z", duration_s=1.25,
                  world=WorldInfo(nnodes=1, world_size=2, backend="gloo", master="127.0.0.1:1", launcher="torchrun"),
                  nodes=[NodeInfo(0, "vm", {})],
                  checks=[passed("host.shm", "ok", node=0), skipped("ib.devices", "none", node=0)],
                  recommendations=[])


def _text(parts: list, soft_wrap: bool = False) -> str:
    buf = io.StringIO()
    term = console.make_console(buf, {})
    for p in parts:
        term.print(p, soft_wrap=soft_wrap)
    return buf.getvalue()


def test_a_report_with_nothing_to_show_prints_no_table_header():
    out = _text(console.render_report(_passing(), verbose=False))
    assert "status" not in out and "PASS" in out, out
    assert "status  check" in _text(console.render_report(_passing(), verbose=True))


def test_the_one_line_verdict_is_one_line_with_its_notes():
    # printed as the guard prints it (training/__init__.py: soft_wrap, one line whatever the width)
    out = _text([console.one_line_verdict(_passing(), ("armed the post-mortem under /x",))], soft_wrap=True)
    assert out.count("\n") == 1, out
    assert out.startswith("ncclcheck preflight 1 node, 2 ranks, launched by torchrun") and ": PASS (1 passed" in out
    assert out.rstrip().endswith("; armed the post-mortem under /x"), out
