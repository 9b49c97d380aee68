"""Per op, what touches torch: one callable per (op, placement) over preallocated buffers (what the timed loop
calls, nothing else), and the exact output --check expects of it. A new collective is its row in ops.py plus its two
branches here.

Buffers are allocated once per (op, size) and reused by warm-up, timing and the check; on a GPU as several copies
taken in turn by the timed calls (copies_for: nccl-tests' offsets, so a small size is not timed from a hot cache).
Every callable returns only when the collective is complete from the caller's point of view: on gloo the host is
done; on NCCL the current CUDA stream is ordered after the collective (torch's blocking collectives make the current
stream wait on the NCCL stream), so CUDA events recorded on the current stream around the loop bracket the
collectives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from .check import rank_values
from .ops import OPS, Counts

# Ops for which torch.distributed has only an in-place form (one tensor is both input and output). Their
# "out-of-place" rows time the same call; rows say so with in_place_call = true.
TORCH_IN_PLACE_ONLY = {"all_reduce", "broadcast", "reduce"}
ROOT = 0


@dataclass
class Runner:
    call: Callable[[], None]
    output: Any  # the tensor whose contents --check verifies
    input: Any  # the tensor (or view) holding this rank's input; check values start at global index 0
    clear: Any  # tensor to zero before the check pass, so stale results cannot pass as fresh ones


def _fn(dist, new: str, old: str):
    # torch 2.13 renamed all_gather_into_tensor/reduce_scatter_tensor to *_single and warns on the old names;
    # older torch only has the old ones.
    return getattr(dist, new, None) or getattr(dist, old)


@dataclass
class Buffers:
    send: Any
    recv: Any


def copies_for(size: int, largest: int, iters: int, device: str) -> int:
    """How many copies of a size's buffers the timed calls take in turn: nccl-tests moves its buffers by one size per
    iteration inside the allocation of the sweep's largest size ("change offset for each iteration so that we avoid
    cache effects", common.cu startColl), so a small size is not timed from a hot L2 (50 MB on an H100). The same
    here, on GPUs: up to largest // size copies, no more than the iterations touch, so no size holds more memory
    than the largest one does (bench/memory.py's refusal stays right). On a CPU (gloo) one copy: the figure is the
    socket's, and copies would only zero more host memory."""
    if not str(device).startswith("cuda") or size <= 0:
        return 1
    return max(1, min(largest // size, iters))


def allocate(counts: Counts, dtype, device: str, copies: int = 1) -> list[Buffers]:
    """`copies` adjacent pairs of send/recv buffers (one allocation each side); the first is the one --check reads."""
    import torch

    # zeros, not empty: uninitialised memory may hold denormals or NaNs that slow CPU reductions down.
    send = torch.zeros(counts.send_count * copies, dtype=dtype, device=device)
    recv = torch.zeros(counts.recv_count * copies, dtype=dtype, device=device)
    sc, rc = counts.send_count, counts.recv_count
    return [Buffers(send[k * sc:(k + 1) * sc], recv[k * rc:(k + 1) * rc]) for k in range(copies)]


def make_runner(op: str, in_place: bool, bufs: Buffers, counts: Counts, rank: int, nranks: int,
                group: Optional[Any] = None) -> Runner:
    import torch.distributed as dist

    base = counts.param_count
    send, recv = bufs.send, bufs.recv
    if op == "all_reduce":
        t = recv if in_place else send
        return Runner(lambda: dist.all_reduce(t, group=group), t, t, t)
    if op == "broadcast":
        t = recv if in_place else send
        return Runner(lambda: dist.broadcast(t, src=ROOT, group=group), t, t, t)
    if op == "reduce":
        t = recv if in_place else send
        return Runner(lambda: dist.reduce(t, dst=ROOT, group=group), t, t, t)
    if op == "all_gather":
        ag = _fn(dist, "all_gather_single", "all_gather_into_tensor")
        src = recv[rank * base:(rank + 1) * base] if in_place else send
        return Runner(lambda: ag(recv, src, group=group), recv, src, recv)
    if op == "reduce_scatter":
        rs = _fn(dist, "reduce_scatter_single", "reduce_scatter_tensor")
        out = send[rank * base:(rank + 1) * base] if in_place else recv
        return Runner(lambda: rs(out, send, group=group), out, send, out)
    if op == "all_to_all":
        if in_place:
            raise ValueError("all_to_all has no in-place form")
        return Runner(lambda: dist.all_to_all_single(recv, send, group=group), recv, send, recv)
    if op == "sendrecv":
        if in_place:
            raise ValueError("sendrecv has no in-place form")
        peer_to, peer_from = (rank + 1) % nranks, (rank - 1) % nranks

        def sendrecv() -> None:
            ops = [dist.P2POp(dist.isend, send, peer_to, group), dist.P2POp(dist.irecv, recv, peer_from, group)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()

        return Runner(sendrecv, recv, send, recv)
    raise ValueError(f"unknown op {op!r}")


def expected_output(op: str, dtype: str, nranks: int, rank: int, counts, device="cpu", root: int = 0):
    """The exact float32 output rank `rank` must hold after `op`, or None when this rank's output is unspecified
    (reduce on a non-root rank)."""
    import torch

    reduces = OPS[op].reduces
    vals = lambda r, s, c: rank_values(dtype, nranks, reduces, r, s, c, device=device)  # noqa: E731
    if op == "all_reduce" or (op == "reduce" and rank == root):
        out = torch.zeros(counts.param_count, dtype=torch.float32, device=device)
        for r in range(nranks):
            out += vals(r, 0, counts.param_count)
        return out
    if op == "reduce":
        return None
    if op == "broadcast":
        return vals(root, 0, counts.param_count)
    if op == "sendrecv":
        return vals((rank - 1) % nranks, 0, counts.param_count)
    base = counts.param_count
    if op == "all_gather":
        return torch.cat([vals(r, 0, base) for r in range(nranks)])
    if op == "reduce_scatter":
        out = torch.zeros(base, dtype=torch.float32, device=device)
        for r in range(nranks):
            out += vals(r, rank * base, base)
        return out
    if op == "all_to_all":
        # Rank r's input chunk q (elements q*base..) goes to rank q's output chunk r.
        return torch.cat([vals(r, rank * base, base) for r in range(nranks)])
    raise ValueError(f"no expected output for op {op!r}")


def moves_data(op: str, in_place: bool, nranks: int) -> bool:
    """Whether the timed call moves any byte. On one rank an in-place call has nothing to move (its output is its
    input): torch's single-form all_reduce, broadcast and reduce, and every --in-place row. Its time is the call's
    cost alone, so no bandwidth may be derived from it (size / time read 41,612 GB/s for a 1 GiB no-op all_reduce
    on an H100: issue 35)."""
    return nranks > 1 or not (in_place or op in TORCH_IN_PLACE_ONLY)


def unsupported_reason(op: str, in_place: bool, nranks: int) -> Optional[str]:
    """Why (op, placement) cannot run on this world at all, before trying it; None when it can."""
    if in_place and op in TORCH_IN_PLACE_ONLY:
        # Its out-of-place row already times torch's one (in-place) call: a second row would show two timings of
        # the same call as if the placements differed (issue 24).
        return f"torch has {op} in one (in-place) form only: its one row is that call"
    if in_place and not OPS[op].in_place_supported:
        return f"{op} has no in-place form (nccl-tests does not verify it in place either)"
    if op == "sendrecv" and nranks < 2:
        return "sendrecv needs at least 2 ranks"
    return None
