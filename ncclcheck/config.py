"""Typed configuration, built once from argv + environment. Everything below the CLI takes these dataclasses.

Flag values fall back to NCCLCHECK_* variables and then to MASTER_ADDR, MASTER_PORT and NODE_RANK; a launcher's own
world (torchrun, fabric run, srun, mpirun, Kubernetes) is read and reconciled with these in agent/launchers.py, so
`ncclcheck preflight` inside a job script needs no flags.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from .errors import UsageError

DEFAULT_MASTER_PORT = 29500
BACKENDS = ("auto", "nccl", "gloo")
# Ranks per node when --nproc-per-node is not given; the CLI's help says these numbers (options._world_flags).
CPU_RANKS_DEFAULT = 2  # bench, links, sweep on a machine without GPUs (with GPUs: one rank per GPU)
# preflight and recommend start no ranks: one process per node checks it, and gpu.count and the report's world size
# count this many ranks per node unless told the job's (a launcher's local world size, or --nproc-per-node).
CHECK_RANKS_DEFAULT = 1


@dataclass(frozen=True)
class WorldConfig:
    nnodes: int = 1
    node_rank: int = 0
    nproc_per_node: Optional[int] = None  # None: one per GPU, or 2 CPU ranks on a machine with none
    master_addr: Optional[str] = None  # None on a standalone run: loopback with a free port
    master_port: Optional[int] = None
    backend: str = "auto"
    timeout_s: Optional[float] = None  # --timeout, stored here once (None: the default in rendezvous/budget.py)
    # The job's shared secret (NCCLCHECK_TOKEN or --token-file): every store value is signed with it (never shown).
    token: Optional[bytes] = field(default=None, repr=False, compare=False, hash=False)
    token_source: str = ""  # where the token came from ("NCCLCHECK_TOKEN", "--token-file /path"): never its value
    token_warning: str = ""  # a token file that others can read: said in the report's trust line and the log
    # NCCLCHECK_TRUST: "auto" (a token, else munge under Slurm), "shared-file" (also a --shared-dir file),
    # "none" (a token only)
    trust: str = "auto"
    # Where each world value came from ("--nnodes", "NCCLCHECK_NNODES", "NODE_RANK"...); a value absent here is a
    # default. agent.launchers compares the user's values with a launcher's world and names both when they disagree.
    origin: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def multi_node(self) -> bool:
        return self.nnodes > 1


@dataclass(frozen=True)
class OutputConfig:
    # Output files by format name (render/formats.py: json, html, junit, markdown, env_out, prometheus) -> path;
    # "-" is stdout for the formats that may go there.
    files: Mapping[str, str] = field(default_factory=dict, hash=False)
    quiet: bool = False
    print_all: bool = False  # every process prints its full report (default: global rank 0 only, others one line)
    verbose: bool = False  # every check's row on the console (default: passes counted, skips one row per reason)
    strict: bool = False
    format: str = "text"  # report --format: text | labels (kubectl commands for node labels and taints)

    @property
    def json_path(self) -> Optional[str]:
        return self.files.get("json")


@dataclass(frozen=True)
class DiagnoseConfig:
    """`diagnose PATH...`: what a failed job left, and optionally the preflight report that ties ranks to hosts."""

    paths: tuple = ()
    preflight: Optional[str] = None


@dataclass(frozen=True)
class WatchConfig:
    """`watch`: where to keep what was fetched (diagnose DIR reads it), and whether to follow the job's progress."""

    dump_dir: Optional[str] = None
    follow: bool = False


@dataclass(frozen=True)
class BenchConfig:
    """`ncclcheck bench`'s sweep: these defaults are the CLI's and the Python API's alike (its help shows them)."""

    sizes: tuple = tuple(1 << k for k in range(20, 27))  # 1M-64M, doubling
    ops: tuple = ("all_reduce", "all_gather")
    dtype: str = "float32"
    iters: int = 20
    warmup: int = 5
    in_place: bool = False
    check: bool = False
    min_busbw_gbps: Optional[float] = None
    min_efficiency: Optional[float] = None  # gate: busbw / the bound of the links crossed (bench/efficiency.py)
    gate_size: Optional[int] = None
    baseline: Optional[str] = None
    tolerance: float = 0.1
    save_baseline: Optional[str] = None
    timing: str = "auto"  # --timing: bench/timing.py's TIMINGS (auto | graph | eager)


@dataclass(frozen=True)
class LinksConfig:
    """`ncclcheck links`: the one place its defaults live (the CLI's help, the API and links/job.py read them)."""

    size: int = 64 << 20
    iters: int = 5
    rounds: str = "auto"  # auto | full | quick | scale (auto: full below 16 nodes, scale from 16)
    min_gbps: Optional[float] = None
    min_efficiency: Optional[float] = None  # gate: every pair's GB/s / the bound of its two ends
    relative: float = 0.5  # a link below this fraction of the median is slow
    seed: int = 0  # quick/scale modes: which random pairing is measured (vary it across runs to cover other pairs)
    min_time_s: Optional[float] = None  # --min-time: each direction timed at least this long; None: the Budget's


@dataclass(frozen=True)
class StorageConfig:
    """preflight --shared-dir (repeatable: directories every node must see as one writable filesystem) and --need
    (bytes each node's view of them must have free, e.g. a checkpoint's size)."""

    dirs: tuple = ()
    need_bytes: Optional[int] = None


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
class SlurmActionConfig:
    """What health/sweep may do to Slurm: --drain (drain failing nodes, resume ncclcheck's own drains after a clean
    run) or --dry-run (print the scontrol commands instead of running them); neither: only report."""

    drain: bool = False
    dry_run: bool = False

    @property
    def acts(self) -> bool:
        return self.drain or self.dry_run


@dataclass(frozen=True)
class HealthConfig:
    """`ncclcheck health`: node-local expectations (None: not checked) and the Slurm node it speaks for."""

    node: Optional[str] = None  # the Slurm node name: --node, else SLURMD_NODENAME, else the hostname
    gpus: Optional[int] = None  # expected GPUs: --gpus, else the node's Gres from `scontrol show node`
    ifname: Optional[str] = None  # the NCCL interface(s), NCCL_SOCKET_IFNAME syntax; None: NCCL's own choice
    mtu: Optional[int] = None
    min_speed_mbps: Optional[int] = None
    ib_rate_gbps: Optional[float] = None
    timeout_s: Optional[float] = None  # None: rendezvous/budget.py's health_timeout_s
    slurm: SlurmActionConfig = field(default_factory=SlurmActionConfig)


@dataclass(frozen=True)
class HardwareConfig:
    """What the GPU hardware checks read and expect (preflight, health, env: docs/hardware.md)."""

    xid_window_s: Optional[float] = None  # --xid-window HOURS: the kernel log's Xids of the last N hours; None: boot
    mig: Optional[bool] = False  # --mig on|off|any: the MIG mode every GPU should have (None: either)
    prolog: bool = False  # --prolog, or Slurm's SLURM_SCRIPT_CONTEXT=prolog_slurmd: any GPU process is a leftover
    host_copy: bool = False  # preflight --gpu: measure host<->device copies (torch, pinned memory)


@dataclass(frozen=True)
class SweepConfig:
    """`ncclcheck sweep`: the allocation's node names (SLURM_STEP_NODELIST / SLURM_JOB_NODELIST, as Slurm wrote
    it: node rank i is its i-th name) and what to do with the verdicts."""

    nodelist: Optional[str] = None
    slurm: SlurmActionConfig = field(default_factory=SlurmActionConfig)
    good_out: Optional[str] = None  # file for the good nodes' hostlist (`sbatch -w "$(cat FILE)"`)
    bad_out: Optional[str] = None  # file for the bad nodes' hostlist (`sbatch --exclude "$(cat FILE)"`)


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
    health: Optional[HealthConfig] = None
    sweep: Optional[SweepConfig] = None
    diagnose: Optional[DiagnoseConfig] = None
    watch: Optional[WatchConfig] = None
    postmortem_dir: Optional[str] = None  # recommend --postmortem DIR: arm the job so its failure can be diagnosed
    storage: StorageConfig = field(default_factory=StorageConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)


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


def parse_fraction(value: Optional[str], what: str) -> Optional[float]:
    """A fraction in (0, 1] (--min-efficiency 0.8); UsageError otherwise."""
    x = parse_float(value, what)
    if x is not None and x > 1:
        raise UsageError(f"{what} is a fraction of the bound: 0.8 means 80%, got {value!r}")
    return x


def parse_port(value: Optional[str], what: str) -> Optional[int]:
    """A TCP port 1..65535 (None stays None). The one port parser: flags, MASTER_PORT, PET_MASTER_PORT, endpoints."""
    return parse_int(value, what, 1, 65535)


def parse_host(value: Optional[str], what: str) -> Optional[str]:
    """A host name or address (None stays None); '[v6]' loses its brackets."""
    if value is None:
        return None
    host = str(value).strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or any(c.isspace() for c in host) or "/" in host:
        raise UsageError(f"{what} {value!r} is not a host name or address")
    # a DNS name is at most 253 ASCII characters (an IDN is written in punycode); a non-UTF-8 argument arrives as
    # surrogates, which no resolver takes
    if len(host) > 253 or not host.isascii() or not host.isprintable():
        raise UsageError(f"{what} {ascii(value)[:80]}: not a host name or address (at most 253 printable ASCII "
                         "characters)")
    return host


def parse_endpoint(value: str, what: str) -> tuple[str, Optional[int]]:
    """'host', 'host:port', '[v6addr]:port' or a bare IPv6 address -> (host, port or None)."""
    text = str(value).strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise UsageError(f"{what} {value!r} is not host:port")
        return parse_host(host, what), parse_port(rest[1:], f"the port in {what} {value!r}") if rest else None
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return parse_host(host, what), parse_port(port, f"the port in {what} {value!r}")
    return parse_host(text, what), None


def _pick(flag_value: Optional[str], flag: str, env: Mapping[str, str], *names: str) -> tuple[Optional[str], str]:
    """(value, where it came from): the flag, else the first non-empty variable among names."""
    if flag_value is not None:
        return flag_value, flag
    for n in names:
        v = env_fallback(env, n)
        if v is not None:
            return v, n
    return None, ""


def is_user_origin(origin: str) -> bool:
    """A value the user chose for ncclcheck (a flag or an NCCLCHECK_* variable), not one a launcher exported."""
    return origin.startswith("--") or origin.startswith("NCCLCHECK_")


def build_world(
    nnodes: Optional[str] = None,
    node_rank: Optional[str] = None,
    nproc_per_node: Optional[str] = None,
    master_addr: Optional[str] = None,
    master_port: Optional[str] = None,
    backend: Optional[str] = None,
    timeout: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    token_file: Optional[str] = None,
) -> WorldConfig:
    """Each value: the flag, then NCCLCHECK_*, then the launcher-standard name (MASTER_ADDR, MASTER_PORT, NODE_RANK).

    Only single values are checked here. Whether node rank, node count and master agree with each other and with a
    launcher that started us is decided in one place, agent.launchers.detect_placement, which knows the launcher.
    Raises UsageError on bad values.
    """
    env = os.environ if env is None else env
    origin: dict[str, str] = {}
    raw, src = _pick(nnodes, "--nnodes", env, "NCCLCHECK_NNODES")
    n = parse_int(raw, _what(src), 1, 100000)
    if n is not None:
        origin["nnodes"] = src
    raw, src = _pick(node_rank, "--node-rank", env, "NCCLCHECK_NODE_RANK", "NODE_RANK")
    r = parse_int(raw, _what(src), 0)
    if r is not None:
        origin["node_rank"] = src
    raw, src = _pick(nproc_per_node, "--nproc-per-node", env, "NCCLCHECK_NPROC_PER_NODE")
    nproc = None
    if raw is not None and raw not in ("auto", "gpu"):
        nproc = parse_int(raw, _what(src), 1, 1024)
        origin["nproc_per_node"] = src
    raw, addr_src = _pick(master_addr, "--master-addr", env, "NCCLCHECK_MASTER_ADDR", "MASTER_ADDR")
    # host or host:port, like torchrun's --rdzv-endpoint: 'h1:29500' is a name that would never resolve otherwise
    addr, addr_port = parse_endpoint(raw, _what(addr_src)) if raw is not None else (None, None)
    if addr is not None:
        origin["master_addr"] = addr_src
    raw, src = _pick(master_port, "--master-port", env, "NCCLCHECK_MASTER_PORT", "MASTER_PORT")
    port = parse_port(raw, _what(src))
    if addr_port is not None and port is not None and port != addr_port:
        raise UsageError(f"{_what(addr_src)} names port {addr_port} but {_what(src)} is {port}: give the port once")
    if port is None and addr_port is not None:
        port, src = addr_port, addr_src
    if port is not None:
        origin["master_port"] = src
    be, src = _pick(backend, "--backend", env, "NCCLCHECK_BACKEND")
    be, what = be or "auto", _what(src)
    if be not in BACKENDS:
        raise UsageError(f"{what} must be one of {', '.join(BACKENDS)}, got {be!r}")
    raw, src = _pick(timeout, "--timeout", env, "NCCLCHECK_TIMEOUT")
    t = parse_float(raw, _what(src))
    token, token_source, token_warning = read_token(token_file, env)
    trust = (env.get("NCCLCHECK_TRUST") or "auto").strip() or "auto"
    if trust not in TRUST_MODES:
        raise UsageError(f"NCCLCHECK_TRUST (environment) must be one of {', '.join(TRUST_MODES)}, got {trust!r}")
    return WorldConfig(
        nnodes=n or 1,
        node_rank=r or 0,
        nproc_per_node=nproc,
        master_addr=addr,
        master_port=port,
        backend=be,
        timeout_s=t,
        token=token,
        token_source=token_source,
        token_warning=token_warning,
        trust=trust,
        origin=origin,
    )


K8S_TOKEN_FILE = "/var/run/secrets/ncclcheck/token"  # a Secret mounted where docs/trust.md shows, used when present
TOKEN_FILE_MAX = 4096  # a token is one line of a few dozen characters; a bigger first line is not a token file
TRUST_MODES = ("auto", "shared-file", "none")


def read_token(token_file: Optional[str], env: Mapping[str, str],
               k8s_file: str = K8S_TOKEN_FILE) -> tuple[Optional[bytes], str, str]:
    """(token, where it came from, a warning): the first line of --token-file / NCCLCHECK_TOKEN_FILE, else
    NCCLCHECK_TOKEN (stripped), else the first line of a Kubernetes Secret mounted at K8S_TOKEN_FILE; (None, "", "")
    without one. Every node must be given the same one (docs/trust.md says how under each launcher)."""
    raw, src = _pick(token_file, "--token-file", env, "NCCLCHECK_TOKEN_FILE")
    if raw is None:
        value = env.get("NCCLCHECK_TOKEN")
        if value is not None and value != "":
            tok = value.strip()
            if not tok:
                raise UsageError("NCCLCHECK_TOKEN (environment) is only whitespace: set the job's token, or unset it")
            return tok.encode(), "NCCLCHECK_TOKEN", ""
        if not os.path.exists(k8s_file):
            return None, "", ""
        raw, src = k8s_file, "the mounted Secret"
    try:
        with open(raw, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            line = f.readline(TOKEN_FILE_MAX + 1)
    except OSError as exc:
        raise UsageError(f"{_what(src)} {raw}: cannot read it ({exc.strerror or exc})") from None
    if len(line) > TOKEN_FILE_MAX and not line.endswith(b"\n"):
        raise UsageError(f"{_what(src)} {raw}: its first line is over {TOKEN_FILE_MAX} bytes: not a token file")
    tok = line.strip()
    if not tok:
        raise UsageError(f"{_what(src)} {raw}: its first line is empty")
    warning = ""
    if mode & 0o077 and not (src == "the mounted Secret"):
        warning = (f"the token file {raw} can be read by other users (mode {oct(mode & 0o777)}): chmod 600 it and "
                   "make a new token")
    return tok, f"{src} {raw}" if src != "the mounted Secret" else f"the Secret mounted at {raw}", warning


def format_endpoint(addr: Optional[str], port: Optional[int]) -> Optional[str]:
    """"host:port" as reports show it ("[v6]:port" for an IPv6 literal); None without an address."""
    if not addr:
        return None
    host = f"[{addr}]" if ":" in addr and not addr.startswith("[") else addr
    return f"{host}:{port}" if port is not None else host


def _what(origin: str) -> str:
    """How an error names a value: the flag itself, or the variable it came from."""
    return origin if origin.startswith("--") else f"{origin} (environment)"
