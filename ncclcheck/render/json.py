"""JSON rendering of a Report (schema ncclcheck.report/1) and the published schema's location."""

from __future__ import annotations

import json
import os

from ..model import Report

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "schema", "report-1.schema.json")


def render_json(report: Report) -> str:
    return report.to_json()


def load_schema() -> dict:
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return json.load(f)
