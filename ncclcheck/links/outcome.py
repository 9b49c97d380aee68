"""Turn runner.run_job's outcome of links_job into the report's `links` section, checks and partial flag.

links/pipeline.py calls this after run_job, so the API stays a thin layer: every rank returns the same verdict; the
first one found is used, and when none came back (the coordinator died) the streamed `links_row` records are
turned into a partial matrix and analysed here.
"""

from __future__ import annotations

from typing import Any, Optional

from ..model import CheckResult, failed
from .analyze import analyze
from .job import DEFAULTS, ROW_KIND


def from_outcome(out: Any, payload: dict, ranks_per_node: int = 1) -> tuple[Optional[dict], list, bool]:
    """(links section or None, [CheckResult], partial) from a runner.JobOutcome of links_job."""
    result = next((r for _, r in sorted(out.results.items()) if isinstance(r, dict) and r.get("links")), None)
    checks: list[CheckResult] = []
    if result is not None:
        section = result["links"]
        checks = [CheckResult.from_json(c) for c in result.get("checks", [])]
        partial = bool(section.get("unmeasured"))
    else:
        section, checks = _from_rows(out.emitted, payload)
        partial = True
    dead = set((section or {}).get("dead") or [])
    per = 1 if (section or {}).get("unit") == "rank" else max(1, ranks_per_node)
    # A rank that failed on a node links already named dead is the same fact; anything else is its own failure.
    others = [f for f in out.failures if f["rank"] // per not in dead]
    if others:
        first = others[0]
        checks.insert(0, failed("links.world", f"rank {first['rank']} failed: {first['reason']}",
                                evidence={"failures": others},
                                fix="run `ncclcheck preflight` with the same world flags to find the cause"))
    return section, checks, partial or bool(others)


def _from_rows(emitted: list, payload: dict) -> tuple[Optional[dict], list]:
    rows = [e["data"] for e in emitted if e.get("kind") == ROW_KIND and isinstance(e.get("data"), dict)]
    if not rows:
        return None, []
    n = 1 + max(max(r["a"], r["b"]) for r in rows)
    m: list[list[Optional[float]]] = [[None] * n for _ in range(n)]
    for r in rows:
        m[r["a"]][r["b"]] = r.get("gbps_ab")
        m[r["b"]][r["a"]] = r.get("gbps_ba")
    res = analyze(m, size=int(payload.get("size") or DEFAULTS["size"]),
                  relative=float(payload.get("relative") or DEFAULTS["relative"]),
                  min_gbps=payload.get("min_gbps"), extra={"partial": True})
    return res.section, res.checks
