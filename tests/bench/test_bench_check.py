"""--check values: exact in every dtype for any summation order, and expected outputs equal to what each collective
does (simulated here from every rank's inputs, without a process group)."""

from __future__ import annotations

import random

import pytest
import torch

from ncclcheck.bench import check as chk
from ncclcheck.bench.ops import OPS, coll_counts, torch_dtype
from ncclcheck.bench.runners import expected_output
from tests.bench.jobs import corrupt


def _inputs(op, dtype, n, counts):
    reduces = OPS[op].reduces
    return [chk.rank_values(dtype, n, reduces, r, 0, counts.send_count).to(torch_dtype(dtype)) for r in range(n)]


def _simulate(op, n, ins, counts):
    """What each rank's output holds after op, given every rank's input (reduction in the tensors' own dtype,
    in a random order, as a real backend might)."""
    base = counts.param_count
    order = list(range(n))
    random.Random(n).shuffle(order)

    def reduce(chunks):
        acc = chunks[order[0]].clone()
        for r in order[1:]:
            acc = acc + chunks[r]
        return acc

    if op in ("all_reduce", "reduce"):
        s = reduce(ins)
        return [s if (op == "all_reduce" or r == 0) else None for r in range(n)]
    if op == "broadcast":
        return [ins[0].clone() for _ in range(n)]
    if op == "sendrecv":
        return [ins[(r - 1) % n].clone() for r in range(n)]
    if op == "all_gather":
        g = torch.cat([x[:base] for x in ins])
        return [g.clone() for _ in range(n)]
    if op == "reduce_scatter":
        return [reduce([x[q * base:(q + 1) * base] for x in ins]) for q in range(n)]
    if op == "all_to_all":
        return [torch.cat([ins[r][q * base:(q + 1) * base] for r in range(n)]) for q in range(n)]
    raise AssertionError(op)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "float64", "int8"])
@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("op", list(OPS))
def test_expected_matches_simulated_collective(op, dtype, n):
    counts = coll_counts(op, 4096, dtype, n)
    outs = _simulate(op, n, _inputs(op, dtype, n, counts), counts)
    for r in range(n):
        exp = expected_output(op, dtype, n, r, counts)
        if outs[r] is None:
            assert exp is None
            continue
        assert chk.count_wrong(outs[r], exp) == 0, (op, dtype, n, r)


@pytest.mark.parametrize("dtype,n", [("bfloat16", 300), ("float16", 3000), ("int8", 200), ("bfloat16", 256)])
def test_reductions_stay_exact_with_more_ranks_than_the_exact_range(dtype, n):
    counts = coll_counts("all_reduce", 2048, dtype, n)
    ins = _inputs("all_reduce", dtype, n, counts)
    total = ins[0].clone()
    for x in ins[1:]:  # every prefix sum must stay exact too
        total = total + x
    assert chk.count_wrong(total, expected_output("all_reduce", dtype, n, 0, counts)) == 0
    assert float(total.float().max()) <= chk.EXACT_LIMIT[dtype]


def test_inputs_depend_on_the_rank():
    a = chk.rank_values("bfloat16", 2, False, 0, 0, 64)
    b = chk.rank_values("bfloat16", 2, False, 1, 0, 64)
    assert not torch.equal(a, b)


def test_corruption_is_always_visible():
    for dtype in ("bfloat16", "float16", "int8", "float32"):
        counts = coll_counts("all_reduce", 1024, dtype, 2)
        exp = expected_output("all_reduce", dtype, 2, 0, counts)
        out = exp.to(torch_dtype(dtype)).clone()
        assert chk.count_wrong(out, exp) == 0
        corrupt(out)
        assert chk.count_wrong(out, exp) == 3


def test_nan_counts_as_wrong():
    exp = torch.zeros(4)
    assert chk.count_wrong(torch.tensor([0.0, float("nan"), 0.0, 0.0]), exp) == 1
