"""bench/links --nccl-capture as one step: a fresh world whose ranks log NCCL's choices and dump its topology and
graph per host, then nccl.transport per node against what preflight would recommend here."""

from __future__ import annotations

from ..config import Config, WorldConfig
from ..model import CheckResult, skipped
from . import world as w


def nccl_capture(config: Config, world: WorldConfig, placement, backend: str,
                 budget) -> tuple[list[CheckResult], dict]:
    """(nccl.transport checks, the report's extra sections: `nccl_captures` with the files' paths)."""
    from ..facts import hostname
    from ..recommend import NodeView, recommend_local
    from .nccl_debug import captures_section, nccl_debug_env, nccl_debug_job, transport_checks

    if backend != "nccl":
        why = f"--nccl-capture needs the nccl backend on GPUs; this run used {backend}"
        return [skipped("nccl.transport", why)], {}

    # NCCL reads its debug and dump variables once, at init: they go into the spawned ranks' environment.
    log_dir = w.side_dir()
    nproc = w.local_ranks(world, placement)
    env = nccl_debug_env(log_dir, hostname().split(".")[0], dump_rank=placement.node_rank * nproc) if log_dir else None
    out = w.run_world_job(world, placement, nccl_debug_job, {"log_dir": log_dir}, budget, env=env)
    results = [r for _, r in sorted(out.results.items())]
    # What NCCL chose, against what preflight would recommend on this node (its interfaces, RDMA ports, NCCL_*).
    recs = recommend_local(NodeView(w.collect(config), multi_node=world.nnodes > 1))
    return transport_checks(results, recs), {"nccl_captures": captures_section(results)}
