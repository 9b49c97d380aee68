"""watch's fetching: the job's live records read from its store, every rank asked at once, and what comes back decoded
within bounds (a responder, or a stranger's listener a forged record points at, may send anything).

- the registry: PREFIX + "world" names the job, its run and its size; a rank's record of another job or run is
  ignored and named (records copied from another job's store never point watch at that job's ranks);
- a request names the job and run it asks about and how much it takes (`max_bytes`, `max_items`: the look's
  allowance shared among the ranks); a reply over either is refused before a byte of it is decoded (its length is
  read first, its JSON items counted on the raw bytes), and every look's replies together stay within one
  Allowance, so watch's memory is bounded whatever responders send (issue 45: 63 MiB of `{},{},...` from one fake
  rank took watch to 3.4 GB);
- a rank whose reply was refused is named as answering with garbage, never as not answering; one that closed the
  connection before answering (its slots busy) is asked again within the same bound.
"""

from __future__ import annotations

import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Optional

from ..postmortem import flight
from ..postmortem.analyze import GARBAGE, NO_ANSWER_IN_BOUND
from ..rendezvous.budget import Budget
from ..rendezvous.store import JsonStore
from . import wire
from .auth import Session
from .responder import MAX_FRAMES, MAX_THREADS

MAX_WORKERS = 64  # ranks asked at once; the rest queue within the same bound
# One look's replies, all ranks together: the JSON read and the JSON values built from it. 2.5 M values are about
# 200 MB of Python objects at their most compact ({} in a list), beside the ~220 MB of torch's import: watch stays
# under 512 MB whatever responders send. An honest reply has ~10-30 bytes per value.
LOOK_BYTES = 48 << 20
LOOK_ITEMS = 2_500_000
SEAL_BYTES = 256  # a sealed reply's prefix (wire.seal): beyond the JSON asked for
MAX_GROUPS = 10_000  # process groups in one reply's status, config or progress (a large MoE job has hundreds)


@dataclass
class Answer:
    rank: int
    doc: Optional[dict] = None  # the reply
    why: str = ""  # why there is none
    elapsed_s: Optional[float] = None  # how long its answer took (None: not asked)
    nbytes: int = 0
    garbage: bool = False  # it answered, and what it sent was refused (over bounds, not sealed, not JSON, not its)


class Allowance:
    """What one look may read and decode, all ranks together (watch's memory bound)."""

    def __init__(self, nbytes: int = LOOK_BYTES, items: int = LOOK_ITEMS) -> None:
        self.nbytes, self.items = nbytes, items
        self._lock = threading.Lock()

    def take(self, nbytes: int = 0, items: int = 0) -> bool:
        with self._lock:
            if nbytes > self.nbytes or items > self.items:
                return False
            self.nbytes -= nbytes
            self.items -= items
            return True

    def per_rank(self, n: int) -> tuple[int, int]:
        """(max_bytes, max_items) each of n ranks is asked to keep its reply within: the look's share."""
        nbytes = max(wire.MIN_REPLY, min(wire.MAX_REPLY, self.nbytes // max(1, n)))
        return nbytes, max(wire.MIN_ITEMS, nbytes * self.items // max(1, self.nbytes))


@dataclass
class Asker:
    """What watch asks with: its session (how requests are sealed and replies opened), the job and run it asks
    about, and what one reply may hold."""

    session: Session
    job: str = "nojob"
    run: str = ""
    max_bytes: int = wire.MAX_REPLY
    max_items: int = LOOK_ITEMS
    allowance: Allowance = field(default_factory=Allowance)

    def for_look(self, n: int, kind: str) -> Asker:
        """A copy with a fresh allowance for one look at n ranks (its per-rank share asked of each)."""
        allowance = Allowance()
        nbytes, items = allowance.per_rank(n) if kind in ("all", "flight", "stacks") else (wire.MIN_REPLY,
                                                                                          wire.MIN_ITEMS * 8)
        return Asker(self.session, self.job, self.run, nbytes, items, allowance)


@dataclass
class Registry:
    """The job's live records as watch read them."""

    n: int = 0  # world size
    records: dict = field(default_factory=dict)  # rank -> record of this job's run
    missing: dict = field(default_factory=dict)  # rank -> why there is none
    job: str = "nojob"
    run: str = ""
    ignored: list = field(default_factory=list)  # ["rank r: why"]: records of another job or run, named
    ends: dict = field(default_factory=dict)  # rank -> the end record it left (wire.end_key): how it ended


def read_registry(st: JsonStore, ends: bool = False) -> Registry:
    """The world record and every rank's record of this job's run; another job's or run's record ignored and named.
    ends: also each registered rank's end record of this run and attempt (a rank that raised, exited or was told to
    stop said so there: training/arm.py)."""
    w = st.get_now(wire.WORLD_KEY, lambda v: wire.world_problem(v) or (
        None if v["world_size"] <= flight.MAX_WORLD else "not a world size"))
    if w is None:
        return Registry()
    n = w["world_size"]
    reg = Registry(n, job=w["job"], run=w["run"])
    rows = st.read_present([wire.rank_key(r) for r in range(n)])
    for r, (there, v) in enumerate(rows):
        if not there:
            reg.missing[r] = "never registered in the job's store (not armed, or it stopped before arming)"
        elif v is None:  # the store refused it (unsigned with a token, not JSON, too large): its reason
            key = f"{wire.rank_key(r)}: "
            why = next((x[len(key):] for x in reversed(st.rejected) if x.startswith(key)), "unreadable")
            reg.missing[r] = f"its record in the store was refused ({why})"
        elif bad := wire.record_problem(r, v):
            reg.missing[r] = f"its record in the store was refused ({bad})"
        elif v["attempt"] < w["attempt"]:
            reg.missing[r] = f"registered in attempt {v['attempt']}, not in the job's newest ({w['attempt']})"
        elif bad := wire.foreign(v, reg.job, reg.run):
            reg.missing[r] = f"its record was ignored: {bad}"
            reg.ignored.append(f"{wire.rank_key(r)}: {bad}: ignored")
        else:
            reg.records[r] = v
    if ends and reg.records:
        ranks = sorted(reg.records)
        for r, (there, v) in zip(ranks, st.read_present([wire.end_key(r) for r in ranks])):
            if there and v is not None and wire.end_problem(r, v) is None and \
                    wire.foreign(v, reg.job, reg.run) is None and v.get("attempt") == reg.records[r]["attempt"]:
                reg.ends[r] = v
    return reg


def _refused(r: int, why: str, t0: float, budget: Budget, garbage: bool = True) -> Answer:
    return Answer(r, why=f"{GARBAGE} ({why})" if garbage else why, elapsed_s=budget.since(t0), garbage=garbage)


def _hello_problem(hello: object, r: int, asker: Asker) -> tuple[Optional[str], bool]:
    """(why this hello is not one to send rank r's request to, whether that is garbage), (None, False) when it is."""
    if not isinstance(hello, dict):
        return "its hello is not a responder's", True
    ch = hello.get("challenge")
    if hello.get("v") != wire.VERSION or not isinstance(ch, str) \
            or not re.fullmatch(f"[0-9a-f]{{{wire.CHALLENGE_CHARS}}}", ch) or hello.get("rank") != r:
        return f"not rank {r}'s responder (a live/2 hello naming rank {r})", True
    if bad := wire.foreign(hello, asker.job, asker.run, "responder"):
        return f"its record points at another job's responder: {bad}", False
    auth, mine = hello.get("auth"), asker.session.level
    if auth == "token" and mine != "token":
        return "it answers only with the job's key: give watch NCCLCHECK_TOKEN or --token-file", False
    if auth == "munge" and mine != "munge":
        return ("it answers only requests carrying a munge credential of the job's user: run watch inside the job's "
                "allocation (srun --overlap --jobid J ...), with no token" if mine == "none" else
                "it authenticates with munge and watch has a token: the job's ranks were armed without it"), False
    if auth == "none" and mine != "none":
        return (f"it answers without authentication while watch requires one (trust {mine} here): the job was "
                "armed without it; NCCLCHECK_TRUST=none and no token on watch's side to believe it"), False
    return None, False


def ask(rec: dict, kind: str, asker: Asker, end: float, budget: Budget, args: Optional[dict] = None) -> Answer:
    """One rank's reply to one request (`args`: a "reach" request's ranks), every step bounded by `end`; asked again
    (within `end`) when the responder closed the connection before answering (its slots went to others)."""
    pause = budget.live_retry_s
    while True:
        a, again = _ask_once(rec, kind, asker, end, budget, args)
        if not again or budget.passed(end):
            return a
        budget.pause(end, pause)
        pause = budget.next_retry(pause, budget.probe_retry_max_s)


def _ask_once(rec: dict, kind: str, asker: Asker, end: float, budget: Budget,
              args: Optional[dict]) -> tuple[Answer, bool]:
    r = rec["rank"]
    t0 = budget.now()
    where = f"{rec['addr']}:{rec['port']}"
    family = socket.AF_INET6 if ":" in rec["addr"] else socket.AF_INET
    said = False  # the hello came: a close after it is not the slots' doing
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(budget.left(end))
            s.connect((rec["addr"], rec["port"]))
            try:
                hello = wire.loads(wire.recv_frame(s, wire.MAX_HELLO, end, budget))
            except (ConnectionError, wire.WireError) as exc:
                if isinstance(exc, ConnectionError) or "closed after 0 of" in str(exc):  # closed at once: its slots
                    return Answer(r, why=f"{where}: closed before its hello", elapsed_s=budget.since(t0)), True
                return _refused(r, f"{where}: its hello: {exc}", t0, budget), False
            said = True
            bad, garbage = _hello_problem(hello, r, asker)
            if bad:
                return _refused(r, f"{where}: {bad}" if garbage else bad, t0, budget, garbage), False
            ch = hello["challenge"]
            doc = {"kind": kind, "job": asker.job, "run": asker.run, "max_bytes": asker.max_bytes,
                   "max_items": asker.max_items, **(args or {})}
            s.settimeout(budget.left(end))
            try:
                s.sendall(wire.frame(asker.session.request(ch, doc)))
                n = wire.recv_header(s, asker.max_bytes + SEAL_BYTES, end, budget)
            except (ConnectionError, wire.WireError) as exc:
                if isinstance(exc, ConnectionError) or "closed after 0 of" in str(exc):
                    # closed (or reset: the request unread) before a byte of the reply: its slot went to another
                    return Answer(r, why=f"{where}: closed before its reply", elapsed_s=budget.since(t0)), True
                return _refused(r, f"its reply: {exc} (watch asked for at most {asker.max_bytes:,})", t0,
                                budget), False
            if not asker.allowance.take(nbytes=n):
                return _refused(r, f"its reply of {n:,} bytes is past what watch reads in one look, all ranks "
                                   "together", t0, budget), False
            data = wire.recv_body(s, n, end, budget)
    except TimeoutError:
        return Answer(r, why=f"no answer from {where} {NO_ANSWER_IN_BOUND}", elapsed_s=budget.since(t0)), False
    except (OSError, wire.WireError) as exc:
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if said:
            return _refused(r, f"{where}: {what}", t0, budget), False
        return Answer(r, why=f"{where}: {what}", elapsed_s=budget.since(t0)), False
    items = wire.count_items(data)
    if items > asker.max_items or not asker.allowance.take(items=items):
        return _refused(r, f"its reply holds up to {items:,} JSON values; watch asked for at most "
                           f"{asker.max_items:,}", t0, budget), False
    return _decoded(r, data, ch, asker, t0, budget)


def _decoded(r: int, data: bytes, ch: str, asker: Asker, t0: float, budget: Budget) -> tuple[Answer, bool]:
    doc, why = asker.session.open_reply(ch, data)
    if isinstance(doc, dict) and "error" in doc and "rank" not in doc:
        doc, why = None, ""
    if doc is None:
        try:  # a refusal is sent unsealed: say what the responder said
            said = wire.loads(data).get("error")
        except (ValueError, AttributeError, RecursionError):
            said = None
        if said:
            busy = str(said).startswith("busy")
            return Answer(r, why=f"it refused the request: {str(said)[:200]}", elapsed_s=budget.since(t0)), busy
        return _refused(r, f"its reply: {why}", t0, budget), False
    if not isinstance(doc, dict) or doc.get("rank") != r:
        return _refused(r, f"its reply is not rank {r}'s", t0, budget), False
    if bad := wire.foreign(doc, asker.job, asker.run, "reply"):
        return _refused(r, bad, t0, budget), False
    if bad := shape_problem(doc):
        return _refused(r, f"its reply {bad}", t0, budget), False
    return Answer(r, doc, elapsed_s=budget.since(t0), nbytes=len(data)), False


def shape_problem(doc: dict) -> Optional[str]:
    """Why a decoded reply is not the shape a responder sends (more process groups, entries, threads or frames than
    it ever does): the analysis builds objects per group and per entry, so these are bounded before it runs."""
    fr = doc.get("flight")
    if fr is not None and not isinstance(fr, dict):
        return "has a flight recorder that is not an object"
    fr = fr or {}
    for name, v in (("flight recorder's pg_status", fr.get("pg_status")), ("pg_config", fr.get("pg_config")),
                    ("progress", doc.get("progress"))):
        if v is not None and (not isinstance(v, dict) or len(v) > MAX_GROUPS):
            return f"has a {name} of more than {MAX_GROUPS:,} process groups (or not an object)"
    entries = fr.get("entries")
    if entries is not None and (not isinstance(entries, list) or len(entries) > flight.MAX_ENTRIES):
        return f"has more than {flight.MAX_ENTRIES:,} flight-recorder entries (or not a list)"
    stacks = doc.get("stacks")
    if stacks is not None and (not isinstance(stacks, list) or len(stacks) > MAX_THREADS
                               or any(not isinstance(t, dict) or not isinstance(t.get("frames", []), list)
                                      or len(t.get("frames", [])) > MAX_FRAMES for t in stacks)):
        return f"has more than {MAX_THREADS} threads of {MAX_FRAMES} frames (or not a list of them)"
    return None


def fetch_all(records: dict, kind: str, asker: Asker, budget: Budget) -> dict:
    """{rank: Answer} for every record, asked concurrently under ONE bound (Budget.live_fetch_s), within one look's
    allowance."""
    end = budget.deadline(budget.live_fetch_s)
    if not records:
        return {}
    look = asker.for_look(len(records), kind)
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(records)), thread_name_prefix="ncclcheck-watch") as ex:
        futs = {ex.submit(ask, rec, kind, look, end, budget): r for r, rec in records.items()}
        wait_futures(futs, timeout=budget.remaining(end) + budget.thread_join_s)
        out = {}
        for f, r in futs.items():
            if f.done() and not f.cancelled() and f.exception() is None:
                out[r] = f.result()
            else:
                f.cancel()
                out[r] = Answer(r, why="not asked before the bound passed (too many ranks did not answer before it)")
    return out
