"""An armed rank's responder: a daemon thread that answers `ncclcheck watch` with this rank's flight recorder (JSON,
never pickle), its Python stacks (every thread) and its progress, while the job runs or hangs.

    from ncclcheck.live.responder import start
    responder = start()          # after the world's variables are set (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)

Reads only: a request names one of wire.KINDS and nothing else; nothing it says is executed or used as a path.
Bounded: at most MAX_CONNECTIONS connections served at once (more are closed at once), one request per connection,
each read and send bounded by the Budget, every reply capped (wire.MAX_REPLY: the oldest flight-recorder entries go
first), at most MAX_THREADS stacks of MAX_FRAMES frames. It listens only on the address this host uses to reach
the job's master (the interface the job's own traffic goes through), and with a job key (NCCLCHECK_TOKEN / its
file) it answers only requests sealed with that key (wire.py). It registers its address in the job's store (the
TCPStore at MASTER_ADDR:MASTER_PORT) under wire.PREFIX, signed with the key when there is one, from its own thread,
so a store that starts after it (env://, the script's own) is waited for, bounded by Budget.live_register_s.
torch's own worker server (torch.distributed.debug) binds every interface and authenticates nothing ("trusted
network only"), so it is not used.
"""

from __future__ import annotations

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

from ..rendezvous.budget import FIXED, Budget
from ..rendezvous.store import Guard
from . import pace, wire

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 4  # served at once: a watcher makes one per rank per look; a flood is closed, not queued
MAX_THREADS = 128  # stacks sent per reply
MAX_FRAMES = 48  # innermost frames per thread
MAX_LINE = 200  # characters of a source line or a name
THREAD_PREFIX = "ncclcheck-live"  # the responder's own threads: never in the stacks it sends (its noise is no cause)


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
            out[pg[:MAX_LINE]] = {k: _int(st.get(f"last_{k}_collective")) for k in ("enqueued", "started",
                                                                                     "completed")}
    return out


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
    del frames
    return out


def _cap(reply: dict, limit: int) -> bytes:
    """The reply's JSON, under `limit` bytes: the oldest flight-recorder entries dropped first (said in the reply)."""
    text = json.dumps(reply, separators=(",", ":"), default=str).encode()
    fr = reply.get("flight")
    while len(text) > limit and isinstance(fr, dict) and fr.get("entries"):
        keep = len(fr["entries"]) // 2
        reply["flight_dropped"] = reply.get("flight_dropped", 0) + len(fr["entries"]) - keep
        fr["entries"] = fr["entries"][len(fr["entries"]) - keep:]
        text = json.dumps(reply, separators=(",", ":"), default=str).encode()
    if len(text) > limit:
        text = json.dumps({k: reply[k] for k in ("rank", "pid", "host") if k in reply} |
                          {"error": f"the reply was over {limit:,} bytes"}).encode()
    return text


class Responder:
    """One rank's listener and its registration. `close()` stops both (the thread is a daemon either way)."""

    def __init__(self, rank: int, world_size: int, local_rank: Optional[int], master: tuple, guard: Guard,
                 budget: Budget = FIXED, sources: Optional[Sources] = None, bind: Optional[str] = None,
                 attempt: int = 0, launcher: str = "none") -> None:
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.launcher = launcher  # who started this rank (pace.launcher_of): watch's header says it
        self.master, self.guard, self.budget = master, guard, budget
        self.sources = sources or Sources()
        self.host = socket.gethostname()
        self.attempt = attempt
        self.addr = bind or job_address(master[0], master[1])
        self.registered = threading.Event()
        self.served = 0
        self.refused: list = []  # ["why"], the last few: what it would not answer (tests and the log read it)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._stop = threading.Event()
        family = socket.AF_INET6 if ":" in self.addr else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((self.addr, 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]

    @property
    def auth(self) -> bool:
        return self.guard.token is not None

    def record(self) -> dict:
        """What the store holds for this rank: where to ask, and who it is."""
        return {"v": wire.VERSION, "rank": self.rank, "world_size": self.world_size, "local_rank": self.local_rank,
                "host": self.host, "addr": self.addr, "port": self.port, "pid": os.getpid(), "auth": self.auth,
                "attempt": self.attempt, "launcher": self.launcher}

    def start(self, register: bool = True) -> Responder:
        threading.Thread(target=self._accept, name=f"{THREAD_PREFIX}-accept", daemon=True).start()
        if register:
            threading.Thread(target=self._register, name=f"{THREAD_PREFIX}-register", daemon=True).start()
        return self

    def close(self) -> None:
        self._stop.set()
        try:
            self._sock.close()
        except OSError:
            pass

    # --- registration
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
                st.set(f"{wire.PREFIX}rank/{self.rank}", self.record())
                st.set(f"{wire.PREFIX}world", {"world_size": self.world_size, "attempt": self.attempt})
                del st
                self.registered.set()
                return
            except (OSError, StoreLost) as exc:
                log.debug("live: the job's store is not there yet: %s", exc)
            self._stop.wait(min(pause, b.remaining(end)))
            pause = b.next_retry(pause, b.probe_retry_max_s)
        if not self.registered.is_set():
            log.warning("live: rank %d could not register in the job's store at %s:%d", self.rank, *self.master)

    # --- serving
    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self._sock.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                self._note(f"{peer[0]}: more than {MAX_CONNECTIONS} connections at once: closed")
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn, peer), name=f"{THREAD_PREFIX}-serve",
                             daemon=True).start()

    def _note(self, why: str) -> None:
        self.refused = [*self.refused[-15:], why]
        log.debug("live: %s", why)

    def _serve(self, conn: socket.socket, peer: tuple) -> None:
        b = self.budget
        try:
            challenge = secrets.token_hex(wire.CHALLENGE_CHARS // 2)
            conn.settimeout(b.live_send_s)
            wire.send_frame(conn, json.dumps({"v": wire.VERSION, "rank": self.rank, "challenge": challenge,
                                              "auth": self.auth}).encode())
            try:
                raw = wire.recv_frame(conn, wire.MAX_REQUEST, b.deadline(b.live_request_s), b)
            except (wire.WireError, TimeoutError) as exc:
                self._refuse(conn, peer, f"request: {exc}")
                return
            req, why = wire.open_sealed(self.guard, wire.request_key(challenge), raw)
            if req is None:
                self._refuse(conn, peer, f"not authenticated ({why})" if self.auth else why)
                return
            kind = req.get("kind") if isinstance(req, dict) else None
            if kind not in wire.KINDS:
                self._refuse(conn, peer, f"unknown request {str(kind)[:40]!r} (one of {', '.join(wire.KINDS)})")
                return
            if kind == "reach":
                ranks = wire.reach_ranks(req)
                if ranks is None:
                    self._refuse(conn, peer, f"a reach request names 1 to {wire.MAX_REACH} distinct ranks")
                    return
                reply = self.reach(ranks)
            elif kind in pace.KINDS:  # a slow job: the clock, a blob, a probe of the links (live/pace.py)
                reply = pace.answer(self, kind, req)
                if reply is None:
                    self._refuse(conn, peer, f"a malformed {kind} request")
                    return
            else:
                reply = self.answer(kind)
            conn.settimeout(b.live_send_s)
            wire.send_frame(conn, self.guard.seal(wire.reply_key(challenge), _cap(reply, wire.MAX_REPLY - 256)))
            self.served += 1
        except OSError as exc:
            self._note(f"{peer[0]}: {exc}")
        finally:
            conn.close()
            self._slots.release()

    def _refuse(self, conn: socket.socket, peer: tuple, why: str) -> None:
        self._note(f"{peer[0]}: {why}")
        try:
            wire.send_frame(conn, json.dumps({"error": why[:MAX_LINE]}).encode())
        except OSError:
            pass

    def answer(self, kind: str) -> dict:
        """The reply to one request of `kind` (wire.KINDS); a source that fails is said in the reply."""
        out: dict = {"v": wire.VERSION, "rank": self.rank, "world_size": self.world_size,
                     "local_rank": self.local_rank, "host": self.host, "pid": os.getpid(), "time": time.time()}
        try:
            fr = self.sources.flight(entries=kind in ("flight", "all"))
            out["progress"] = progress_of(fr)
            if kind in ("flight", "all"):
                out["flight"] = fr
        except Exception as exc:  # noqa: BLE001 - torch's recorder failing is evidence, said, never a crash
            out["flight_error"] = f"{type(exc).__name__}: {str(exc)[:MAX_LINE]}"
        if kind in ("stacks", "all"):
            out["stacks"] = self.sources.stacks()
        return out


    def reach(self, ranks: list) -> dict:
        """A "reach" reply: this rank's TCP connect to each named rank's responder, at the address the job's store
        holds for it (never one the request says); a rank with no readable record is said, not connected to."""
        from ..rendezvous.store import StoreLost, open_store
        from .reach import connect_all

        b = self.budget
        end = b.deadline(b.live_reach_s)
        out: dict = {"v": wire.VERSION, "rank": self.rank, "host": self.host, "pid": os.getpid(), "reach": {},
                     "unknown": {}}
        try:
            st = open_store(self.master[0], self.master[1], False, b.left(end), guard=self.guard)
            rows = st.read_present([f"{wire.PREFIX}rank/{r}" for r in ranks])
        except (ConnectionError, StoreLost) as exc:
            out["error"] = f"the job's store: {str(exc)[:MAX_LINE]}"
            return out
        targets = {}
        for r, (there, v) in zip(ranks, rows):
            why = "not registered" if not there else wire.record_problem(r, v) if v is not None else "refused"
            if why:
                out["unknown"][str(r)] = why
            elif r != self.rank:
                targets[r] = (v["addr"], v["port"])
        out["reach"] = {str(r): res for r, res in connect_all(targets, end, b).items()}
        return out


def start(env: Optional[Mapping[str, str]] = None, token: Optional[bytes] = None, budget: Budget = FIXED,
          sources: Optional[Sources] = None, rank: Optional[int] = None, world_size: Optional[int] = None,
          local_rank: Optional[int] = None, master: Optional[tuple] = None) -> Optional[Responder]:
    """Start this rank's responder. Its place: the arguments (a launcher's placement, read once by the caller), else
    the launcher's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); TORCHELASTIC_RESTART_COUNT
    tells attempts apart. The job's key: `token`, else NCCLCHECK_TOKEN / its file, as every ncclcheck process reads
    it. None (and a log line) where the world is not described: nothing to register in."""
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
                     launcher=pace.launcher_of(env)).start()
