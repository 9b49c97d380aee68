"""The job runner bench and links use: form a torch.distributed process group in any launch mode and run a job on it.

    outcome = run_job(world_config, placement, job_fn, payload)   # job_fn(ctx: WorkerContext, payload) -> dict

- standalone launcher mode (--nnodes 1): spawns nproc_per_node local workers (one per GPU, 2 CPU ranks without
  one) over loopback with a free port;
- multi-node launcher mode: node 0's agent hosts a TCPStore at MASTER_ADDR:MASTER_PORT, every agent spawns its local
  workers with global rank node_rank * nproc + local_rank;
- worker mode (torchrun/srun/mpirun started us): the job runs in this process as that rank.
Results and `ctx.emit` records go through the store as JSON as soon as they exist, so a worker that crashes or hangs
loses nothing it already emitted; a worker still running at the deadline is killed and named. job_fn must be a
module-level function (it is pickled by reference into spawned workers).
"""

from __future__ import annotations

import datetime as _dt
import logging
import multiprocessing as mp
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..config import WorldConfig
from ..facts.gpu import usable_gpu_count
from .context import NullObserver, WorkerContext
from .placement import Placement
from .relay import StoreObserver, relay
from .roles import is_server
from .store import JsonStore, StoreLost, first_line, open_store

log = logging.getLogger(__name__)
CPU_RANKS_DEFAULT = 2
_KILL_GRACE_S = 3.0


@dataclass
class JobOutcome:
    """What every rank returned, what was emitted on the way, and which ranks failed (rank + one-line reason)."""

    world_size: int
    backend: str
    results: dict = field(default_factory=dict)  # global rank -> job_fn's dict
    emitted: list = field(default_factory=list)  # [{"rank", "kind", "data"}] in arrival order
    failures: list = field(default_factory=list)  # [{"rank", "reason"}]

    @property
    def ok(self) -> bool:
        return not self.failures and len(self.results) == self.world_size


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_torch():
    """The torch module, for the facts layer (which never imports torch itself)."""
    import torch

    return torch


def gpu_count() -> int:
    """GPUs torch can use here: the runner spawns one rank per GPU."""
    return usable_gpu_count(load_torch)


def resolve_backend(requested: str, gpus: int, nproc: int) -> str:
    """auto -> nccl when every local rank gets a GPU, else gloo."""
    if requested in ("nccl", "gloo"):
        return requested
    return "nccl" if gpus >= nproc > 0 else "gloo"


def _emitter(st: JsonStore, rank: int) -> Callable[[str, dict], None]:
    def emit(kind: str, data: dict) -> None:
        i = st.add("emit/count", 1)
        st.set(f"emit/{i}", {"rank": rank, "kind": kind, "data": data})

    return emit


def _run_rank(spec: dict, st: JsonStore, job_fn: Callable, payload: dict, observer: Any = None) -> None:
    """Init the process group on this rank (bounded), run the job, publish its result or its error."""
    import torch.distributed as dist

    rank = spec["rank"]
    try:
        timeout = _dt.timedelta(seconds=max(1.0, spec["deadline_wall"] - time.time()))
        device = "cpu"
        if spec["backend"] == "nccl":
            import torch

            torch.cuda.set_device(spec["local_rank"])
            device = f"cuda:{spec['local_rank']}"
        pg_store = dist.PrefixStore(st.prefix + "pg/", st.raw)
        dist.init_process_group(spec["backend"], store=pg_store, rank=rank, world_size=spec["world_size"],
                                timeout=timeout)
        try:
            ctx = WorkerContext(
                rank=rank, world_size=spec["world_size"], local_rank=spec["local_rank"],
                local_world_size=spec["local_world_size"], node_rank=spec["node_rank"], nnodes=spec["nnodes"],
                backend=spec["backend"], device=device, timeout_s=spec["timeout_s"],
                deadline=time.monotonic() + max(0.0, spec["deadline_wall"] - time.time()), store=st,
                observer=observer if (observer is not None and rank == 0) else NullObserver(),
                emit=_emitter(st, rank), test_hooks=spec.get("test_hooks") or {}, log_dir=spec.get("log_dir"),
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


def _worker_main(spec: dict, job_fn: Callable, payload: dict) -> None:
    """Entry point of a spawned local worker."""
    if spec.get("log_path"):
        logging.basicConfig(filename=spec["log_path"], level=logging.DEBUG)
    try:
        st = open_store(spec["host"], spec["port"], False, spec["timeout_s"], spec.get("log_path"), spec["prefix"])
        # Rank 0 has no terminal of its own: its progress goes through the store to the agent's (dist/relay.py).
        _run_rank(spec, st, job_fn, payload, StoreObserver(st) if spec.get("progress") else None)
    except Exception:  # noqa: BLE001 - the agent reads error/<rank> and the exit code
        os._exit(1)
    os._exit(0)


def _collect(st: JsonStore, world_size: int, deadline: float) -> JobOutcome:
    out = JobOutcome(world_size=world_size, backend="")
    for r in range(world_size):
        v = st.wait_get(f"result/{r}", deadline, poll_s=0.02) if time.monotonic() < deadline else st.get_now(
            f"result/{r}")
        if v is not None:
            out.results[r] = v
        else:
            err = st.get_now(f"error/{r}")
            if err is not None:
                out.failures.append({"rank": r, "reason": err.get("reason", "failed")})
    n = st.add("emit/count", 0)
    for i in range(1, n + 1):
        v = st.get_now(f"emit/{i}")
        if v is not None:
            out.emitted.append(v)
    return out


AGREE_WAIT_S = 15.0


def agree(st: JsonStore, out: JobOutcome, decider: bool) -> JobOutcome:
    """Every process builds its report from the same outcome: the decider's (node 0 / global rank 0), so every
    process of the world exits with the same code. Without the store, or past a bounded wait, keep our own."""
    try:
        if decider:
            st.set("job/outcome", {"world_size": out.world_size, "backend": out.backend, "emitted": out.emitted,
                                   "results": [[r, v] for r, v in sorted(out.results.items())],
                                   "failures": out.failures})
            return out
        v = st.wait_get("job/outcome", time.monotonic() + AGREE_WAIT_S)
    except StoreLost:
        return out
    if not isinstance(v, dict) or not isinstance(v.get("results"), list):
        return out
    return JobOutcome(world_size=int(v.get("world_size", out.world_size)), backend=v.get("backend") or out.backend,
                      results={int(r): x for r, x in v["results"]}, emitted=list(v.get("emitted") or []),
                      failures=list(v.get("failures") or []))


def _launch_local(world_config: WorldConfig, placement: Placement, job_fn: Callable, payload: dict,
                  log_dir: Optional[str], test_hooks: Optional[dict], observer: Any = None) -> JobOutcome:
    gpus = gpu_count()
    nproc = world_config.nproc_per_node or placement.local_world_size or gpus or CPU_RANKS_DEFAULT
    backend = resolve_backend(world_config.backend, gpus, nproc)
    nnodes, node = placement.nnodes, placement.node_rank
    world_size = nnodes * nproc
    standalone = nnodes == 1
    host = "127.0.0.1" if standalone else placement.master_addr
    port = _free_port() if standalone else placement.master_port
    server = standalone or node == 0
    timeout_s = world_config.timeout_s
    log_path = os.path.join(log_dir, f"job.node{node}.log") if log_dir else None
    prefix = "ncclcheck/job/"
    bind_host = host if standalone else "0.0.0.0"
    st = open_store(bind_host if server else host, port, server, timeout_s, log_path, prefix)
    deadline = time.monotonic() + timeout_s
    deadline_wall = time.time() + timeout_s
    ctx = mp.get_context("spawn")
    procs = {}
    for lr in range(nproc):
        rank = node * nproc + lr
        spec = {"host": host, "port": port, "prefix": prefix, "rank": rank, "world_size": world_size,
                "local_rank": lr, "local_world_size": nproc, "node_rank": node, "nnodes": nnodes,
                "backend": backend, "timeout_s": timeout_s, "deadline_wall": deadline_wall, "log_path": log_path,
                "log_dir": log_dir, "test_hooks": (test_hooks or {}).get(rank) or {},
                "progress": rank == 0 and observer is not None}
        p = ctx.Process(target=_worker_main, args=(spec, job_fn, payload), name=f"ncclcheck-rank{rank}", daemon=True)
        p.start()
        procs[rank] = p
    hung = []
    show = observer if 0 in procs else None
    with relay(lambda: open_store(host, port, False, timeout_s, log_path, prefix), show):
        for rank, p in procs.items():
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                hung.append(rank)
                p.terminate()
    for rank in hung:
        procs[rank].join(_KILL_GRACE_S)
        if procs[rank].is_alive():
            procs[rank].kill()
            procs[rank].join(1.0)
    # Ranks on other nodes finish on their own clock: wait for their results a little, bounded.
    out = _collect(st, world_size, time.monotonic() + (0.5 if standalone else min(10.0, timeout_s)))
    out.backend = backend
    named = {f["rank"] for f in out.failures}
    for rank, p in procs.items():
        if rank in out.results or rank in named:
            continue
        if rank in hung:
            out.failures.append({"rank": rank, "reason": f"still running after the {timeout_s:g} s deadline; killed"})
        else:
            out.failures.append({"rank": rank, "reason": f"exited with code {p.exitcode} without a result"})
    for r in range(world_size):
        if r not in procs and r not in out.results and r not in {f["rank"] for f in out.failures}:
            out.failures.append({"rank": r, "reason": f"no result from node {r // nproc}"})
    out.failures.sort(key=lambda f: f["rank"])
    if not standalone:
        out = agree(st, out, decider=server)
        try:
            st.add("job/done", 1)
            if server:
                st.wait_count("job/done", nnodes, time.monotonic() + 10.0)
        except StoreLost:
            pass
    return out


def _run_in_process(world_config: WorldConfig, placement: Placement, job_fn: Callable, payload: dict,
                    observer: Any, log_dir: Optional[str]) -> JobOutcome:
    gpus = gpu_count()
    backend = resolve_backend(world_config.backend, gpus, placement.local_world_size)
    timeout_s = world_config.timeout_s
    log_path = os.path.join(log_dir, f"job.rank{placement.rank}.log") if log_dir else None
    server = is_server(placement, os.environ)
    st = open_store("0.0.0.0" if server else placement.master_addr, placement.master_port, server, timeout_s,
                    log_path, "ncclcheck/job/")
    spec = {"rank": placement.rank, "world_size": placement.world_size, "local_rank": placement.local_rank,
            "local_world_size": placement.local_world_size, "node_rank": placement.node_rank,
            "nnodes": placement.nnodes, "backend": backend, "timeout_s": timeout_s,
            "deadline_wall": time.time() + timeout_s, "log_dir": log_dir}
    try:
        _run_rank(spec, st, job_fn, payload, observer)
    except Exception:  # noqa: BLE001 - recorded in the store as error/<rank>
        pass
    out = _collect(st, placement.world_size, time.monotonic() + min(10.0, timeout_s))
    out.backend = backend
    missing = [r for r in range(placement.world_size)
               if r not in out.results and r not in {f["rank"] for f in out.failures}]
    out.failures.extend({"rank": r, "reason": "no result before the deadline"} for r in missing)
    out = agree(st, out, decider=placement.rank == 0)
    try:
        st.add("job/done", 1)
        if server:
            st.wait_count("job/done", placement.world_size, time.monotonic() + 10.0)
    except StoreLost:
        pass
    return out


def run_job(world_config: WorldConfig, placement: Placement, job_fn: Callable, payload: dict,
            observer: Any = None, log_dir: Optional[str] = None, test_hooks: Optional[dict] = None) -> JobOutcome:
    """Run job_fn on every rank of the world this process belongs to; bounded by world_config.timeout_s."""
    if placement.worker_mode:
        return _run_in_process(world_config, placement, job_fn, payload, observer, log_dir)
    return _launch_local(world_config, placement, job_fn, payload, log_dir, test_hooks, observer)
