"""JSON rendering of a Report (schema ncclcheck.report/1) and the published schema's location."""

from __future__ import annotations

from ..model import Report
from ..schema import SCHEMA_PATH, load


def render_json(report: Report) -> str:
    return report.to_json()


def load_schema() -> dict:
    return load()


__all__ = ["SCHEMA_PATH", "load_schema", "render_json"]
