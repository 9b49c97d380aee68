"""What a job running on one rank of a formed world gets: its placement, its process group's backend and device,
the run's Budget (each collective is bounded by --timeout; a job has no overall deadline: a sweep runs as long as its
work needs), the shared store, and two callbacks.

A job is `def job(ctx: WorkerContext, payload: dict) -> dict` (JSON in, JSON out). agent/runner.py forms the world in
every launch mode (standalone local ranks, multi-node launcher, torchrun, Slurm, MPI), calls
torch.distributed.init_process_group, runs the job on every rank, and gathers the results. Jobs never form worlds
themselves, so bench and links work the same way under every launcher. (Preflight needs no process group: it meets
through the same store and roles, in preflight/cluster.py, so it can name a world that cannot form.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from ..rendezvous.budget import FIXED, Budget


class Observer(Protocol):
    """Progress reporting, implemented by the console renderer on rank 0; the core never imports rich."""

    def start(self, total: int, label: str) -> None: ...

    def advance(self, label: str = "") -> None: ...

    def stop(self) -> None: ...

    # Optional: row(kind, data) receives each measured row (show_row); observers without it show progress only.
    # Optional: wait(event) hears what the process waits for while it waits (rendezvous/waits.py, from another
    # thread); observers without it say nothing of waits.


def show_row(observer: Any, kind: str, data: dict) -> None:
    """Hand one measured row (a bench row, a links pair) to the observer as it is measured, so the console prints it
    then, on a terminal and into a pipe or a job log alike (issue 24). `row` is optional in the Protocol: an observer
    without it only shows progress."""
    fn = getattr(observer, "row", None)
    if fn is not None:
        fn(kind, data)


class NullObserver:
    def start(self, total: int, label: str) -> None:
        pass

    def advance(self, label: str = "") -> None:
        pass

    def stop(self) -> None:
        pass


@dataclass
class WorkerContext:
    rank: int
    world_size: int
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0
    nnodes: int = 1
    backend: str = "gloo"  # the initialized default process group's backend: "nccl" | "gloo"
    device: str = "cpu"  # "cpu" or "cuda:<local index>"
    budget: Budget = FIXED  # the run's time bounds: budget.collective_s (--timeout) bounds each collective
    store: Any = None  # the world's torch.distributed Store, for JSON side-channel exchange (may be None in tests)
    observer: Any = field(default_factory=NullObserver)  # real progress on global rank 0 only
    # emit(kind, data): stream a partial result (e.g. one bench row) towards the report as soon as it exists, so
    # a run cut short still reports what it measured. The world decides where it goes (store, queue, file).
    emit: Callable[[str, dict], None] = lambda kind, data: None
    log_dir: Optional[str] = None  # where jobs may write side files (NCCL_DEBUG_FILE...)

    @property
    def timeout_s(self) -> float:
        """Each collective's bound (--timeout)."""
        return self.budget.collective_s


def load_torch():
    """The torch module, imported when first asked for: the facts layer never imports torch itself, and a command
    that only reads facts (standalone preflight) must not pay for the runner's imports to get this."""
    import torch

    return torch
