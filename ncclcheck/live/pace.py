"""What watch asks the responders while a job runs slow (issue 47): each host's clock, when the ranks work outside
collectives, and a transfer probe between the suspects' hosts. Four request kinds, answered by live/responder.py
through `answer`:

- "clock": the responder's wall clock (time.time_ns()) the moment it read the request, and nothing else, so that the
  watcher reads it NTP-style: offset = remote - (sent + received) / 2, error = half the round trip. The flight
  recorder's call times are each host's CLOCK_REALTIME: a host whose clock is ahead would look late.
- "phase": the responder reads its own progress counters (the flight recorder's pg_status: last enqueued and last
  completed collective, ~5 us each) every PHASE_EVERY_S for `s` seconds (at most PHASE_MAX_S) and says each change
  with the moments around it: when each collective ended and the next was called, so postmortem/phase.py can tell
  where in a step the ranks compute (outside collectives) from where they communicate, whichever takes longer. Its
  own worker thread (it waits between samples); ~0.5 % of one core while it samples.
- "blob": `bytes` (at most MAX_BLOB) of padding in the sealed reply frame: what a "rate" probe downloads.
- "rate": names up to wire.MAX_REACH ranks, as "reach" does (never an address: the responder reads the ranks'
  addresses from the job's store); the responder downloads a blob of RATE_BYTES from each, one after another (a
  target serves at most a few probers at once, within its connection slots), each bounded by Budget.live_rate_s,
  and says the rate each carried (bytes received / time, the part received when the bound passed). The reply's
  rates are the links' directions target -> prober, judged by links/analyze.classify (the rule `ncclcheck links`
  uses) in watch.

The client side of a request (`exchange`) is the handshake watch's fetch.ask speaks (wire.py, live/2), sealed and
opened by the asker's session (live/auth.py), with the two moments around the request kept for the clock; a
responder's own "rate" download asks the same way, with a session of its own level.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Mapping
from typing import Any, NamedTuple, Optional

from ..rendezvous.budget import Budget
from . import wire

KINDS = ("clock", "phase", "blob", "rate")
MAX_BLOB = 4 << 20  # bytes of one blob reply: a probe of a few MiB tells a shaped NIC (1-100 MB/s) from a LAN's
RATE_BYTES = 1 << 20  # what a "rate" probe downloads per target: 1 MiB, ~10 ms on a healthy 1 Gb/s link
PHASE_EVERY_S = 0.002  # between two samples of the progress counters: a compute phase of a few ms is seen
PHASE_MAX_S = 3.0  # seconds one "phase" request samples at most (watch asks for its pause between two looks)
PHASE_SHARE = 0.01  # of one core for sampling, past the burst (Budget.live_work_burst_s: one 2 s sampling is ~0.01 s)
PHASE_MAX_ROWS = 4096  # changes of the counters one reply holds at most, per process group (the newest kept)
MAX_RATE_TARGETS = 4  # targets one "rate" request may name (they are downloaded one after another)
SEAL_BYTES = 256  # a sealed reply's prefix beyond the JSON asked for (as fetch.SEAL_BYTES)
LAUNCHERS = ("torchrun", "fabric", "slurm", "mpi", "kubernetes", "pytorchjob")


def launcher_of(env: Mapping[str, str]) -> str:
    """The launcher that started this rank, for watch's header, or "none": the launcher's own variables (torchrun's
    TORCHELASTIC_*, srun's SLURM_STEP_*, mpirun's OMPI_*), not RANK / WORLD_SIZE, which a script under srun sets
    itself for env://."""
    from ..agent.launchers import detect_launcher
    from ..errors import UsageError

    view = dict(env)
    if not any(k in env for k in ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")):
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            view.pop(k, None)
    try:
        name = detect_launcher(view)
    except UsageError:
        return "none"
    return name if name in LAUNCHERS else "none"


class Caller(NamedTuple):
    """Who asks a responder: the session that seals the request and opens the reply (live/auth.Session), and the
    job and run it asks about (fetch.Asker has the same fields)."""

    session: Any
    job: str
    run: str


def blob_bytes(req: Any) -> Optional[int]:
    n = req.get("bytes") if isinstance(req, dict) else None
    return n if type(n) is int and 0 < n <= MAX_BLOB else None


def phase_seconds(req: Any) -> Optional[float]:
    s = req.get("s") if isinstance(req, dict) else None
    return float(s) if type(s) in (int, float) and 0 < s <= PHASE_MAX_S else None


def well_formed(kind: str, req: Any) -> bool:
    """Is this pace request one the responder answers (checked before any work is queued)?"""
    if kind == "phase":
        return phase_seconds(req) is not None
    if kind == "blob":
        return blob_bytes(req) is not None
    if kind == "rate":
        ranks = wire.reach_ranks(req)
        return ranks is not None and len(ranks) <= MAX_RATE_TARGETS
    return kind == "clock"


def answer(me: Any, kind: str, req: Any) -> dict:
    """A responder's reply to a well-formed pace request (`me`: the responder: rank, host, job, run, master, guard,
    budget, caller)."""
    mine = {"v": wire.VERSION, "rank": me.rank, "job": me.job, "run": me.run}
    if kind == "clock":
        return {**mine, "host": me.host, "pid": os.getpid(), "time_ns": time.time_ns()}
    if kind == "phase":
        return {**mine, "host": me.host, "phase": phase(me, phase_seconds(req) or 0.0)}
    if kind == "blob":
        return {**mine, "pad": "0" * (blob_bytes(req) or 0)}
    return {**mine, **rate(me, wire.reach_ranks(req) or [])}


def phase(me: Any, seconds: float) -> dict:
    """{pg: [[ns of the sample before, ns of this sample, enqueued, completed], ...]}: each change of the rank's
    progress counters while sampled (the first sample too), on this host's wall clock (the flight recorder's). The
    sampling's CPU is charged to a Spend of its own (PHASE_SHARE of one core past a burst that covers one sampling:
    watch's "all" just spent the replies' own): a flood of "phase" requests samples less, never more."""
    from .responder import progress_of

    end = time.monotonic() + min(seconds, PHASE_MAX_S)
    rows: dict = {}
    last: dict = {}
    before = time.time_ns()
    t_cpu = time.thread_time()
    while time.monotonic() < end and not me.stopping() and me.phase_spend.allows():
        now = time.time_ns()
        for pg, st in progress_of(me.sources.flight(entries=False)).items():
            v = (st.get("enqueued"), st.get("completed"))
            if None in v or last.get(pg) == v:
                continue
            last[pg] = v
            mine = rows.setdefault(pg, [])
            if len(mine) >= PHASE_MAX_ROWS:
                mine.pop(0)
            mine.append([before, now, v[0], v[1]])
        before = now
        me.phase_spend.charge(time.thread_time() - t_cpu)
        time.sleep(PHASE_EVERY_S)
        t_cpu = time.thread_time()
    return rows


def rate(me: Any, ranks: list) -> dict:
    """A "rate" reply: this rank's download of RATE_BYTES from each named rank's responder (its address from the
    job's store, only a record of this job's run), one after another."""
    from ..rendezvous.store import StoreLost, open_store

    b: Budget = me.budget
    out: dict = {"host": me.host, "pid": os.getpid(), "rate": {}, "unknown": {}}
    try:
        st = open_store(me.master[0], me.master[1], False, b.left(b.deadline(b.live_reach_s)), guard=me.guard)
        rows = st.read_present([wire.rank_key(r) for r in ranks])
    except (ConnectionError, StoreLost) as exc:
        out["error"] = f"the job's store: {str(exc)[:200]}"
        return out
    for r, (there, v) in zip(ranks, rows):
        why = ("not registered" if not there else "refused" if v is None else
               wire.record_problem(r, v) or wire.foreign(v, me.job, me.run or ""))
        if why:
            out["unknown"][str(r)] = why
        elif r != me.rank:
            out["rate"][str(r)] = download(v, me.caller(), RATE_BYTES, b.deadline(b.live_rate_s), b)
    return out


def _open(rec: dict, end: float, budget: Budget) -> tuple[socket.socket, Optional[str]]:
    """A connection to the responder of `rec` and the challenge of its hello (None: not that rank's live/2 one)."""
    family = socket.AF_INET6 if ":" in rec["addr"] else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.settimeout(budget.left(end))
        s.connect((rec["addr"], rec["port"]))
        return s, _challenge(wire.recv_frame(s, wire.MAX_HELLO, end, budget), rec["rank"])
    except BaseException:
        s.close()
        raise


def _request(caller: Caller, ch: str, doc: dict, max_bytes: int, max_items: int = wire.MIN_ITEMS) -> bytes:
    return wire.frame(caller.session.request(ch, {**doc, "job": caller.job, "run": caller.run,
                                                  "max_bytes": max_bytes, "max_items": max_items}))


def exchange(rec: dict, doc: dict, caller: Caller, end: float, budget: Budget,
             limit: int = wire.MAX_REPLY) -> tuple[Optional[dict], str, int, int]:
    """One request to the responder of record `rec` -> (its reply or None, why not, ns before the request was sent,
    ns after the reply was read: the watcher's wall clock)."""
    sent = got = 0
    try:
        s, ch = _open(rec, end, budget)
        with s:
            if ch is None:
                return None, "not that rank's responder", 0, 0
            data = _request(caller, ch, doc, limit)
            s.settimeout(budget.left(end))
            sent = time.time_ns()
            s.sendall(data)
            reply = wire.recv_frame(s, limit + SEAL_BYTES, end, budget)
            got = time.time_ns()
    except (OSError, wire.WireError, TimeoutError) as exc:
        return None, str(exc)[:200] or type(exc).__name__, sent, got
    out, why = caller.session.open_reply(ch, reply)
    if not isinstance(out, dict) or out.get("rank") != rec["rank"] or "error" in out:
        return None, why or "not a reply of that rank", sent, got
    if bad := wire.foreign(out, caller.job, caller.run, "reply"):
        return None, bad, sent, got
    return out, "", sent, got


def _challenge(hello: bytes, rank: int) -> Optional[str]:
    try:
        h = wire.loads(hello)
    except wire.WireError:
        return None
    ch = h.get("challenge") if isinstance(h, dict) else None
    ok = isinstance(ch, str) and re.fullmatch(f"[0-9a-f]{{{wire.CHALLENGE_CHARS}}}", ch) and h.get("rank") == rank \
        and h.get("v") == wire.VERSION
    return ch if ok else None


def download(rec: dict, caller: Caller, nbytes: int, end: float, budget: Budget) -> dict:
    """{"ok", "bytes", "bps", "ms", "kind"}: one blob of `nbytes` from the responder of `rec`, timed from the
    request to the last byte; when `end` passes first, the rate of what arrived (a shaped link is measured, not
    timed out)."""
    from ..preflight.probe import classify

    got, t0 = 0, None
    try:
        s, ch = _open(rec, end, budget)
        with s:
            if ch is None:
                return {"ok": False, "bytes": 0, "bps": None, "ms": None, "kind": "not its responder"}
            data = _request(caller, ch, {"kind": "blob", "bytes": nbytes}, nbytes + 4096)
            t0 = budget.now()
            s.sendall(data)
            want = nbytes + wire.HEADER.size
            while got < want and not budget.passed(end):
                s.settimeout(budget.left(end))
                part = s.recv(min(1 << 20, want - got))
                if not part:
                    break
                got += len(part)
    except (TimeoutError, socket.timeout):
        pass  # the bound passed: the rate of what arrived
    except wire.WireError as exc:  # the target closed at once (its connection slots were full) or spoke nonsense
        return {"ok": False, "bytes": got, "bps": None, "ms": None, "kind": str(exc)[:80]}
    except OSError as exc:
        if t0 is None or got == 0:
            return {"ok": False, "bytes": 0, "bps": None, "ms": None, "kind": classify(exc)}
    if t0 is None:
        return {"ok": False, "bytes": 0, "bps": None, "ms": None, "kind": "timeout"}
    took = max(budget.since(t0), 1e-6)
    return {"ok": got > 0, "bytes": got, "bps": round(got / took), "ms": round(took * 1e3, 2),
            "kind": "ok" if got >= nbytes else "partial"}
