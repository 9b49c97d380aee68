"""`ncclcheck report RUN.json`: a saved run read and checked against the report's JSON Schema (ncclcheck/schema, the
one validator every reader of a saved report goes through) before it is rendered."""

from __future__ import annotations

from typing import Any, Optional

from ..schema import problem


def schema_problem(doc: Any, schema: Optional[dict] = None) -> Optional[str]:
    """None when doc is a valid ncclcheck report; else the first problem, one line (schema.problem)."""
    return problem(doc, schema)


def load_report(path: str):
    """`ncclcheck report RUN.json`: the saved run as a Report, after checking it against the schema. A saved report
    may come from anywhere: UsageError (one line, naming the field where it can) when it cannot be read, is not
    JSON, is nested too deep, holds NaN or Infinity, or is not an ncclcheck report (model.load_saved_report)."""
    from ..model import load_saved_report

    return load_saved_report(path, path, schema_problem)


def run(config, observer=None, placement=None):
    """The commands table's runner for `report` (commands.py): the saved run the Config names."""
    return load_report(config.report_input)
