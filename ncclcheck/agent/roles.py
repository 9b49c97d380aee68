"""Who does what in a world: which process hosts the TCPStore, which one decides (who joined, the verdict, the exit
code), and under which key prefix a run's records live. One answer for preflight, bench and links."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from .launchers import Placement, job_id


def run_prefix(env: Mapping[str, str]) -> str:
    """Store keys of one run: the launcher's job id when there is one, so two jobs on one store never mix."""
    run = job_id(env)
    return f"ncclcheck/{'preflight' if run == 'nojob' else run}/"


def uses_agent_store(placement: Placement, env: Mapping[str, str]) -> bool:
    """Under torchrun the agent already hosts the store at MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE)."""
    return placement.launcher in ("torchrun", "fabric") and \
        str(env.get("TORCHELASTIC_USE_AGENT_STORE", "")).strip().lower() == "true"


def is_server(placement: Placement, env: Optional[Mapping[str, str]] = None) -> bool:
    """Does this process host the TCPStore? Node 0's agent, or global rank 0 unless torchrun's agent hosts it."""
    if not placement.worker_mode:
        return placement.node_rank == 0
    return placement.rank == 0 and not uses_agent_store(placement, env or {})


def is_decider(placement: Placement) -> bool:
    """Node 0 (global rank 0 in worker mode) decides who joined and publishes the verdict and the exit code."""
    return placement.node_rank == 0 and placement.node_leader
