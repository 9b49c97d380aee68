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
    import dataclasses

    out = _text(console.render_report(dataclasses.replace(_passing(), checks=[]), verbose=False))
    assert "status" not in out and "PASS" in out, out
    assert "status  check" in _text(console.render_report(_passing(), verbose=True))
    # the first screen folds the passes and skips into rows of their own, under the same header
    folded = _text(console.render_report(_passing(), verbose=False))
    assert "status  check" in folded and "1 result" in folded and "host 1" in folded, folded
    assert "host.shm" not in folded and "--verbose" in folded, folded


def test_the_one_line_verdict_is_one_line_with_its_notes():
    # printed as the guard prints it (training/__init__.py: soft_wrap, one line whatever the width)
    out = _text([console.one_line_verdict(_passing(), ("armed the post-mortem under /x",))], soft_wrap=True)
    assert out.count("\n") == 1, out
    assert out.startswith("ncclcheck preflight 1 node, 2 ranks, launched by torchrun") and ": PASS (1 passed" in out
    assert out.rstrip().endswith("; armed the post-mortem under /x"), out


def _two_findings() -> Report:
    from ncclcheck.model import failed

    rank = "rank 3 (host h2) calls collectives late: 52 ms per step: compute"
    link = "host h3's link measures slow while the job runs: communication: host h3 sends at 6.8 MB/s"
    return Report(command="watch", version="0", started="2026-01-01T00:00:00Z", duration_s=1.0,
                  world=WorldInfo(nnodes=3, world_size=6, backend="gloo", master="h1:1", launcher="torchrun"),
                  nodes=[NodeInfo(i, f"h{i + 1}", {}) for i in range(3)],
                  checks=[failed("live.slow", rank, detail=f"{rank}\n{link}", findings=(rank, link), fix="f")],
                  recommendations=[])


def test_every_finding_of_a_check_is_shown_by_every_renderer_not_its_first_alone(validate_report):
    """A slow rank and a slow link are two findings of live.slow: the console printed the summary (the first) and
    the link was in the JSON alone (issue 56)."""
    import json

    from ncclcheck.model import Report as R
    from ncclcheck.render.html import render_html
    from ncclcheck.render.junit import render_junit
    from ncclcheck.render.markdown import render_markdown

    report = _two_findings()
    for out in (" ".join(_text(console.render_report(report, verbose=False)).split()), render_markdown(report),
                render_html(report), render_junit(report)):
        assert "rank 3 (host h2) calls collectives late" in out and "host h3" in out and "6.8 MB/s" in out, out
    doc = json.loads(report.to_json())
    validate_report(doc)
    assert doc["checks"][0]["findings"][1].startswith("host h3's link")
    assert R.from_json(doc).checks[0].findings == report.checks[0].findings  # read back as written
    assert "findings" not in json.loads(_passing().to_json())["checks"][0]  # a check of one finding: as before
