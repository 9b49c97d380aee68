"""Who does what in a world: which process hosts the TCPStore, which one decides (who joined, the verdict, the exit
code), and under which key prefix a run's records live. One answer for preflight, bench and links; plain values in,
so it sits below agent/ (which knows launchers)."""

from __future__ import annotations


def run_prefix(job_id: str) -> str:
    """Store keys of one run: the launcher's job id when there is one, so two jobs on one store never mix."""
    return f"ncclcheck/{'preflight' if job_id == 'nojob' else job_id}/"


def is_server(worker_mode: bool, rank: int, node_rank: int, agent_store: bool) -> bool:
    """Does this process host the TCPStore? Node 0's agent, or global rank 0 unless the launcher's agent hosts it
    (torchrun with TORCHELASTIC_USE_AGENT_STORE=True)."""
    if not worker_mode:
        return node_rank == 0
    return rank == 0 and not agent_store


def is_decider(node_rank: int, node_leader: bool) -> bool:
    """Node 0 (global rank 0 in worker mode) decides who joined and publishes the verdict and the exit code."""
    return node_rank == 0 and node_leader
