"""health's and sweep's Slurm part as text: one line per node in NHC's style (`host | Healthy`, `host | ERROR: ...`,
`host | No results`), the good and bad nodes as Slurm hostlists, and the scontrol commands run (or, with --dry-run,
to run). Computes nothing: the verdicts and hostlists are in the report (sweep/verdict.py, health/run.py)."""

from __future__ import annotations

from ..model import Report

_WORD = {"healthy": "Healthy", "no_results": "No results"}


def node_line(name: str, status: str, message: str = "") -> str:
    if status in _WORD:
        return f"{name} | {_WORD[status]}"
    return f"{name} | {'ERROR' if status == 'bad' else 'UNKNOWN' if status == 'unknown' else 'WARNING'}: {message}"


def slurm_lines(report: Report) -> list:
    """The lines for the console (empty when the report has no Slurm part)."""
    lines: list = []
    sweep = report.extra.get("sweep")
    if isinstance(sweep, dict):
        for v in sweep.get("nodes") or []:
            lines.append(node_line(v.get("name", "?"), v.get("status", "?"), v.get("message") or ""))
        lines.append(f"good (sbatch -w): {sweep.get('good') or '(none)'}")
        lines.append(f"bad (sbatch --exclude): {sweep.get('bad') or '(none)'}")
        for key, what in (("suspect", "suspect (not drained)"), ("unknown", "not measured (not drained)"),
                          ("no_results", "no results")):
            if sweep.get(key):
                lines.append(f"{what}: {sweep[key]}")
    slurm = report.extra.get("slurm")
    if isinstance(slurm, dict):
        if report.command == "health":
            bad = next((c for c in report.checks if c.status.value == "fail"), None)
            status = "bad" if bad else "healthy"
            lines.append(node_line(slurm.get("node") or "?", status, f"[{bad.id}] {bad.summary}" if bad else ""))
        cmds = slurm.get("commands") or []
        if cmds:
            lines.append("would run (--dry-run):" if slurm.get("dry_run") else "ran:")
            lines.extend(f"  {c}" for c in cmds)
    return lines
