"""Markdown, JUnit and env-file output of the example reports, byte for byte.

After an intended change: NCCLCHECK_UPDATE_GOLDEN=1 python -m pytest tests/render/test_golden.py, then review the diff.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from ncclcheck.render.envfile import render_envfile
from ncclcheck.render.junit import render_junit
from ncclcheck.render.markdown import render_markdown

GOLDEN = pathlib.Path(__file__).parent / "golden"
RENDERERS = {"md": render_markdown, "junit.xml": render_junit, "env.sh": render_envfile}


@pytest.mark.parametrize("suffix", sorted(RENDERERS))
def test_matches_golden(example, suffix):
    name, report = example
    got = RENDERERS[suffix](report)
    path = GOLDEN / f"{name}.{suffix}"
    if os.environ.get("NCCLCHECK_UPDATE_GOLDEN") == "1":
        path.write_text(got, encoding="utf-8")
    assert path.exists(), f"no golden file {path.name}: run with NCCLCHECK_UPDATE_GOLDEN=1"
    assert got == path.read_text(encoding="utf-8")


def test_renderers_are_pure(example):
    _, report = example
    before = report.to_json()
    for render in RENDERERS.values():
        assert render(report) == render(report)
    assert report.to_json() == before
