"""Checks: pure functions of facts -> CheckResults. local.py reads one node's facts, cross.py every node's;
registry.py is the one list of checks and the one runner."""

from __future__ import annotations

from .cross import CrossInput
from .local import LocalInput
from .registry import CROSS, LOCAL, POSTMORTEM, REGISTRY, run_checks


def run_local_checks(inp: LocalInput) -> list:
    """Every node-local check on one node's facts."""
    return run_checks(LOCAL, inp)


def run_cross_checks(inp: CrossInput) -> list:
    """Every cross-node check on every node's facts and the mesh probe."""
    return run_checks(CROSS, inp)


__all__ = ["POSTMORTEM", "REGISTRY", "CrossInput", "LocalInput", "run_checks", "run_cross_checks", "run_local_checks"]
