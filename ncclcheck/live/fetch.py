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

import collections
import errno
import os
import re
import selectors
import socket
import threading
from dataclasses import dataclass, field
from typing import Optional

from ..agent.limits import BASE_FDS
from ..facts.host import nofile
from ..postmortem import flight
from ..postmortem.analyze import GARBAGE, NO_ANSWER_IN_BOUND
from ..rendezvous.budget import Budget
from ..rendezvous.store import JsonStore, StoreLost
from . import wire
from .auth import Session
from .kept import Kept
from .responder import MAX_FRAMES, MAX_THREADS

# Ranks asked at once: n / RANKS_PER_ASK, between MIN_AT_ONCE and MAX_AT_ONCE, within half the descriptors this
# process may open (one each); the rest wait their turn within the same bound. A fixed 64 at once (then a thread each)
# took a look at 4,096 ranks past the default 10 s bound, where a real rank answers "all" in ~0.1-0.2 s (torch's dump
# of 2,000 entries alone is ~0.13 s; its responder's threads wait behind the training loop for the GIL): n / 32 at
# once keeps such a look near 5 s at any size up to MAX_AT_ONCE x 32 ranks. More at once waits less on a real
# cluster and costs more where the answering ranks share CPUs: in scripts/bench_live.py (512 simulated ranks a
# process, 2 cores) 512 at once took the first look at 4,096 ranks to 10 s, 64 to 256 at once to 4.1-4.5 s (issue 56).
MIN_AT_ONCE = 64
MAX_AT_ONCE = 512
RANKS_PER_ASK = 32
# One look's replies, all ranks together: the JSON read and the JSON values built from it. 2.5 M values are about
# 200 MB of Python objects at their most compact ({} in a list), beside the ~220 MB of torch's import: watch stays
# under 512 MB whatever responders send, up to LOOK_BYTES / wire.MIN_REPLY ranks (12,288); past that a look takes
# each rank's least reply (Allowance.of). An honest reply has ~10-30 bytes per value.
LOOK_BYTES = 48 << 20
LOOK_ITEMS = 2_500_000
PROGRESS_BYTES = 16 << 10  # what a "progress" reply is asked to fit in: a job's few hundred groups' counters
PROGRESS_ITEMS = 8192
SEAL_BYTES = 256  # a sealed reply's prefix (wire.seal): beyond the JSON asked for
READ_CHUNK = 1 << 16
MAX_GROUPS = 10_000  # process groups in one reply's status, config or progress (a large MoE job has hundreds)


@dataclass
class Answer:
    rank: int
    doc: Optional[dict] = None  # the reply
    why: str = ""  # why there is none
    elapsed_s: Optional[float] = None  # how long its answer took (None: not asked)
    nbytes: int = 0
    garbage: bool = False  # it answered, and what it sent was refused (over bounds, not sealed, not JSON, not its)
    done_at: Optional[float] = None  # when the asking ended (time.monotonic)


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

    @classmethod
    def of(cls, n: int, nbytes: int, items: int) -> Allowance:
        """The allowance of a look asking each of n ranks for at most `nbytes` and `items`: the fixed one, or n of
        those replies where that is more (so every honest reply fits, whatever the number of ranks)."""
        return cls(max(LOOK_BYTES, n * (nbytes + SEAL_BYTES)), max(LOOK_ITEMS, n * items))

    @staticmethod
    def per_rank(n: int) -> tuple[int, int]:
        """(max_bytes, max_items) each of n ranks is asked to keep its reply within: the look's share, at least what a
        responder takes (wire.MIN_REPLY, wire.MIN_ITEMS)."""
        nbytes = max(wire.MIN_REPLY, min(wire.MAX_REPLY, LOOK_BYTES // max(1, n) - SEAL_BYTES))
        return nbytes, max(wire.MIN_ITEMS, nbytes * LOOK_ITEMS // LOOK_BYTES)


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
        nbytes, items = Allowance.per_rank(n) if kind in ("all", "flight", "stacks") else (PROGRESS_BYTES,
                                                                                           PROGRESS_ITEMS)
        return Asker(self.session, self.job, self.run, nbytes, items, Allowance.of(n, nbytes, items))


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
    if ends and reg.records and _ended_any(st):
        ranks = sorted(reg.records)
        for r, (there, v) in zip(ranks, st.read_present([wire.end_key(r) for r in ranks])):
            if there and v is not None and wire.end_problem(r, v) is None and \
                    wire.foreign(v, reg.job, reg.run) is None and v.get("attempt") == reg.records[r]["attempt"]:
                reg.ends[r] = v
    return reg


def _ended_any(st: JsonStore) -> bool:
    """May any rank have left an end record? False only when the ranks' counter of them (wire.ENDS_KEY) is absent or
    reads 0 (looked at before it is read: reading a counter that is not there would write it in the job's store)."""
    try:
        return st.has(wire.ENDS_KEY) and st.add(wire.ENDS_KEY, 0) != 0
    except StoreLost:  # not a counter (a value someone set): every end key is read
        return True


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
    return _fly({rec["rank"]: rec}, kind, asker, end, budget, {rec["rank"]: args or {}}, {}, 1)[rec["rank"]]


HELLO, SEND, HEADER, BODY = "hello", "send", "header", "body"  # what an ask waits for, once connected


class _Ask:
    """One rank's request in flight: its socket (non-blocking), the stage it is at and what it read so far."""

    __slots__ = ("rec", "rank", "where", "args", "sock", "stage", "buf", "need", "out", "ch", "t0", "pause",
                 "connected", "parked", "reused")

    def __init__(self, rec: dict, args: dict, pause: float) -> None:
        self.rec, self.rank, self.args, self.pause = rec, rec["rank"], args, pause
        self.where = f"{rec['addr']}:{rec['port']}"
        self.sock: Optional[socket.socket] = None
        self.stage, self.buf, self.out, self.ch = HELLO, bytearray(), b"", ""
        self.need: Optional[int] = None  # the frame's length once its header came
        self.t0, self.connected = 0.0, False
        self.parked = False  # its reply not begun within Budget.live_park_s: open, but no longer holding a slot
        self.reused = False  # its socket is a connection an earlier look kept (Kept)


def _fly(records: dict, kind: str, asker: Asker, end: float, budget: Budget, args: dict, due: dict,
         at_once: int, kept: Optional[Kept] = None) -> dict:
    """{rank: Answer}: every record asked, at most `at_once` connections open at a time, all on this thread (one
    selector; no thread per rank: at 512 at once, threads took watch's CPU per rank from ~0.4 to ~0.8 ms), none
    before its `due` time (time.monotonic), every step bounded by `end`; a rank whose responder closed before
    answering (its slots went to others) asked again within `end`. kept: a rank's connection kept by an earlier look
    is asked on first (one that closed before its hello: connected again at once), and each answered connection is
    kept for the next."""
    sel = selectors.DefaultSelector()
    todo = collections.deque(sorted(records, key=lambda r: due.get(r, 0.0)))
    again: list = []  # (when, rank, its ask): asked again after a pause
    out: dict = {}
    open_: dict = {}  # socket -> _Ask
    started: collections.deque = collections.deque()  # (t0, ask) in the order asked: the oldest park first
    parked = [0]  # asks open whose reply has not begun within live_park_s: they hold no slot
    room = max(at_once, open_room())  # asks open at once, parked ones included: the descriptors this process has

    def slots() -> int:
        """Asks that may start now: at_once less those holding a slot, within the descriptors' room."""
        return max(0, min(at_once - (len(open_) - parked[0]), room - len(open_)))

    def park(now: float) -> None:
        while started and started[0][0] + budget.live_park_s <= now:
            t0, a = started.popleft()
            if a.sock is not None and a.t0 == t0 and not a.parked and a.stage != BODY:
                a.parked = True
                parked[0] += 1

    def start(a: _Ask) -> None:
        a.t0, a.stage, a.buf, a.need, a.connected = budget.now(), HELLO, bytearray(), None, False
        a.parked = False
        started.append((a.t0, a))
        a.sock = kept.take(a.rank) if kept is not None else None
        a.reused = a.connected = a.sock is not None
        if a.reused:  # its responder greeted it again after the last reply: the hello is there or on its way
            open_[a.sock] = a
            sel.register(a.sock, selectors.EVENT_READ, a)
            return
        try:
            a.sock = socket.socket(socket.AF_INET6 if ":" in a.rec["addr"] else socket.AF_INET, socket.SOCK_STREAM)
            a.sock.setblocking(False)
            err = a.sock.connect_ex((a.rec["addr"], a.rec["port"]))
        except OSError as exc:
            return finish(a, Answer(a.rank, why=f"{a.where}: {exc.strerror or exc}", elapsed_s=budget.since(a.t0)))
        if err not in (0, errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK):
            return finish(a, Answer(a.rank, why=f"{a.where}: {os.strerror(err)}", elapsed_s=budget.since(a.t0)))
        open_[a.sock] = a
        # The responder speaks first: the connection's first event is its hello (or the connect's error), one wakeup
        # where waiting for writability, then for the hello, took two and a modify between (the second look's asks
        # are nothing but this exchange: ~1 s of watch's CPU at 4,096 ranks)
        sel.register(a.sock, selectors.EVENT_READ, a)

    def drop(a: _Ask, keep: bool = False) -> None:
        """The ask's socket off the selector and its slot freed: closed, or (keep) kept for the next look."""
        if a.parked:
            a.parked = False
            parked[0] -= 1
        if a.sock is not None:
            if a.sock in open_:
                del open_[a.sock]
                sel.unregister(a.sock)
            if not keep:
                a.sock.close()
            a.sock = None

    def finish(a: _Ask, answer: Answer, retry: bool = False) -> None:
        drop(a, kept is not None and answer.doc is not None and not retry and a.sock is not None
             and kept.put(a.rank, a.sock))
        if retry and not budget.passed(end):
            again.append((budget.now() + a.pause, a, answer))
            a.pause = budget.next_retry(a.pause, budget.probe_retry_max_s)
            return
        answer.done_at = budget.now()
        out[a.rank] = answer

    def closed(a: _Ask, reset: bool = False) -> None:
        """The responder closed (or reset) the connection partway through what the ask was reading."""
        got, of = (len(a.buf), wire.HEADER.size) if a.need is None else (len(a.buf), a.need)
        if a.reused and a.stage == HELLO and (got == 0 or reset):
            # a kept connection its responder closed (its bound passed, its slot given to a new one, a responder that
            # does not keep): no sign of busy slots, so a fresh connection at once, not a retry after a pause
            drop(a)
            return start(a)
        if (got == 0 or reset) and a.stage == HELLO:  # closed at once: its slots went to others
            return finish(a, Answer(a.rank, why=f"{a.where}: closed before its hello", elapsed_s=budget.since(a.t0)),
                          retry=True)
        if (got == 0 or reset) and a.stage in (SEND, HEADER):  # the request unread, or none of the reply: the same
            return finish(a, Answer(a.rank, why=f"{a.where}: closed before its reply", elapsed_s=budget.since(a.t0)),
                          retry=True)
        cut = f"the connection closed after {got} of {of} bytes"
        if a.stage == HELLO:
            return finish(a, _refused(a.rank, f"{a.where}: its hello: {cut}", a.t0, budget))
        if a.stage == HEADER:
            return finish(a, _refused(a.rank, f"its reply: {cut} (watch asked for at most {asker.max_bytes:,})",
                                      a.t0, budget))
        finish(a, _refused(a.rank, f"{a.where}: {cut}", a.t0, budget))

    def length(a: _Ask, limit: int) -> bool:
        """Has the frame's header come (its length within `limit`, else WireError)? Its bytes leave the buffer."""
        if a.need is None and len(a.buf) >= wire.HEADER.size:
            (n,) = wire.HEADER.unpack_from(a.buf)
            if n > limit:
                raise wire.WireError(f"a frame of {n:,} bytes, over the {limit:,}-byte limit")
            a.need = n
            del a.buf[:wire.HEADER.size]
        return a.need is not None

    def readable(a: _Ask) -> None:
        if not a.connected and not connected(a):
            return
        # a reply is read to its frame's end and no further: what follows it on a kept connection is the responder's
        # next hello (sent as the reply's last byte leaves, often in the same segment), the next look's to read
        while a.sock is not None:
            want = READ_CHUNK if a.stage == HELLO else wire.HEADER.size - len(a.buf) if a.need is None else \
                max(1, a.need - len(a.buf))
            try:
                part = a.sock.recv(min(READ_CHUNK, want))
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionError:
                return closed(a, reset=True)
            except OSError as exc:
                return finish(a, _refused(a.rank, f"{a.where}: {exc.strerror or exc}", a.t0, budget))
            if not part:
                return closed(a)
            a.buf += part
            try:
                if a.stage == HELLO:
                    if length(a, wire.MAX_HELLO) and len(a.buf) >= a.need:
                        hello(a, bytes(a.buf[:a.need]))
                    return
                if a.stage == HEADER and length(a, asker.max_bytes + SEAL_BYTES):
                    if not asker.allowance.take(nbytes=a.need):  # what a look reads is taken before any of it
                        return finish(a, _refused(a.rank, f"its reply of {a.need:,} bytes is past what watch reads "
                                                          "in one look, all ranks together", a.t0, budget))
                    a.stage = BODY
                    continue  # its body is most often there already: read now, not at the selector's next turn
                if a.stage == BODY and len(a.buf) >= a.need:
                    body(a, bytes(a.buf[:a.need]))
                return
            except wire.WireError as exc:
                if a.stage == HELLO:
                    return finish(a, _refused(a.rank, f"{a.where}: its hello: {exc}", a.t0, budget))
                return finish(a, _refused(a.rank, f"its reply: {exc} (watch asked for at most {asker.max_bytes:,})",
                                          a.t0, budget))

    def hello(a: _Ask, data: bytes) -> None:
        try:
            said = wire.loads(data)
        except wire.WireError as exc:
            return finish(a, _refused(a.rank, f"{a.where}: its hello: {exc}", a.t0, budget))
        bad, garbage = _hello_problem(said, a.rank, asker)
        if bad:
            return finish(a, _refused(a.rank, f"{a.where}: {bad}" if garbage else bad, a.t0, budget, garbage))
        a.ch = said["challenge"]
        doc = {"kind": kind, "job": asker.job, "run": asker.run, "max_bytes": asker.max_bytes,
               "max_items": asker.max_items, "pack": wire.PACK, **({"keep": True} if kept is not None else {}),
               **a.args}
        a.out = wire.frame(asker.session.request(a.ch, doc))
        a.stage, a.buf, a.need = SEND, bytearray(), None
        writable(a)  # a request of a few hundred bytes fits the socket's buffer: sent now, no wait to write
        if a.sock is not None and a.stage == SEND:
            sel.modify(a.sock, selectors.EVENT_WRITE, a)

    def connected(a: _Ask) -> bool:
        """The connect's outcome, at the ask's first event: False (the ask finished) when it failed."""
        err = a.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            finish(a, Answer(a.rank, why=f"{a.where}: {os.strerror(err)}", elapsed_s=budget.since(a.t0)))
            return False
        a.connected = True
        return True

    def writable(a: _Ask) -> None:
        try:
            k = a.sock.send(a.out)
        except (BlockingIOError, InterruptedError):
            return
        except ConnectionError:
            return closed(a, reset=True)
        except OSError as exc:
            return finish(a, _refused(a.rank, f"{a.where}: {exc.strerror or exc}", a.t0, budget))
        a.out = a.out[k:]
        if not a.out:
            a.stage = HEADER
            if sel.get_key(a.sock).events != selectors.EVENT_READ:  # it waited to write the rest
                sel.modify(a.sock, selectors.EVENT_READ, a)

    def body(a: _Ask, data: bytes) -> None:
        items = wire.count_items(data)
        if items > asker.max_items or not asker.allowance.take(items=items):
            return finish(a, _refused(a.rank, f"its reply holds up to {items:,} JSON values; watch asked for at most "
                                              f"{asker.max_items:,}", a.t0, budget))
        answer, retry = _decoded(a.rank, data, a.ch, asker, a.t0, budget)
        finish(a, answer, retry)

    try:
        while (todo or again or open_) and not budget.passed(end):
            now = budget.now()
            park(now)
            while todo and slots() > 0 and due.get(todo[0], 0.0) <= now:
                r = todo.popleft()
                start(_Ask(records[r], args.get(r, {}), budget.live_retry_s))
            for item in sorted((x for x in again if x[0] <= now), key=lambda x: x[0])[:slots()]:
                again.remove(item)
                start(item[1])
            wake = [end, *(w for w, _, _ in again)]
            if todo and slots() > 0:
                wake.append(due.get(todo[0], 0.0))
            if (todo or again) and started:
                wake.append(started[0][0] + budget.live_park_s)  # a slot frees when the oldest ask parks
            for key, mask in sel.select(budget.remaining(min(wake))):
                a = key.data
                if a.sock is None:  # finished by an event before this one
                    continue
                if mask & selectors.EVENT_WRITE:
                    writable(a)
                elif mask & selectors.EVENT_READ:
                    readable(a)
    finally:
        for a in list(open_.values()):
            finish(a, Answer(a.rank, why=f"no answer from {a.where} {NO_ANSWER_IN_BOUND}",
                             elapsed_s=budget.since(a.t0)))
        for _, a, last in again:  # closed before answering each time it was asked: what it did the last time
            last.done_at = budget.now()
            out[a.rank] = last
        sel.close()
    for r in todo:
        out[r] = Answer(r, why="not asked before the bound passed (too many ranks did not answer before it)")
    return out


def _decoded(r: int, data: bytes, ch: str, asker: Asker, t0: float, budget: Budget) -> tuple[Answer, bool]:
    doc, why = asker.session.open_reply(ch, data, asker.max_bytes + SEAL_BYTES)
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


def open_room() -> int:
    """How many asks this process may hold open at once: half the descriptors it may open (MAX_AT_ONCE unknown)."""
    soft = nofile()["soft"]
    return MAX_AT_ONCE if soft is None else max(1, (soft - BASE_FDS) // 2)


def keep_room(n: int) -> int:
    """Connections a look at n ranks may keep for the next (Kept): the descriptors open_room gives asks, less the asks
    one look holds at once."""
    return max(0, open_room() - fan_out(n))


def fan_out(n: int) -> int:
    """How many of n ranks one look asks at once (see MIN_AT_ONCE)."""
    return max(1, min(n, max(MIN_AT_ONCE, n // RANKS_PER_ASK), MAX_AT_ONCE, open_room()))


def fetch_all(records: dict, kind: str, asker: Asker, budget: Budget, not_before: Optional[dict] = None,
              kept: Optional[Kept] = None) -> dict:
    """{rank: Answer} for every record, asked concurrently under ONE bound (Budget.live_fetch_s), within one look's
    allowance. not_before: {rank: time.monotonic()} before which that rank is not asked (those due first asked
    first). kept: connections kept between looks (Kept), used and refilled."""
    return fetch_each(records, kind, asker, budget, budget.live_fetch_s, {}, not_before, kept)


def fetch_each(records: dict, kind: str, asker: Asker, budget: Budget, bound_s: float, args: dict,
               not_before: Optional[dict] = None, kept: Optional[Kept] = None) -> dict:
    """fetch_all under a bound of bound_s, each rank's request saying args[rank] beside its kind (a "reach"
    request's ranks)."""
    end = budget.deadline(bound_s)
    if not records:
        return {}
    return _fly(records, kind, asker.for_look(len(records), kind), end, budget, args, not_before or {},
                fan_out(len(records)), kept)
