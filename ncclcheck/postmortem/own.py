"""What a rank said of itself outranks what the other ranks' flight recorders imply about it (issue 53 item 1).

A rank whose own evidence says it ended on its own (it raised in its own code, asked sys.exit for a failing code,
died of a signal nobody in the job sent it) is the cause, whatever its recorder's completion counters say: gloo may
not yet have marked its last collective complete when the exception hit, and the others' recorders then read as "it
never finished all_reduce #5: a peer, a NIC or a link" (2 runs in 9). What points at it from outside (a peer that
waited on it, the launcher's SIGTERM to the survivors, a survivor's "connection closed by peer", a wrapper's "see
NCCL_DEBUG") is its consequence, never the cause.

A rank's own end, from (per rank, the first that says one):
- its stacks file (training/arm.py; watch: the word it left in the job's store): "raised X: msg" with the script's
  frame, unless an exception of its traceback came out of torch.distributed (a survivor's: its collective failed
  because a peer went) or names a consequence of the failure table (a peer gone, a timeout, the launcher's stop
  reaching its DataLoader); "sys.exit(N)", N failing, with the line that called it;
- the launcher's output or a torchelastic error file: an exception that ended the rank and that no consequence
  class explains, when none of that rank's tracebacks is a consequence's;
- the launcher's failure table: a signal of its own (SIGKILL, a crash), not the launcher's stop, for a rank that left
  no flight recorder (one that wrote its dump was alive to write it: a table saying it was killed too says a stop).
A rank the launcher stopped (its SIGTERM, or the SIGKILL past its grace) has no end of its own, unless its stacks say
it had ended first: a rank that raised or asked sys.exit, still exiting (its exception handling, atexit handlers, a
DataLoader's workers or the process group's teardown take a while) when the launcher stopped every rank after another
failed, keeps its end, with the stop said as what came after (its stacks' `then`). Several ranks that
ended on their own are each a cause, the launcher's first observed failure first, then by the time they wrote.
Pure: the inputs' findings in, causes out; the words are render/words.py's.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable
from typing import Optional

from ..nccl import failures
from ..render import words
from .precedence import AFTER_A_DEATH, OWN_DEATHS
from .stacks import EXITED, RAISED, TOLD_TO_STOP

# causes the named rank's own end restates (its exception line, "left no dump", its exit): left out
RESTATED = ("exception", "exited", "died", "no_dump", "job_failed")
# what the flight recorder says of that rank itself ("never entered #6", "never finished #5" when gloo had not yet
# marked it complete): kept, as the recorder's view of its end, never with a cause of its own
SEEN_BY_RECORDER = ("never_entered", "unfinished", "not_completed")
# what the others' recorders and the launcher say once a rank ended on its own: they waited on it, or were stopped
WAITED = ("never_entered", "unfinished", "blocked", "not_completed", "stalled", "state_mismatch", "not_started",
          "no_dump", "died", "exited", "job_failed", "host_cut", "unusable_dump", "p2p_unmatched", "p2p_cycle")
MAX_ENDS = 64  # ranks given a cause of their own end each (a whole world raising the same error: the first ones)


# an exception torch.distributed raises when a collective or the store failed (DistBackendError, DistNetworkError,
# DistStoreError; their module's name where Python prints it): the communication's failure, told to this rank
_COMM_TYPE = re.compile(r"^(?:torch\.distributed\.[\w.]{1,200}|Dist\w{0,40}Error)(?::|$)")


def said_by_lines(implied: list, logs: list) -> list:
    """`implied` (what the others' recorders or watchdog lines imply of ranks: "never entered all_reduce #3634") with
    those about ranks whose own lines name a cause of theirs (rank 5's NCCL WARN of a failed InfiniBand completion:
    `logs`, the log's causes) made their consequence: the rank had failed, which is why it never entered."""
    said = {r for c in logs if c["cause"] for r in c.get("ranks") or ()}
    return [dict(c, cause=False) if c["cause"] and c["kind"] in SEEN_BY_RECORDER and c.get("ranks")
            and set(c["ranks"]) <= said else c for c in implied]


def _own_exception(lines: list) -> bool:
    """A rank's exceptions (the one that ended it and those it was raised while handling) are its own: none is
    torch.distributed's, torch's wrapper of an NCCL error, or a consequence class of the failure table (a peer gone,
    a timeout, the launcher's stop)."""
    for line in lines:
        cls = failures.classify(line)
        if (cls is not None and not cls.cause) or failures.is_wrapper(line) or _COMM_TYPE.match(line):
            return False
    return True


def _from_stacks(st: dict) -> Optional[dict]:
    reason = st.get("reason") or ""
    if reason.startswith(RAISED):
        chain = st.get("chain") or [reason[len(RAISED):]]
        if st.get("from_collective") or not _own_exception(chain):
            return None
        return {"kind": "exception", "what": reason, "at": st.get("where"), "source": st.get("path"),
                "then": st.get("then")}
    if reason.startswith(EXITED) and reason not in (f"{EXITED}0)", f"{EXITED}None)", f"{EXITED}False)"):
        return {"kind": "exited", "what": f"called {reason}", "at": st.get("where"), "source": st.get("path"),
                "then": st.get("then")}
    return None


def _stopped(f: dict) -> bool:
    return f.get("signal") == "SIGTERM" or bool(f.get("stopped"))


def _raised_before_the_stop(end: Optional[dict], first_said: Optional[tuple]) -> bool:
    """A stopped rank's own exception, read in the launcher's output above every line of the launcher's first observed
    failure: the launcher stops the ranks only once it saw that failure, so the exception came first (the rank was
    still exiting when the stop reached it)."""
    if not end or end.get("kind") != "exception" or not end.get("order") or not first_said:
        return False
    return end["order"][0] == first_said[0] and end["order"][1] < first_said[1]


def ends(stacks: dict, by_rank: dict, events: list, error_files: list, first: Optional[int],
         dumped: frozenset = frozenset()) -> list:
    """Each rank's own end {"rank", "kind" (exception / exited / died), "what", "at", "source"}, the one to name
    first first (at most MAX_ENDS). dumped: the ranks that left a flight recorder."""
    found: dict = {}
    for r, st in stacks.items():
        got = _from_stacks(st)
        if got is not None:
            found[r] = {**got, "time": st.get("time") or ""}
    raised: dict = {}  # rank -> [(class, line, source)] of its lines the logs classified (tracebacks' ends too)
    at: dict = {}  # rank -> (its own frame, the line's place in its file) of the exception that ended it
    said_first: dict = {}  # rank -> the place in its file of its first classified line
    for e in events:
        if isinstance(e.get("rank"), int):
            raised.setdefault(e["rank"], []).append((e["class"], e["line"], e["source"]))
            said_first.setdefault(e["rank"], e.get("order"))
            if e.get("raised") and e["rank"] not in at:
                at[e["rank"]] = (e.get("at"), e.get("order"))
    for e in error_files:
        if isinstance(e.get("rank"), int) and isinstance(e.get("message"), str) and e["message"].strip():
            line = e["message"].strip().splitlines()[-1]
            cls = failures.classify(line)
            raised.setdefault(e["rank"], []).append((cls.id if cls else failures.EXCEPTION.id, line, e["path"]))
    for r, seen in raised.items():
        if r in found or r in stacks:  # its stacks said how it ended (or that it was told to stop): its word first
            continue
        # its exception alone: any other line of that rank the table knows (NCCL's, a peer gone) says more
        if all(c == failures.EXCEPTION.id for c, _, _ in seen) and _own_exception([x[1] for x in seen]):
            _, line, source = seen[0]
            found[r] = {"kind": "exception", "what": f"{RAISED}{line}", "at": (at.get(r) or (None,))[0],
                        "source": source, "time": "", "order": (at.get(r) or (None, None))[1]}
    for r, f in by_rank.items():  # the launcher's table quoting the rank's own exception (its error file)
        if r not in found and r not in stacks and f.get("raised") and _own_exception([f["raised"]]):
            found[r] = {"kind": "exception", "what": f"{RAISED}{f['raised']}", "at": None,
                        "source": f.get("source") or "launcher", "time": ""}
    for r, f in by_rank.items():
        if _stopped(f) and _raised_before_the_stop(found.get(r), said_first.get(first)):
            found[r]["then"] = f"{TOLD_TO_STOP} ({f.get('signal') or 'SIGTERM'})"
        if _stopped(f) and not ((found.get(r) or {}).get("then") or "").startswith(TOLD_TO_STOP):
            found.pop(r, None)  # raised or exited as the launcher stopped it: its stop, not its own end
        elif f.get("signal") in OWN_DEATHS and r not in found and r not in dumped:
            found[r] = {"kind": "died", "what": words.OOM_KILL if f.get("oom") else f["signal"], "at": None,
                        "source": f.get("source") or "launcher", "time": ""}
    order = {"exception": 0, "died": 1, "exited": 2}
    return heapq.nsmallest(MAX_ENDS, ({"rank": r, **e} for r, e in found.items()),
                           key=lambda e: (e["rank"] != first, e["time"] or "~", order[e["kind"]], e["rank"]))


def first(causes: list, found: list, groups: list, who: Callable[[int], str], coll: Callable[[dict], str],
          ranks_text: Callable[[list], str]) -> list:
    """The causes with each rank's own end first (the first of them the root cause), what they restate of that rank
    left out, and what the others' recorders and the launcher said of the rest (they waited, they were stopped) a
    consequence. Causes of another kind (a mismatch, a misconfigured interface) stay causes, after them."""
    if not found:
        return causes
    mine = {e["rank"] for e in found}
    by_pg = {g["pg"]: g for g in groups}
    said = {e["rank"]: e for e in found}
    own = []
    for e in found:
        r = e["rank"]
        text = words.own_end(who(r), e["kind"], e["what"], e["at"])
        if (e.get("then") or "").startswith(TOLD_TO_STOP):
            text += words.stopped_after_its_end(e["then"][len(TOLD_TO_STOP):].strip())
        g = next((g for g in groups if r in g["not_entered"] or r in g["no_dump"]
                  or str(r) in (g.get("unfinished") or {})), None)
        waiting = [x for x in (g["entered"] if g else []) if x != r and x not in mine]
        if waiting:
            text += words.waited_for_it(ranks_text(waiting), coll(g))
        # a death is the "no_dump" (flight recorder) or "died" (launcher) the report's readers already know it by
        kind = next((c["kind"] for c in causes if c["ranks"] == [r] and c["kind"] in ("no_dump", "died")),
                    "died") if e["kind"] == "died" else e["kind"]
        own.append({"kind": kind, "cause": True, "pg": g["pg"] if g else None, "seq": g["seq"] if g else None,
                    "ranks": [r], "text": text,
                    "fix": (words.CRASH_FIX.get(e["what"]) if e["kind"] == "died" else None)
                    or words.OWN_END_FIX[e["kind"]].format(where=e["source"] or "its output"),
                    "source": e["source"] or "launcher", **({"line": e["at"]} if e["at"] else {})})
    rest = []
    for c in causes:
        if c["kind"] in RESTATED and set(c["ranks"]) <= mine and c["ranks"]:
            continue
        if c["kind"] in SEEN_BY_RECORDER and len(c["ranks"]) == 1 and c["ranks"][0] in mine and c["pg"] in by_pg:
            e = said[c["ranks"][0]]
            rest.append(dict(c, cause=False, fix="", text=words.recorder_view(who(e["rank"]), coll(by_pg[c["pg"]]),
                                                                              e["what"])))
            continue
        if c["cause"] and (c["kind"] in WAITED or c["kind"] in AFTER_A_DEATH):
            c = dict(c, cause=False)
        rest.append(c)
    return own + rest

