"""Typed configuration, built once from argv + environment. Everything below the CLI takes these dataclasses.

Flag values fall back to NCCLCHECK_* variables and then to the variables torchrun and friends use
(MASTER_ADDR, MASTER_PORT, NODE_RANK...), so `ncclcheck preflight` inside a job script needs no flags.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from .errors import UsageError

DEFAULT_MASTER_PORT = 29500
DEFAULT_TIMEOUT_S = 60.0
BACKENDS = ("auto", "nccl", "gloo")


# The waits --timeout bounds, by name: each may last at most T before its cause is named (DESIGN.md: a hang bound).
PHASES = ("master_probe", "join", "exchange", "mesh", "collective", "final")
# The one table of waits whose length does not depend on --timeout (seconds), and why each is what it is.
FIXED_BOUNDS_S = {
    "connect_attempt": 2.0,  # one TCP connect of a probe; a healthy LAN answers in milliseconds
    "join_grace": 1.0,  # after every rank joined, node 0 listens this long for a duplicate node rank
    "verdict_grace": 5.0,  # beyond T, for node 0's verdict to reach a node that joined late in node 0's window
    "final_agreement": 15.0,  # node 0 waits for every member to read the agreed exit code
    "collect": 10.0,  # after the local ranks ended, for the results of ranks on other nodes
    "kill_grace": 3.0,  # SIGTERM -> SIGKILL for a rank that must be stopped
    "stall_grace": 2.0,  # beyond a job step's bound (its collectives x T) before the agent calls a silent world hung
    "rank_start": 60.0,  # a spawned rank's start (a new Python, torch's import) before it joins; then the join has T
}


@dataclass(frozen=True)
class Budget:
    """--timeout parsed once, when the process starts: T bounds each named phase's wait; the rest are fixed.

    A sweep (bench, links) is not a wait: it runs as long as its work needs, while each collective in it is bounded
    by T ("collective"), and a collective that does not complete within T is a hang the report names.
    """

    timeout_s: float = DEFAULT_TIMEOUT_S
    started: float = field(default_factory=time.monotonic)  # time.monotonic() when the process started

    def bound(self, phase: str) -> float:
        """Seconds the wait named `phase` may last (a PHASES name: T; else the fixed table)."""
        if phase in PHASES:
            return self.timeout_s
        try:
            return FIXED_BOUNDS_S[phase]
        except KeyError:
            raise ValueError(f"unknown budget phase {phase!r}") from None

    def deadline(self, phase: str, since: Optional[float] = None) -> float:
        """time.monotonic() by which the wait `phase`, begun at `since` (default: now), must end."""
        return (time.monotonic() if since is None else since) + self.bound(phase)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


@dataclass(frozen=True)
class WorldConfig:
    nnodes: int = 1
    node_rank: int = 0
    nproc_per_node: Optional[int] = None  # None: one per GPU, or 2 CPU ranks on a machine with none
    master_addr: Optional[str] = None  # None on a standalone run: loopback with a free port
    master_port: Optional[int] = None
    backend: str = "auto"
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def multi_node(self) -> bool:
        return self.nnodes > 1


@dataclass(frozen=True)
class OutputConfig:
    json_path: Optional[str] = None  # "-" = stdout
    quiet: bool = False
    strict: bool = False
    html: Optional[str] = None
    junit: Optional[str] = None
    markdown: Optional[str] = None
    env_out: Optional[str] = None
    prometheus: Optional[str] = None  # Prometheus text exposition (node_exporter textfile collector)
    format: str = "text"  # report --format: text | labels (kubectl commands for node labels and taints)


@dataclass(frozen=True)
class BenchConfig:
    sizes: tuple = (1 << 20,)
    ops: tuple = ("all_reduce",)
    dtype: str = "float32"
    iters: int = 20
    warmup: int = 5
    in_place: bool = False
    check: bool = False
    min_busbw_gbps: Optional[float] = None
    gate_size: Optional[int] = None
    baseline: Optional[str] = None
    tolerance: float = 0.1
    save_baseline: Optional[str] = None


@dataclass(frozen=True)
class LinksConfig:
    size: int = 64 << 20
    iters: int = 5
    rounds: str = "full"  # full | quick
    min_gbps: Optional[float] = None
    relative: float = 0.5  # a link below this fraction of the median is slow


@dataclass(frozen=True)
class BaselineConfig:
    """preflight/links --baseline (a saved known-good run), --tolerance (links) and --save-baseline."""

    path: Optional[str] = None
    save: Optional[str] = None
    tolerance: float = 0.1


@dataclass(frozen=True)
class NcclDiagConfig:
    """NCCL's own diagnostics: saved `ncclras -f json` output and NCCL_DEBUG captures (preflight), and capturing the
    debug log plus topology/graph dumps on a GPU bench run."""

    ras: Optional[str] = None
    debug: tuple = ()
    capture: bool = False


@dataclass(frozen=True)
class Config:
    command: str
    world: WorldConfig = field(default_factory=WorldConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    code_path: Optional[str] = None  # None: the working directory
    paths: tuple = ()
    recommend_format: str = "text"  # text | env | json
    report_input: Optional[str] = None
    bench: Optional[BenchConfig] = None
    links: Optional[LinksConfig] = None
    baseline: Optional[BaselineConfig] = None  # preflight and links; bench has its own in BenchConfig
    nccl_diag: Optional[NcclDiagConfig] = None
    budget: Optional[Budget] = None  # None: built from world.timeout_s when the Config is made

    def __post_init__(self) -> None:
        if self.budget is None:
            object.__setattr__(self, "budget", Budget(self.world.timeout_s))


def env_fallback(env: Mapping[str, str], *names: str) -> Optional[str]:
    """First non-empty value among names (NCCLCHECK_X first by convention)."""
    for n in names:
        v = env.get(n)
        if v is not None and v.strip() != "":
            return v.strip()
    return None


def pick(flag_value: Optional[str], flag: str, env: Mapping[str, str], *names: str) -> tuple[Optional[str], str]:
    """(value, what to call it in an error): the flag when given, else the first set variable, named as such, so
    `MASTER_PORT=abc` is reported as MASTER_PORT, not as a bad --master-port."""
    if flag_value is not None:
        return flag_value, flag
    for n in names:
        v = env.get(n)
        if v is not None and v.strip() != "":
            return v.strip(), f"{n} (environment)"
    return None, flag


def parse_int(value: Optional[str], what: str, lo: Optional[int] = None, hi: Optional[int] = None) -> Optional[int]:
    if value is None:
        return None
    try:
        n = int(str(value).strip())
    except ValueError:
        raise UsageError(f"{what} must be an integer, got {value!r}") from None
    if lo is not None and n < lo:
        raise UsageError(f"{what} must be >= {lo}, got {n}")
    if hi is not None and n > hi:
        raise UsageError(f"{what} must be <= {hi}, got {n}")
    return n


def parse_float(value: Optional[str], what: str, positive: bool = True) -> Optional[float]:
    if value is None:
        return None
    try:
        x = float(str(value).strip())
    except ValueError:
        raise UsageError(f"{what} must be a number, got {value!r}") from None
    if x != x or x in (float("inf"), float("-inf")) or (positive and x <= 0):
        raise UsageError(f"{what} must be a positive number, got {value!r}")
    return x


def build_world(
    nnodes: Optional[str] = None,
    node_rank: Optional[str] = None,
    nproc_per_node: Optional[str] = None,
    master_addr: Optional[str] = None,
    master_port: Optional[str] = None,
    backend: Optional[str] = None,
    timeout: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
) -> WorldConfig:
    """Flags first, then NCCLCHECK_*, then the launcher-standard names. Raises UsageError on bad values."""
    env = os.environ if env is None else env
    v, what = pick(nnodes, "--nnodes", env, "NCCLCHECK_NNODES")
    n = parse_int(v, what, 1, 100000) or 1
    v, what = pick(node_rank, "--node-rank", env, "NCCLCHECK_NODE_RANK", "NODE_RANK", "GROUP_RANK")
    r = parse_int(v, what, 0) or 0
    if r >= n:
        raise UsageError(f"{what} {r} is out of range for --nnodes {n} (valid: 0..{n - 1})")
    nproc_raw, what = pick(nproc_per_node, "--nproc-per-node", env, "NCCLCHECK_NPROC_PER_NODE")
    nproc = None
    if nproc_raw is not None and nproc_raw not in ("auto", "gpu"):
        nproc = parse_int(nproc_raw, what, 1, 1024)
    addr, what = pick(master_addr, "--master-addr", env, "NCCLCHECK_MASTER_ADDR", "MASTER_ADDR")
    if addr is not None:
        addr = addr.strip()
        if not addr or any(c.isspace() for c in addr) or "/" in addr:
            raise UsageError(f"{what} {addr!r} is not a host name or address")
    v, what = pick(master_port, "--master-port", env, "NCCLCHECK_MASTER_PORT", "MASTER_PORT")
    port = parse_int(v, what, 1, 65535)
    if n > 1 and addr is None:
        raise UsageError("--nnodes > 1 needs --master-addr (or MASTER_ADDR): the address of node rank 0")
    if addr is not None and port is None:
        port = DEFAULT_MASTER_PORT
    be, what = pick(backend, "--backend", env, "NCCLCHECK_BACKEND")
    be = be or "auto"
    if be not in BACKENDS:
        raise UsageError(f"{what} must be one of {', '.join(BACKENDS)}, got {be!r}")
    v, what = pick(timeout, "--timeout", env, "NCCLCHECK_TIMEOUT")
    t = parse_float(v, what)
    return WorldConfig(
        nnodes=n,
        node_rank=r,
        nproc_per_node=nproc,
        master_addr=addr,
        master_port=port,
        backend=be,
        timeout_s=t if t is not None else DEFAULT_TIMEOUT_S,
    )


def format_endpoint(addr: Optional[str], port: Optional[int]) -> Optional[str]:
    """"host:port" as reports show it ("[v6]:port" for an IPv6 literal); None without an address."""
    if not addr:
        return None
    host = f"[{addr}]" if ":" in addr and not addr.startswith("[") else addr
    return f"{host}:{port}" if port is not None else host
