"""Where each rank stood when torch's watchdog fired, read from the job's log lines alone (no flight recorder): the
cross-rank reading a person does with a pasted log of an unarmed job.

torch's ProcessGroupNCCL prints, on each rank whose collective timed out (torch/csrc/distributed/c10d/
ProcessGroupNCCL.cpp, 1.13 to 2.13):
- "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=.., NumelOut=..,
  Timeout(ms)=..) ran for .. milliseconds before timing out.", the rank inside the message as "[Rank 3]" (<= 2.1),
  "[PG 0 Rank 3]", "[PG 0 (default_pg) Rank 3]" or "[PG ID 0 PG GUID 0(default_pg) Rank 3]" (later), or only in the
  launcher's prefix ("[rank3]:");
- "Timeout at NCCL work: 41, last enqueued NCCL work: 41, last completed NCCL work: 40." (2.2+).
gloo's "Timed out waiting Nms for recv operation" says no sequence number; its rank is its prefix's.

Per process group, from the ranks that reported:
- ranks that time out at one sequence number in different ops, or at different numbers, diverged: a collective
  mismatch, the minority named;
- a rank whose last enqueued work is below the number the others time out at never entered that collective;
- in the default group, a rank of the job that reported no timeout while most ranks did never entered it (it was
  elsewhere: its own lines may go on); a rank that said how it ended (it raised, it was killed) outranks this
  (postmortem/own.py);
- every rank of the job timing out in the one collective each enqueued: all entered it and it stalled inside (the
  network, peer-to-peer, a GPU), which no rank's skipping explains: said as that, never blamed on a rank.
Pure: events in, causes out; the sentences are render/words.py's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from ..nccl import failures
from ..nccl.linear import MAX_LINE_CHARS
from ..render import words

_WORK = re.compile(r"WorkNCCL\(SeqNum=(\d{1,12}), OpType=(\w{1,40})(?:, NumelIn=(\d{1,15}), NumelOut=(\d{1,15}))?")
_TIMEOUT = re.compile(r"Timeout\(ms\)=(\d{1,12})\)")
# A process group's timeout under this is the setting, not a hang: torch's default is 10 minutes (NCCL), a first
# collective alone sets up its connections for seconds, and a timeout of 60 s is a choice some codebases make (their
# rank 0 validating while the others wait is a hang the text does not explain)
TOO_SHORT_MS = 10_000
# the rank's place: "Timeout at NCCL work: %d, last enqueued NCCL work: %d, last completed NCCL work: %d." (2.3-2.5),
# "Exception (either an error or timeout) detected by watchdog at work: %d, ..." (2.4-2.5), " failure detected by
# watchdog at work sequence id: %d PG status: last enqueued work: %d, last completed work: %d" (2.6+); a dump signal's
# "Last enqueued NCCL work: %d, last completed NCCL work: %d." says the last two alone
_AT = re.compile(r"(?:Timeout at NCCL work|detected by watchdog at work(?: sequence id)?): (\d{1,12}),? "
                 r"(?:PG status: )?last enqueued (?:NCCL )?work: (-?\d{1,12}), last completed (?:NCCL )?work: "
                 r"(-?\d{1,12})")
_LAST = re.compile(r"Last enqueued NCCL work: (-?\d{1,12}), last completed NCCL work: (-?\d{1,12})")
# "[PG 0 Rank 3]", "[PG 1 (tp) Rank 3]", "[PG ID 1 PG GUID 3(tp) Rank 0]": the group's id and its description
_PG = re.compile(r"\[PG (?:ID )?(\d{1,9})(?: PG GUID \w{0,40})? ?(?:\(([^)\]\n]{0,64})\))?")
# c10d's OpType names as the recorder and the reports spell ops
_OPS = {"ALLREDUCE": "all_reduce", "ALLGATHER": "all_gather", "_ALLGATHER_BASE": "all_gather_into_tensor",
        "REDUCE_SCATTER": "reduce_scatter", "_REDUCE_SCATTER_BASE": "reduce_scatter_tensor", "BROADCAST": "broadcast",
        "REDUCE": "reduce", "ALLTOALL": "all_to_all", "ALLTOALL_BASE": "all_to_all_single", "BARRIER": "barrier",
        "GATHER": "gather", "SCATTER": "scatter", "SEND": "send", "RECV": "recv", "COALESCED": "coalesced",
        "ALLREDUCE_COALESCED": "all_reduce_coalesced", "ALLGATHER_COALESCED": "all_gather_coalesced"}
TIMEOUT_CLASSES = ("watchdog_timeout", "gloo_timeout")
GLOO_UNNUMBERED = -1  # the sequence number a gloo timeout stands at (gloo's lines say none)


@dataclass
class Report:
    """One rank's watchdog report in one process group (what its lines say, merged)."""
    rank: int
    pg: str
    desc: str = ""
    seq: Optional[int] = None
    op: Optional[str] = None
    enqueued: Optional[int] = None
    completed: Optional[int] = None
    numel: Optional[tuple] = None  # (NumelIn, NumelOut) of its timed-out work
    timeout_ms: Optional[int] = None  # the Timeout(ms) its work had


def _op(name: str) -> str:
    return _OPS.get(name.upper(), name.lower())


def reports(events: list) -> dict:
    """pg -> rank -> Report, from the timeout lines of ranks that are known (a prefix or the message says it)."""
    out: dict = {}
    for e in events:
        if e["class"] not in TIMEOUT_CLASSES or not isinstance(e.get("rank"), int):
            continue
        line = e["line"][:MAX_LINE_CHARS]
        g = _PG.search(line)
        pg, desc = (g.group(1), g.group(2) or "") if g else ("0", "")
        rep = out.setdefault(pg, {}).setdefault(e["rank"], Report(e["rank"], pg, desc))
        rep.desc = rep.desc or desc
        if (w := _WORK.search(line)) is not None:
            rep.seq, rep.op = int(w.group(1)), _op(w.group(2))
            rep.numel = (int(w.group(3)), int(w.group(4))) if w.group(3) else None
            if (t := _TIMEOUT.search(line, w.end())) is not None:
                rep.timeout_ms = int(t.group(1))
        if e["class"] == "gloo_timeout" and rep.seq is None:  # gloo numbers nothing: the collective it waited in
            rep.seq, rep.op = GLOO_UNNUMBERED, None
        if (a := _AT.search(line)) is not None:
            rep.seq = rep.seq if rep.seq is not None else int(a.group(1))
            rep.enqueued, rep.completed = int(a.group(2)), int(a.group(3))
        elif (b := _LAST.search(line)) is not None and rep.enqueued is None:
            rep.enqueued, rep.completed = int(b.group(1)), int(b.group(2))
    return out


def _name(pg: str, desc: str) -> str:
    return desc if desc and desc != "undefined" else ("default_pg" if pg == "0" else f"process group {pg}")


def causes(events: list, world: int, seen: set, who: Callable[[int], str],
           ranks_text: Callable[[list], str], stated: Optional[int] = None) -> list:
    """The causes (and the consequences "all entered, it stalled") the watchdog lines of `events` show. world: the
    job's size as the other evidence knows it (0: unknown); seen: the ranks with lines of their own in the logs;
    stated: the size a pasted launch command states (a job of one rank can only wait on its own GPU)."""
    out: list = []
    for pg, reps in reports(events).items():
        timed = {r: rep for r, rep in reps.items() if rep.seq is not None}
        if not timed:
            continue
        desc = next((rep.desc for rep in reps.values() if rep.desc), "")
        name = _name(pg, desc)
        count: dict = {}
        for rep in timed.values():
            count[(rep.seq, rep.op)] = count.get((rep.seq, rep.op), 0) + 1
        (seq, op), _ = max(count.items(), key=lambda kv: (kv[1], -kv[0][0]))
        coll = (f"{op or 'collective'} #{seq} of {name}" if seq != GLOO_UNNUMBERED else
                f"the gloo collective they timed out in (gloo numbers none) of {name}")
        major = sorted(r for r, rep in timed.items() if (rep.seq, rep.op) == (seq, op))
        short = sorted({timed[r].timeout_ms for r in major if timed[r].timeout_ms is not None})
        if short and short[-1] < TOO_SHORT_MS:  # what every other reading below would blame is the setting's
            out.append({"kind": "pg_timeout_too_short", "cause": True, "pg": None, "seq": None, "ranks": major,
                        "text": words.timeout_too_short(ranks_text(major), coll, short[-1]),
                        "fix": words.TIMEOUT_TOO_SHORT_FIX, "source": "watchdog lines"})
            continue
        odd = sorted(r for r in timed if r not in major)
        if odd:  # the minority named; as many on each side: both sides are
            named = odd if len(odd) < len(major) else sorted(timed)
            parts = [f"{ranks_text([r])} in {timed[r].op or 'a collective'} #{timed[r].seq}" for r in named[:6]]
            out.append({"kind": "collective_mismatch", "cause": True, "pg": None, "seq": None, "ranks": named,
                        "text": words.diverged("; ".join(parts), ranks_text(major), coll, name,
                                               len(named) == len(timed)),
                        "fix": failures.BY_ID["collective_mismatch"].fix, "source": "watchdog lines"})
            continue
        sizes: dict = {}  # one collective of one op, called with other element counts: a size mismatch
        for r in major:
            if timed[r].numel is not None:
                sizes.setdefault(timed[r].numel, []).append(r)
        if len(sizes) > 1:
            common = max(sizes, key=lambda k: (len(sizes[k]), -min(sizes[k])))
            odd = sorted(r for k, rs in sizes.items() if k != common for r in rs)
            named = odd if len(odd) < len(sizes[common]) else sorted(r for rs in sizes.values() for r in rs)
            out.append({"kind": "collective_mismatch", "cause": True, "pg": None, "seq": None, "ranks": named,
                        "text": words.sizes_differ(coll, "; ".join(f"{ranks_text(rs)} {k[0]} in, {k[1]} out"
                                                                   for k, rs in sorted(sizes.items(),
                                                                                       key=lambda kv: kv[1]))),
                        "fix": failures.BY_ID["collective_mismatch"].fix, "source": "watchdog lines"})
            continue
        # a rank whose own last enqueued work is below it (its timeout, or a dump signal it received, says so)
        behind = sorted(r for r, rep in reps.items() if rep.enqueued is not None and rep.enqueued < seq)
        size = max(world, max([*seen, *reps]) + 1)
        missing = ([r for r in range(size) if r not in timed and r not in behind]
                   if pg == "0" or name == "default_pg" else [])
        if behind:
            out.append(_never(behind, coll, major, who, ranks_text, words.enqueued_below(reps[behind[0]].enqueued)))
        elif missing and len(major) >= 2 and len(missing) < len(major):
            out.append(_never(missing, coll, major, who, ranks_text,
                              words.no_timeout_of_its_own(sorted(set(missing) & seen))))
        elif not missing and len(major) == len(timed) and all(rep.enqueued in (None, seq) for rep in timed.values()):
            if stated == 1 and major == [0]:  # no peer could hold it: its own GPU work did
                out.append({"kind": "not_started", "cause": True, "pg": None, "seq": None, "ranks": major,
                            "text": words.alone_stalled(who(0), coll), "fix": words.OWN_GPU_FIX,
                            "source": "watchdog lines"})
            else:  # one rank seen alone: its own GPU is suspected first
                out.append({"kind": "stalled_one" if len(timed) == 1 else "stalled_all", "cause": False, "pg": None,
                            "seq": None, "ranks": major, "text": words.all_entered_stalled(ranks_text(major), coll),
                            "fix": "", "source": "watchdog lines"})
    return out


def _never(ranks: list, coll: str, waiting: list, who, ranks_text, why: str) -> dict:
    text = words.never_entered_by_lines(who(ranks[0]) if len(ranks) == 1 else ranks_text(ranks), coll,
                                        ranks_text(waiting), why)
    return {"kind": "never_entered", "cause": True, "pg": None, "seq": None, "ranks": ranks, "text": text,
            "fix": "find why that rank stopped issuing collectives (its own log: a rank-dependent branch, an exception "
                   "caught and ignored, a data loader that ran out first); on a live hang `py-spy dump --pid` of it "
                   "shows where it is, and `ncclcheck recommend --postmortem DIR --format env` arms the next run",
            "source": "watchdog lines"}
