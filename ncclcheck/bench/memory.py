"""Can the ranks allocate what --sizes asks for? A usage error before any rank starts, not an allocator crash.

Per rank a size needs its send and receive buffers (plus the expected values with --check); on CPU the local ranks
share the host's available memory, on GPUs each rank has its device (less a reserve for the CUDA context and NCCL).
"""

from __future__ import annotations

from typing import Optional

from ..config import BenchConfig
from ..errors import UsageError
from ..units import format_bytes, format_size_short
from .ops import coll_counts

DEVICE_RESERVE = 0.85  # fraction of a GPU's memory the buffers may take: the rest is CUDA context, NCCL, allocator


def largest_need(cfg: BenchConfig, world_size: int) -> tuple[str, int, int]:
    """(op, requested size, bytes one rank allocates) for the most demanding op x size."""
    best = ("", 0, 0)
    for op in cfg.ops:
        for size in cfg.sizes:
            c = coll_counts(op, size, cfg.dtype, world_size)
            need = (c.send_count + c.recv_count * (2 if cfg.check else 1)) * c.elt_size
            if need > best[2]:
                best = (op, size, need)
    return best


def check_fits(cfg: BenchConfig, world_size: int, local_ranks: int, host_available: Optional[int],
               device_bytes: Optional[int]) -> None:
    """Raise UsageError when the largest op x size cannot be allocated by the ranks of this node."""
    op, size, need = largest_need(cfg, world_size)
    if not op:
        return
    what = f"--sizes: {op} at {format_size_short(size)} needs {format_bytes(need)} per rank"
    if device_bytes is not None:
        room = int(device_bytes * DEVICE_RESERVE)
        if need > room:
            raise UsageError(f"{what}, more than a GPU here can hold ({format_bytes(device_bytes)}, of which about "
                             f"{format_bytes(room)} is usable for buffers); choose smaller --sizes")
        return
    if host_available is not None and need * max(1, local_ranks) > host_available:
        raise UsageError(f"{what} x {local_ranks} local ranks, more than the {format_bytes(host_available)} of "
                         "memory available on this host; choose smaller --sizes (or fewer --nproc-per-node)")
