"""An armed rank's responder: a daemon thread that answers `ncclcheck watch` with this rank's flight recorder (JSON,
never pickle), its Python stacks (every thread) and its progress, while the job runs or hangs.

    from ncclcheck.live.responder import start
    responder = start()          # after the world's variables are set (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)

Reads only: a request names one of wire.KINDS and nothing else; nothing it says is executed or used as a path.
Bounded: its connections are live/loop.py's (slots go to requests, not idle sockets; per-address limits; its CPU
held to a small share of a core, before any work), one request per connection, each read and send bounded by the
Budget, every reply capped (the asker's `max_bytes` within wire.MAX_REPLY: the oldest flight-recorder entries go
first), at most MAX_THREADS stacks of MAX_FRAMES frames. It listens only on the address this host uses to reach
the job's master (the interface the job's own traffic goes through); with a job key (NCCLCHECK_TOKEN / its file)
it answers only requests sealed with that key, in a Slurm job without one only requests carrying a munge credential
of the job's user (live/auth.py). It registers its address in the job's store (the TCPStore at
MASTER_ADDR:MASTER_PORT) under wire.PREFIX, with the job's id and run (wire.py), signed with the key when there is
one, from its own thread, so a store that starts after it (env://, the script's own) is waited for, bounded by
Budget.live_register_s. torch's own worker server (torch.distributed.debug) binds every interface and authenticates
nothing ("trusted network only"), so it is not used.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import secrets
import socket
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any, Optional

from ..postmortem import callseries
from ..postmortem.group_ranks import compact
from ..postmortem.stacks import to_record
from ..rendezvous.budget import FIXED, Budget
from ..rendezvous.store import Guard
from . import pace, peers, wire
from .auth import Busy as MungeBusy
from .auth import Keys, choose
from .calls import c10d_call
from .loop import THREAD_PREFIX, Conn, Loop, Outcome, Spend
from .wire import MAX_LINE

log = logging.getLogger(__name__)

MAX_THREADS = 128  # stacks sent per reply
MAX_FRAMES = 48  # innermost frames per thread
SERIES_SHARE = 2  # a trimmed reply's call series takes at most 1/SERIES_SHARE of its room
CAPPED = 4  # sizes of one kind's reply kept built (watch asks every rank of one look for the same size)
BUILT_DIGITS = 16  # what "built_s" may add to a reply's fresh part once its age is written in


class Refused(Exception):
    """A request this responder will not do: its message is the refusal's."""


class Busy(Refused):
    """A reply that cannot be built now: the responder's CPU share for building replies is spent."""


def job_address(master_addr: str, master_port: int) -> str:
    """The local address this host's traffic to the master leaves from (a UDP connect routes, sends nothing)."""
    family = socket.AF_INET6 if ":" in master_addr else socket.AF_INET
    try:
        target = socket.getaddrinfo(master_addr, master_port, family, socket.SOCK_DGRAM)[0][4]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(target)
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


class Sources:
    """Where the answers come from: torch's flight recorder and this process's threads. Tests replace it."""

    def flight(self, entries: bool = True) -> dict:
        """The flight recorder as a document: the NCCL one where this torch has it and it recorded something,
        else the generic one (gloo, and NCCL on torch versions without a separate NCCL recorder)."""
        import torch

        c10d = torch._C._distributed_c10d
        docs = []
        nccl = getattr(c10d, "_dump_nccl_trace_json", None)
        if nccl is not None:
            try:
                docs.append(nccl(includeCollectives=entries, onlyActive=False))
            except Exception as exc:  # noqa: BLE001 - a torch without an NCCL recorder in use: the generic one
                log.debug("the NCCL flight recorder: %s", exc)
        docs.append(c10d._dump_fr_trace_json(includeCollectives=entries, onlyActive=False))
        parsed = [json.loads(d) for d in docs]
        return next((d for d in parsed if d.get("entries") or d.get("pg_status")), parsed[-1])

    def stacks(self) -> list:
        return thread_stacks()


def thread_stacks() -> list:
    """Every thread's stack but the responder's own, the main thread first, innermost frame last; bounded."""
    names = {t.ident: t for t in threading.enumerate()}
    main = threading.main_thread().ident
    out = []
    frames = sys._current_frames()
    for ident in sorted(frames, key=lambda i: i != main):
        t = names.get(ident)
        name = t.name if t is not None else f"thread {ident}"
        if name.startswith(THREAD_PREFIX):
            continue
        if len(out) >= MAX_THREADS:
            break
        rows = traceback.extract_stack(frames[ident])[-MAX_FRAMES:]
        out.append({"thread": name[:MAX_LINE], "ident": ident, "main": ident == main,
                    "daemon": bool(t.daemon) if t is not None else None,
                    "frames": [{"file": (f.filename or "")[-MAX_LINE:], "line": f.lineno, "func": f.name[:MAX_LINE],
                                "code": (f.line or "")[:MAX_LINE]} for f in rows]})
        if ident == main:  # the c10d call it blocks in: a send's peer, which gloo's flight recorder never records
            out[-1]["call"] = c10d_call(frames[ident])
    del frames
    return out


def _fits(text: bytes, limit: int, items: int) -> bool:
    return len(text) <= limit and wire.count_items(text) <= items


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), default=str).encode()


def _newest_that_fit(entries: list, limit: int, items: int) -> dict:
    """{index: its JSON} of the entries kept when only `limit` bytes and `items` JSON values are left for them: the
    newest ones, taken from the newest back until the next would not fit, and the newest entry of every process group
    (what the analysis reads) whatever its age. Each kept entry's JSON is made once and what is dropped is never
    encoded (a reply of 2,000 entries was encoded whole, then again at every halving, to keep a few dozen: ~20 ms of
    the rank's CPU)."""
    last: dict = {}
    for i, e in enumerate(entries):
        last[e.get("pg_id") if isinstance(e, dict) else None] = i
    kept = {i: _dumps(entries[i]) for i in last.values()}
    limit -= sum(len(t) + 1 for t in kept.values())
    items -= sum(wire.count_items(t) for t in kept.values())
    for i in range(len(entries) - 1, -1, -1):
        if i in kept:
            continue
        t = _dumps(entries[i])
        b, k = len(t) + 1, wire.count_items(t)
        if b > limit or k > items:
            break
        limit, items = limit - b, items - k
        kept[i] = t
    return kept


def _with_entries(reply: dict, fr: dict, entries: list, limit: int, items: int) -> bytes:
    """The reply's JSON with as many of the newest entries as fit (_newest_that_fit), joined into the JSON of the
    rest, which is encoded without them; reply and fr (its copies) are left saying what was kept."""
    mark = secrets.token_hex(8)  # where the entries go: a value nothing the rank holds can contain
    fr["entries"] = mark
    reply["flight_dropped"] = len(entries)  # its widest value: the room left is never overstated
    rest = _dumps(reply)
    # the mark's quotes are the list's brackets; a comma counted per entry is one more than it takes
    kept = _newest_that_fit(entries, limit - len(rest) + len(mark), items - wire.count_items(rest))
    if len(kept) < len(entries):
        reply["flight_dropped"] = len(entries) - len(kept)
    else:
        del reply["flight_dropped"]
    body = b"[" + b",".join(kept[i] for i in sorted(kept)) + b"]"
    text = _dumps(reply).replace(f'"{mark}"'.encode(), body, 1)
    fr["entries"] = [entries[i] for i in sorted(kept)]
    return text


def _cap(reply: dict, limit: int, items: int = 1 << 62) -> bytes:
    """The reply's JSON within what the asker takes (`limit` bytes, `items` JSON values): the oldest flight-recorder
    entries dropped first, the newest entry of every process group kept to the last (what the analysis reads), the
    call times of the newest collectives kept as a series beside them (postmortem/callseries.py), then
    the stacks' outer frames and threads; what was dropped is said in the reply."""
    reply = dict(reply)  # the answer may be cached: trim copies, never it
    fr = reply.get("flight")
    if isinstance(fr, dict):
        reply["flight"] = fr = dict(fr)
    entries = fr.get("entries") if isinstance(fr, dict) else None
    text = None
    if isinstance(entries, list) and entries:
        one = _dumps(entries[-1])  # the reply whole when its entries look like fitting, entry by entry else
        if len(entries) * (len(one) + 1) < limit // 2 and len(entries) * wire.count_items(one) < items // 2:
            text = _dumps(reply)
        if text is None or not _fits(text, limit, items):
            # what does not fit whole is still a call time: half the room keeps the series (a slow job's window)
            reply["calls"] = callseries.fitting(entries, limit // SERIES_SHARE, items // SERIES_SHARE)
            text = _with_entries(reply, fr, entries, limit, items)
    else:
        text = _dumps(reply)
    stacks = reply.get("stacks")
    for frames, threads in ((8, MAX_THREADS), (2, 16), (1, 1)):
        if _fits(text, limit, items) or not isinstance(stacks, list):
            break
        reply["stacks"] = stacks = [{**t, "frames": t["frames"][-frames:]} for t in stacks[:threads]]
        reply["stacks_trimmed"] = True
        text = _dumps(reply) if not (isinstance(entries, list) and entries) else \
            _with_entries(reply, fr, entries, limit, items)  # the entries may take what the stacks left
    if not _fits(text, limit, items):
        text = json.dumps({k: reply[k] for k in ("rank", "pid", "host", "job", "run") if k in reply} |
                          {"error": f"the reply was over {limit:,} bytes or {items:,} values"}).encode()
    return text


class Responder:
    """One rank's listener and its registration. `close()` stops both (its threads are daemons either way)."""

    WORKERS = ("answer", "reach", "phase")  # live/loop.py's Workers: wire.KINDS says which one does a kind

    def __init__(self, rank: int, world_size: int, local_rank: Optional[int], master: tuple, guard: Guard,
                 budget: Budget = FIXED, sources: Optional[Sources] = None, bind: Optional[str] = None,
                 attempt: int = 0, job: str = "nojob", auth: Optional[str] = None, launcher: str = "none") -> None:
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.launcher = launcher  # who started this rank (pace.launcher_of): watch's header says it
        self.master, self.guard, self.budget = master, guard, budget
        self.sources = sources or Sources()
        self.host = socket.gethostname()
        self.attempt, self.job = attempt, job[:wire.MAX_JOB]
        self.launcher = launcher  # who started this rank (pace.launcher_of): watch's header says it
        # how requests are authenticated: the token when there is one, else munge when asked (live/auth.py)
        self.level = "token" if guard.token is not None else (auth if auth in ("munge", "none") else "none")
        self.keys = Keys(master[1], budget) if self.level == "munge" else None
        self.run: Optional[str] = None  # the job's live run (PREFIX + "world"), learned when registering
        self.addr = bind or job_address(master[0], master[1])
        self.registered = threading.Event()
        self.refused: list = []  # ["why"], the last few: what it would not answer (tests and the log read it)
        self.served = 0  # replies sent (refusals not counted)
        self._cache: dict = {}  # kind -> (built at, reply dict, {(limit, items): its JSON}): serves a flood of it
        self.spend = Spend(budget)  # building replies: the recorder, the stacks, the progress
        # what connects somewhere or sends a lot (reach, rate, blob: the transfer probe's work) has a bucket of its
        # own: drawn from the builds' bucket, a probe's 1 MiB blobs (with their credit past empty) left it 25 s short
        # and the recorder a watch 15 s later asked for was the one built before (the lab's healthy fast job: rank 0
        # on watch's host served its first look's recorder to four more watches)
        self.guarded_spend = Spend(budget)
        self.phase_spend = Spend(budget, pace.PHASE_SHARE)  # "phase" samples its progress: a bucket of its own
        self._fresh: Optional[tuple] = None  # (built at, {"time", "progress"}): every reply's fresh part
        self._stop = threading.Event()
        self._caller: Optional[pace.Caller] = None  # made at the first "rate" request (live/pace.py)
        self.askers = peers.Askers()  # who may have a blob (live/peers.py)
        self._blobs: dict = {}  # (bytes, run) -> a blob reply's JSON: built once, then only sent
        family = socket.AF_INET6 if ":" in self.addr else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.addr, 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self.loop = Loop(sock, self, budget)

    @property
    def auth(self) -> bool:
        return self.level != "none"

    def record(self) -> dict:
        """What the store holds for this rank: where to ask, and who it is."""
        return {"v": wire.VERSION, "rank": self.rank, "world_size": self.world_size, "local_rank": self.local_rank,
                "host": self.host, "addr": self.addr, "port": self.port, "pid": os.getpid(), "auth": self.level,
                "attempt": self.attempt, "job": self.job, "run": self.run, "launcher": self.launcher}

    def world(self, run: str) -> dict:
        return {"world_size": self.world_size, "attempt": self.attempt, "job": self.job, "run": run}

    def start(self, register: bool = True, run: Optional[str] = None) -> Responder:
        """Serve, and register in the job's store (a test without a store gives the run itself)."""
        if run is not None:
            self.run = run
        self.loop.start()
        atexit.register(self._quiesce)
        if register:
            threading.Thread(target=self._register, name=f"{THREAD_PREFIX}-register", daemon=True).start()
        return self

    def close(self) -> None:
        self._stop.set()
        self.loop.close()
        atexit.unregister(self._quiesce)

    def _quiesce(self) -> None:
        """At the process's exit, before the interpreter finalizes: stop serving and let the workers' calls into
        torch return (bounded by Budget.live_exit_s): a daemon thread inside C++ at finalization aborts the rank."""
        self.close()
        end = self.budget.deadline(self.budget.live_exit_s)
        for w in self.loop.workers.values():
            if not w.join(self.budget.remaining(end)):
                log.debug("live: the %s worker still runs at exit", w.name)

    def stopping(self) -> bool:
        return self._stop.is_set()

    def caller(self) -> pace.Caller:
        """How this rank asks another rank's responder (a "rate" download): a session at its own level."""
        if self._caller is None:
            from .auth import Session

            self._caller = pace.Caller(Session(self.level, self.guard.token, self.master[1], self.budget), self.job,
                                       self.run or "")
        return self._caller

    def wait_until(self, end: float) -> None:
        """Sleep until `end` (a deadline of the Budget's), or until the responder closes."""
        self._stop.wait(self.budget.remaining(end))

    def note(self, why: str) -> None:
        self.refused = [*self.refused[-15:], why]
        log.debug("live: %s", why)

    # --- registration
    def _our_world(self, v: Any) -> Optional[str]:
        bad = wire.world_problem(v)
        if bad:
            return bad
        if (v["job"], v["world_size"], v["attempt"]) != (self.job, self.world_size, self.attempt):
            return (f"another job's or attempt's world (job {v['job'][:40]!r}, {v['world_size']} ranks, attempt "
                    f"{v['attempt']}; this rank's: {self.job!r}, {self.world_size}, {self.attempt})")
        return None

    def _register(self) -> None:
        from ..rendezvous.store import JsonStore, StoreLost, open_store

        b = self.budget
        end = b.deadline(b.live_register_s)
        pause = b.probe_retry_s
        while not self._stop.is_set() and not b.passed(end):
            try:
                # a plain connect first: c10d's client prints C++ frames into the job's stderr on every failed try
                socket.create_connection(self.master, timeout=b.connect_attempt_s).close()
                st: JsonStore = open_store(self.master[0], self.master[1], False, b.left(end), guard=self.guard)
                # the job's run: the first responder of this job's attempt to register makes it, the others read it
                # (a world record of another job or attempt, or one not signed with the job's key, is replaced)
                world = st.claim(wire.WORLD_KEY, self.world(secrets.token_hex(wire.RUN_CHARS // 2)), self._our_world)
                if world is None:
                    raise StoreLost(f"the live world record keeps being replaced ({st.rejected[-1:]})")
                self.run = world["run"]
                st.set(wire.rank_key(self.rank), self.record())
                del st
                self.registered.set()
                return
            except (OSError, StoreLost) as exc:
                log.debug("live: the job's store is not there yet: %s", exc)
            self._stop.wait(min(pause, b.remaining(end)))
            pause = b.next_retry(pause, b.probe_retry_max_s)
        if not self.registered.is_set():
            log.warning("live: rank %d could not register in the job's store at %s:%d", self.rank, *self.master)

    def say_end(self, said: dict) -> bool:
        """Leave this rank's word on how it ended (stacks.parse's fields of the file arm() just wrote) in the job's
        store, signed as its record is: a watch that finds the rank gone reads it there. One bounded attempt
        (Budget.connect_attempt_s to connect, then the store's own bound); False when it could not."""
        from ..rendezvous.store import StoreLost, open_store

        if self.run is None:  # never registered: no run to say it under, and nobody watching could find it
            return False
        b = self.budget
        end = b.deadline(b.connect_attempt_s)
        rec = {"v": wire.VERSION, "rank": self.rank, "job": self.job, "run": self.run, "attempt": self.attempt,
               **to_record(said)}
        try:
            socket.create_connection(self.master, timeout=b.left(end)).close()  # c10d prints frames on a refusal
            st = open_store(self.master[0], self.master[1], False, b.left(end), guard=self.guard)
            st.set(wire.end_key(self.rank), rec)
            st.add(wire.ENDS_KEY, 1)  # after the record: a watch that counts one finds it
            return True
        except (OSError, StoreLost) as exc:
            log.debug("live: rank %d could not leave its end in the store: %s", self.rank, exc)
            return False

    # --- the loop's questions (live/loop.py): in its thread, so each is cheap; work goes to the workers
    def hello(self) -> tuple[bytes, str]:
        challenge = secrets.token_hex(wire.CHALLENGE_CHARS // 2)
        return json.dumps({"v": wire.VERSION, "rank": self.rank, "challenge": challenge, "auth": self.level,
                           "job": self.job, "run": self.run}).encode(), challenge

    def refusal(self, why: str) -> bytes:
        return json.dumps({"error": why[:MAX_LINE]}).encode()

    def busy(self, conn: Conn) -> bytes:
        self.note(f"{conn.addr}: busy: its request waited past the bound")
        return self.refusal("busy: the request waited past its bound (too many requests at once)")

    def request(self, conn: Conn, data: bytes) -> Outcome:
        """A request frame: authenticated and checked here, answered by a worker; a refusal otherwise."""
        if self.level == "munge":
            cred, why = Keys.of(data)
            if cred is None:
                return Outcome(f"not authenticated ({why})")
            known = self.keys.known(cred)
            if known is None:  # unmunge is work: it waits its turn like any reply
                return Outcome(worker="answer", job=lambda: self._after_munge(conn, data, cred))
            key, why = known
            if key is None:
                return Outcome(f"not authenticated ({why})")
            return self._checked(conn, data, Guard(token=key))
        return self._checked(conn, data, self.guard)

    def _after_munge(self, conn: Conn, data: bytes, cred: str) -> Any:
        try:
            key, why = self.keys.decode(cred)
        except MungeBusy as exc:
            self.note(f"{conn.addr}: {exc}")
            return self.refusal(str(exc))
        if key is None:
            self.note(f"{conn.addr}: not authenticated ({why})")
            return self.refusal(f"not authenticated ({why})")
        out = self._checked(conn, data, Guard(token=key))
        return self.refusal(out.refusal) if out.refusal is not None else out.job()

    def _checked(self, conn: Conn, data: bytes, seal: Guard) -> Outcome:
        req, why = wire.open_sealed(seal, wire.request_key(conn.challenge), data)
        if req is None:
            return Outcome(f"not authenticated ({why})" if self.auth else why)
        kind = req.get("kind") if isinstance(req, dict) else None
        if kind not in wire.KINDS:
            return Outcome(f"unknown request {str(kind)[:40]!r} (one of {', '.join(wire.KINDS)})")
        if self.run is None:
            return Outcome("not registered in the job's store yet: no run to answer for")
        if bad := wire.foreign(req, self.job, self.run, "request"):
            return Outcome(f"a request for another job: {bad}")
        limit, items = wire.reply_limit(req)
        if kind == "reach":
            ranks = wire.reach_ranks(req)
            if ranks is None:
                return Outcome(f"a reach request names 1 to {wire.MAX_REACH} distinct ranks")
            text = lambda: _cap(self.reach(ranks), limit, items)  # noqa: E731 - the worker calls it
        elif kind == "blob":
            nbytes = pace.blob_bytes(req)
            if nbytes is None:
                return Outcome(f"a blob request asks for 1 to {pace.MAX_BLOB:,} bytes")
            text = lambda: self.blob(conn.addr, req.get("from"), nbytes, limit)  # noqa: E731
        elif kind in pace.KINDS:  # a slow job: the clock, a blob, a probe of the links (live/pace.py)
            if not pace.well_formed(kind, req):
                return Outcome(f"a malformed {kind} request")
            text = lambda: _cap(pace.answer(self, kind, req), limit, items)  # noqa: E731
        else:
            text = lambda: self.cached(kind, limit, items)  # noqa: E731
        key = wire.reply_key(conn.challenge)
        packed = wire.wants_packed(req, kind)

        def reply() -> Any:
            t0 = time.thread_time()
            try:
                # what makes this responder connect somewhere or send something large is done within its Spend,
                # as building replies is (live/peers.py): past it, refused before any work
                if kind in wire.GUARDED and not self.guarded_spend.allows(self.budget.live_guarded_credit_s):
                    raise Busy(f"busy: over its share of the CPU for {kind} requests; ask again in a moment")
                got = text()
                # unsealed, the parts go out as they are (a flood of cached replies costs no copy); sealed, joined
                out = got if seal.token is None else seal.seal(key, b"".join(got) if isinstance(got, tuple) else got)
                if packed:  # whatever the Spend says: packing 1 MB takes ~2.6 ms of CPU, sending it as JSON costs
                    # the loop's share Budget.live_send_cost_s (5 ms) a MiB; and a look's own build of a 2,000-entry
                    # recorder (~0.13 s) empties the Spend, so a rule "only within it" packed none of the big replies
                    t1 = time.thread_time()
                    out = wire.pack(out) or out
                    self.spend.charge(time.thread_time() - t1)
            except Refused as exc:
                self.note(f"{conn.addr}: {exc}")
                return self.refusal(str(exc))
            finally:
                if kind in wire.GUARDED:
                    self.guarded_spend.charge(time.thread_time() - t0)
            self.served += 1
            return out
        return Outcome(worker=wire.KINDS[kind], job=reply, prepaid=kind == "blob", now=kind in wire.AT_ONCE,
                       keep=req.get("keep") is True)

    def cached(self, kind: str, limit: int, items: int) -> tuple[bytes, memoryview]:
        """The reply to `kind` as the asker takes it. Its progress (and the time) is always fresh (built at most once
        per Budget.live_answer_cache_s: cheap, the flight recorder's status only), so watch's two looks compare what
        is; the rest (the flight recorder's entries, the stacks) is built at most once per that time too, and only
        within the Spend: past it the last one built is served (`built_s` says how old) until it is
        Budget.live_stale_rebuild_s old, so a flood of requests costs sends and one build per that time, not one
        each. Busy when a reply of that size was never built and the Spend is empty."""
        now = self._now()
        # what the fresh part leaves the rest: its size rounded up (a little growth keeps the same body), at most a
        # quarter of the reply (a quarter always was 150 of the 600 JSON values a rank's reply may hold at 4,096
        # ranks: ~5 entries fewer)
        head = json.dumps({**now, "built_s": 0.0}, separators=(",", ":"), default=str).encode()
        most = min(limit // 4, 64 << 10), min(items // 4, 4096)
        size, values = len(head) + BUILT_DIGITS, wire.count_items(head)
        room = min(most[0], -(-size // 256) * 256), min(most[1], -(-values // 16) * 16)
        if size > room[0] or values > room[1]:
            room = most
            head = json.dumps({"time": now["time"], "built_s": 0.0,
                               "flight_error": f"its progress was over {room[0]:,} bytes"}).encode()
        hit = self._cache.get(kind)  # only the answer worker's thread touches the cache
        b = self.budget
        if hit is None or not (b.within(hit[0], b.live_answer_cache_s) or
                               (not self.spend.allows() and b.within(hit[0], b.live_stale_rebuild_s))):
            t0 = time.thread_time()
            body = self.header() if kind == "progress" else self.answer(kind)
            for k in ("time", "progress"):
                body.pop(k, None)
            hit = self._cache[kind] = (time.monotonic(), body, {})
            self.spend.charge(time.thread_time() - t0)
        texts = hit[2]
        text = texts.get((limit, items, room))
        if text is None:
            if texts and not self.spend.allows():  # a size never asked before, past the share
                raise Busy("busy: over its share of the CPU for building replies; ask again in a moment")
            t0 = time.thread_time()
            text = _cap(hit[1], limit - room[0], items - room[1])
            self.spend.charge(time.thread_time() - t0)
            if len(texts) >= CAPPED:
                texts.pop(next(iter(texts)))
            texts[(limit, items, room)] = text
        head = head.replace(b'"built_s":0.0', f'"built_s":{time.monotonic() - hit[0]:.3f}'.encode(), 1)
        return head[:-1] + b",", memoryview(text)[1:]

    def _now(self) -> dict:
        """{"time", "progress"} (or "flight_error"), built at most once per Budget.live_answer_cache_s."""
        hit = self._fresh
        if hit is not None and self.budget.within(hit[0], self.budget.live_answer_cache_s):
            return hit[1]
        out: dict = {"time": time.time()}
        try:
            out["progress"] = pace.progress_of(self.sources.flight(entries=False))
        except Exception as exc:  # noqa: BLE001 - torch's recorder failing is evidence, said, never a crash
            out["flight_error"] = f"{type(exc).__name__}: {str(exc)[:MAX_LINE]}"
        self._fresh = (time.monotonic(), out)
        return out

    def header(self) -> dict:
        return {"v": wire.VERSION, "rank": self.rank, "world_size": self.world_size, "local_rank": self.local_rank,
                "host": self.host, "pid": os.getpid(), "time": time.time(), "job": self.job, "run": self.run}

    def answer(self, kind: str) -> dict:
        """The reply to one request of `kind` (wire.KINDS); a source that fails is said in the reply."""
        out = self.header()
        try:
            fr = self.sources.flight(entries=kind in ("flight", "all"))
            out["progress"] = pace.progress_of(fr)
            if kind in ("flight", "all"):  # a group's ranks as runs: n ranks x n replies was watch's share at scale
                out["flight"] = {**fr, "pg_config": compact(fr["pg_config"])} if "pg_config" in fr else fr
        except Exception as exc:  # noqa: BLE001 - torch's recorder failing is evidence, said, never a crash
            out["flight_error"] = f"{type(exc).__name__}: {str(exc)[:MAX_LINE]}"
        if kind in ("stacks", "all"):
            out["stacks"] = self.sources.stacks()
        return out

    def reach(self, ranks: list) -> dict:
        """A "reach" reply: this rank's TCP connect to each named rank's responder, at the address the job's store
        holds for it (never one the request says), the targets checked by live/peers.py: with records signed with the
        job's token a connect is reported as it went (ok, refused, timeout); otherwise only whether rank r's own
        responder answered its hello there, and the reply comes at the bound's end whatever happened."""
        from .reach import connect_all, verify_all

        b = self.budget
        end = b.deadline(b.live_reach_s)
        found = peers.resolve(self, ranks, end)
        out: dict = {"v": wire.VERSION, "rank": self.rank, "host": self.host, "pid": os.getpid(), "reach": {},
                     "unknown": found.unknown, "job": self.job, "run": self.run,
                     "checked": "connect" if found.signed else "hello"}
        if found.error:
            out["error"] = found.error
            return out
        targets = {r: (v["addr"], v["port"]) for r, v in found.records.items()}
        if found.signed:
            out["reach"] = {str(r): res for r, res in connect_all(targets, end, b).items()}
        else:
            out["reach"] = {str(r): res for r, res in verify_all(targets, self.job, self.run, end, b).items()}
            peers.settle(self, end)
        return out

    def blob(self, addr: str, asker: Any, nbytes: int, limit: int) -> bytes:
        """A "blob" reply of `nbytes` of padding (what a "rate" probe downloads), for a rank of this job asking from
        its own address only (live/peers.py); built once per size, then only sent."""
        why = self.askers.problem(self, asker, addr)
        if why:
            raise Refused(f"a blob for {addr}: {why}")
        key = (nbytes, self.run)
        text = self._blobs.get(key)
        if text is None:
            text = json.dumps({"v": wire.VERSION, "rank": self.rank, "job": self.job, "run": self.run,
                               "pad": "0" * nbytes}, separators=(",", ":")).encode()
            if len(self._blobs) >= CAPPED:
                self._blobs.pop(next(iter(self._blobs)))
            self._blobs[key] = text
        if len(text) > limit:
            raise Refused(f"a blob of {len(text):,} bytes is over the {limit:,} the request takes")
        # its send is paid here, from the Spend every guarded request draws on (the loop does not count it again)
        self.guarded_spend.charge(len(text) / (1 << 20) * self.budget.live_send_cost_s)
        return text


def start(env: Optional[Mapping[str, str]] = None, token: Optional[bytes] = None, budget: Budget = FIXED,
          sources: Optional[Sources] = None, rank: Optional[int] = None, world_size: Optional[int] = None,
          local_rank: Optional[int] = None, master: Optional[tuple] = None,
          job: Optional[str] = None) -> Optional[Responder]:
    """Start this rank's responder. Its place: the arguments (a launcher's placement, read once by the caller), else
    the launcher's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); TORCHELASTIC_RESTART_COUNT
    tells attempts apart; the job's id is the launcher's (agent/launchers.job_id). The job's key: `token`, else
    NCCLCHECK_TOKEN / its file, as every ncclcheck process reads it; without one, munge inside a Slurm job where
    munged runs (live/auth.py). None (and a log line) where the world is not described: nothing to register in."""
    from ..agent.launchers import job_id
    from ..config import read_token

    env = os.environ if env is None else env
    try:
        rank = int(env["RANK"]) if rank is None else rank
        world = int(env["WORLD_SIZE"]) if world_size is None else world_size
        master = (env["MASTER_ADDR"], int(env["MASTER_PORT"])) if master is None or None in master else master
    except (KeyError, ValueError):
        log.warning("live: no RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT in the environment: not armed")
        return None
    local = env.get("LOCAL_RANK") if local_rank is None else str(local_rank)
    attempt = env.get("TORCHELASTIC_RESTART_COUNT") or "0"
    if token is None:
        token = read_token(None, env)[0]
    return Responder(rank, world, int(local) if local and local.isdigit() else None, master, Guard(token=token),
                     budget, sources, attempt=int(attempt) if attempt.isdigit() else 0,
                     job=job or job_id(env), auth=choose(token, env), launcher=pace.launcher_of(env)).start()
