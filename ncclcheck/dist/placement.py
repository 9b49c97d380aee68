"""How this process was launched (torchrun, Slurm srun, Open MPI, or nothing) and where it sits in the world.

`detect_placement(env, world)` turns an environment mapping into a frozen `Placement`. The Slurm compressed host list
syntax (`gpu[01-04,07]`, `a[1-2],b3`, `n[001-003]-ib`, `r[1-2]-n[01-02]`) is expanded here too, because the master
of an srun job is the first host of SLURM_JOB_NODELIST. Nothing here touches the network or imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from ..config import DEFAULT_MASTER_PORT, WorldConfig
from ..errors import UsageError

LAUNCHERS = ("ncclcheck", "torchrun", "slurm", "mpi")


@dataclass(frozen=True)
class Placement:
    """Where this process sits.

    In worker mode (launcher torchrun/slurm/mpi) rank/world_size/local_* are this process's torch.distributed
    coordinates. In launcher mode (launcher "ncclcheck") this process is the node agent: rank == node_rank and
    world_size == nnodes count node agents, local_rank is 0 and local_world_size is the requested
    --nproc-per-node (0 = decide later: one per GPU, or 2 CPU ranks).
    """

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    nnodes: int
    master_addr: Optional[str]
    master_port: Optional[int]
    launcher: str = "ncclcheck"

    @property
    def worker_mode(self) -> bool:
        """A launcher started us as one rank of the job: run in-process as that rank."""
        return self.launcher != "ncclcheck"

    @property
    def node_leader(self) -> bool:
        """The process that speaks for its node (collects node facts): LOCAL_RANK 0, or the node agent."""
        return self.local_rank == 0

    @property
    def multi_node(self) -> bool:
        return self.nnodes > 1


# ---------------------------------------------------------------------------------------------------------------
# Slurm host lists


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    parts.append("".join(cur))
    return parts


def _expand_range_list(body: str, whole: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"empty range in host list {whole!r}")
        if "-" in item:
            lo_s, _, hi_s = item.partition("-")
            if not (lo_s.isdigit() and hi_s.isdigit()):
                raise ValueError(f"bad range {item!r} in host list {whole!r}")
            lo, hi = int(lo_s), int(hi_s)
            if hi < lo:
                raise ValueError(f"descending range {item!r} in host list {whole!r}")
            if hi - lo > 100000:
                raise ValueError(f"range {item!r} in host list {whole!r} is implausibly large")
            width = len(lo_s)  # Slurm pads to the width of the lower bound: [08-10] -> 08 09 10, [8-10] -> 8 9 10
            out.extend(f"{n:0{width}d}" for n in range(lo, hi + 1))
        else:
            if not item.isdigit():
                raise ValueError(f"bad number {item!r} in host list {whole!r}")
            out.append(item)
    return out


def _expand_one(pattern: str, whole: str) -> list[str]:
    """Cartesian expansion of every bracket group in one host pattern: r[1-2]-n[1-2] -> r1-n1 r1-n2 r2-n1 r2-n2."""
    start = pattern.find("[")
    if start < 0:
        if "]" in pattern:
            raise ValueError(f"unbalanced ']' in host list {whole!r}")
        return [pattern]
    end = pattern.find("]", start)
    if end < 0:
        raise ValueError(f"unbalanced '[' in host list {whole!r}")
    prefix, body, rest = pattern[:start], pattern[start + 1 : end], pattern[end + 1 :]
    if "[" in body:
        raise ValueError(f"nested brackets in host list {whole!r}")
    tails = _expand_one(rest, whole)
    return [prefix + n + t for n in _expand_range_list(body, whole) for t in tails]


def expand_nodelist(text: str) -> list[str]:
    """Expand a Slurm host list ('gpu[01-04,07],cpu1') into host names, in order. Raises ValueError when malformed."""
    text = (text or "").strip()
    if not text:
        return []
    hosts: list[str] = []
    for part in _split_top(text):
        part = part.strip()
        if not part:
            raise ValueError(f"empty host in host list {text!r}")
        hosts.extend(_expand_one(part, text))
    return hosts


_LAST_NUM = re.compile(r"^(.*?)(\d+)(\D*)$")


def compress_nodelist(hosts: list[str]) -> str:
    """The inverse of expand_nodelist for lists of plain host names (order kept, runs of adjacent numbers merged)."""
    groups: list[tuple[str, str, list[list[str]]]] = []  # (prefix, suffix, [[first, last], ...])
    for h in hosts:
        m = _LAST_NUM.match(h)
        if not m:
            groups.append((h, "", []))
            continue
        prefix, digits, suffix = m.groups()
        if groups and groups[-1][2] and groups[-1][0] == prefix and groups[-1][1] == suffix:
            runs = groups[-1][2]
            first, last = runs[-1]
            if int(digits) == int(last) + 1 and f"{int(digits):0{len(first)}d}" == digits:
                runs[-1][1] = digits
            else:
                runs.append([digits, digits])
        else:
            groups.append((prefix, suffix, [[digits, digits]]))
    out = []
    for prefix, suffix, runs in groups:
        if not runs:
            out.append(prefix)
        elif len(runs) == 1 and runs[0][0] == runs[0][1]:
            out.append(prefix + runs[0][0] + suffix)
        else:
            body = ",".join(a if a == b else f"{a}-{b}" for a, b in runs)
            out.append(f"{prefix}[{body}]{suffix}")
    return ",".join(out)


def parse_tasks_per_node(text: str) -> list[int]:
    """SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE ('2(x3),1') -> per-node task counts [2, 2, 2, 1]."""
    counts: list[int] = []
    for item in (text or "").split(","):
        item = item.strip()
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item)
        if not m:
            raise ValueError(f"bad tasks-per-node value {text!r}")
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
    return counts


def slurm_default_port(job_id: Optional[str]) -> int:
    """A port every task of one Slurm job derives alike: 15000 + the job id's last four digits (Lightning's rule)."""
    digits = "".join(c for c in (job_id or "") if c.isdigit())
    if not digits:
        return DEFAULT_MASTER_PORT
    return 15000 + int(digits[-4:])


# ---------------------------------------------------------------------------------------------------------------
# Detection


def _int(env: Mapping[str, str], name: str, default: Optional[int] = None) -> int:
    raw = env.get(name)
    if raw is None or str(raw).strip() == "":
        if default is None:
            raise UsageError(f"{name} is not set")
        return default
    try:
        return int(str(raw).strip())
    except ValueError:
        raise UsageError(f"{name} must be an integer, got {raw!r}") from None


def _port(raw: Optional[str], what: str) -> Optional[int]:
    if raw is None or str(raw).strip() == "":
        return None
    try:
        p = int(str(raw).strip())
    except ValueError:
        raise UsageError(f"{what} must be a port number, got {raw!r}") from None
    if not 1 <= p <= 65535:
        raise UsageError(f"{what} must be 1..65535, got {p}")
    return p


def detect_launcher(env: Mapping[str, str]) -> str:
    """Which launcher started us. NCCLCHECK_LAUNCHER forces one. torchrun wins over Slurm (torchrun under srun)."""
    forced = (env.get("NCCLCHECK_LAUNCHER") or "").strip().lower()
    if forced:
        if forced not in LAUNCHERS:
            raise UsageError(f"NCCLCHECK_LAUNCHER must be one of {', '.join(LAUNCHERS)}, got {forced!r}")
        return forced
    if all(env.get(k) not in (None, "") for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        return "torchrun"
    if env.get("OMPI_COMM_WORLD_RANK") not in (None, "") and env.get("OMPI_COMM_WORLD_SIZE") not in (None, ""):
        return "mpi"
    # A batch script also has SLURM_PROCID=0; only an srun step has the SLURM_STEP_* variables.
    if env.get("SLURM_PROCID") not in (None, "") and any(
        env.get(k) not in (None, "") for k in ("SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS")
    ):
        return "slurm"
    return "ncclcheck"


def _torchrun(env: Mapping[str, str], world: Optional[WorldConfig]) -> Placement:
    rank, size, local = _int(env, "RANK"), _int(env, "WORLD_SIZE"), _int(env, "LOCAL_RANK")
    local_size = _int(env, "LOCAL_WORLD_SIZE", 1)
    nnodes = _int(env, "GROUP_WORLD_SIZE", max(1, size // max(1, local_size)))
    node = _int(env, "GROUP_RANK", _int(env, "NODE_RANK", rank // max(1, local_size)))
    addr = env.get("MASTER_ADDR") or (world.master_addr if world else None)
    port = _port(env.get("MASTER_PORT"), "MASTER_PORT") or (world.master_port if world else None)
    return Placement(rank, size, local, local_size, node, nnodes, addr, port, "torchrun")


def _mpi(env: Mapping[str, str], world: Optional[WorldConfig]) -> Placement:
    rank, size = _int(env, "OMPI_COMM_WORLD_RANK"), _int(env, "OMPI_COMM_WORLD_SIZE")
    local = _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0)
    local_size = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1)
    # mpirun's default mapping fills a node before the next (--map-by slot), so node = rank // ranks-per-node.
    nnodes = max(1, -(-size // max(1, local_size)))
    node = rank // max(1, local_size)
    addr = (world.master_addr if world else None) or env.get("MASTER_ADDR")
    if not addr:
        raise UsageError(
            "under mpirun, ncclcheck needs the address of rank 0's host: "
            "mpirun -x MASTER_ADDR=<host of rank 0> -x MASTER_PORT=29500 ncclcheck ..."
        )
    port = (world.master_port if world else None) or _port(env.get("MASTER_PORT"), "MASTER_PORT") or DEFAULT_MASTER_PORT
    return Placement(rank, size, local, local_size, node, nnodes, addr, port, "mpi")


def _slurm(env: Mapping[str, str], world: Optional[WorldConfig]) -> Placement:
    rank = _int(env, "SLURM_PROCID")
    size = _int(env, "SLURM_STEP_NUM_TASKS", _int(env, "SLURM_NTASKS", 1))
    local = _int(env, "SLURM_LOCALID", 0)
    node = _int(env, "SLURM_NODEID", 0)
    nodelist_raw = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    try:
        hosts = expand_nodelist(nodelist_raw)
    except ValueError as e:
        raise UsageError(f"cannot read the Slurm host list: {e}") from None
    nnodes = _int(env, "SLURM_STEP_NUM_NODES", _int(env, "SLURM_NNODES", len(hosts) or 1))
    per_node_raw = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_NTASKS_PER_NODE") or ""
    local_size = 0
    if per_node_raw:
        try:
            counts = parse_tasks_per_node(per_node_raw)
        except ValueError as e:
            raise UsageError(str(e)) from None
        local_size = counts[node] if node < len(counts) else counts[0] if len(counts) == 1 else 0
    if not local_size:
        local_size = max(1, size // max(1, nnodes))
    addr = (world.master_addr if world else None) or env.get("MASTER_ADDR") or (hosts[0] if hosts else None)
    if not addr:
        raise UsageError("under srun, SLURM_JOB_NODELIST is empty and MASTER_ADDR is not set: cannot find rank 0")
    port = (world.master_port if world else None) or _port(env.get("MASTER_PORT"), "MASTER_PORT")
    if port is None:
        port = slurm_default_port(env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"))
    return Placement(rank, size, local, local_size, node, nnodes, addr, port, "slurm")


def _launcher_mode(world: Optional[WorldConfig]) -> Placement:
    w = world or WorldConfig()
    return Placement(
        rank=w.node_rank,
        world_size=w.nnodes,
        local_rank=0,
        local_world_size=w.nproc_per_node or 0,
        node_rank=w.node_rank,
        nnodes=w.nnodes,
        master_addr=w.master_addr,
        master_port=w.master_port,
        launcher="ncclcheck",
    )


def detect_placement(env: Mapping[str, str], world: Optional[WorldConfig] = None) -> Placement:
    """The placement of this process. Raises UsageError (exit 2) when the launcher's variables are inconsistent."""
    launcher = detect_launcher(env)
    if launcher == "torchrun":
        p = _torchrun(env, world)
    elif launcher == "mpi":
        p = _mpi(env, world)
    elif launcher == "slurm":
        p = _slurm(env, world)
    else:
        return _launcher_mode(world)
    if not 0 <= p.rank < p.world_size:
        raise UsageError(f"{launcher}: rank {p.rank} is out of range for world size {p.world_size}")
    if not 0 <= p.node_rank < p.nnodes:
        raise UsageError(f"{launcher}: node rank {p.node_rank} is out of range for {p.nnodes} nodes")
    if p.multi_node and not p.master_addr:
        raise UsageError(f"{launcher}: MASTER_ADDR is not set, so ncclcheck cannot find rank 0's host")
    return p
