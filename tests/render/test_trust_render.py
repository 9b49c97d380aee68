"""Issue 36: every report of a run that crossed a store says its trust level, and names what it ignored (the JSON
field `trust`, the terminal, Markdown and HTML headers, JUnit's properties); a saved report's `trust` is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from ncclcheck.model import Report
from ncclcheck.render.console import header, verdict
from ncclcheck.render.html import render_html
from ncclcheck.render.junit import render_junit
from ncclcheck.render.markdown import render_markdown

EXAMPLE = Path(__file__).parent / "examples" / "preflight-pass-2node.json"
TRUST = {"level": "munge", "source": "a munge credential from uid 1000",
         "ignored": ["world/verdict: not signed with the job token"]}


def _report(trust=TRUST) -> Report:
    doc = json.loads(EXAMPLE.read_text())
    doc["trust"] = trust
    return Report.from_dict(doc)


def _text(renderable) -> str:
    c = Console(width=400, record=True, color_system=None)
    c.print(renderable)
    return c.export_text()


def test_the_trust_level_and_the_ignored_records_reach_every_renderer(validate_report):
    r = _report()
    validate_report(r.to_json())
    assert json.loads(r.to_json())["trust"] == TRUST
    assert "trust: munge" in _text(header(r))
    assert "1 store record(s) ignored, first: world/verdict: not signed" in _text(verdict(r))
    assert "trust: munge; 1 store record(s) ignored" in render_markdown(r)
    assert "trust: munge; 1 store record(s) ignored" in render_html(r)
    assert 'name="ncclcheck.trust" value="munge"' in render_junit(r)


def test_a_report_without_trust_renders_as_before():
    doc = json.loads(EXAMPLE.read_text())
    r = Report.from_dict(doc)
    assert r.trust is None and "trust" not in json.loads(r.to_json()) and "trust" not in _text(header(r))


@pytest.mark.parametrize("bad", [{"level": "root"}, "munge", {"level": "none", "ignored": [1]},
                                 {"level": "token", "source": 7}])
def test_a_saved_reports_trust_is_checked(bad):
    with pytest.raises(ValueError, match="trust"):
        _report(bad)
