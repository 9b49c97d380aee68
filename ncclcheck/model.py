"""The result model: check results, recommendations, bench rows and the Report every command produces.

Everything here is plain data. Renderers read it; nothing here prints, measures or imports torch. Units inside are
bytes and microseconds (GB/s for bandwidth, as nccl-tests reports it); human units appear only in renderers.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional

from .clean import MAX_DEPTH, clean_text, clean_tree

SCHEMA_ID = "ncclcheck.report/1"

def tree_problem(value: Any, max_depth: int = MAX_DEPTH) -> Optional[str]:
    """The first thing in a JSON value no report can hold, as one line naming where: a NaN or an infinity (JSON has
    neither; Python's reader accepts them and the plots crash on them) or nesting deeper than max_depth. None if
    there is none. Iterative, so a hostile file cannot make it overflow the stack."""
    stack: list = [(value, 0, "")]
    while stack:
        v, depth, path = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return f"{path or 'the document'}: {v!r} is not a number a report can hold"
        if isinstance(v, (dict, list)):
            if depth >= max_depth:
                where = path if len(path) <= 80 else f"{path[:40]}...{path[-20:]}"
                return f"{where or 'the document'}: nested more than {max_depth} levels deep"
            items = list(v.items() if isinstance(v, dict) else enumerate(v))
            for k, x in reversed(items):  # reversed: the stack then visits them in document order
                stack.append((x, depth + 1, (f"{path}.{k}" if path else str(k)) if isinstance(v, dict)
                              else f"{path}[{k}]"))
    return None


def _text(d: dict, key: str, default: str = "", where: str = "") -> str:
    """d[key] as a clean string; ValueError naming the field when it is there but not a string."""
    v = d.get(key, default)
    if v is None:
        v = default
    if not isinstance(v, str):
        raise ValueError(f"{where}{key}: expected a string, got {type(v).__name__}")
    return clean_text(v)


def _texts(d: dict, key: str, where: str = "") -> tuple:
    """d[key] as a tuple of clean strings (at most MAX_FINDINGS); ValueError naming the field when it is there but
    not a list of strings."""
    v = d.get(key)
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"{where}{key}: expected a list of strings")
    return tuple(clean_text(x) for x in v[:MAX_FINDINGS])


def _node_rank(d: dict, key: str, where: str = "", required: bool = False) -> Optional[int]:
    v = d.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ValueError(f"{where}{key}: expected a node rank (an integer >= 0), got {v!r:.40}")
    return v


def _mapping(d: dict, key: str, where: str = "") -> dict:
    v = d.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"{where}{key}: expected an object, got {type(v).__name__}")
    return clean_tree(v)


def _record(d: Any, where: str) -> dict:
    if not isinstance(d, dict):
        raise ValueError(f"{where.rstrip('.') or 'record'}: expected an object, got {type(d).__name__}")
    return d


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
_STATUS_VALUES = tuple(s.value for s in Status)



SIG_DIGITS = 6  # every measured figure in the JSON keeps at least this many significant digits; renderers round


def load_saved_report(path: str, what: str, schema_problem: Optional[Callable[[Any], Optional[str]]] = None):
    """A saved run's JSON (schema ncclcheck.report/1), for `report RUN.json`, --baseline and friends: the dict (every
    node's shared facts expanded, for the readers of a baseline), or, given a validator (render.validate's
    schema_problem, for `report`), the Report. Every saved report is checked once, here, against the published schema
    (ncclcheck/schema), which types the facts a baseline's readers use: whatever passes is safe for every reader. A
    saved report may come from anywhere: UsageError naming `what` (e.g. "--baseline run.json") and, where it can, the
    field, never a traceback, when the file cannot be read, is not JSON, is nested too deep, holds NaN or Infinity,
    or has a field of the wrong type."""
    import json

    from .errors import UsageError
    from .infile import read_doc
    from .schema import problem as schema_problem_of

    raw = read_doc(path, what)  # within infile.MAX_DOC_BYTES: a larger file is no report, and is not read whole
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UsageError(f"{what}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except ValueError as e:
        raise UsageError(f"{what}: not JSON ({e})") from None
    except RecursionError:
        raise UsageError(f"{what}: nested deeper than a JSON reader can follow (a report is at most {MAX_DEPTH} "
                         "levels deep)") from None
    if schema_problem is None and (not isinstance(data, dict) or data.get("schema") != SCHEMA_ID):
        raise UsageError(f"{what}: not an ncclcheck report (expected schema {SCHEMA_ID})")
    problem = tree_problem(data)
    expanded = data
    if problem is None and isinstance(data, dict) and isinstance(data.get("nodes"), list):
        try:  # the facts as the readers see them: each node's shared groups expanded, then checked as its own
            table = shared_table(data.get("shared"))
            expanded = {**data, "nodes": [
                {**n, "facts": resolve_facts(n["facts"], table, f"nodes[{i}]")}
                if isinstance(n, dict) and isinstance(n.get("facts"), dict) else n
                for i, n in enumerate(data["nodes"])]}
        except ValueError as exc:
            problem = str(exc)
    if problem is None:
        problem = (schema_problem or schema_problem_of)(expanded)
    if problem:
        raise UsageError(f"{what}: not an ncclcheck report (schema {SCHEMA_ID}): {problem}")
    if schema_problem is None:
        return expanded  # the readers of a raw saved report (drift, baselines) see every node's facts in full
    try:
        return Report.from_json(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{what}: not an ncclcheck report (schema {SCHEMA_ID}): {exc}") from None


def sig(x: float, digits: int = SIG_DIGITS) -> float:
    """x to `digits` significant digits (0.000412345678 -> 0.000412346), unlike round(x, 4) -> 0.0004."""
    if not isinstance(x, (int, float)) or x != x or x in (float("inf"), float("-inf")) or x == 0:
        return x
    return float(f"{x:.{digits}g}")

# A measured figure above its bound by more than this share proves the bound wrong (never a figure to show): a token
# bucket lets its burst through at line speed (tbf burst / transfer size: a few KB of MBs), timers are microseconds;
# the lab's shaped links measure 0.93-0.96 of their shaper (docs/bounds.md).
ABOVE_LIMIT_NOISE = 0.05  # the report's meaning of an efficiency: renderers of old reports apply it too


MAX_FINDINGS = 64  # findings of one check a report carries (a check with more says "and N more" in its own words)


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict. `node` is the node rank it is about, or None for a cross-node result. `findings`: when
    the check found several things, each of them as a sentence like the summary (the summary is the first): every
    renderer shows them all, not the first alone (a slow rank and a slow link are two findings)."""

    id: str
    status: Status
    summary: str
    detail: str = ""
    fix: str = ""
    node: Optional[int] = None
    evidence: dict = field(default_factory=dict)
    findings: tuple = ()

    def to_json(self) -> dict:
        out = {
            "id": self.id,
            "status": self.status.value,
            "node": self.node,
            "summary": self.summary,
            "detail": self.detail,
            "fix": self.fix,
            "evidence": self.evidence,
        }
        if self.findings:
            out["findings"] = list(self.findings[:MAX_FINDINGS])
        return out

    @property
    def more(self) -> list:
        """The findings beyond the first (the one the summary says), in order: what a renderer lists under it."""
        return list(self.findings[1:MAX_FINDINGS])

    @classmethod
    def from_json(cls, d: dict, where: str = "") -> CheckResult:
        """From a record another node or a file wrote: every string cleaned (clean_text), every field type-checked;
        ValueError naming the field (prefixed by `where`, e.g. "checks[3].") otherwise."""
        d = _record(d, where)
        status = d.get("status")
        if status not in _STATUS_VALUES:
            raise ValueError(f"{where}status: {status!r:.40} is not one of {', '.join(_STATUS_VALUES)}")
        cid = _text(d, "id", where=where)
        if not cid:
            raise ValueError(f"{where}id: missing")
        return cls(
            id=cid,
            status=Status(status),
            summary=_text(d, "summary", where=where),
            detail=_text(d, "detail", where=where),
            fix=_text(d, "fix", where=where),
            node=_node_rank(d, "node", where),
            evidence=_mapping(d, "evidence", where),
            findings=_texts(d, "findings", where),
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
    def from_json(cls, d: dict, where: str = "") -> Recommendation:
        """From a record another node or a file wrote, cleaned and type-checked like CheckResult.from_json. Whether
        the name may be recommended at all is envnames.env_name_allowed's to say (every shell renderer asks)."""
        d = _record(d, where)
        name = _text(d, "name", where=where)
        if not name:
            raise ValueError(f"{where}name: missing")
        if not isinstance(d.get("value"), str):
            raise ValueError(f"{where}value: expected a string, got {type(d.get('value')).__name__}")
        return cls(name=name, value=_text(d, "value", where=where), reason=_text(d, "reason", where=where),
                   node=_node_rank(d, "node", where))


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
        d = clean_tree(d)
        return cls(
            **{k: d[k] for k in known if k in d},
            extra={k: v for k, v in d.items() if k not in known},
        )


# every launcher a report may name (the schema's world.launcher; "none" besides): agent/launchers.py detects them
LAUNCHERS = ("ncclcheck", "torchrun", "fabric", "slurm", "mpi", "kubernetes", "pytorchjob")


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

    @classmethod
    def from_json(cls, d: dict, where: str = "") -> NodeInfo:
        """From a record another node or a file wrote: hostname and every string of the facts cleaned."""
        d = _record(d, where)
        return cls(_node_rank(d, "node_rank", where, required=True), _text(d, "hostname", "?", where) or "?",
                   _mapping(d, "facts", where))


def overall_status(checks: list[CheckResult]) -> Status:
    """Worst status among checks; skips alone do not make a run fail or warn."""
    worst = Status.PASS
    for c in checks:
        if c.status in (Status.WARN, Status.FAIL) and c.status.rank > worst.rank:
            worst = c.status
    return worst


from .errors import EXIT_INTERRUPTED, EXIT_TERMINATED  # noqa: E402 - written once, in errors.py


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
    interrupted: bool = False  # Ctrl-C or SIGTERM: the partial report is still written, the process exits 130/143
    interrupted_by: str = "Ctrl-C"  # or "SIGTERM" (errors.interruption)
    interrupt_code: int = 130  # the CLI sets 143 for SIGTERM: the report's exit_code is the process's
    # Node 0's word reached this process (a formed world's verdict or outcome, or node 0 saying why the world did not
    # form): node 0's console holds the job's full report. False: none did (the master was never reached, nothing
    # joined), and this process's report is all there is: a node's one line never points at a report nobody wrote.
    node_0_reported: bool = False
    # How far this process could trust what other nodes wrote (rendezvous/trust.py): {"level": token | munge |
    # shared-file | none, "source", "ignored": ["key: why"], "warning"}; None where no store was crossed.
    trust: Optional[dict] = None

    @property
    def status(self) -> Status:
        if self.interrupted:  # a run stopped by Ctrl-C did not do what was asked: never PASS or WARN (issue 24)
            return Status.FAIL
        return overall_status(self.checks)

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return self.interrupt_code
        if self.agreed_exit_code is not None:
            return self.agreed_exit_code
        return exit_code_for(self.status, self.strict)

    def root_cause(self) -> Optional[CheckResult]:
        """The first failing check (checks run in dependency order), like torchrun names the first failure. A
        check whose verdict depends on who joined never fails where the world did not form (it is judged among the
        nodes that joined: checks.local.judged_among_joined), so it cannot outrank the node that never joined."""
        for c in self.checks:
            if c.status is Status.FAIL:
                return c
        return None

    def to_json(self) -> str:
        """The report as JSON text (schema ncclcheck.report/1), as `--json` writes it: indented on a small run; from
        LARGE_FROM_NODES nodes one node, check or recommendation per line (indentation was 40% of the bytes at 1,024
        nodes, and a line per node is what grep and diff want)."""
        import json

        d = self.to_dict()
        if len(self.nodes) < LARGE_FROM_NODES:
            return json.dumps(d, indent=2, sort_keys=False, default=str) + "\n"
        return records_layout(d)

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
        if self.trust is not None:
            d["trust"] = self.trust
        if self.log_path:
            d["log"] = self.log_path
        d.update(self.extra)
        if len(self.nodes) >= LARGE_FROM_NODES:
            share_facts(d)
        return d

    @classmethod
    def from_json(cls, doc: Any) -> Report:
        """Load a saved run (ncclcheck report RUN.json) from its JSON text (or from the dict to_dict gave)."""
        import json

        return cls.from_dict(json.loads(doc) if isinstance(doc, (str, bytes)) else doc)

    @classmethod
    def from_dict(cls, d: Any) -> Report:
        """Load a saved run from its parsed JSON. Unknown top-level keys are kept in `extra`. Every string is
        cleaned (clean_text) and every field type-checked: ValueError naming the field when one is wrong."""
        d = _record(d, "")
        problem = tree_problem(d)
        if problem:
            raise ValueError(problem)
        known = {"schema", "command", "version", "status", "exit_code", "started", "duration_s", "world", "nodes",
                 "checks", "recommendations", "bench", "links", "partial", "log", "shared", "trust"}
        w = _mapping(d, "world")
        duration = d.get("duration_s") or 0.0
        if not isinstance(duration, (int, float)) or isinstance(duration, bool):
            raise ValueError(f"duration_s: expected a number, got {type(duration).__name__}")

        def items(key: str) -> list:
            v = d.get(key)
            if v is None:
                return []
            if not isinstance(v, list):
                raise ValueError(f"{key}: expected an array, got {type(v).__name__}")
            return v

        try:
            world = WorldInfo(**{k: w[k] for k in ("nnodes", "world_size", "backend", "master", "launcher")
                                 if k in w})
        except TypeError as exc:
            raise ValueError(f"world: {exc}") from None
        bench = None
        if d.get("bench") is not None:
            bench = [BenchRow.from_json(_record(r, f"bench[{i}]")) for i, r in enumerate(items("bench"))]
        links = d.get("links")
        if links is not None and not isinstance(links, dict):
            raise ValueError(f"links: expected an object, got {type(links).__name__}")
        checks = [CheckResult.from_json(c, f"checks[{i}].") for i, c in enumerate(items("checks"))]
        trust = _trust(d.get("trust"))
        code = d.get("exit_code")
        interrupted = code in (EXIT_INTERRUPTED, EXIT_TERMINATED)
        return cls(
            command=_text(d, "command", "?"),
            version=_text(d, "version", "?"),
            started=_text(d, "started"),
            duration_s=float(duration),
            world=world,
            nodes=expand_shared([NodeInfo.from_json(n, f"nodes[{i}].") for i, n in enumerate(items("nodes"))],
                                _mapping(d, "shared")),
            checks=checks,
            recommendations=[Recommendation.from_json(r, f"recommendations[{i}].")
                             for i, r in enumerate(items("recommendations"))],
            bench=bench,
            links=clean_tree(links) if links is not None else None,
            partial=bool(d.get("partial")),
            trust=trust,
            log_path=_text(d, "log") or None,
            extra=clean_tree({k: v for k, v in d.items() if k not in known}),
            # A saved run keeps the exit code it had, including --strict and an interrupt.
            strict=code == 1 and overall_status(checks) is Status.WARN,
            interrupted=interrupted,
            interrupt_code=code if interrupted else EXIT_INTERRUPTED,
            interrupted_by="SIGTERM" if code == EXIT_TERMINATED else "Ctrl-C",
        )


TRUST_LEVELS = ("token", "munge", "shared-file", "none")


def _trust(v: Any) -> Optional[dict]:
    """A saved report's `trust`, checked: a level of TRUST_LEVELS, text fields, a list of text."""
    if v is None:
        return None
    if not isinstance(v, dict) or v.get("level") not in TRUST_LEVELS:
        raise ValueError(f"trust: expected an object whose level is one of {', '.join(TRUST_LEVELS)}")
    out: dict = {"level": v["level"]}
    for k in ("source", "warning"):
        if v.get(k) is not None:
            if not isinstance(v[k], str):
                raise ValueError(f"trust.{k}: expected a string, got {type(v[k]).__name__}")
            out[k] = clean_text(v[k])
    ignored = v.get("ignored")
    if ignored is not None:
        if not isinstance(ignored, list) or not all(isinstance(x, str) for x in ignored):
            raise ValueError("trust.ignored: expected an array of strings")
        out["ignored"] = [clean_text(x) for x in ignored]
    return out


# ---------------------------------------------------------------------------------------------------------------
# Facts written once: at 1,024 nodes the same package list (137 names, 3 KB) stood in the report 1,024 times.

LARGE_FROM_NODES = 8  # from this many nodes a report is large: renderers aggregate, the JSON shares repeated facts
SHARE_MIN_BYTES = 64  # a repeated facts group shorter than its reference plus a table entry is left inline
_REF = re.compile(r"^#/shared/facts/([A-Za-z0-9_]+)/(0|[1-9][0-9]{0,8})$")


def share_facts(d: dict) -> None:
    """In a report dict: every facts group (`packages`, `code`, `versions`, ...) whose value is the same on two or more
    nodes and at least SHARE_MIN_BYTES long is written once, in `shared.facts.<group>[i]`, and each node's group
    becomes `{"$ref": "#/shared/facts/<group>/<i>"}` (a JSON Reference: a JSON Pointer into this document).
    Nothing is dropped: expand_shared gives every node's facts back exactly."""
    import json

    nodes = [n for n in d.get("nodes") or [] if isinstance(n.get("facts"), dict)]
    text: dict = {}  # id(value) -> its canonical text: facts read from one place are often one object

    def canon(v: Any) -> str:
        key = id(v)
        if key not in text:
            text[key] = (json.dumps(v, sort_keys=True, separators=(",", ":"), default=str), v)
        return text[key][0]

    seen: dict = {}  # (group, canonical text) -> how many nodes have it
    for n in nodes:
        for k, v in n["facts"].items():
            if isinstance(v, (dict, list)) and not _is_ref(v):
                seen[(k, canon(v))] = seen.get((k, canon(v)), 0) + 1
    slots: dict = {}  # (group, text) -> index in shared.facts[group]
    table: dict = {}
    for n in nodes:
        facts = dict(n["facts"])
        for k, v in facts.items():
            if not isinstance(v, (dict, list)) or _is_ref(v):
                continue
            c = canon(v)
            if seen.get((k, c), 0) < 2 or len(c) < SHARE_MIN_BYTES:
                continue
            if (k, c) not in slots:
                slots[(k, c)] = len(table.setdefault(k, []))
                table[k].append(v)
            facts[k] = {"$ref": f"#/shared/facts/{k}/{slots[(k, c)]}"}
        n["facts"] = facts
    if table:
        d["shared"] = {"facts": table}


def _is_ref(v: Any) -> bool:
    return isinstance(v, dict) and "$ref" in v


def shared_table(shared: Any) -> dict:
    """`shared.facts` of a saved report ({group: [value, ...]}), {} when there is none or it is malformed."""
    table = shared.get("facts") if isinstance(shared, dict) else None
    return table if isinstance(table, dict) else {}


def resolve_facts(facts: dict, table: dict, where: str) -> dict:
    """One node's facts with every `{"$ref": "#/shared/facts/<group>/<i>"}` group replaced by the value it points at
    (the table's own object, not a copy: a small file cannot expand into a huge one). A reference is followed only
    where share_facts writes one (a node's facts group, pointing into the same group) and never inside a shared
    value; ValueError naming the node and group for one that points at nothing."""
    if not any(_is_ref(v) for v in facts.values()):
        return facts
    out = dict(facts)
    for k, v in facts.items():
        if not _is_ref(v):
            continue
        ref = v["$ref"]
        m = _REF.match(ref) if isinstance(ref, str) and len(v) == 1 else None
        slot = table.get(k) if m and m.group(1) == k else None
        if not isinstance(slot, list) or int(m.group(2)) >= len(slot):
            raise ValueError(f"{where}.facts.{k}: {str(ref)!r:.80} is not a reference to an entry of "
                             f"shared.facts.{k}")
        out[k] = slot[int(m.group(2))]
    return out


def expand_shared(nodes: list, shared: dict) -> list:
    """NodeInfo list with every shared facts group resolved (resolve_facts)."""
    table = shared_table(shared)
    return [n if not any(_is_ref(v) for v in n.facts.values())
            else NodeInfo(n.node_rank, n.hostname, resolve_facts(n.facts, table, f"nodes[node_rank={n.node_rank}]"))
            for n in nodes]


def records_layout(d: dict) -> str:
    """A report dict as JSON text with one line per top-level field and one per element of a top-level list (a
    node, a check, a bench row): compact, yet a node's facts are one line to grep or diff."""
    import json

    def one(v: Any) -> str:
        return json.dumps(v, separators=(",", ":"), default=str)

    items = list(d.items())
    lines = ["{"]
    for i, (k, v) in enumerate(items):
        end = "," if i < len(items) - 1 else ""
        if isinstance(v, list) and v:
            lines.append(f"{json.dumps(k)}: [")
            lines.extend(one(x) + ("," if j < len(v) - 1 else "") for j, x in enumerate(v))
            lines.append("]" + end)
        else:
            lines.append(f"{json.dumps(k)}: {one(v)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"
