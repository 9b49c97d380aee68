"""The op table against nccl-tests: count rules (GetCollByteCount), reported size and count, busbw factors."""

from __future__ import annotations

import pytest

from ncclcheck.bench.ops import (
    DTYPES,
    OPS,
    bandwidths,
    busbw_factor,
    coll_counts,
    dtype_name,
    element_size,
    min_size,
    parse_ops,
)
from ncclcheck.errors import UsageError


def nccl_tests_reference(op: str, size: int, e: int, n: int) -> tuple[int, int, int]:
    """(size column, count column, busbw factor) written out from nccl-tests' src/*.cu and common.cu by hand."""
    count = size // e
    align = 16 // e
    if op in ("all_reduce", "broadcast", "reduce", "sendrecv"):
        send = recv = param = count
    elif op == "all_gather":
        base = (count // n) // align * align
        send, recv, param = base, base * n, base
    elif op == "reduce_scatter":
        base = (count // n) // align * align
        send, recv, param = base * n, base, base
    elif op == "all_to_all":
        param = (count // n) // align * align
        send = recv = param * n
    factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
              "all_to_all": (n - 1) / n, "broadcast": 1.0, "reduce": 1.0, "sendrecv": 1.0}[op]
    return max(send, recv) * e, param, factor


SIZES = [1 << 20, 1000003, 4096 + 12, 65536, 3 * 1024 * 1024 + 7, 1 << 30]


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "float64", "int8"])
def test_counts_match_nccl_tests(op, n, dtype):
    e = element_size(dtype)
    for size in SIZES:
        c = coll_counts(op, size, dtype, n)
        want_size, want_count, want_factor = nccl_tests_reference(op, size, e, n)
        assert (c.bytes, c.count) == (want_size, want_count), (op, size, dtype, n)
        assert busbw_factor(op, n) == pytest.approx(want_factor)
        assert c.rounded == (c.bytes != size)


def test_documented_examples():
    # 1 MiB float32 all_reduce on 8 ranks: 262144 elements, nothing rounded.
    c = coll_counts("all_reduce", 1 << 20, "float32", 8)
    assert (c.bytes, c.count, c.rounded) == (1 << 20, 262144, False)
    # all_gather 1 MiB float32 on 3 ranks: 262144/3 = 87381 -> 87380 (4 floats = 16 bytes) per rank.
    c = coll_counts("all_gather", 1 << 20, "float32", 3)
    assert (c.send_count, c.recv_count, c.count, c.bytes) == (87380, 262140, 87380, 1048560)
    assert c.rounded and c.requested_bytes == 1 << 20
    # reduce_scatter: the send side is the big one.
    c = coll_counts("reduce_scatter", 1 << 20, "float32", 8)
    assert (c.send_count, c.recv_count, c.count, c.bytes) == (262144, 32768, 32768, 1 << 20)
    # odd byte count for all_reduce: floored to whole elements like size / wordSize.
    c = coll_counts("all_reduce", 1001, "float32", 2)
    assert (c.bytes, c.count, c.rounded) == (1000, 250, True)


@pytest.mark.parametrize("op,dtype,n,size", [
    ("all_reduce", "float32", 2, 3),
    ("all_gather", "float32", 8, 64),  # 16 floats / 8 ranks = 2 per rank -> rounds to 0 (needs 4)
    ("reduce_scatter", "float16", 3, 32),
    ("all_to_all", "int8", 2, 31),
])
def test_sizes_that_round_to_zero_are_usage_errors(op, dtype, n, size):
    with pytest.raises(UsageError, match="too small"):
        coll_counts(op, size, dtype, n)


def test_min_size_is_the_boundary():
    for op in OPS:
        for dtype in DTYPES:
            for n in (2, 3, 8):
                m = min_size(op, dtype, n)
                coll_counts(op, m, dtype, n)
                if m > 1:
                    with pytest.raises(UsageError):
                        coll_counts(op, m - 1, dtype, n)


def test_bandwidths_follow_nccl_tests_units():
    # 1 GiB in 10 ms: algbw = 2^30 / 0.01 / 1e9 = 107.37 GB/s; all_reduce on 8 ranks x 1.75.
    alg, bus = bandwidths("all_reduce", 1 << 30, 10_000.0, 8)
    assert alg == pytest.approx(107.374182, rel=1e-6)
    assert bus == pytest.approx(alg * 1.75)
    assert bandwidths("sendrecv", 1 << 20, 0.0, 2) == (0.0, 0.0)
    assert busbw_factor("all_reduce", 1) == 0.0


def test_dtype_names_and_aliases():
    assert dtype_name("half") == "float16"
    assert dtype_name("BF16") == "bfloat16"
    assert element_size("double") == 8
    with pytest.raises(UsageError, match="unknown --dtype 'float8'"):
        dtype_name("float8")


def test_parse_ops():
    assert parse_ops("allreduce, all_gather") == ("all_reduce", "all_gather")
    assert parse_ops("all") == tuple(OPS)
    assert parse_ops(["sendrecv", "sendrecv"]) == ("sendrecv",)
    with pytest.raises(UsageError, match="unknown op 'gather'"):
        parse_ops("gather")
    with pytest.raises(UsageError):
        parse_ops("")


def test_the_schema_names_every_op_of_the_table():
    import json

    from ncclcheck.render.json import SCHEMA_PATH

    with open(SCHEMA_PATH, encoding="utf-8") as f:
        enum = json.load(f)["properties"]["bench"]["items"]["properties"]["op"]["enum"]
    assert enum == list(OPS)
