"""Typed configuration, built once from argv + environment. Everything below the CLI takes these dataclasses.

Flag values fall back to NCCLCHECK_* variables and then to the variables torchrun and friends use
(MASTER_ADDR, MASTER_PORT, NODE_RANK...), so `ncclcheck preflight` inside a job script needs no flags.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from .errors import UsageError

DEFAULT_MASTER_PORT = 29500
DEFAULT_TIMEOUT_S = 60.0
BACKENDS = ("auto", "nccl", "gloo")


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
    rounds: str = "auto"  # auto | full | quick | scale (auto: full below 16 nodes, scale from 16)
    min_gbps: Optional[float] = None
    relative: float = 0.5  # a link below this fraction of the median is slow


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


def env_fallback(env: Mapping[str, str], *names: str) -> Optional[str]:
    """First non-empty value among names (NCCLCHECK_X first by convention)."""
    for n in names:
        v = env.get(n)
        if v is not None and v.strip() != "":
            return v.strip()
    return None


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
    n = parse_int(nnodes if nnodes is not None else env_fallback(env, "NCCLCHECK_NNODES"), "--nnodes", 1, 100000)
    n = n or 1
    r = parse_int(
        node_rank if node_rank is not None else env_fallback(env, "NCCLCHECK_NODE_RANK", "NODE_RANK", "GROUP_RANK"),
        "--node-rank",
        0,
    )
    r = r or 0
    if r >= n:
        raise UsageError(f"--node-rank {r} is out of range for --nnodes {n} (valid: 0..{n - 1})")
    nproc_raw = nproc_per_node if nproc_per_node is not None else env_fallback(env, "NCCLCHECK_NPROC_PER_NODE")
    nproc = None
    if nproc_raw is not None and nproc_raw not in ("auto", "gpu"):
        nproc = parse_int(nproc_raw, "--nproc-per-node", 1, 1024)
    addr = master_addr if master_addr is not None else env_fallback(env, "NCCLCHECK_MASTER_ADDR", "MASTER_ADDR")
    if addr is not None:
        addr = addr.strip()
        if not addr or any(c.isspace() for c in addr) or "/" in addr:
            raise UsageError(f"--master-addr {addr!r} is not a host name or address")
    port = parse_int(
        master_port if master_port is not None else env_fallback(env, "NCCLCHECK_MASTER_PORT", "MASTER_PORT"),
        "--master-port",
        1,
        65535,
    )
    if n > 1 and addr is None:
        raise UsageError("--nnodes > 1 needs --master-addr (or MASTER_ADDR): the address of node rank 0")
    if addr is not None and port is None:
        port = DEFAULT_MASTER_PORT
    be = (backend if backend is not None else env_fallback(env, "NCCLCHECK_BACKEND")) or "auto"
    if be not in BACKENDS:
        raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, got {be!r}")
    t = parse_float(timeout if timeout is not None else env_fallback(env, "NCCLCHECK_TIMEOUT"), "--timeout")
    return WorldConfig(
        nnodes=n,
        node_rank=r,
        nproc_per_node=nproc,
        master_addr=addr,
        master_port=port,
        backend=be,
        timeout_s=t if t is not None else DEFAULT_TIMEOUT_S,
    )
