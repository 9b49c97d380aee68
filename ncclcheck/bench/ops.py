"""The op table: which collectives the bench runs, nccl-tests' count rules and bus-bandwidth factors, and dtypes.
A new collective is a row here plus its torch call and expected output in runners.py; the CLI's --ops and --dtype
choices come from these tables.

Pure arithmetic, no torch at import time. The count rules follow nccl-tests' `<Op>GetCollByteCount` functions
(src/all_gather.cu, src/reduce_scatter.cu, src/alltoall.cu ... in NVIDIA/nccl-tests), and the reported size and count
follow `setupArgs`/`TimeTest` in src/common.cu: size = max(send, recv) bytes, count = the count passed to the NCCL
call ("paramcount"). algbw = size / time (GB/s = 1e9 B/s) and busbw = algbw x factor, which is what each
`<Op>GetBw` computes once its count x typesize x nranks terms are multiplied out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable, Union

from ..errors import UsageError

# name -> element size in bytes. The torch dtype is looked up lazily (torch_dtype) so importing this is cheap.
DTYPES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "float64": 8,
    "int8": 1,
}
# Common spellings users type (nccl-tests says "float", "half", "bfloat16", "int32", "double", "int8").
DTYPE_ALIASES = {"float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16", "bf16": "bfloat16",
                 "int": "int32", "double": "float64", "fp64": "float64"}


def dtype_name(name: str) -> str:
    """Canonical dtype name, or UsageError naming the valid ones."""
    key = (name or "").strip().lower()
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise UsageError(f"unknown --dtype {name!r}: expected one of {', '.join(DTYPES)}")
    return key


def element_size(dtype: str) -> int:
    return DTYPES[dtype_name(dtype)]


def torch_dtype(dtype: str):
    import torch

    return getattr(torch, dtype_name(dtype))


def _align_elems(elt_size: int) -> int:
    # nccl-tests rounds per-rank chunks down to 16 bytes: `(count/nranks) & -(16/eltSize)`.
    return max(1, 16 // elt_size)


def _counts_full(count: int, n: int, e: int) -> tuple[int, int, int, int, int]:
    # all_reduce, reduce, broadcast, sendrecv: the whole buffer on every rank.
    return count, count, count, 0, 0


def _counts_all_gather(count: int, n: int, e: int) -> tuple[int, int, int, int, int]:
    base = (count // n) & -_align_elems(e)
    return base, base * n, base, base, 0  # send, recv, param, send in-place offset (x rank), recv in-place offset


def _counts_reduce_scatter(count: int, n: int, e: int) -> tuple[int, int, int, int, int]:
    base = (count // n) & -_align_elems(e)
    return base * n, base, base, 0, base


def _counts_all_to_all(count: int, n: int, e: int) -> tuple[int, int, int, int, int]:
    param = (count // n) & -_align_elems(e)
    return param * n, param * n, param, 0, 0


def _factor_all_reduce(n: int) -> float:
    return 2.0 * (n - 1) / n


def _factor_gather(n: int) -> float:
    return (n - 1) / n


def _factor_one(n: int) -> float:
    return 1.0


@dataclass(frozen=True)
class OpSpec:
    name: str
    counts: Callable[[int, int, int], tuple]
    busbw_factor: Callable[[int], float]
    reduces: bool  # has a reduction (the "redop" column; values are summed across ranks)
    in_place_supported: bool  # nccl-tests does not verify in-place alltoall/sendrecv; neither do we run them
    chunked: bool  # the size is split over ranks, so it is rounded to a multiple of 16 bytes x ranks
    rooted: bool = False  # one root rank (nccl-tests' "root" column: 0 here, -1 for ops without one)

    @property
    def redop(self) -> str:
        """nccl-tests' "redop" column."""
        return "sum" if self.reduces else "none"

    @property
    def root(self) -> int:
        return 0 if self.rooted else -1


OPS: dict[str, OpSpec] = {
    "all_reduce": OpSpec("all_reduce", _counts_full, _factor_all_reduce, True, True, False),
    "all_gather": OpSpec("all_gather", _counts_all_gather, _factor_gather, False, True, True),
    "reduce_scatter": OpSpec("reduce_scatter", _counts_reduce_scatter, _factor_gather, True, True, True),
    "broadcast": OpSpec("broadcast", _counts_full, _factor_one, False, True, False, rooted=True),
    "reduce": OpSpec("reduce", _counts_full, _factor_one, True, True, False, rooted=True),
    "all_to_all": OpSpec("all_to_all", _counts_all_to_all, _factor_gather, False, False, True),
    "sendrecv": OpSpec("sendrecv", _counts_full, _factor_one, False, False, False),
}
OP_ALIASES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
              "alltoall": "all_to_all", "all2all": "all_to_all", "bcast": "broadcast", "send_recv": "sendrecv"}


def op_name(name: str) -> str:
    key = (name or "").strip().lower().replace("-", "_")
    key = OP_ALIASES.get(key, key)
    if key not in OPS:
        raise UsageError(f"unknown op {name!r}: expected one of {', '.join(OPS)} (or 'all')")
    return key


def parse_ops(value: Union[str, Iterable[str]]) -> tuple[str, ...]:
    """'all_reduce,all_gather' or 'all' -> canonical names in the given order, duplicates dropped."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        if str(item).strip().lower() == "all":
            names = list(OPS)
        else:
            names = [op_name(item)]
        for n in names:
            if n not in out:
                out.append(n)
    if not out:
        raise UsageError("empty --ops: expected e.g. all_reduce,all_gather or all")
    return tuple(out)


def busbw_factor(op: str, nranks: int) -> float:
    return OPS[op_name(op)].busbw_factor(nranks)


@dataclass(frozen=True)
class Counts:
    """Element counts for one (op, requested size, dtype, ranks), as nccl-tests computes them."""

    op: str
    requested_bytes: int
    elt_size: int
    nranks: int
    send_count: int
    recv_count: int
    param_count: int  # the count passed to the collective; nccl-tests prints it in the "count" column
    send_inplace_offset: int  # in elements, multiplied by the rank for all_gather
    recv_inplace_offset: int  # in elements, multiplied by the rank for reduce_scatter

    @property
    def bytes(self) -> int:
        """The size nccl-tests reports: the larger of the send and receive buffers."""
        return max(self.send_count, self.recv_count) * self.elt_size

    @property
    def count(self) -> int:
        return self.param_count

    @property
    def rounded(self) -> bool:
        return self.bytes != self.requested_bytes


def coll_counts(op: str, size_bytes: int, dtype_or_elt: Union[str, int], nranks: int) -> Counts:
    """nccl-tests' GetCollByteCount for `op`. Raises UsageError when the size holds no element per rank."""
    op = op_name(op)
    e = dtype_or_elt if isinstance(dtype_or_elt, int) else element_size(dtype_or_elt)
    if nranks < 1:
        raise ValueError(f"nranks must be >= 1, got {nranks}")
    count = int(size_bytes) // e
    send, recv, param, soff, roff = OPS[op].counts(count, nranks, e)
    if param <= 0 or max(send, recv) <= 0:
        need = min_size(op, e, nranks)
        raise UsageError(
            f"size {size_bytes} B is too small for {op} with {nranks} ranks and {e}-byte elements: "
            f"it needs at least {need} B"
        )
    return Counts(op, int(size_bytes), e, nranks, send, recv, param, soff, roff)


def min_size(op: str, dtype_or_elt: Union[str, int], nranks: int) -> int:
    """The smallest size in bytes that gives `op` at least one element per rank."""
    e = dtype_or_elt if isinstance(dtype_or_elt, int) else element_size(dtype_or_elt)
    return _align_elems(e) * e * nranks if OPS[op_name(op)].chunked else e


def bandwidths(op: str, size_bytes: int, time_us: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for `size_bytes` (the reported size) moved in `time_us`."""
    if time_us <= 0:
        return 0.0, 0.0
    algbw = size_bytes / (time_us * 1e-6) / 1e9
    return algbw, algbw * busbw_factor(op, nranks)
