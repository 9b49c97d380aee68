"""The job runner bench and links use: form a torch.distributed process group in any launch mode and run a job on it.

    outcome = run_job(world_config, placement, job_fn, payload)   # job_fn(ctx: WorkerContext, payload) -> dict

- standalone launcher mode (--nnodes 1): spawns nproc_per_node local workers (one per GPU, 2 CPU ranks without
  one) over loopback with a free port;
- multi-node launcher mode: node 0's agent hosts a TCPStore at MASTER_ADDR:MASTER_PORT, every agent spawns its local
  workers with global rank node_rank * nproc + local_rank;
- worker mode (torchrun/srun/mpirun started us): the job runs in this process as that rank.
Results and `ctx.emit` records go through the store as JSON as soon as they exist, so a worker that crashes or hangs
loses nothing it already emitted; each collective is bounded by --timeout (the process group's timeout), and a
world that emits nothing for longer than one job step's bound is hung: its ranks are killed and named. job_fn must be a
function at the top level of an importable module: spawned ranks import it by name (agent/handoff.py).

Local ranks are fresh interpreters running this module's own entry point (`python -c` + _spawned_main), not
multiprocessing's spawn: spawn re-imports the caller's __main__ in every child, which re-runs a plain script's top
level (no `if __name__ == "__main__":` guard) and cannot import `<stdin>` (a heredoc, `python -i`), so the Python API
failed there. The child gets the parent's sys.path, its spec, the job's "module:qualname" and the payload as one bounded
JSON document on its stdin (agent/handoff.py), validated on read: never a pickle, even from our own parent.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import signal
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..config import CPU_RANKS_DEFAULT, WorldConfig
from ..errors import first_line, interruption
from ..facts.gpu import usable_gpu_count
from ..rendezvous import agree as _agree
from ..rendezvous.budget import Budget
from ..rendezvous.journal import Journal
from ..rendezvous.store import Guard, JsonStore, Limits, StoreLost, open_store
from .context import NullObserver, WorkerContext, load_torch
from .handoff import MAX_BYTES, Handoff, HandoffError, decode, read_path
from .launchers import Placement, store_host
from .relay import StoreObserver, relay

log = logging.getLogger(__name__)
MAX_EMITS = 1 << 20  # partial results of one job (bench rows, links pairs): far more than any sweep makes


@dataclass
class JobOutcome:
    """What every rank returned, what was emitted on the way, and which ranks failed (rank + one-line reason)."""

    world_size: int
    backend: str
    results: dict = field(default_factory=dict)  # global rank -> job_fn's dict
    emitted: list = field(default_factory=list)  # [{"rank", "kind", "data"}] in arrival order
    failures: list = field(default_factory=list)  # [{"rank", "reason"}]
    interrupted: bool = False  # Ctrl-C reached the agent: its ranks were stopped; `emitted` holds what they made
    interrupted_by: str = "Ctrl-C"  # or "SIGTERM" (errors.interruption)
    decided: bool = False  # the decider (node 0) published its outcome: this process is the decider or read it

    @property
    def ok(self) -> bool:
        return not self.failures and len(self.results) == self.world_size


def gpu_count() -> int:
    """GPUs torch can use here: the runner spawns one rank per GPU."""
    return usable_gpu_count(load_torch)


def resolve_backend(requested: str, gpus: int, nproc: int) -> str:
    """auto -> nccl when every local rank gets a GPU, else gloo."""
    if requested in ("nccl", "gloo"):
        return requested
    return "nccl" if gpus >= nproc > 0 else "gloo"


def _emit_record(v: Any) -> Optional[str]:
    if not isinstance(v, dict) or type(v.get("rank")) is not int or not isinstance(v.get("kind"), str) \
            or not isinstance(v.get("data"), dict):
        return "not an emit record {rank, kind, data}"
    return None


def emits(st: JsonStore) -> Journal:
    """The `emit` journal: partial results as they are made, readable even if their rank dies later."""
    return Journal(st, "emit", MAX_EMITS, _emit_record)


def _emitter(st: JsonStore, rank: int) -> Callable[[str, dict], None]:
    journal = emits(st)

    def emit(kind: str, data: dict) -> None:
        journal.append({"rank": rank, "kind": kind, "data": data})

    return emit


def _run_rank(spec: dict, st: JsonStore, job_fn: Callable, payload: dict, observer: Any = None) -> None:
    """Init the process group on this rank (bounded), run the job, publish its result or its error."""
    import torch.distributed as dist

    rank = spec["rank"]
    try:
        # Each collective's hang bound is T: a sweep runs as long as its work needs.
        budget: Budget = spec["budget"]
        timeout = _dt.timedelta(seconds=budget.collective_s)
        device = "cpu"
        if spec["backend"] == "nccl":
            import torch

            torch.cuda.set_device(spec["local_rank"])
            device = f"cuda:{spec['local_rank']}"
        pg_store = dist.PrefixStore(st.prefix + "pg/", st.raw)
        dist.init_process_group(spec["backend"], store=pg_store, rank=rank, world_size=spec["world_size"],
                                timeout=timeout)
        st.add(f"ready/{spec['node_rank']}", 1)  # the agent's hang watch starts from here, not from the spawn
        try:
            ctx = WorkerContext(
                rank=rank, world_size=spec["world_size"], local_rank=spec["local_rank"],
                local_world_size=spec["local_world_size"], node_rank=spec["node_rank"], nnodes=spec["nnodes"],
                backend=spec["backend"], device=device, budget=budget, store=st,
                observer=observer if (observer is not None and rank == 0) else NullObserver(),
                emit=_emitter(st, rank), log_dir=spec.get("log_dir"),
            )
            result = job_fn(ctx, payload)
        finally:
            dist.destroy_process_group()
        st.set(f"result/{rank}", result if isinstance(result, dict) else {"value": result})
    except Exception as exc:  # noqa: BLE001 - reported as this rank's failure, with the traceback in the log
        log.debug("rank %s failed:\n%s", rank, traceback.format_exc())
        try:
            st.set(f"error/{rank}", {"reason": first_line(exc)})
        except StoreLost:
            pass
        raise


def worker_env(backend: str, extra: Optional[dict] = None, inherited: Optional[dict] = None) -> dict:
    """Variables a spawned worker needs before torch and NCCL initialise (they read them once, at init).

    On NCCL, TORCH_NCCL_ASYNC_ERROR_HANDLING=2 (clean up only): a failed or timed-out communicator is aborted and the
    error reaches our code, which names it, instead of tearing the process down. A value the user set wins."""
    env = dict(extra or {})
    if backend == "nccl" and "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in (inherited or {}):
        env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2")
    return env


def _worker_main(spec: dict, job_fn: Callable, payload: dict) -> None:
    """Entry point of a spawned local worker."""
    # The one place a worker's environment is written: this process is new and torch is not initialised yet.
    os.environ.update(spec.get("env") or {})
    # Ctrl-C to the process group is the agent's to handle (partial report, exit 130): no traceback from a rank.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if spec.get("log_path"):
        logging.basicConfig(filename=spec["log_path"], level=logging.DEBUG)
    try:
        budget: Budget = spec["budget"]
        st = open_store(spec["host"], spec["port"], False, budget.join_s, spec["prefix"], _guard(spec))
        # Rank 0 has no terminal of its own: its progress goes through the store to the agent's (agent/relay.py).
        _run_rank(spec, st, job_fn, payload, StoreObserver(st) if spec.get("progress") else None)
    except Exception:  # noqa: BLE001 - the agent reads error/<rank> and the exit code
        os._exit(1)
    os._exit(0)


def _result(v: Any) -> Optional[str]:
    return None if isinstance(v, dict) else "not a job result (a JSON object)"


def _error(v: Any) -> Optional[str]:
    return None if isinstance(v, dict) and isinstance(v.get("reason"), str) else "not an error record {reason}"


def _collect(st: JsonStore, world_size: int, deadline: float, budget: Budget) -> JobOutcome:
    out = JobOutcome(world_size=world_size, backend="")
    for r in range(world_size):
        v = st.wait_get(f"result/{r}", deadline, budget, _result)
        if v is not None:
            out.results[r] = v
        else:
            err = st.get_now(f"error/{r}", _error)
            if err is not None:
                out.failures.append({"rank": r, "reason": err["reason"]})
    out.emitted.extend(v for _, v in emits(st).read_since())
    return out


def _outcome_record(v: Any) -> Optional[str]:
    if not isinstance(v, dict) or not isinstance(v.get("results"), list) or type(v.get("world_size")) is not int:
        return "not a job outcome"
    if not all(isinstance(x, list) and len(x) == 2 and type(x[0]) is int and isinstance(x[1], dict)
               for x in v["results"]):
        return "a job outcome whose results are not [rank, result] pairs"
    if not all(isinstance(f, dict) and type(f.get("rank")) is int and isinstance(f.get("reason"), str)
               for f in v.get("failures") or []) or not all(_emit_record(e) is None for e in v.get("emitted") or []):
        return "a job outcome with malformed failures or emits"
    return None


def agree(st: JsonStore, out: JobOutcome, decider: bool, budget: Budget) -> JobOutcome:
    """Every process builds its report from the same outcome: the decider's (node 0 / global rank 0), so every
    process of the world exits with the same code. Without the store, or past a bounded wait, keep our own; an
    outcome that names fewer failures than our own is not adopted (a stranger must not make a run look healthy)."""
    try:
        if decider:
            _agree.publish(st, "job/outcome", {
                "world_size": out.world_size, "backend": out.backend, "emitted": out.emitted,
                "results": [[r, v] for r, v in sorted(out.results.items())], "failures": out.failures,
                "interrupted": out.interrupted})
            out.decided = True
            return out
        v = _agree.adopt(st, "job/outcome", budget.deadline(budget.final_agreement_s), budget, _outcome_record)
    except StoreLost:
        return out
    if v is None or (out.failures and not v.get("failures")) or v["world_size"] != out.world_size:
        out.decided = v is not None and v["world_size"] == out.world_size  # read (node 0 ran), not adopted
        return out
    return JobOutcome(world_size=out.world_size, backend=str(v.get("backend") or out.backend),
                      results={r: x for r, x in v["results"] if 0 <= r < out.world_size},
                      emitted=list(v.get("emitted") or []), failures=list(v.get("failures") or []),
                      interrupted=bool(v.get("interrupted")) or out.interrupted, decided=True)


def _watch(procs: dict, st: JsonStore, stall_s: float, node: int, start_s: float,
           budget: Budget) -> tuple[list, Optional[str]]:
    """Wait while local ranks run; (the ranks to stop, why) once the world emitted nothing for stall_s (hung: why
    is None), or once a local rank died before the world formed; ([], None) when every rank ended.

    A sweep has no overall deadline (it runs as long as its work needs): each collective is bounded by the process
    group's timeout, and this watch is the backstop for a rank stuck outside one. Until every local rank has joined
    its process group, starting (a new Python, torch's import, the join) has its own bound, start_s. A local rank
    that died before every local rank joined means the world can never form: the others (waiting in their first
    collective for it) are stopped after a short grace instead of the start bound."""
    last_count, last_change = -1, budget.now()
    died_at: Optional[float] = None
    while any(p.is_alive() for p in procs.values()):
        try:
            ready = st.add(f"ready/{node}", 0)
            count = st.add("emit/count", 0) + ready
        except StoreLost:
            ready, count = len(procs), last_count
        now = budget.now()
        if died_at is None and ready < len(procs) and any(p.exitcode not in (None, 0) for p in procs.values()):
            died_at = now
        if count != last_count:
            last_count, last_change = count, now
        elif not budget.within(last_change, stall_s if ready >= len(procs) else start_s):
            return [r for r, p in procs.items() if p.is_alive()], None
        if died_at is not None and not budget.within(died_at, budget.kill_grace_s):
            dead = ", ".join(str(r) for r, p in procs.items() if p.exitcode not in (None, 0))
            return [r for r, p in procs.items() if p.is_alive()], f"stopped: rank {dead} exited before the world formed"
        for p in procs.values():
            p.join(budget.watch_slice_s(len(procs)))
    return [], None


@dataclass
class _LocalWorld:
    """This node's share of a launcher-mode world: where the store is, who we are, what we spawn."""

    host: str
    port: int
    server: bool
    node: int
    nnodes: int
    nproc: int
    backend: str
    log_path: Optional[str]
    prefix: str = "ncclcheck/job/"

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc

    @property
    def standalone(self) -> bool:
        return self.nnodes == 1


def _guard(spec: dict) -> Guard:
    return Guard(token=spec.get("token"), limits=Limits.for_nodes(spec["nnodes"]))


def _local_world(world_config: WorldConfig, placement: Placement, log_dir: Optional[str]) -> _LocalWorld:
    gpus = gpu_count()
    nproc = world_config.nproc_per_node or placement.local_world_size or gpus or CPU_RANKS_DEFAULT
    standalone = placement.nnodes == 1
    return _LocalWorld(
        host="127.0.0.1" if standalone else placement.master_addr,
        # A standalone store's front binds port 0 and says which port it got (set after open_store): a port picked
        # here and released could be handed to the store's own loopback server, or anyone, before the front binds it.
        port=0 if standalone else placement.master_port,
        server=standalone or placement.node_rank == 0, node=placement.node_rank, nnodes=placement.nnodes,
        nproc=nproc, backend=resolve_backend(world_config.backend, gpus, nproc),
        log_path=os.path.join(log_dir, f"job.node{placement.node_rank}.log") if log_dir else None)


# The child's whole program: import this very ncclcheck (the folder that holds it is argv[1]; an editable install or
# PYTHONPATH must not swap in another copy), then _spawned_main reads its description. Nothing here imports the
# caller's __main__, and nothing is unpickled.
_CHILD_CODE = ("import sys; sys.path.insert(0, sys.argv[1]); "
               "from ncclcheck.agent.runner import _spawned_main; _spawned_main()")
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class SpawnError(RuntimeError):
    """This Python cannot start a fresh interpreter for the ranks (no sys.executable, e.g. an embedded one), or the
    job cannot be handed to one (agent/handoff.py: not importable by name, a payload that is not JSON)."""


class _Rank:
    """One local rank: a fresh interpreter. Answers what _watch/_stop ask of a process (is_alive, exitcode, join,
    terminate, kill), like multiprocessing.Process."""

    def __init__(self, spec: dict, handoff: Handoff) -> None:
        exe = sys.executable
        if not exe or not os.path.isfile(exe):
            raise SpawnError("cannot start local ranks: this Python has no usable sys.executable "
                             f"({exe!r}); run ncclcheck from a regular python, or start ranks with torchrun")
        try:
            blob = handoff.for_rank(spec)
        except HandoffError as exc:
            raise SpawnError(str(exc)) from None
        self._p = subprocess.Popen([exe, "-c", _CHILD_CODE, _PACKAGE_ROOT], stdin=subprocess.PIPE, close_fds=True)
        try:
            self._p.stdin.write(blob)
            self._p.stdin.close()
        except (BrokenPipeError, OSError):  # died before reading: its exit code says so
            pass

    @property
    def exitcode(self) -> Optional[int]:
        return self._p.poll()

    def is_alive(self) -> bool:
        return self._p.poll() is None

    def join(self, timeout: Optional[float] = None) -> None:
        try:
            self._p.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def terminate(self) -> None:
        if self.is_alive():
            self._p.terminate()

    def kill(self) -> None:
        if self.is_alive():
            self._p.kill()


def _spawned_main() -> None:
    """Entry point of a local rank's fresh interpreter (see _CHILD_CODE): a description that is not one is refused
    in one line on stderr (exit 2, which the agent names), never a traceback."""
    data = sys.stdin.buffer.read(MAX_BYTES + 1)
    sys.stdin = open(os.devnull)  # the pipe is spent; a rank reads nothing from the user's terminal
    path = read_path(data)
    if path is not None:  # before the job's module is imported: it may live beside the caller's script
        sys.path[:] = path
    try:
        spec, job_fn, payload = decode(data)
    except HandoffError as exc:
        sys.stderr.write(f"ncclcheck: local rank refused its job description: {exc}\n")
        sys.stderr.flush()
        os._exit(2)
    _worker_main(spec, job_fn, payload)


def _spawn_ranks(lw: _LocalWorld, job_fn: Callable, payload: dict, log_dir: Optional[str],
                 env: Optional[dict], progress: bool, budget: Budget, token: Optional[bytes]) -> dict:
    """Start this node's ranks (fresh interpreters: a forked CUDA context would be unusable); {global rank: rank}."""
    child_env = worker_env(lw.backend, env, os.environ)
    try:
        handoff = Handoff.of(job_fn, payload)
    except HandoffError as exc:  # one line per rank of this node, before anything starts
        raise SpawnError(str(exc)) from None
    procs: dict = {}
    try:
        for lr in range(lw.nproc):
            rank = lw.node * lw.nproc + lr
            spec = {"host": lw.host, "port": lw.port, "prefix": lw.prefix, "rank": rank, "world_size": lw.world_size,
                    "local_rank": lr, "local_world_size": lw.nproc, "node_rank": lw.node, "nnodes": lw.nnodes,
                    "backend": lw.backend, "budget": budget, "token": token,
                    "log_path": lw.log_path, "log_dir": log_dir, "env": child_env,
                    "progress": progress and rank == 0}
            procs[rank] = _Rank(spec, handoff)
    except BaseException:
        _stop(procs, list(procs), budget)
        raise
    return procs


def _stop(procs: dict, ranks: list, budget: Budget) -> None:
    """Terminate, then kill after the grace, the given ranks."""
    for rank in ranks:
        procs[rank].terminate()
    for rank in ranks:
        procs[rank].join(budget.kill_grace_s)
        if procs[rank].is_alive():
            procs[rank].kill()
            procs[rank].join(budget.reap_s)


def _name_failures(out: JobOutcome, lw: _LocalWorld, procs: dict, hung: list, stall_s: float, budget: Budget,
                   why: Optional[str] = None) -> None:
    """Every rank without a result gets one reason: interrupted, hung, exited early, or its node never said."""
    named = {f["rank"] for f in out.failures}
    for rank, p in procs.items():
        if rank in out.results or rank in named:
            continue
        if out.interrupted:
            out.failures.append({"rank": rank, "reason": f"interrupted ({out.interrupted_by}); stopped"})
        elif rank in hung and why:
            out.failures.append({"rank": rank, "reason": why})
        elif rank in hung:
            out.failures.append({"rank": rank, "reason": f"hung: no progress from the job for {stall_s:g} s "
                                 f"(a step's bound at --timeout {budget.collective_s:g} s); killed"})
        else:
            out.failures.append({"rank": rank, "reason": f"exited with code {p.exitcode} without a result"})
    named = {f["rank"] for f in out.failures}
    for r in range(lw.world_size):
        if r not in procs and r not in out.results and r not in named:
            out.failures.append({"rank": r, "reason": f"no result from node {r // lw.nproc}"})
    out.failures.sort(key=lambda f: f["rank"])


def _say_done(st: JsonStore, server: bool, members: int, budget: Budget) -> None:
    """The store's host stays up (bounded) until every other member has read what it needs."""
    try:
        if server:
            _agree.await_acks(st, "job/done", members - 1, budget.deadline(budget.collect_s), budget)
        else:
            _agree.acknowledge(st, "job/done")
    except StoreLost:
        pass


def _launch_local(world_config: WorldConfig, placement: Placement, job_fn: Callable, payload: dict,
                  log_dir: Optional[str], env: Optional[dict], budget: Budget, step_ops: int,
                  observer: Any = None) -> JobOutcome:
    lw = _local_world(world_config, placement, log_dir)
    guard = Guard(token=world_config.token, limits=Limits.for_nodes(lw.nnodes))
    bind = lw.host if lw.standalone else store_host(placement)
    st = open_store(bind if lw.server else lw.host, lw.port, lw.server, budget.join_s, lw.prefix, guard)
    if lw.standalone:
        lw.port = st.front.port
    try:
        # an observer of what this process waits for alone (render/progress.WaitLines) shows no rank's progress
        shows = observer is not None and getattr(observer, "progress", True)
        procs = _spawn_ranks(lw, job_fn, payload, log_dir, env, shows, budget, world_config.token)
    except SpawnError as exc:  # one line with the fix, on every rank of this node, instead of a traceback
        out = JobOutcome(world_size=lw.world_size, backend=lw.backend)
        out.failures = [{"rank": lw.node * lw.nproc + lr, "reason": str(exc)} for lr in range(lw.nproc)]
        return out
    stall_s = budget.stall_s(step_ops)
    interrupted, by = False, ""
    show = observer if 0 in procs and shows else None  # rank 0's progress, replayed into this agent's bar
    try:
        with relay(lambda: open_store(lw.host, lw.port, False, budget.join_s, lw.prefix, guard), show, budget):
            hung, why = _watch(procs, st, stall_s, lw.node, budget.rank_start_bound_s, budget)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (errors.Terminated): stop the ranks, report what exists
        interrupted, by, hung, why = True, interruption(exc), [r for r, p in procs.items() if p.is_alive()], None
    except BaseException:  # our own failure: no rank outlives the agent that would collect it
        _stop(procs, [r for r, p in procs.items() if p.is_alive()], budget)
        raise
    _stop(procs, hung, budget)
    # Ranks on other nodes finish on their own clock: wait for their results a little, bounded.
    collect_s = budget.standalone_collect_s if lw.standalone or interrupted else budget.collect_s
    out = _collect(st, lw.world_size, budget.deadline(collect_s), budget)
    out.backend, out.interrupted = lw.backend, interrupted
    out.interrupted_by = by or out.interrupted_by
    _name_failures(out, lw, procs, hung, stall_s, budget, why)
    if not lw.standalone:
        out = agree(st, out, decider=lw.server, budget=budget)
        _say_done(st, lw.server, lw.nnodes, budget)
    return out


def _run_in_process(world_config: WorldConfig, placement: Placement, job_fn: Callable, payload: dict,
                    observer: Any, log_dir: Optional[str], budget: Budget) -> JobOutcome:
    gpus = gpu_count()
    backend = resolve_backend(world_config.backend, gpus, placement.local_world_size)
    server = placement.hosts_store
    guard = Guard(token=world_config.token, limits=Limits.for_nodes(placement.nnodes))
    st = open_store(store_host(placement) if server else placement.master_addr, placement.master_port, server,
                    budget.join_s, "ncclcheck/job/", guard, clients=placement.world_size + placement.nnodes)
    spec = {"rank": placement.rank, "world_size": placement.world_size, "local_rank": placement.local_rank,
            "local_world_size": placement.local_world_size, "node_rank": placement.node_rank,
            "nnodes": placement.nnodes, "backend": backend, "budget": budget, "log_dir": log_dir}
    by = ""
    try:
        _run_rank(spec, st, job_fn, payload, observer)
    except Exception:  # noqa: BLE001 - recorded in the store as error/<rank>
        pass
    except KeyboardInterrupt as exc:  # every rank the launcher signalled writes its partial report (exit 130/143)
        by = interruption(exc)
    if by:  # the others are being stopped too: what the store holds now is all there will be; no agreement
        try:
            out = _collect(st, placement.world_size, budget.now(), budget)
        except (StoreLost, ValueError):  # the store's host (rank 0) was signalled too and is gone
            out = JobOutcome(world_size=placement.world_size, backend=backend)
        out.backend, out.interrupted, out.interrupted_by = backend, True, by
        _name_missing(out, placement.world_size, f"interrupted ({by}); stopped")
        return out
    out = _collect(st, placement.world_size, budget.deadline(budget.collect_s), budget)
    out.backend = backend
    _name_missing(out, placement.world_size, "no result before the deadline")
    out = agree(st, out, decider=placement.rank == 0, budget=budget)
    _say_done(st, server, placement.world_size, budget)
    return out


def _name_missing(out: JobOutcome, world_size: int, reason: str) -> None:
    named = {f["rank"] for f in out.failures}
    out.failures.extend({"rank": r, "reason": reason} for r in range(world_size)
                        if r not in out.results and r not in named)


def run_job(world_config: WorldConfig, placement: Placement, job_fn: Callable, payload: dict,
            observer: Any = None, log_dir: Optional[str] = None, env: Optional[dict] = None,
            step_ops: int = 1, *, budget: Budget) -> JobOutcome:
    """Run job_fn on every rank of the world this process belongs to.

    Each wait is bounded by the run's Budget: the join by T, each collective by T; the job itself runs as long as
    it keeps emitting, and is hung once it emits nothing for budget.stall_s(step_ops), step_ops being the most
    collectives the job runs between two emits.

    env: variables for the ranks this call spawns, set before torch initialises (NCCL_DEBUG_FILE...). In worker mode
    the launcher made this process, so its environment is the launcher's: run_job never rewrites os.environ."""
    if placement.worker_mode:
        return _run_in_process(world_config, placement, job_fn, payload, observer, log_dir, budget)
    return _launch_local(world_config, placement, job_fn, payload, log_dir, env, budget, step_ops, observer)
