"""torch's collective matcher (torch.distributed.flight_recorder's Op.match) as rules over one sequence id: the op,
the input and the output sizes, the input and the output dtypes, what a collective requires of its own sizes and
dtypes (all_reduce's output is its input; all_gather's output is its input times the group), and in a coalesced
group (ops issued together share one collective_seq_id) every op in order. Each finding says which side differs
(input / output / input vs output) and, inside a coalesced group, at which position.
"""

from __future__ import annotations

import math
from typing import Optional

from .fields import dtypes as _dtypes
from .fields import op as _op
from .fields import sizes as _sizes

# torch's rules, by op (types.py): which sides a collective's ranks must agree on
NO_INPUT_MATCH = ("all_to_all", "scatter")
NO_OUTPUT_MATCH = ("all_to_all", "gather")
NO_INPUT_DTYPE_MATCH = ("scatter", "broadcast", "_broadcast_oop")
NO_OUTPUT_DTYPE_MATCH = ("gather",)
NO_OWN_DTYPE = ("scatter", "gather", "broadcast", "_broadcast_oop")
SAME_IN_OUT = ("all_reduce", "allreduce_coalesced")
GATHERS = ("all_gather", "all_gather_base", "_all_gather_base", "all_gather_into_tensor_coalesced")
SCATTERS = ("reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced")
CLOSERS = ("coalesced", "ALLGATHER_coalesced", "REDUCE_SCATTER_coalesced")


def op_sig(e: dict) -> tuple:
    """(op, input sizes, input dtypes, output sizes, output dtypes) of one entry, each as plain tuples."""
    return (_op(e.get("profiling_name"))[1], _sizes(e.get("input_sizes")), _dtypes(e.get("input_dtypes")),
            _sizes(e.get("output_sizes")), _dtypes(e.get("output_dtypes")))


def group_sig(entries: list) -> tuple:
    """A coalesced group's (or a lone entry's) signature: every op's, in order."""
    return tuple(op_sig(e) for e in entries)


def _numel(sizes: tuple) -> int:
    return sum(math.prod(s) for s in sizes)


def compare(ref: tuple, other: tuple) -> Optional[tuple]:
    """(kind, side) where `other` (one op) differs from `ref` as torch's matcher sees it, None when they match.
    kind: op | size | dtype; side: input | output."""
    op = ref[0]
    if op != other[0]:
        return ("op", None)
    if op in CLOSERS:
        return None
    if op not in NO_INPUT_MATCH and ref[1] != other[1]:
        return ("size", "input")
    if op not in NO_OUTPUT_MATCH and ref[3] != other[3]:
        return ("size", "output")
    if op not in NO_INPUT_DTYPE_MATCH and ref[1] and other[1] and set(ref[2]) != set(other[2]):
        return ("dtype", "input")
    if op not in NO_OUTPUT_DTYPE_MATCH and ref[3] and other[3] and set(ref[4]) != set(other[4]):
        return ("dtype", "output")
    return None


def own(sig: tuple, group_size: Optional[int]) -> Optional[tuple]:
    """(kind, side, why) when one op breaks what its collective requires of itself, whatever the other ranks did:
    all_reduce's output is its input; all_gather's output holds the group's inputs, reduce_scatter's input the
    group's outputs; input and output of one dtype (broadcast, gather, scatter excepted)."""
    op, ins, in_dt, outs, out_dt = sig
    if op in SAME_IN_OUT and outs and ins != outs:
        return ("size", "input vs output", f"its output {_shape(outs)} is not its input {_shape(ins)}")
    if group_size and ins and outs:
        if op in GATHERS and _numel(outs) != _numel(ins) * group_size:
            return ("size", "input vs output", f"its output holds {_numel(outs)} elements, not its input's "
                                               f"{_numel(ins)} x {group_size} ranks")
        if op in SCATTERS and _numel(ins) != _numel(outs) * group_size:
            return ("size", "input vs output", f"its input holds {_numel(ins)} elements, not its output's "
                                               f"{_numel(outs)} x {group_size} ranks")
    if op not in NO_OWN_DTYPE and ins and outs and in_dt and out_dt and set(in_dt) != set(out_dt):
        return ("dtype", "input vs output", f"its output is {'/'.join(dict.fromkeys(out_dt))} where its input is "
                                            f"{'/'.join(dict.fromkeys(in_dt))}")
    return None


def _shape(sizes: tuple) -> str:
    return ", ".join("x".join(str(n) for n in s) or "scalar" for s in sizes) or "nothing"


def first_difference(ref: tuple, other: tuple) -> Optional[tuple]:
    """(position, kind, side) of the first op where two groups' signatures differ; a group of another length
    differs at the first position one of them lacks (kind "count")."""
    for i, (a, b) in enumerate(zip(ref, other)):
        found = compare(a, b)
        if found:
            return (i, *found)
    if len(ref) != len(other):
        return (min(len(ref), len(other)), "count", None)
    return None


def own_in_group(sig: tuple, group_size: Optional[int]) -> Optional[tuple]:
    """(position, kind, side, why) of the first op of a group that breaks its own collective's rules."""
    for i, s in enumerate(sig):
        found = own(s, group_size)
        if found:
            return (i, *found)
    return None
