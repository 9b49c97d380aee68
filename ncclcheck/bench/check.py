"""--check: exactly representable, rank-dependent inputs, and the exact comparison (each op's expected output is
beside its torch call, in runners.py).

Values are small integers, so every partial sum a reduction can form (in any order, on any algorithm) stays inside
the range where the dtype holds integers exactly: 2048 for float16 (11-bit significand), 256 for bfloat16 (8 bits),
127 for int8. Outputs are compared exactly, element by element, the way nccl-tests counts "#wrong". The check is its
own pass after the timed loop (as in nccl-tests), so filling and comparing never land inside a timing.
"""

from __future__ import annotations

import math

# Largest integer magnitude a sum may reach and still be exact (and fit) in the dtype.
EXACT_LIMIT = {
    "float16": 2048,
    "bfloat16": 256,
    "int8": 127,
    "float32": 1 << 20,
    "float64": 1 << 20,
    "int32": 1 << 20,
}


def _value_params(dtype: str, nranks: int, reduces: bool) -> tuple[int, int]:
    """(p, k): per-rank values are 1 + (r*3 + i) % p when k == 1, else 0/1 spread one rank in k.

    For a reduction the sum over n ranks of values <= p must stay <= the limit: p = limit // n. When there are more
    ranks than the limit (e.g. 300 ranks in bfloat16) values become 1 on only every k-th (rank+index), so at most
    ceil(n/k) ones are ever summed.
    """
    limit = EXACT_LIMIT[dtype]
    if not reduces:
        return limit, 1
    p = limit // nranks
    if p >= 1:
        return p, 1
    return 1, math.ceil(nranks / limit)


def rank_values(dtype: str, nranks: int, reduces: bool, rank: int, start: int, count: int, device="cpu"):
    """Rank `rank`'s input elements [start, start+count) as float32 on `device` (exact small integers)."""
    import torch

    p, k = _value_params(dtype, nranks, reduces)
    # int32 indices halve the temporary memory on a GPU for the sizes where they suffice.
    itype = torch.int32 if start + count + nranks * 131 < (1 << 31) else torch.int64
    idx = torch.arange(start, start + count, device=device, dtype=itype)
    if k == 1:
        if reduces:
            v = 1 + (idx + rank * 3) % p
        else:
            v = (idx + rank * 131) % (p + 1)
    else:
        v = ((idx + rank) % k == 0).to(itype)
    return v.to(torch.float32)


def fill(buf, dtype: str, nranks: int, reduces: bool, rank: int, start: int = 0) -> None:
    """Write rank's check values into `buf` (a 1-D tensor view), element i holding global index start+i."""
    buf.copy_(rank_values(dtype, nranks, reduces, rank, start, buf.numel(), device=buf.device).to(buf.dtype))


def count_wrong(output, expected) -> int:
    """Elements of `output` that differ from `expected` (exact comparison, NaN counts as wrong)."""
    if expected is None:
        return 0
    import torch

    got = output.reshape(-1).to(torch.float32)
    return int((got != expected).sum().item())
