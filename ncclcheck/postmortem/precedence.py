"""Which of a failed job's lines and deaths is the cause and which only reports it (issue 44: the first failure wins).

- torch's wrapper of an NCCL error ("NCCL error in: ..., invalid usage (run with NCCL_DEBUG=WARN for details)") stands
  for NCCL's own line about the same failure (its WARN in NCCL_DEBUG_FILE or the launcher's output, or the text torch
  prints under "Last error:"): where that line exists, it is the cause and the wrapper its report.
- NCCL's header ("host:pid:tid [dev]") is found after whatever prefix precedes it, and a line of a process the
  launcher's failure table lists by pid belongs to that rank.
- a rank the launcher stopped (its SIGTERM, or the SIGKILL past its grace) after another rank died of a signal of its
  own (SIGKILL from the OOM killer or an operator, a crash) was stopped before it reached the collective the others
  waited in: it did not skip it.
- a collective of a group with no other member that never completed was held by that rank's own GPU work: no peer
  could hold it.
Pure: events, launcher records and groups in, marks and causes out; the words are render/words.py's.
"""

from __future__ import annotations

import re
from typing import Optional

from ..nccl import failures
from ..render import words
from .stacks import told_to_stop

# NCCL's line header anywhere in a line: not anchored, so a launcher's, a timestamp's or a log collector's prefix may
# precede it; the host starts at a token boundary and every part is bounded (linear on a hostile line)
_HEADER = re.compile(r"(?<![\w.:-])([A-Za-z0-9][\w.-]{0,254}):(\d{1,10}):(\d{1,10}) \[(\d{1,4})\] ")
# a c10d log line ("[W1123 07:32:03.371 ProcessGroupNCCL.cpp:1575] ...") is torch's, never NCCL's last error text
_C10D_LOG = re.compile(r"^\[[IWEF]\d{4} ")


def header_anywhere(line: str) -> Optional[dict]:
    """{host, pid, cuda_dev} from NCCL's "host:pid:tid [dev] " after any prefix, or None. Only NCCL's lines have
    it; a line without "NCCL" is not looked at."""
    if "NCCL" not in line:
        return None
    m = _HEADER.search(line)
    return {"host": m.group(1), "pid": int(m.group(2)), "cuda_dev": int(m.group(4))} if m else None


def after_last_error(lines: list) -> set:
    """Indices of the lines torch printed under its "Last error:" (ncclGetLastError: NCCL's last WARN, its header
    cut): NCCL's own words for the failure its wrapper above reports."""
    out: set = set()
    for i, line in enumerate(lines[:-1]):
        if failures.LAST_ERROR.search(line):
            nxt = lines[i + 1].strip()
            if nxt and not _C10D_LOG.match(nxt) and not nxt.startswith("Traceback"):
                out.add(i + 1)
    return out


def _says_what(e: dict) -> bool:
    """An event that names what happened: a class of the table that is a cause, not torch's wrapper text."""
    cls = failures.BY_ID[e["class"]]
    return cls.cause and cls.id not in (failures.EXCEPTION.id, failures.GUARD_FAILED.id, *failures.WRAPPER_CLASSES) \
        and not failures.is_wrapper(e["line"])


def wrappers(events: list) -> dict:
    """index of a wrapper event -> index of the event that says what happened to the same rank (the same rank, or
    a line without a rank on either side: NCCL's file of a process no table names). Linear in events."""
    first_of: dict = {}  # rank (None too) -> index of its first event that says what happened
    for i, e in enumerate(events):
        if _says_what(e):
            first_of.setdefault(e["rank"], i)
    anyone = min(first_of.values()) if first_of else None
    out = {}
    for i, e in enumerate(events):
        if not (failures.is_wrapper(e["line"]) or e["class"] in failures.WRAPPER_CLASSES):
            continue
        j = first_of.get(e["rank"], first_of.get(None)) if e["rank"] is not None else anyone
        if j is not None and j != i:
            out[i] = j
    return out


def tie_by_pid(events: list, records: list) -> None:
    """A rank-less NCCL line whose process (host:pid) the launcher's failure table lists by pid is that rank's:
    NCCL_DEBUG_FILE of a rank that failed before its init line named its rank (a missing interface fails at once).
    Pids repeat across hosts: a pid listed for more than one rank ties only where the table's host is NCCL's."""
    by_pid: dict = {}
    for f in records:
        if isinstance(f.get("rank"), int) and isinstance(f.get("pid"), int):
            by_pid.setdefault(f["pid"], []).append(f)
    if not by_pid:
        return
    for e in events:
        if e["rank"] is not None:
            continue
        head = header_anywhere(e["line"])
        same = by_pid.get(head["pid"], []) if head else []
        if len(same) > 1:
            same = [f for f in same if _short(f.get("host")) == _short(head["host"])]
        if len({f["rank"] for f in same}) == 1:
            e["rank"], e["tied"] = same[0]["rank"], words.TIED_BY_PID


# the process a launcher's one-line report names ("failed (exitcode: -9) local_rank: 0 (pid: 4100) of binary: ...")
_REPORTED_PID = re.compile(r"\(pid: (\d{1,10})\)")


def not_restated(events: list, records: list) -> list:
    """The events without the launcher's one-line reports of a process its failure table also lists (the same pid):
    the table's record says it, with the rank."""
    pids = {f["pid"] for f in records if isinstance(f.get("pid"), int)}
    if not pids:
        return events
    out = []
    for e in events:
        m = _REPORTED_PID.search(e["line"]) if e["rank"] is None else None
        if m is None or int(m.group(1)) not in pids:
            out.append(e)
    return out


def _short(host: Optional[str]) -> str:
    return (host or "").split(".")[0].lower()


# torchrun's failure table stamps each failure in whole seconds ("2026-11-23_07:32:03", elastic's ProcessFailure:
# int(time.time()) when its agent noticed it): two stamps one apart may be in either order
STAMP_TICKS_APART = 1  # stamps whole seconds apart that may still be in either order (not a wait: a format fact)
_STAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2})_(\d{2}):(\d{2}):(\d{2})$")


def stamp_s(text) -> Optional[int]:
    """Seconds since the epoch (UTC read as naive: only differences matter) of a failure table's time, or None."""
    import calendar

    m = _STAMP.match(text) if isinstance(text, str) else None
    if not m:
        return None
    try:
        return calendar.timegm(tuple(int(g) for g in m.groups()) + (0, 0, 0))
    except (ValueError, OverflowError):
        return None


# What a rank sees when a peer is gone: after the launcher's first observed failure, these lines on the other ranks
# are its consequences (a reconnect refused, a store wait that timed out, NCCL's WARN about the closed socket, the
# survivor's own exception wrapping the collective's error), not causes of their own. Lines that name a fault of the
# rank itself (its socket interface, its GPU, its HCA) stay causes wherever they are.
AFTER_A_DEATH = ("connection_refused", "no_route", "init_timeout", "nccl_warn", "exception",
                  "unhandled_system_error")


# -- deaths and the flight recorder ----------------------------------------------------------------------------------
OWN_DEATHS = ("SIGKILL", "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE")  # nobody's consequence: a kill from outside, a crash


def peer_ended_cleanly(causes: list, failed: list) -> Optional[dict]:
    """The closed connection that says a peer ended without error, or None: a rank's connection to a peer on its own
    host (a loopback address) was closed, and torchrun's failure table (`failed`: its records of ranks that ended
    badly), which lists every worker of that host that did (its agent watches them all, and the peer ended before this
    rank's failure), lists this rank alone."""
    if len(failed) != 1 or failed[0].get("launcher", "torchrun") != "torchrun":
        return None
    r = failed[0]["rank"]
    return next((c for c in causes if c["kind"] == "peer_closed" and c.get("ranks") in ([r], [])
                 and failures.loopback_peer(failures.peer_of(c.get("line") or "") or "")), None)


def stopped_by_launcher(rank: int, by_rank: dict, stacks: dict, first: Optional[int]) -> bool:
    """The launcher stopped `rank` after its first observed failure: the table says SIGTERM (torchrun's own stop),
    or the agent logged sending it its stop signal, or the rank's own stacks file says it was told to stop."""
    if first is None or rank == first:
        return False
    f = by_rank.get(rank) or {}
    if f.get("first"):
        return False
    return f.get("signal") == "SIGTERM" or bool(f.get("stopped")) or told_to_stop(stacks.get(rank))


def killed_first(by_rank: dict, first: Optional[int]) -> Optional[dict]:
    """The launcher's first observed failure when it died of a signal of its own (OOM killer, an operator's kill, a
    crash) and not of one the launcher sent it, else None."""
    f = by_rank.get(first) if first is not None else None
    if not f or f.get("signal") not in OWN_DEATHS or f.get("stopped"):
        return None
    return f


def stopped_not_skipped(causes: list, by_rank: dict, stacks: dict, first: Optional[int], groups: list) -> list:
    """The flight recorder's "never entered" of ranks the launcher stopped after a rank died of its own signal is a
    consequence: their dumps were written when they were stopped, mid-step, before they reached the collective the
    others waited in (issue 44 item 4: 1 run in 4 named such a rank, not the SIGKILLed one). Without the launcher's
    output an armed job says the same: its ranks write their stacks on every end they can catch, so a rank of the
    group that left neither dump nor stacks died of one it could not (SIGKILL, the OOM killer, a crash, its host),
    and ranks whose stacks say they were told to stop were stopped after it."""
    dead = killed_first(by_rank, first)
    by_pg = {g["pg"]: g for g in groups}
    out = []
    for c in causes:
        if c["kind"] == "never_entered" and c["cause"]:
            if dead is not None and first not in c["ranks"] and \
                    all(stopped_by_launcher(r, by_rank, stacks, first) for r in c["ranks"]):
                c = dict(c, cause=False, fix="",
                         text=c["text"] + words.stopped_before_it(first, dead["signal"], len(c["ranks"])))
            elif not by_rank and stacks and all(told_to_stop(stacks.get(r)) for r in c["ranks"]):
                silent = [r for r in (by_pg.get(c["pg"]) or {}).get("no_dump", []) if r not in stacks]
                if silent:
                    c = dict(c, cause=False, fix="",
                             text=c["text"] + words.stopped_after_silent(silent[0], len(c["ranks"])))
        out.append(c)
    return out
