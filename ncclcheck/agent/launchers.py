"""How this process was launched (torchrun, fabric run, srun, mpirun, Kubernetes, or nothing) and where it sits.

`detect_placement(env, world)` turns an environment mapping into a frozen `Placement`, once per process: everything
below takes that Placement (its master endpoint is the run's one master endpoint). The Slurm host list grammar is in
agent/hostlist.py. Nothing here touches the network or imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from ..config import (
    DEFAULT_MASTER_PORT,
    WorldConfig,
    build_world,
    format_endpoint,
    is_user_origin,
    parse_host,
    parse_int,
    parse_port,
)
from ..envnames import JOB_ID_VARS
from ..errors import UsageError
from ..model import LAUNCHERS  # the names, written once
from ..rendezvous import roles
from .hostlist import expand_nodelist

# Launchers that start every rank themselves (ncclcheck runs in-process as that rank); the others start one
# ncclcheck per node, which spawns the node's ranks (launcher mode).
WORKER_LAUNCHERS = ("torchrun", "fabric", "slurm", "mpi")


@dataclass(frozen=True)
class Placement:
    """Where this process sits.

    In worker mode (launcher torchrun/fabric/slurm/mpi) rank/world_size/local_* are this process's
    torch.distributed coordinates. In launcher mode (ncclcheck, kubernetes, pytorchjob) this process is the node
    agent: rank == node_rank and world_size == nnodes count node agents, local_rank is 0 and local_world_size is the
    requested --nproc-per-node (0 = decide later: one per GPU, or 2 CPU ranks).
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
    job_id: str = "nojob"  # the launcher's id of the job (%j in output paths)
    agent_store: bool = False  # torchrun's agent already hosts the store at the master (TORCHELASTIC_USE_AGENT_STORE)

    @property
    def worker_mode(self) -> bool:
        """A launcher started us as one rank of the job: run in-process as that rank."""
        return self.launcher in WORKER_LAUNCHERS

    @property
    def node_leader(self) -> bool:
        """The process that speaks for its node (collects node facts): LOCAL_RANK 0, or the node agent."""
        return self.local_rank == 0

    @property
    def multi_node(self) -> bool:
        return self.nnodes > 1

    @property
    def master(self) -> Optional[str]:
        """"host:port" as reports show it (None on a standalone run)."""
        return format_endpoint(self.master_addr, self.master_port)

    @property
    def hosts_store(self) -> bool:
        """Does this process host the TCPStore? (rendezvous.roles)"""
        return roles.is_server(self.worker_mode, self.rank, self.node_rank, self.agent_store)

    @property
    def decider(self) -> bool:
        """Does this process decide who joined, the verdict and the exit code? (rendezvous.roles)"""
        return roles.is_decider(self.node_rank, self.node_leader)

    @property
    def prefix(self) -> str:
        """Where this run's records live in the store (rendezvous.roles)."""
        return roles.run_prefix(self.job_id)


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
#
# PRECEDENCE, one rule for every launcher (docs/deploy.md repeats it):
#   1. the launcher's own variables describe the world: rank, world size, local rank and size, node rank, node count,
#      and the master address and port where the launcher exports them (torchrun, fabric run, PyTorchJob);
#   2. a flag or NCCLCHECK_* variable may repeat one of those values; a different value is a usage error that names
#      both (the flag and the launcher's variable), because one of the two is a mistake;
#   3. what the launcher leaves open comes from the flag, then NCCLCHECK_*, then MASTER_ADDR / MASTER_PORT /
#      NODE_RANK, then a derived default (srun: the first host of the step's node list and 15000 + the job id's last
#      four digits; otherwise port 29500).


@dataclass(frozen=True)
class _Told:
    """One value a launcher gave: the value, the variable it came from, and whether it is only derived (rule 3)."""

    value: object
    source: str
    derived: bool = False


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


def _set(env: Mapping[str, str], name: str) -> bool:
    return str(env.get(name) or "").strip() != ""


def _told_int(env: Mapping[str, str], name: str) -> _Told:
    return _Told(_int(env, name), name)


# Variables only torchrun's agent (torch/distributed/elastic/agent/server/local_elastic_agent.py) exports to workers.
TORCHRUN_OWN = ("TORCHELASTIC_RUN_ID", "GROUP_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT")


def detect_launcher(env: Mapping[str, str]) -> str:
    """Which launcher started us. NCCLCHECK_LAUNCHER forces one. torchrun wins over Slurm (torchrun under srun)."""
    forced = (env.get("NCCLCHECK_LAUNCHER") or "").strip().lower()
    if forced:
        if forced not in LAUNCHERS:
            raise UsageError(f"NCCLCHECK_LAUNCHER must be one of {', '.join(LAUNCHERS)}, got {forced!r}")
        return forced
    mpi = _set(env, "OMPI_COMM_WORLD_RANK") and _set(env, "OMPI_COMM_WORLD_SIZE")
    # A batch script also has SLURM_PROCID=0; only an srun step has the SLURM_STEP_* variables.
    slurm = _set(env, "SLURM_PROCID") and any(_set(env, k) for k in ("SLURM_STEP_ID", "SLURM_STEPID",
                                                                    "SLURM_STEP_NUM_TASKS"))
    if all(_set(env, k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        # torchrun's agent always exports its own variables beside these. Without them, under an srun step or
        # mpirun, the script copied SLURM_PROCID / OMPI_COMM_WORLD_RANK into RANK itself (a common recipe before
        # init_process_group): the launcher is still srun or mpirun, which knows the nodes; read as torchrun
        # without LOCAL_WORLD_SIZE it made every rank a node (6 nodes for 3 hosts x 2 tasks, 3 never joining).
        if any(_set(env, k) for k in TORCHRUN_OWN) or not (mpi or slurm):
            # `fabric run` is torchrun underneath; it marks the processes it starts with LT_CLI_USED=1.
            return "fabric" if str(env.get("LT_CLI_USED", "")).strip() == "1" else "torchrun"
    if mpi:
        return "mpi"
    if slurm:
        return "slurm"
    if _set(env, "PET_NNODES") or _set(env, "PET_NODE_RANK"):
        return "pytorchjob"
    if _set(env, "JOB_COMPLETION_INDEX"):
        return "kubernetes"
    return "ncclcheck"


_LOCAL_RANK_VAR = {"torchrun": "LOCAL_RANK", "fabric": "LOCAL_RANK", "mpi": "OMPI_COMM_WORLD_LOCAL_RANK",
                   "slurm": "SLURM_LOCALID"}


def speaks_for_node(env: Mapping[str, str]) -> bool:
    """Whether this process says what went wrong before any report exists (a usage error, Ctrl-C): a launcher's
    local rank 0, or a process no launcher started. The other ranks of a node would only repeat it, once per GPU."""
    try:
        var = _LOCAL_RANK_VAR.get(detect_launcher(env))
        return var is None or _int(env, var, 0) == 0
    except UsageError:  # a launcher's variable is malformed: better every rank says so than none
        return True


def job_id(env: Mapping[str, str]) -> str:
    """The launcher's id of this job (%j in output paths, the store's key prefix): the same on every process."""
    for name in JOB_ID_VARS:
        v = str(env.get(name) or "").strip()
        if v and v != "none":  # torchrun's static rendezvous calls every run "none"
            return "".join(c if c.isalnum() or c in "._-" else "_" for c in v)
    return "nojob"


def _torchrun(env: Mapping[str, str]) -> dict:
    size = _int(env, "WORLD_SIZE")
    local_size = _int(env, "LOCAL_WORLD_SIZE", 1)
    told = {"rank": _told_int(env, "RANK"), "world_size": _Told(size, "WORLD_SIZE"),
            "local_rank": _told_int(env, "LOCAL_RANK"), "local_world_size": _Told(local_size, "LOCAL_WORLD_SIZE")}
    # Nodes may run different numbers of ranks (torchrun allows it), so the node count and this node's rank come from
    # the agent (GROUP_*; under c10d rendezvous the rendezvous assigned them), never from rank // LOCAL_WORLD_SIZE.
    if _set(env, "GROUP_WORLD_SIZE"):
        told["nnodes"] = _told_int(env, "GROUP_WORLD_SIZE")
    elif size % max(1, local_size) == 0:
        told["nnodes"] = _Told(size // max(1, local_size), "WORLD_SIZE/LOCAL_WORLD_SIZE", derived=True)
    else:
        raise UsageError(f"WORLD_SIZE={size} is not a multiple of LOCAL_WORLD_SIZE={local_size} and GROUP_WORLD_SIZE "
                         "is not set: cannot tell how many nodes there are")
    for name in ("GROUP_RANK", "NODE_RANK"):
        if _set(env, name):
            told["node_rank"] = _told_int(env, name)
            break
    else:
        told["node_rank"] = _Told(told["rank"].value // max(1, local_size), "RANK//LOCAL_WORLD_SIZE", derived=True)
    # Under c10d rendezvous (TORCHELASTIC_USE_AGENT_STORE=True) these point at rank 0's agent store.
    return _told_master(env, told, "MASTER_ADDR", "MASTER_PORT")


def _told_master(env: Mapping[str, str], told: dict, addr_var: str, port_var: str) -> dict:
    """The master the launcher names in addr_var/port_var, when it names one (each value tagged with its variable)."""
    if _set(env, addr_var):
        told["master_addr"] = _Told(parse_host(env[addr_var], addr_var), addr_var)
    if _set(env, port_var):
        told["master_port"] = _Told(parse_port(env[port_var], port_var), port_var)
    return told


def _mpi(env: Mapping[str, str]) -> dict:
    size = _int(env, "OMPI_COMM_WORLD_SIZE")
    local_size = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1)
    rank = _int(env, "OMPI_COMM_WORLD_RANK")
    if size % max(1, local_size):
        raise UsageError(f"mpirun placed {local_size} of {size} ranks on this node, not the same number on every "
                         "node: use --map-by ppr:N:node (Open MPI does not say which node a rank is on otherwise)")
    # mpirun's default mapping fills a node before the next (--map-by slot / ppr:N:node): node = rank // per node.
    return {"rank": _Told(rank, "OMPI_COMM_WORLD_RANK"), "world_size": _Told(size, "OMPI_COMM_WORLD_SIZE"),
            "local_rank": _Told(_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0), "OMPI_COMM_WORLD_LOCAL_RANK"),
            "local_world_size": _Told(local_size, "OMPI_COMM_WORLD_LOCAL_SIZE"),
            "nnodes": _Told(size // max(1, local_size), "OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_LOCAL_SIZE"),
            "node_rank": _Told(rank // max(1, local_size), "OMPI_COMM_WORLD_RANK//OMPI_COMM_WORLD_LOCAL_SIZE")}


def _slurm(env: Mapping[str, str]) -> dict:
    size_var = "SLURM_STEP_NUM_TASKS" if _set(env, "SLURM_STEP_NUM_TASKS") else "SLURM_NTASKS"
    told = {"rank": _told_int(env, "SLURM_PROCID"), "world_size": _Told(_int(env, size_var, 1), size_var),
            "local_rank": _Told(_int(env, "SLURM_LOCALID", 0), "SLURM_LOCALID"),
            "node_rank": _Told(_int(env, "SLURM_NODEID", 0), "SLURM_NODEID")}
    list_var = next((v for v in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST") if _set(env, v)), "")
    try:
        hosts = expand_nodelist(env.get(list_var, "") if list_var else "")
    except ValueError as e:
        raise UsageError(f"cannot read the Slurm host list {list_var}: {e}") from None
    nodes_var = next((v for v in ("SLURM_STEP_NUM_NODES", "SLURM_NNODES") if _set(env, v)), "")
    told["nnodes"] = _told_int(env, nodes_var) if nodes_var else _Told(len(hosts) or 1, list_var or "default")
    node = told["node_rank"].value
    per_var = next((v for v in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE") if _set(env, v)), "")
    local_size = 0
    if per_var:
        try:
            counts = parse_tasks_per_node(env[per_var])
        except ValueError as e:
            raise UsageError(f"{per_var}: {e}") from None
        local_size = counts[node] if node < len(counts) else counts[0] if len(counts) == 1 else 0
    if local_size:
        told["local_world_size"] = _Told(local_size, per_var)
    else:
        told["local_world_size"] = _Told(max(1, told["world_size"].value // max(1, told["nnodes"].value)),
                                         f"{size_var}/{nodes_var or 'nodes'}", derived=True)
    if hosts:
        told["master_addr"] = _Told(hosts[0], f"the first host of {list_var}", derived=True)
    told["master_port"] = _Told(slurm_default_port(env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")),
                                "15000 + the Slurm job id's last four digits", derived=True)
    return told


def _pytorchjob(env: Mapping[str, str]) -> dict:
    """Kubeflow's PyTorchJob exports torchrun's arguments as PET_*; each pod then runs one ncclcheck node agent."""
    told: dict = {}
    if _set(env, "PET_NNODES"):
        raw = env["PET_NNODES"].strip()
        lo, _, hi = raw.partition(":")
        if hi and lo != hi:
            raise UsageError(f"PET_NNODES={raw} is an elastic range; ncclcheck needs a fixed node count: --nnodes N")
        told["nnodes"] = _Told(parse_int(lo, "PET_NNODES", 1), "PET_NNODES")
    if _set(env, "PET_NODE_RANK"):
        told["node_rank"] = _Told(parse_int(env["PET_NODE_RANK"], "PET_NODE_RANK", 0), "PET_NODE_RANK")
    nproc = str(env.get("PET_NPROC_PER_NODE") or "").strip()
    if nproc and nproc not in ("auto", "gpu", "cpu"):
        told["local_world_size"] = _Told(parse_int(nproc, "PET_NPROC_PER_NODE", 1, 1024), "PET_NPROC_PER_NODE")
    return _told_master(env, told, "PET_MASTER_ADDR", "PET_MASTER_PORT")


def _kubernetes(env: Mapping[str, str]) -> dict:
    """An Indexed Job gives each pod its index; the node count and master come from flags (--nnodes = completions)."""
    return {"node_rank": _Told(parse_int(env["JOB_COMPLETION_INDEX"], "JOB_COMPLETION_INDEX", 0),
                               "JOB_COMPLETION_INDEX")}


_READERS = {"torchrun": _torchrun, "fabric": _torchrun, "mpi": _mpi, "slurm": _slurm, "pytorchjob": _pytorchjob,
            "kubernetes": _kubernetes}
# WorldConfig field -> Placement field it must agree with.
_USER_FIELDS = {"nnodes": "nnodes", "node_rank": "node_rank", "nproc_per_node": "local_world_size",
                "master_addr": "master_addr", "master_port": "master_port"}


def _named(source: str, value: object) -> str:
    """'--nnodes 2' for a flag, 'GROUP_WORLD_SIZE=3' for a variable, 'the first host of X (h1)' for a derivation."""
    if source.startswith("--"):
        return f"{source} {value}"
    if source.replace("_", "").isalnum() and source.upper() == source:
        return f"{source}={value}"
    return f"{value} ({source})"


def _reconcile(launcher: str, told: dict, world: WorldConfig) -> dict:
    """Rules 2 and 3: the user's values against the launcher's; returns field -> _Told with every field decided."""
    out = dict(told)
    default = WorldConfig()
    for wf, pf in _USER_FIELDS.items():
        # A WorldConfig built in code (the Python API) has no origins: its non-default values count as flags.
        src = world.origin.get(wf) or ("--" + wf.replace("_", "-") if getattr(world, wf) != getattr(default, wf)
                                       else "")
        if not src:
            continue
        mine = getattr(world, wf)
        theirs = told.get(pf)
        if theirs is None or theirs.derived:
            out[pf] = _Told(mine, src)
        elif is_user_origin(src) and mine != theirs.value:
            raise UsageError(f"{_named(src, mine)} contradicts {launcher}'s {_named(theirs.source, theirs.value)}: "
                             f"drop the flag or start {launcher} with the same value")
    return out


def _worker(launcher: str, t: dict, env: Mapping[str, str]) -> Placement:
    v = {k: x.value for k, x in t.items()}
    if not 0 <= v["rank"] < v["world_size"]:
        raise UsageError(f"{launcher}: rank {v['rank']} ({t['rank'].source}) is out of range for world size "
                         f"{v['world_size']} ({t['world_size'].source})")
    if not 0 <= v["local_rank"] < max(1, v["local_world_size"]) or v["local_world_size"] > v["world_size"]:
        raise UsageError(f"{launcher}: local rank {v['local_rank']} of {v['local_world_size']} does not fit a world "
                         f"of {v['world_size']}")
    if not 0 <= v["node_rank"] < v["nnodes"]:
        raise UsageError(f"{launcher}: node rank {_named(t['node_rank'].source, v['node_rank'])} is out of range "
                         f"for {_named(t['nnodes'].source, v['nnodes'])} node(s)")
    addr = v.get("master_addr")
    if v["nnodes"] > 1 and not addr:
        if launcher == "mpi":
            raise UsageError("under mpirun, ncclcheck needs the address of rank 0's host: "
                             "mpirun -x MASTER_ADDR=<host of rank 0> -x MASTER_PORT=29500 ncclcheck ...")
        raise UsageError(f"{launcher}: MASTER_ADDR is not set, so ncclcheck cannot find rank 0's host")
    port = v.get("master_port") or (DEFAULT_MASTER_PORT if addr else None)
    return Placement(v["rank"], v["world_size"], v["local_rank"], v["local_world_size"], v["node_rank"], v["nnodes"],
                     addr, port, launcher, job_id(env), agent_store=_agent_store(launcher, env))


def _agent(launcher: str, t: dict, world: WorldConfig, env: Mapping[str, str]) -> Placement:
    """Launcher mode: this process is its node's agent and spawns the node's ranks itself."""
    nnodes = t["nnodes"] if "nnodes" in t else _Told(world.nnodes, "--nnodes", derived=True)
    node = t["node_rank"] if "node_rank" in t else _Told(world.node_rank, "--node-rank")
    if not 0 <= node.value < nnodes.value:
        raise UsageError(f"{_named(node.source, node.value)} is out of range for {_named(nnodes.source, nnodes.value)}"
                         f"{' (the default)' if nnodes.derived else ''} (valid node ranks: 0..{nnodes.value - 1})")
    addr = t["master_addr"].value if "master_addr" in t else None
    port = t["master_port"].value if "master_port" in t else None
    if nnodes.value > 1 and not addr:
        raise UsageError(f"{_named(nnodes.source, nnodes.value)} needs --master-addr (or MASTER_ADDR): the address "
                         "of node rank 0")
    local = t["local_world_size"].value if "local_world_size" in t else (world.nproc_per_node or 0)
    return Placement(rank=node.value, world_size=nnodes.value, local_rank=0, local_world_size=local,
                     node_rank=node.value, nnodes=nnodes.value, master_addr=addr,
                     master_port=port or (DEFAULT_MASTER_PORT if addr else None), launcher=launcher,
                     job_id=job_id(env))


def _agent_store(launcher: str, env: Mapping[str, str]) -> bool:
    """Under torchrun the agent already hosts the store at MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE)."""
    return launcher in ("torchrun", "fabric") and \
        str(env.get("TORCHELASTIC_USE_AGENT_STORE", "")).strip().lower() == "true"


def detect_placement(env: Mapping[str, str], world: Optional[WorldConfig] = None) -> Placement:
    """The placement of this process under the precedence rule above. Raises UsageError (exit 2) when the launcher's
    variables are inconsistent or a flag contradicts them."""
    world = world if world is not None else build_world(env=env)
    launcher = detect_launcher(env)
    told = _READERS[launcher](env) if launcher in _READERS else {}
    told = _reconcile(launcher, told, world)
    if launcher in WORKER_LAUNCHERS:
        return _worker(launcher, told, env)
    return _agent(launcher, told, world, env)


def store_host(placement: Placement) -> str:
    """Where the process that hosts the store listens: the master address when it is one of this host's (so the
    store is reachable exactly where the other nodes were told to connect), else every address."""
    from ..facts.net import is_local_address

    addr = placement.master_addr
    return addr if addr and is_local_address(addr) else "0.0.0.0"
