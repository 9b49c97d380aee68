"""Flight-recorder dumps of every class torch's own analyzer tests (pytorch test/distributed/flight_recorder/
test_fr_analysis.py: matched, coalesced, type, size, state, dtype including output dtypes), written the way torch
writes them (a pickled dict per rank: entries with process_group as a (name, desc) tuple, pg_config, pg_status), plus
NCCL's point-to-point records ("nccl:send 0->1", "nccl:recv 1<-0", p2p_seq_id per group, a batch closed by a
"coalesced" entry) for the pipeline cases. gloo's recorder writes neither coalesced groups nor send/recv (see
docs/postmortem.md), so these are rendered, not captured: the lab-staged gloo cases are tests/postmortem/fixtures/.

    python tests/postmortem/fr_classes.py DIR [CASE...]     # DIR/<case>/nccl_trace_rank_<r> (pickles)

CASES: name -> (builder, the root cause's kind or None for healthy, its ranks, torch's MatchState for the class).
"""

from __future__ import annotations

import os
import pickle
import sys

F32, F16 = "Float", "Half"


def entry(rid: int, op: str, ins, outs, state: str = "completed", seq: int = 1, p2p_seq: int = 0,
          in_dt: str = F32, out_dt: str = F32, pg: tuple = ("0", "default_pg"), p2p: bool = False) -> dict:
    return {"record_id": rid, "pg_id": int(pg[0]), "process_group": pg, "collective_seq_id": seq,
            "p2p_seq_id": p2p_seq, "op_id": rid + 1, "profiling_name": f"nccl:{op}", "time_created_ns": 1000 + rid,
            "input_sizes": ins, "input_dtypes": [in_dt] * len(ins), "output_sizes": outs,
            "output_dtypes": [out_dt] * len(outs), "state": state, "retired": state == "completed",
            "time_discovered_started_ns": None, "time_discovered_completed_ns": None, "duration_ms": None,
            "is_p2p": p2p, "timeout_ms": 600000, "frames": []}


def send(rid, me, peer, n, p2p_seq, state="scheduled", seq=0, pg=("0", "default_pg"), dt=F32):
    return entry(rid, f"send {me}->{peer}", [[n]], [[n]], state, seq, p2p_seq, dt, dt, pg, True)


def recv(rid, me, peer, n, p2p_seq, state="scheduled", seq=0, pg=("0", "default_pg"), dt=F32):
    return entry(rid, f"recv {me}<-{peer}", [[n]], [[n]], state, seq, p2p_seq, dt, dt, pg, True)


def dump(entries: list, world: int, subgroups: dict = None) -> dict:
    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}}
    for name, (desc, ranks) in (subgroups or {}).items():
        cfg[name] = {"name": name, "desc": desc, "ranks": str(ranks)}
    return {"version": "2.10", "entries": entries, "pg_config": cfg, "pg_status": {}, "nccl_version": "2.27.5",
            "comm_lib_version": "2.27.5"}


def two(a: list, b: list, **kw) -> dict:
    return {0: dump(a, 2, **kw), 1: dump(b, 2, **kw)}


def ar(rid=0, seq=1, ins=((4, 4),), outs=((4, 4),), state="completed", out_dt=F32, op="all_reduce"):
    return entry(rid, op, [list(s) for s in ins], [list(s) for s in outs], state, seq, out_dt=out_dt)


CASES = {
    # torch's testBuildDB case 1: matched all_reduce, then one in a subgroup of one rank each
    "matched": (lambda: {r: dump([ar(0), entry(1, "all_reduce", [[5, 5]], [[5, 5]], seq=1, pg=("1", "sub_pg"))], 2,
                                 subgroups={"1": ("sub_pg", [r])}) for r in (0, 1)}, None, None, "FULLY_MATCHED"),
    # case 2: allreduce_coalesced matched
    "matched_allreduce_coalesced": (lambda: two([ar(op="allreduce_coalesced")], [ar(op="allreduce_coalesced")]),
                                    None, None, "FULLY_MATCHED"),
    # case 3: two broadcasts coalesced (one seq), closed by "coalesced": matched
    "coalesced_matched": (lambda: two(*[[entry(0, "broadcast", [[4, 4]], [[4, 4]]),
                                         entry(1, "broadcast", [[4, 4]], [[4, 4]]),
                                         entry(2, "coalesced", [[]], [[]])] for _ in (0, 1)]),
                          None, None, "FULLY_MATCHED"),
    # case 4: uneven all-gather as coalesced broadcasts, rank 0's second is 5x5: a size mismatch inside the group
    "coalesced_size": (lambda: two([entry(0, "_broadcast_oop", [[4, 4]], [[4, 4]]),
                                    entry(1, "_broadcast_oop", [[5, 5]], [[5, 5]]),
                                    entry(2, "ALLGATHER_coalesced", [[]], [[]])],
                                   [entry(0, "_broadcast_oop", [[4, 4]], [[4, 4]]),
                                    entry(1, "_broadcast_oop", [[4, 4]], [[4, 4]]),
                                    entry(2, "ALLGATHER_coalesced", [[]], [[]])]),
                       "size_mismatch", [0, 1], "SIZE_OR_SYNTAX_MISMATCH"),
    # case 5: matched reduce_scatter coalesced
    "coalesced_reduce_matched": (lambda: two(*[[entry(0, "_reduce_oop", [[4, 4]], [[4, 4]]),
                                                entry(1, "_reduce_oop", [[4, 4]], [[4, 4]]),
                                                entry(2, "REDUCE_SCATTER_coalesced", [[]], [[]])] for _ in (0, 1)]),
                                 None, None, "FULLY_MATCHED"),
    # match_one_event's classes, one collective on two ranks (e1 against e2, e5, e6, e7, e9, e10)
    "type": (lambda: two([ar()], [ar(op="all_gather", outs=((8, 4),))]), "op_mismatch", [0, 1],
             "COLLECTIVE_TYPE_MISMATCH"),
    "size_input": (lambda: two([ar()], [ar(ins=((5, 4),))]), "size_mismatch", [0, 1], "SIZE_OR_SYNTAX_MISMATCH"),
    "size_output": (lambda: two([ar()], [ar(outs=((5, 4),))]), "size_mismatch", [0, 1], "SIZE_OR_SYNTAX_MISMATCH"),
    "size_own": (lambda: two([ar(outs=((5, 4),))], [ar(outs=((5, 4),))]), "size_mismatch", [0, 1],
                 "SIZE_OR_SYNTAX_MISMATCH"),
    "state": (lambda: two([ar(state="scheduled")], [ar()]), "state_mismatch", [0], "COLLECTIVE_STATE_MISMATCH"),
    "dtype_output": (lambda: two([ar(out_dt=F16)], [ar()]), "dtype_mismatch", [0, 1], "COLLECTIVE_DTYPE_MISMATCH"),
    # three ranks: the odd one out is named
    "dtype_output_3": (lambda: {r: dump([ar(out_dt=F16 if r == 2 else F32)], 3) for r in range(3)},
                       "dtype_mismatch", [2], "COLLECTIVE_DTYPE_MISMATCH"),
    "coalesced_size_3": (lambda: {r: dump([entry(0, "broadcast", [[3]], [[3]]),
                                           entry(1, "broadcast", [[5, 5] if r == 0 else [4, 4]],
                                                 [[5, 5] if r == 0 else [4, 4]]),
                                           entry(2, "coalesced", [[]], [[]])], 3) for r in range(3)},
                         "size_mismatch", [0], "SIZE_OR_SYNTAX_MISMATCH"),
    # point-to-point (NCCL records each send and recv): rank 0 sends 1024 floats to rank 1, which never posts the
    # recv and waits in all_reduce #3 that rank 0 (stuck in its send) never enters
    "p2p_unmatched": (lambda: two([ar(0, 1), ar(1, 2), send(2, 0, 1, 1024, 1, seq=2)],
                                  [ar(0, 1), ar(1, 2), ar(2, 3, state="scheduled")]),
                      "p2p_unmatched", [1], "SIZE_OR_SYNTAX_MISMATCH"),
    "p2p_size": (lambda: two([ar(0, 1), send(1, 0, 1, 1024, 1, seq=1)], [ar(0, 1), recv(1, 1, 0, 512, 1, seq=1)]),
                 "size_mismatch", [0, 1], "SIZE_OR_SYNTAX_MISMATCH"),
    # a pipeline of 4 stages, two micro-batches: stage 2 skips its second recv from stage 1
    "pipeline_skip": (lambda: _pipeline(4, skip=2), "p2p_unmatched", [2], None),
    # every stage sends to the next before receiving from the previous one: a ring of blocking sends
    "p2p_cycle": (lambda: {r: dump([ar(0, 1), send(1, r, (r + 1) % 3, 1 << 20, 1, seq=1)], 3) for r in range(3)},
                  "p2p_cycle", [0, 1, 2], None),
    # healthy batch_isend_irecv between two ranks: the batch's ops closed by a completed "coalesced" entry
    "p2p_batch_matched": (lambda: {r: dump([ar(0, 1), send(1, r, 1 - r, 64, 1, seq=1), recv(2, r, 1 - r, 64, 1, seq=1),
                                            entry(3, "coalesced", [], [], "completed", 1, 1, p2p=True), ar(4, 2)], 2)
                                   for r in (0, 1)}, None, None, "FULLY_MATCHED"),
}


def _pipeline(n: int, skip: int) -> dict:
    """n stages, 2 micro-batches forward: stage s receives from s-1 and sends to s+1; stage `skip` never posts its
    second recv and goes on to the loss all_reduce (#2), which its upstream stage, stuck in its send, never enters."""
    out = {}
    for r in range(n):
        ents, rid, p = [ar(0, 1)], 1, 1
        for mb in range(2):
            if r > 0 and not (r == skip and mb == 1):
                ents.append(recv(rid, r, r - 1, 1024, p, "completed", seq=1))
                rid, p = rid + 1, p + 1
            if r < n - 1:
                stuck = r == skip - 1 and mb == 1
                ents.append(send(rid, r, r + 1, 1024, p, "scheduled" if stuck else "completed", seq=1))
                rid, p = rid + 1, p + 1
        if r != skip - 1:
            ents.append(ar(rid, 2, state="scheduled"))
        out[r] = dump(ents, n)
    return out


def write(directory: str, case: str) -> str:
    out = os.path.join(directory, case)
    os.makedirs(out, exist_ok=True)
    for r, doc in CASES[case][0]().items():
        with open(os.path.join(out, f"nccl_trace_rank_{r}"), "wb") as f:
            pickle.dump(doc, f)
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for name in sys.argv[2:] or CASES:
        print(write(sys.argv[1], name))
