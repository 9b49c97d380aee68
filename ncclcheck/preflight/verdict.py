"""The compact verdict node 0 publishes to every other node: what went wrong and where, sized by the problems found,
not by the number of nodes. Pure functions; the full per-node detail stays in node 0's report files."""

from __future__ import annotations

import json
from typing import Optional

from ..model import CheckResult, Recommendation, Status
from ..render.common import group_checks, group_summary

MAX_TEXT = 2000  # characters of a summary/detail/fix on the wire
MAX_EVIDENCE_ITEM = 512  # evidence entries larger than this (JSON characters) stay in node 0's report only
MAX_NAMED = 16  # node ranks listed per status in an aggregated check's evidence (the counts are exact)


def _cap(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _per_node(v: object) -> bool:
    """A map keyed by node rank ({"0": ..., "1": ...}), or a map of such maps: it grows with n, so it stays home."""
    if not isinstance(v, dict) or not v:
        return False
    return all(str(k).isdigit() for k in v) or all(_per_node(x) for x in v.values())


def _small_evidence(ev: dict) -> dict:
    out = {}
    for k, v in (ev or {}).items():
        if _per_node(v) or (isinstance(v, list) and len(v) > MAX_NAMED):
            continue
        try:
            if len(json.dumps(v, default=str)) <= MAX_EVIDENCE_ITEM:
                out[k] = v
        except (TypeError, ValueError):
            continue
    return out


def compact_check(c: CheckResult) -> dict:
    """A check as it travels to the other nodes: texts capped, only the small evidence entries kept."""
    return {"id": c.id, "status": c.status.value, "node": c.node, "summary": _cap(c.summary),
            "detail": _cap(c.detail), "fix": _cap(c.fix), "evidence": _small_evidence(c.evidence)}


def aggregate_local(local: list[CheckResult], hosts: dict[int, str]) -> list[CheckResult]:
    """One cross-node result per node-local check that did not pass everywhere: 'fail on node 17 (gpu017): ...'.

    Checks that passed (or were skipped) on every node are left out: the other nodes need only the exceptions.
    """
    out = []
    for g in group_checks([c for c in local if c.node is not None]):
        if g.status not in (Status.FAIL, Status.WARN):
            continue
        nodes = {st.value: g.nodes_with(st)[:MAX_NAMED] for st in (Status.FAIL, Status.WARN) if g.nodes_with(st)}
        counts = {st.value: len(g.nodes_with(st)) for st in Status if g.nodes_with(st)}
        out.append(CheckResult(g.id, g.status, group_summary(g, hosts), fix=g.fix, node=None,
                               evidence={"aggregated": True, "nodes": nodes, "counts": counts}))
    return out


def build_result(cross: list[CheckResult], local: list[CheckResult], recs: list[Recommendation],
                 hosts: dict[int, str], mesh: Optional[dict] = None) -> dict:
    """The payload of `world/result`: cross-node checks, aggregated node-local exceptions, recommendations."""
    return {"checks": [compact_check(c) for c in cross],
            "local": [compact_check(c) for c in aggregate_local(local, hosts)],
            "recommendations": [r.to_json() for r in recs],
            "mesh": mesh or {}}


def read_result(d: object) -> tuple[list[CheckResult], list[CheckResult], list[Recommendation], dict]:
    """(cross-node checks, aggregated local exceptions, recommendations, mesh info) from a `world/result` payload."""
    if not isinstance(d, dict):
        return [], [], [], {}

    def checks(key: str) -> list[CheckResult]:
        return [CheckResult.from_json(c) for c in d.get(key) or [] if isinstance(c, dict) and c.get("id")]

    recs = [Recommendation.from_json(r) for r in d.get("recommendations") or [] if isinstance(r, dict)]
    return checks("checks"), checks("local"), recs, d.get("mesh") if isinstance(d.get("mesh"), dict) else {}


def compact_world(verdict: dict, last_join: int) -> dict:
    """The world verdict without the per-node lists (members, joined): what every node needs to know it is in."""
    out = {k: v for k, v in verdict.items() if k not in ("members", "joined")}
    out["last_join"] = last_join
    out["members_n"] = len(verdict.get("members") or [])
    return out
