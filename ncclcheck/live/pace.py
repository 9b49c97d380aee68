"""What watch asks the responders while a job runs slow (issue 47): each host's clock, when the ranks work outside
collectives, and a transfer probe between the suspects' hosts. Four request kinds, answered by live/responder.py
through `answer`:

- "clock": the responder's wall clock (time.time_ns()) the moment it read the request, and nothing else, so that the
  watcher reads it NTP-style: offset = remote - (sent + received) / 2, error = half the round trip. The flight
  recorder's call times are each host's CLOCK_REALTIME: a host whose clock is ahead would look late.
- "phase": the responder reads its own progress counters (the flight recorder's pg_status: last enqueued and last
  completed collective, ~5 us each) every Budget.live_phase_every_s for `s` seconds (at most
  Budget.live_phase_max_s) and says each change with the moments around it: when each collective ended and the
  next was called, so postmortem/phase.py can tell where in a step the ranks compute (outside collectives) from where
  they communicate, whichever takes longer. Its own worker thread (it waits between samples); ~0.5 % of one core
  while it samples.
- "blob": `bytes` (at most MAX_BLOB) of padding in the sealed reply frame: what a "rate" probe downloads; sent only
  to a rank of this job asking from its own address (`from`: its rank), built once (live/peers.py, Responder.blob).
- "rate": names up to MAX_RATE_TARGETS ranks, as "reach" does (never an address: the responder reads the ranks'
  addresses from the job's store, through the guard reach has: live/peers.py); the responder downloads a blob of
  RATE_BYTES from each, one after another (a target serves at most a few probers at once, within its connection
  slots), each bounded by Budget.live_rate_s, from its own address, and says the rate each carried (bytes received /
  time, the part received when the bound passed). Where the records are not signed, a target that did not answer
  as rank r's own responder of this job and run is "unreached" and nothing more, said at the end of its bound. The
  reply's rates are the links' directions target -> prober, judged by links/analyze.classify (the rule `ncclcheck
  links` uses) in watch.

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

from .. import model
from ..rendezvous.budget import FIXED, Budget
from . import peers, wire
from .kept import Kept

KINDS = ("clock", "phase", "blob", "rate")
RATE_BYTES = 1 << 20  # what a "rate" probe downloads per target: 1 MiB, ~10 ms on a healthy 1 Gb/s link
MAX_BLOB = RATE_BYTES  # bytes of one blob reply: what a probe downloads, no more (a 4 MiB one for any asker was a
# stranger's amplifier: 43,000 times the bytes he sent)
PHASE_SHARE = 0.01  # of one core for sampling, past the burst (Budget.live_work_burst_s: one 2 s sampling is ~0.01 s)
PHASE_MARGIN = 1.25  # the sampling's pace keeps this much of the burst unspent (a sample's CPU varies)
PHASE_MAX_ROWS = 4096  # changes of the counters one reply holds at most, per process group (the newest kept)
PHASE_ROW_BYTES = 86  # one row's JSON at most: four integers of up to 19 digits, three commas, two brackets, a comma
PHASE_ROW_ITEMS = 5  # ... and its JSON values (the list and its four integers)
PHASE_HEAD_BYTES, PHASE_HEAD_ITEMS = 1024, 32  # the reply's own fields (rank, host, job, run, dropped)
PHASE_GROUP_BYTES, PHASE_GROUP_ITEMS = 96, 2  # each process group's name and list
CLOCK_REPLY_BYTES = 4096  # a clock reply is a few dozen bytes
MAX_RATE_TARGETS = 4  # targets one "rate" request may name (they are downloaded one after another)
ITEM_BYTES = 2  # the fewest bytes a JSON value takes in a reply (a digit and a comma)
SEAL_BYTES = 256  # a sealed reply's prefix beyond the JSON asked for (as fetch.SEAL_BYTES)
LAUNCHERS = tuple(x for x in model.LAUNCHERS if x != "ncclcheck")  # ncclcheck starts no job's ranks


def _int(v: Any) -> Optional[int]:
    if type(v) is int:
        return v
    if isinstance(v, str) and v.lstrip("-").isdigit() and len(v) < 20:
        return int(v)
    return None


def progress_of(doc: Any) -> dict:
    """{pg: {"enqueued", "started", "completed"}} from a flight-recorder document's pg_status (torch writes the
    numbers as strings), else from its entries."""
    out: dict = {}
    status = doc.get("pg_status") if isinstance(doc, dict) else None
    for pg, st in (status.items() if isinstance(status, dict) else ()):
        if isinstance(pg, str) and isinstance(st, dict):
            out[pg[:wire.MAX_LINE]] = {k: _int(st.get(f"last_{k}_collective")) for k in ("enqueued", "started",
                                                                                     "completed")}
    return out


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
    return float(s) if type(s) in (int, float) and 0 < s <= FIXED.live_phase_max_s else None


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
    """A responder's reply to a well-formed "clock" or "rate" request (`me`: the responder: rank, host, job, run,
    master, guard, budget, caller); "blob" is the responder's own (Responder.blob: built once)."""
    mine = {"v": wire.VERSION, "rank": me.rank, "job": me.job, "run": me.run}
    if kind == "clock":
        quiet = me.loop.quiet_s() if getattr(me, "loop", None) is not None else None
        return {**mine, "host": me.host, "pid": os.getpid(), "time_ns": time.time_ns(),
                **({"quiet_s": round(quiet, 3)} if quiet is not None else {})}
    if kind == "phase":
        rows, dropped = fit_rows(phase(me, phase_seconds(req) or 0.0), *wire.reply_limit(req))
        return {**mine, "host": me.host, "phase": rows, **({"dropped": dropped} if dropped else {})}
    return {**mine, **rate(me, wire.reach_ranks(req) or [])}


def phase(me: Any, seconds: float) -> dict:
    """{pg: [[ns of the sample before, ns of this sample, enqueued, completed], ...]}: each change of the rank's
    progress counters while sampled (the first sample too), on this host's wall clock (the flight recorder's). The
    sampling's CPU is charged to a Spend of its own (PHASE_SHARE of one core past a burst that covers one sampling:
    watch's "all" just spent the replies' own): a flood of "phase" requests samples less, never more."""
    b: Budget = me.budget
    window = min(seconds, b.live_phase_max_s)
    end = time.monotonic() + window
    rows: dict = {}
    last: dict = {}
    before = time.time_ns()
    t_cpu = time.thread_time()
    cost = 0.0  # a sample's CPU, smoothed
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
        c = time.thread_time() - t_cpu
        me.phase_spend.charge(c)
        cost = c if cost == 0.0 else 0.8 * cost + 0.2 * c
        # a sample's CPU sets the pace, so that the whole window fits one burst of the Spend: a real rank whose
        # recorder cost ~0.12 ms a read (a lab job busy in a big all_reduce) ran dry after 0.8 s of the 2 s at 2 ms,
        # leaving two steps sampled where the analysis needs two measures of each place (its steps unmeasured)
        time.sleep(phase_pace(cost, window, b))
        t_cpu = time.thread_time()
    return rows


def phase_pace(cost_s: float, window_s: float, budget: Budget) -> float:
    """Seconds between two samples of a "phase" window: Budget.live_phase_every_s, longer where a sample's CPU
    (`cost_s`) would spend more than one burst of the sampling's Spend over the window (PHASE_MARGIN kept). A short
    window samples densely for the same CPU: why watch samples a fast job over a few dozen of its steps, not its whole
    pause (straggle.phase_window)."""
    return max(budget.live_phase_every_s, cost_s * window_s / budget.live_work_burst_s * PHASE_MARGIN)


def phase_room(groups: int, rows: int) -> tuple[int, int]:
    """(bytes, JSON values) a "phase" reply of `rows` rows in each of `groups` process groups takes at most: what
    watch asks for (its window's samples) and what fit_rows keeps a reply within."""
    return (PHASE_HEAD_BYTES + groups * (PHASE_GROUP_BYTES + rows * PHASE_ROW_BYTES),
            PHASE_HEAD_ITEMS + groups * (PHASE_GROUP_ITEMS + rows * PHASE_ROW_ITEMS))


def fit_rows(rows: dict, limit: int, items: int) -> tuple[dict, int]:
    """(the rows within `limit` bytes and `items` JSON values, as phase_room counts them, the rows dropped): the
    oldest rows of the longest group go first, so a reply too small for its window still holds each group's newest
    steps, and says how many rows it lacks (watch says it where the verdict is made, never a silent refusal)."""
    sizes = {pg: len(r) for pg, r in rows.items()}
    dropped = 0
    while sizes:
        need = phase_room(0, 0)
        need = (need[0] + sum(PHASE_GROUP_BYTES + n * PHASE_ROW_BYTES for n in sizes.values()),
                need[1] + sum(PHASE_GROUP_ITEMS + n * PHASE_ROW_ITEMS for n in sizes.values()))
        over = max(-(-(need[0] - limit) // PHASE_ROW_BYTES), -(-(need[1] - items) // PHASE_ROW_ITEMS))
        if over <= 0:
            break
        pg = max(sizes, key=lambda g: sizes[g])
        cut = min(over, sizes[pg])
        sizes[pg] -= cut
        dropped += cut
        if sizes[pg] == 0:
            del sizes[pg]
    return {pg: rows[pg][len(rows[pg]) - n:] for pg, n in sizes.items()}, dropped


def rate(me: Any, ranks: list) -> dict:
    """A "rate" reply: this rank's download of RATE_BYTES from each named rank's responder, one after another, the
    targets those live/peers.py lets a responder connect to. Unsigned records: a target that did not answer as that
    rank's own responder is "unreached", said at the end of its bound."""
    b: Budget = me.budget
    out: dict = {"host": me.host, "pid": os.getpid(), "rate": {}, "unknown": {}}
    found = peers.resolve(me, ranks, b.deadline(b.live_reach_s))
    out["unknown"], out["checked"] = found.unknown, "connect" if found.signed else "hello"
    if found.error:
        out["error"] = found.error
        return out
    received = 0
    for r, rec in found.records.items():
        end = b.deadline(b.live_rate_s)
        got = download(rec, me.caller(), RATE_BYTES, end, b, source=me.addr, asker=me.rank)
        received += got["bytes"]
        if not found.signed and not got.get("answered"):
            got = dict(peers.UNREACHED)
            peers.settle(me, end)
        got.pop("answered", None)
        if got.get("ok") and (ends := contended(me, rec, got, b)):
            got["contended"] = ends
        out["rate"][str(r)] = got
    # what receiving cost this host's core beyond this thread (the kernel's copy), as the loop counts its sends
    me.guarded_spend.charge(received / (1 << 20) * b.live_send_cost_s)
    return out


def contended(me: Any, rec: dict, got: dict, budget: Budget) -> list:
    """Which ends of a download ("prober", "source") turned a stranger away while it ran (loop.Loop.stranger_at): a
    token-protected job's responder refuses a stranger's requests before any work, but the refusals, the connections
    it parks and the kernel's part of them still share that host's cores with the transfer (the lab: a healthy host
    flooded without the token lost half its probe rate in two rounds of four). Such a rate is not its link's: the
    probe leaves it out (live/straggle.py). A stranger's connection is parked to the end of the loop's window, so the
    window counts as the transfer's too."""
    took = (got.get("ms") or 0.0) / 1e3 + budget.live_share_window_s
    ends = []
    loop = getattr(me, "loop", None)
    mine = loop.quiet_s() if loop is not None else None
    if mine is not None and mine <= took:
        ends.append("prober")
    doc, _why, _sent, _got = exchange(rec, {"kind": "clock"}, me.caller(), budget.deadline(budget.live_quiet_ask_s),
                                      budget, CLOCK_REPLY_BYTES)
    quiet = doc.get("quiet_s") if isinstance(doc, dict) else None
    if type(quiet) in (int, float) and 0 <= quiet <= took:
        ends.append("source")
    return ends


def _open(rec: dict, end: float, budget: Budget, caller: Caller,
          source: Optional[str] = None) -> tuple[socket.socket, Optional[str]]:
    """A connection to the responder of `rec` (from address `source` when given: a responder probes from the address
    its own record holds, the one a blob is sent to) and the challenge of its hello (None: not that rank's live/2
    responder of the caller's job and run)."""
    family = socket.AF_INET6 if ":" in rec["addr"] else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.settimeout(budget.left(end))
        if source is not None:
            s.bind((source, 0))
        s.connect((rec["addr"], rec["port"]))
        return s, _challenge(wire.recv_frame(s, wire.MAX_HELLO, end, budget), rec["rank"], caller)
    except BaseException:
        s.close()
        raise


def _request(caller: Caller, ch: str, doc: dict, max_bytes: int, max_items: int = wire.MIN_ITEMS) -> bytes:
    """The request frame: `max_bytes` and `max_items` are what the reply may hold (a reply over them is refused or
    trimmed by the responder: ask for what the answer will hold)."""
    packed = {} if doc.get("kind") in wire.NEVER_PACKED else {"pack": wire.PACK}
    return wire.frame(caller.session.request(ch, {**doc, "job": caller.job, "run": caller.run,
                                                  "max_bytes": max_bytes, "max_items": max_items, **packed}))


def exchange(rec: dict, doc: dict, caller: Caller, end: float, budget: Budget,
             limit: int = wire.MAX_REPLY, items: Optional[int] = None,
             kept: Optional[Kept] = None) -> tuple[Optional[dict], str, int, int]:
    """One request to the responder of record `rec`, whose reply may hold `limit` bytes and `items` JSON values ->
    (its reply or None, why not (the responder's own refusal when it refused), ns before the request was sent, ns
    after the reply was read: the watcher's wall clock). Without `items`, as many values as `limit`'s bytes hold at
    ITEM_BYTES each: the bytes bound the reply, never a count the caller did not think of (a "phase" reply of a job
    that steps every 100 ms was refused at 256 values, issue 65). kept: connections kept for the caller's next
    exchanges: the request says "keep", the connection is kept there, and the next exchange with that rank reads its
    responder's next hello on it and asks there (one that closed meanwhile: connected again; one that holds its hello
    holds the exchange to `end`, as a fresh connection's would)."""
    items = max(wire.MIN_ITEMS, limit // ITEM_BYTES) if items is None else items
    sent = got = 0
    s, ch = (kept.take(rec["rank"]) if kept is not None else None), None
    try:
        if s is not None:  # kept by the last exchange: its responder's next hello is there, or it closed meanwhile
            try:
                s.settimeout(budget.left(end))
                ch = _challenge(wire.recv_frame(s, wire.MAX_HELLO, end, budget), rec["rank"], caller)
            except (OSError, wire.WireError, TimeoutError):
                s.close()
                s = None
        if s is None:
            s, ch = _open(rec, end, budget, caller)
        if ch is None:
            s.close()
            return None, "not that rank's responder", 0, 0
        data = _request(caller, ch, {**doc, "keep": True} if kept is not None else doc, limit, items)
        s.settimeout(budget.left(end))
        sent = time.time_ns()
        s.sendall(data)
        reply = wire.recv_frame(s, limit + SEAL_BYTES, end, budget)
        got = time.time_ns()
    except (OSError, wire.WireError, TimeoutError) as exc:
        if s is not None:
            s.close()
        return None, str(exc)[:200] or type(exc).__name__, sent, got
    if kept is None or not kept.put(rec["rank"], s):
        s.close()
    out, why = caller.session.open_reply(ch, reply, limit + SEAL_BYTES)
    if out is None and (said := _refused(reply)):  # a refusal is never sealed: said as one, never as a forgery
        return None, f"refused: {said}", sent, got
    if isinstance(out, dict) and isinstance(out.get("error"), str):
        return None, f"refused: {out['error'][:160]}", sent, got
    if not isinstance(out, dict) or out.get("rank") != rec["rank"]:
        return None, why or "not a reply of that rank", sent, got
    if bad := wire.foreign(out, caller.job, caller.run, "reply"):
        return None, bad, sent, got
    return out, "", sent, got


def _challenge(hello: bytes, rank: int, caller: Caller) -> Optional[str]:
    """The challenge of rank `rank`'s own responder's hello, of the caller's job and run; None for anything else."""
    try:
        h = wire.loads(hello)
    except wire.WireError:
        return None
    ch = h.get("challenge") if isinstance(h, dict) else None
    ok = isinstance(ch, str) and re.fullmatch(f"[0-9a-f]{{{wire.CHALLENGE_CHARS}}}", ch) and h.get("rank") == rank \
        and h.get("v") == wire.VERSION and h.get("job") == caller.job and h.get("run") == caller.run
    return ch if ok else None


def _refused(data: bytes) -> str:
    """A responder's refusal's words ({"error": why}, never sealed), or "" for anything else."""
    try:
        doc = wire.loads(data)
    except wire.WireError:
        return ""
    return doc["error"][:160] if isinstance(doc, dict) and isinstance(doc.get("error"), str) else ""


def download(rec: dict, caller: Caller, nbytes: int, end: float, budget: Budget, source: Optional[str] = None,
             asker: Optional[int] = None) -> dict:
    """{"ok", "bytes", "bps", "ms", "kind", "answered"}: one blob of `nbytes` from the responder of `rec`, asked as
    rank `asker` from address `source`, timed from the request to the last byte; when `end` passes first, the rate of
    what arrived (a shaped link is measured, not timed out). "answered": rank rec["rank"]'s own responder answered
    its hello there (what an unsigned record's target may be said to have done)."""
    from ..preflight.probe import classify

    got, t0, t1 = 0, None, None
    try:
        s, ch = _open(rec, end, budget, caller, source)
        with s:
            if ch is None:
                return {"ok": False, "bytes": 0, "bps": None, "ms": None, "kind": "not its responder",
                        "answered": False}
            data = _request(caller, ch, {"kind": "blob", "bytes": nbytes, "from": asker}, nbytes + 4096)
            t0 = budget.now()
            s.sendall(data)
            n = wire.recv_header(s, nbytes + SEAL_BYTES + 4096, end, budget)
            got = wire.HEADER.size
            if n < nbytes:  # not a blob: a refusal (busy, not a rank of the job), never read as a slow link
                why = _refused(wire.recv_body(s, n, end, budget)) or "not a refusal (JSON with its reason)"
                return {"ok": False, "bytes": 0, "bps": None, "ms": None, "kind": f"refused: {why}"[:120],
                        "answered": True}
            want = n + wire.HEADER.size
            body = bytearray()
            while got < want and not budget.passed(end):
                s.settimeout(budget.left(end))
                part = s.recv(min(1 << 20, want - got))
                if not part:
                    break
                got += len(part)
                body += part
            t1 = budget.now()  # the last byte: opening the blob (a MiB of JSON, its seal) is this side's CPU
            if got == want:  # whole: it must open as rank r's blob, sealed with the asker's key where it has one
                doc, why = caller.session.open_reply(ch, bytes(body), nbytes + SEAL_BYTES + 4096)  # a blob is
                # never packed: one that came packed inflates no further than a blob
                if not isinstance(doc, dict) or doc.get("rank") != rec["rank"] or not isinstance(doc.get("pad"), str):
                    return {"ok": False, "bytes": got, "bps": None, "ms": None,
                            "kind": f"not rank {rec['rank']}'s blob ({why or 'not one'})"[:120], "answered": True}
    except (TimeoutError, socket.timeout):
        pass  # the bound passed: the rate of what arrived
    except wire.WireError as exc:  # the target closed at once (its connection slots were full) or spoke nonsense
        return {"ok": False, "bytes": got, "bps": None, "ms": None, "kind": str(exc)[:80], "answered": t0 is not None}
    except OSError as exc:
        if t0 is None or got == 0:
            return {"ok": False, "bytes": 0, "bps": None, "ms": None, "kind": classify(exc),
                    "answered": t0 is not None}
    if t0 is None:
        return {"ok": False, "bytes": 0, "bps": None, "ms": None, "kind": "timeout", "answered": False}
    took = max((t1 if t1 is not None else budget.now()) - t0, 1e-6)
    return {"ok": got > 0, "bytes": got, "bps": round(got / took), "ms": round(took * 1e3, 2),
            "kind": "ok" if got >= nbytes else "partial", "answered": True}
