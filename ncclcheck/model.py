"""The result model: check results, recommendations, bench rows and the Report every command produces.

Everything here is plain data. Renderers read it; nothing here prints, measures or imports torch. Units inside are
bytes and microseconds (GB/s for bandwidth, as nccl-tests reports it); human units appear only in renderers.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

SCHEMA_ID = "ncclcheck.report/1"


class Status(str, enum.Enum):
    """Outcome of one check. Ordered by severity so the worst of a list is max(..., key=Status.rank)."""

    PASS = "pass"
    SKIP = "skip"
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def __str__(self) -> str:  # so f-strings show "fail", not "Status.FAIL"
        return self.value


_RANK = {Status.PASS: 0, Status.SKIP: 1, Status.WARN: 2, Status.FAIL: 3}



SIG_DIGITS = 6  # every measured figure in the JSON keeps at least this many significant digits; renderers round


def load_saved_report(path: str, what: str) -> dict:
    """A saved run's JSON (schema ncclcheck.report/1), for --baseline and friends. Raises UsageError naming `what`
    (e.g. "--baseline run.json") when the file cannot be read, is not JSON, or is not an ncclcheck report."""
    import json

    from .errors import UsageError

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise UsageError(f"{what}: cannot read it ({e.strerror or e})") from None
    except ValueError as e:
        raise UsageError(f"{what}: not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_ID:
        raise UsageError(f"{what}: not an ncclcheck report (expected schema {SCHEMA_ID})")
    return data


def sig(x: float, digits: int = SIG_DIGITS) -> float:
    """x to `digits` significant digits (0.000412345678 -> 0.000412346), unlike round(x, 4) -> 0.0004."""
    if not isinstance(x, (int, float)) or x != x or x in (float("inf"), float("-inf")) or x == 0:
        return x
    return float(f"{x:.{digits}g}")

@dataclass(frozen=True)
class CheckResult:
    """One check's verdict. `node` is the node rank it is about, or None for a cross-node result."""

    id: str
    status: Status
    summary: str
    detail: str = ""
    fix: str = ""
    node: Optional[int] = None
    evidence: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "status": self.status.value,
            "node": self.node,
            "summary": self.summary,
            "detail": self.detail,
            "fix": self.fix,
            "evidence": self.evidence,
        }

    @classmethod
    def from_json(cls, d: dict) -> CheckResult:
        return cls(
            id=d["id"],
            status=Status(d["status"]),
            summary=d.get("summary", ""),
            detail=d.get("detail", ""),
            fix=d.get("fix", ""),
            node=d.get("node"),
            evidence=d.get("evidence") or {},
        )


def passed(id: str, summary: str, **kw: Any) -> CheckResult:
    return CheckResult(id, Status.PASS, summary, **kw)


def warned(id: str, summary: str, **kw: Any) -> CheckResult:
    return CheckResult(id, Status.WARN, summary, **kw)


def failed(id: str, summary: str, **kw: Any) -> CheckResult:
    return CheckResult(id, Status.FAIL, summary, **kw)


def skipped(id: str, reason: str, **kw: Any) -> CheckResult:
    """A check that could not run: its reason is the summary. Never reported as passing."""
    return CheckResult(id, Status.SKIP, reason, **kw)


@dataclass(frozen=True)
class Recommendation:
    """One environment setting with the reason for it. `node` set means the value applies to that node only."""

    name: str
    value: str
    reason: str
    node: Optional[int] = None

    def to_json(self) -> dict:
        return {"name": self.name, "value": self.value, "node": self.node, "reason": self.reason}

    @classmethod
    def from_json(cls, d: dict) -> Recommendation:
        return cls(name=d["name"], value=d["value"], reason=d.get("reason", ""), node=d.get("node"))


@dataclass(frozen=True)
class BenchRow:
    """One (op, size, dtype, placement) measurement with nccl-tests' semantics (see bench/ops.py)."""

    op: str
    bytes: int
    count: int
    dtype: str
    in_place: bool
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: Optional[int] = None  # None when --check was off
    rank_time_us: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # e.g. requested_bytes when rounded, arrival skew

    def to_json(self) -> dict:
        d = asdict(self)
        extra = d.pop("extra")
        d.update(extra)
        return d

    @classmethod
    def from_json(cls, d: dict) -> BenchRow:
        known = {"op", "bytes", "count", "dtype", "in_place", "time_us", "algbw_gbps", "busbw_gbps", "wrong",
                 "rank_time_us"}
        return cls(
            **{k: d[k] for k in known if k in d},
            extra={k: v for k, v in d.items() if k not in known},
        )


@dataclass(frozen=True)
class WorldInfo:
    nnodes: int = 1
    world_size: int = 1
    backend: str = "none"
    master: Optional[str] = None
    launcher: str = "ncclcheck"

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class NodeInfo:
    node_rank: int
    hostname: str
    facts: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"node_rank": self.node_rank, "hostname": self.hostname, "facts": self.facts}


def overall_status(checks: list[CheckResult]) -> Status:
    """Worst status among checks; skips alone do not make a run fail or warn."""
    worst = Status.PASS
    for c in checks:
        if c.status in (Status.WARN, Status.FAIL) and c.status.rank > worst.rank:
            worst = c.status
    return worst


EXIT_INTERRUPTED = 130  # DESIGN.md's exit code of a run stopped by Ctrl-C


def exit_code_for(status: Status, strict: bool = False) -> int:
    if status is Status.FAIL or (strict and status is Status.WARN):
        return 1
    return 0


@dataclass(frozen=True)
class Report:
    """Everything one run found, built once by the command's pipeline and never changed afterwards (a view that
    needs another value, such as the CLI adding the log's path, makes a copy with dataclasses.replace). Status and
    exit code are derived from the checks, never stored separately."""

    command: str
    version: str
    started: str
    duration_s: float = 0.0
    world: WorldInfo = field(default_factory=WorldInfo)
    nodes: list = field(default_factory=list)  # list[NodeInfo]
    checks: list = field(default_factory=list)  # list[CheckResult]
    recommendations: list = field(default_factory=list)  # list[Recommendation]
    bench: Optional[list] = None  # list[BenchRow] for bench runs
    links: Optional[dict] = None
    strict: bool = False
    log_path: Optional[str] = None
    partial: bool = False  # the run was cut short; what is here is what was gathered
    extra: dict = field(default_factory=dict)  # command-specific sections (e.g. "bench_summary")
    # Set when a formed world agreed on one exit code (node 0's), so every process of srun/CI exits alike.
    agreed_exit_code: Optional[int] = None
    # False on the non-leader ranks of a node in worker mode: they write JSON if asked but print nothing.
    prints: bool = True
    interrupted: bool = False  # Ctrl-C: the partial report is still written, and the process exits 130

    @property
    def status(self) -> Status:
        if self.interrupted:  # a run stopped by Ctrl-C did not do what was asked: never PASS or WARN (issue 24)
            return Status.FAIL
        return overall_status(self.checks)

    @property
    def exit_code(self) -> int:
        if self.interrupted:  # the JSON says what the process exits with, so a CI reading it sees no success
            return EXIT_INTERRUPTED
        if self.agreed_exit_code is not None:
            return self.agreed_exit_code
        return exit_code_for(self.status, self.strict)

    def root_cause(self) -> Optional[CheckResult]:
        """The first failing check (checks run in dependency order), like torchrun names the first failure."""
        for c in self.checks:
            if c.status is Status.FAIL:
                return c
        return None

    def to_json(self) -> str:
        """The report as JSON text (schema ncclcheck.report/1), as `--json` writes it."""
        import json

        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=str) + "\n"

    def to_dict(self) -> dict:
        """The report as a JSON-able dict (schema ncclcheck.report/1)."""
        d: dict = {
            "schema": SCHEMA_ID,
            "command": self.command,
            "version": self.version,
            "status": self.status.value,
            "exit_code": self.exit_code,
            "started": self.started,
            "duration_s": round(self.duration_s, 3),
            "world": self.world.to_json(),
            "nodes": [n.to_json() for n in self.nodes],
            "checks": [c.to_json() for c in self.checks],
            "recommendations": [r.to_json() for r in self.recommendations],
        }
        if self.bench is not None:
            d["bench"] = [r.to_json() for r in self.bench]
        if self.links is not None:
            d["links"] = self.links
        if self.partial:
            d["partial"] = True
        if self.log_path:
            d["log"] = self.log_path
        d.update(self.extra)
        return d

    @classmethod
    def from_json(cls, doc: Any) -> Report:
        """Load a saved run (ncclcheck report RUN.json) from its JSON text (or from the dict to_dict gave)."""
        import json

        return cls.from_dict(json.loads(doc) if isinstance(doc, (str, bytes)) else doc)

    @classmethod
    def from_dict(cls, d: dict) -> Report:
        """Load a saved run from its parsed JSON. Unknown top-level keys are kept in `extra`."""
        known = {"schema", "command", "version", "status", "exit_code", "started", "duration_s", "world", "nodes",
                 "checks", "recommendations", "bench", "links", "partial", "log"}
        w = d.get("world") or {}
        checks = [CheckResult.from_json(c) for c in d.get("checks", [])]
        return cls(
            command=d.get("command", "?"),
            version=d.get("version", "?"),
            started=d.get("started", ""),
            duration_s=float(d.get("duration_s") or 0.0),
            world=WorldInfo(**{k: w[k] for k in ("nnodes", "world_size", "backend", "master", "launcher") if k in w}),
            nodes=[NodeInfo(n["node_rank"], n.get("hostname", "?"), n.get("facts") or {}) for n in d.get("nodes", [])],
            checks=checks,
            recommendations=[Recommendation.from_json(r) for r in d.get("recommendations", [])],
            bench=[BenchRow.from_json(r) for r in d["bench"]] if d.get("bench") is not None else None,
            links=d.get("links"),
            partial=bool(d.get("partial")),
            log_path=d.get("log"),
            extra={k: v for k, v in d.items() if k not in known},
            # A saved run keeps the exit code it had, including --strict and an interrupt.
            strict=d.get("exit_code") == 1 and overall_status(checks) is Status.WARN,
            interrupted=d.get("exit_code") == EXIT_INTERRUPTED,
        )
