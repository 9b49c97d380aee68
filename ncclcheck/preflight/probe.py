"""Plain-socket probes: is the master reachable (before any torch rendezvous), and which interfaces connect which nodes.

`probe_master` is a bounded, retried TCP connect to MASTER_ADDR:MASTER_PORT; `check_bind` tells node 0 whether it can
host the rendezvous port. The mesh probe is `MeshListener` (an ephemeral-port listener on every candidate address,
answering with the node's identity and wall clock) plus `probe_peers` (connect to the chosen peers' endpoints
concurrently); nccl/reachability.py turns the attempts into the per-interface matrix. Only JSON travels on the wire.
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from ..facts.net import is_local_address, resolve_host
from ..nccl.reachability import DEADLINE, LATE, NO_ANSWER
from ..rendezvous.budget import FIXED, Budget
from ..rendezvous.waits import Waits
from .wire import OWN_ADDRESS

MAGIC = "NCCLCHECK-PROBE/1"
_MAX_LINE = 4096

# ---------------------------------------------------------------------------------------------------------------
# Master reachability


@dataclass(frozen=True)
class MasterProbe:
    """Outcome of the bounded connect to the master.

    status: ok | refused | timeout | no_route | unresolvable | error.
    """

    addr: str
    port: int
    status: str
    attempts: int
    elapsed_s: float
    last_error: Optional[str] = None
    resolved: list = field(default_factory=list)
    connected_to: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict:
        """The dict checks.local.check_master_reachable reads (mode/ok/kind/error) plus the details."""
        d = asdict(self)
        d.update(mode="connect", ok=self.ok, kind=self.status, error=self.last_error)
        return d


def classify(exc: BaseException) -> str:
    """A failed connect's class: unresolvable | timeout | refused | no_route | error."""
    if isinstance(exc, socket.gaierror):
        return "unresolvable"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    code = getattr(exc, "errno", None)
    if code in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL):
        return "no_route"
    if code == errno.ETIMEDOUT:
        return "timeout"
    if code == errno.ECONNREFUSED:
        return "refused"
    return "error"


def probe_master(
    addr: str,
    port: int,
    deadline: float,
    interval_s: Optional[float] = None,
    connect_timeout_s: Optional[float] = None,
    resolve_grace_s: Optional[float] = None,
    resolve: Callable[[str], list] = resolve_host,
    max_interval_s: Optional[float] = None,
    budget: Budget = FIXED,
    on_try: Optional[Callable[[str, int, Optional[str]], None]] = None,
) -> MasterProbe:
    """Connect to addr:port, retrying until `deadline` (a time.monotonic() value): node 0 may start after us.

    Refused and timed-out connects are retried, the pause growing from interval_s to max_interval_s: a thousand
    nodes waiting for node 0 must not flood its link with connects while it starts (at 16 lab hosts on a loaded
    machine, a 1 s cap cost each node 12-15 refused connects, ~130 B each, on node 0's link before it listened).
    A name that still does not resolve after resolve_grace_s is given up early (a typo will not start resolving).
    The last failure's class is the verdict. `resolve` is injectable so tests never send a name query to the
    machine's resolver. `on_try(status, attempts, error)` hears each failed try (rendezvous/waits.py says it while
    the probe retries).
    """
    interval_s = budget.probe_retry_s if interval_s is None else interval_s
    connect_timeout_s = budget.connect_attempt_s if connect_timeout_s is None else connect_timeout_s
    resolve_grace_s = budget.resolve_grace_s if resolve_grace_s is None else resolve_grace_s
    max_interval_s = budget.probe_retry_max_s if max_interval_s is None else max_interval_s
    start = budget.now()
    attempts, last_error, status, resolved = 0, None, "timeout", []
    while True:
        attempts += 1
        try:
            resolved = resolve(addr)
            target = resolved[0]
            family = socket.AF_INET6 if ":" in target else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(min(connect_timeout_s, budget.left(deadline)))
                s.connect((target, port))
            return MasterProbe(addr, port, "ok", attempts, budget.since(start), None, resolved, target)
        except OSError as e:
            status, last_error = classify(e), f"{type(e).__name__}: {e}"
            if on_try is not None:
                on_try(status, attempts, last_error)
        if budget.passed(deadline) or (status == "unresolvable" and not budget.within(start, resolve_grace_s)):
            return MasterProbe(addr, port, status, attempts, budget.since(start), last_error, resolved)
        time.sleep(min(interval_s, budget.remaining(deadline)))
        interval_s = budget.next_retry(interval_s, max_interval_s)


FAULTS_AT_ONCE = ("unresolvable", "no_route")  # master probe outcomes no healthy start meets


def probe_master_said(addr: str, port: int, deadline: float, budget: Budget, waits: Optional[Waits]) -> MasterProbe:
    """probe_master, saying while it retries what it waits for and what the last try met (rendezvous/waits.py):
    a refused master is known on the first connect, and the node says so instead of a silent --timeout."""
    if waits is None or not waits.heard:
        return probe_master(addr, port, deadline, budget=budget)
    with waits.wait("master", deadline, budget.master_notice_s, addr=addr, port=port,
                    give_up_s=budget.resolve_grace_s) as said:
        # A name that does not resolve or a host with no route is a fault the first try proves: said at once. A
        # refused connect is also what a healthy start meets while node 0 starts: said after the usual quiet.
        return probe_master(addr, port, deadline, budget=budget,
                            on_try=lambda status, tries, error: said.seen(status in FAULTS_AT_ONCE, status=status,
                                                                          tries=tries, error=error))


@dataclass(frozen=True)
class BindCheck:
    """Can this host listen on the rendezvous port? in_use: something already listens there."""

    port: int
    bindable: bool
    in_use: bool
    error: Optional[str] = None

    def to_json(self) -> dict:
        return asdict(self)


def check_bind(port: int, host: str = "") -> BindCheck:
    """Bind (and release) the port like TCPStore's server would: all interfaces, SO_REUSEADDR."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.listen(1)
        return BindCheck(port, True, False)
    except OSError as e:
        return BindCheck(port, False, e.errno == errno.EADDRINUSE, f"{type(e).__name__}: {e}")
    finally:
        s.close()


def bind_test(addr: str, port: int) -> dict:
    """Node 0's view of the master: can it host the rendezvous port, and is MASTER_ADDR one of its addresses?

    Returns the dict checks.local.check_master_reachable reads. A MASTER_ADDR that is not local is only a warning
    text (a Kubernetes service address is legitimately not an address of pod 0).
    """
    b = check_bind(port)
    local = is_local_address(addr)
    d: dict = {"addr": addr, "port": port, "mode": "bind", "ok": b.bindable, "in_use": b.in_use,
               "error": b.error, "kind": "in_use" if b.in_use else (None if b.bindable else "error"), "local": local}
    if b.in_use:
        d["error"] = f"port {port} is already in use on this host ({b.error})"
    if local is False:
        d["warning"] = f"MASTER_ADDR {addr} is not an address of this host, but node rank 0 hosts the rendezvous"
    elif local is None:
        d["warning"] = f"MASTER_ADDR {addr} does not resolve on this host"
    return d


# ---------------------------------------------------------------------------------------------------------------
# Mesh probe (full or sampled: nccl/reachability.probe_targets decides who probes whom)
#
# Both sides run in one thread each on non-blocking sockets: a node answering its ~k+2 probers, or probing ~k+2 peers
# on every interface, costs no thread per connection, which is what lets hundreds of virtual nodes share a process.


class MeshListener:
    """Listens on an ephemeral port on each candidate address and answers probes with this node's identity.

    Use as a context manager; `endpoints` is what to publish: {iface: [[addr, port], ...]}, and `bind_errors`
    names addresses that could not be bound. One thread serves every connection (accept, read a line, answer).
    """

    def __init__(self, node_rank: int, node_id: str, addresses: dict[str, list[str]], budget: Budget = FIXED):
        self.node_rank, self.node_id, self.budget = node_rank, node_id, budget
        self.endpoints: dict[str, list[list]] = {}
        self.bind_errors: dict[str, str] = {}
        self._socks: list[socket.socket] = []
        self._sel = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._released, self._release_lock = False, threading.Lock()
        # close() writes here to wake the serving thread, which otherwise sleeps in select() until a probe arrives
        # (no periodic wake-ups: hundreds of idle listeners in one process must cost nothing).
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        for iface, addrs in addresses.items():
            for addr in addrs:
                try:
                    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((addr, 0))
                    s.listen(128)
                    s.setblocking(False)
                except OSError as e:
                    self.bind_errors[f"{iface}/{addr}"] = f"{type(e).__name__}: {e}"
                    continue
                self._socks.append(s)
                self._sel.register(s, selectors.EVENT_READ, None)
                self.endpoints.setdefault(iface, []).append([addr, s.getsockname()[1]])

    def __enter__(self) -> MeshListener:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="ncclcheck-mesh-listener", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self._serve_until_stopped()
        finally:
            if self._stop.is_set():
                self._release()  # close() may have given up waiting for this thread (issue 27: 8,192 nodes)

    def _serve_until_stopped(self) -> None:
        conns: dict[socket.socket, list] = {}  # conn -> [deadline, buffer]
        while not self._stop.is_set():
            timeout = self.budget.remaining(min(dl for dl, _ in conns.values())) if conns else None
            for key, _ in self._sel.select(timeout=timeout):
                sock = key.fileobj
                if key.data == "wake":
                    return self._drain(conns)
                if key.data is None:  # a listening socket
                    try:
                        conn, _peer = sock.accept()  # type: ignore[union-attr]
                    except OSError:
                        continue
                    conn.setblocking(False)
                    # A prober retries a late answer with probe_suspect_s: wait for its line at least that long, or
                    # a busy prober's request (sent late) would meet a closed door and read as a failure.
                    conns[conn] = [self.budget.deadline(max(self.budget.connect_attempt_s,
                                                            self.budget.probe_suspect_s)), b""]
                    self._sel.register(conn, selectors.EVENT_READ, "conn")
                    continue
                self._on_data(sock, conns)  # type: ignore[arg-type]
            now = time.monotonic()
            for conn in [c for c, (dl, _) in conns.items() if dl < now]:
                self._drop(conn, conns)
        self._drain(conns)

    def _drain(self, conns: dict) -> None:
        for conn in list(conns):
            self._drop(conn, conns)

    def _on_data(self, conn: socket.socket, conns: dict) -> None:
        try:
            chunk = conn.recv(_MAX_LINE)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        state = conns[conn]
        state[1] += chunk
        if chunk and b"\n" not in state[1] and len(state[1]) < _MAX_LINE:
            return
        try:
            req = json.loads(state[1].split(b"\n", 1)[0].decode("utf-8"))
            if isinstance(req, dict) and req.get("magic") == MAGIC:
                reply = {"magic": MAGIC, "node": self.node_rank, "id": self.node_id, "nonce": req.get("nonce"),
                         "time": time.time()}
                conn.setblocking(True)
                conn.settimeout(self.budget.reply_send_s)
                conn.sendall(json.dumps(reply).encode() + b"\n")
        except (OSError, ValueError):
            pass
        self._drop(conn, conns)

    def _drop(self, conn: socket.socket, conns: dict) -> None:
        conns.pop(conn, None)
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def close(self) -> None:
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(timeout=self.budget.thread_join_s)
            if self._thread.is_alive():
                return  # starved of CPU: the serving thread releases everything as it ends (never under its feet)
        self._release()

    def _release(self) -> None:
        with self._release_lock:
            if self._released:
                return
            self._released = True
        for s in [*self._socks, self._wake_r]:
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()
        self._wake_w.close()
        self._socks = []
        self._sel.close()


def _attempt(addr: str, port: int, error: Optional[str] = None) -> dict:
    return {"addr": addr, "port": port, "ok": False, "reached": None, "reached_id": None, "error": error,
            "rtt_us": None, "offset_s": None}


def _reply_record(rec: dict, line: bytes, nonce: str, t0: float, t1: float) -> dict:
    try:
        reply = json.loads(line.decode("utf-8")) if line else None
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or reply.get("magic") != MAGIC or reply.get("nonce") != nonce:
        rec["error"] = "connected, but something other than an ncclcheck probe answered"
        return rec
    rec.update(ok=True, reached=reply.get("node"), reached_id=reply.get("id"), rtt_us=(t1 - t0) * 1e6)
    if isinstance(reply.get("time"), (int, float)):
        rec["offset_s"] = reply["time"] - (t0 + t1) / 2  # NTP-style: remote clock minus our midpoint
    return rec


class _Probe:
    __slots__ = ("job", "sock", "nonce", "deadline", "t0", "buf", "rec", "me")

    def __init__(self, job: tuple, my_rank: int, deadline: float):
        self.job, self.deadline, self.t0, self.buf, self.me = job, deadline, 0.0, b"", my_rank
        self.nonce = f"{my_rank}-{job[0]}-{time.monotonic_ns()}"
        self.rec = _attempt(job[2], job[3])
        self.sock: Optional[socket.socket] = None


# The two ways a probe times out, told apart on the wire (issue 27: 64 busy lab hosts were named unreachable):
# NO_ANSWER, the TCP connect itself was not answered (a dropped SYN: firewall DROP, dead link, host down); LATE, the
# peer's kernel accepted the connection, then its prober did not reply in time (a busy host).
MESH_DEADLINE = f"{DEADLINE}: the mesh probe's deadline passed"


def local_peers(attempts: list[dict], own_addresses: set) -> set:
    """The peers this node reached, with their id in the reply, on an address of its own: they share its network
    stack (the proof nccl.reachability.host_groups reads from the rows)."""
    return {a["peer"] for a in attempts if a.get("ok") and a.get("addr") in own_addresses
            and a.get("reached") == a.get("peer") and a.get("expected_id")
            and str(a.get("reached_id") or "").startswith(str(a["expected_id"]))}


def is_suspect(rec: dict) -> bool:
    """A timed-out attempt worth one more try with a longer bound (refused or unroutable ones are definite)."""
    err = str(rec.get("error") or "")
    return not rec.get("ok") and (err.startswith(NO_ANSWER) or err.startswith(LATE))


def probe_peers(
    my_rank: int,
    peers: dict[int, dict],
    timeout_s: Optional[float] = None,
    deadline_s: Optional[float] = None,
    max_workers: int = 64,
    own_addresses: Optional[set] = None,
    budget: Budget = FIXED,
    stats: Optional[dict] = None,
    same_host: Optional[set] = None,
) -> list[dict]:
    """Probe every endpoint of every other node in `peers`, up to max_workers connections at a time (so a node's
    concurrent probe sockets stay bounded whatever the world's size).

    An endpoint on one of `own_addresses` is not connected to: that address is duplicated (the report says so from
    the published endpoints), and a connect would only reach a listener chosen by port. Except towards the peers in
    `same_host` (they claim this node's network identity, facts.host.network_identity): there the connect is made,
    and a reply with the peer's id proves the claim (nccl.reachability.host_groups), since a connect to a local
    address never leaves this network stack.

    A timed-out attempt says which half timed out: `no_answer:` (the connect was never answered) or `late:` (the
    peer accepted, then did not reply in time). Every such suspect is probed once more with the longer bound
    budget.probe_suspect_s (within the deadline) before it stands: a loaded host answers within seconds, a dropped
    SYN never. `stats`, when given, receives {"lag_ms": how late this prober's own loop woke at worst (a starved
    process), "retried": suspects retried, "recovered": suspects that answered the second time}.

    peers: {node_rank: {"id": node_id, "endpoints": {iface: [[addr, port], ...]}}}. Returns attempt records with
    "peer", "iface" and "expected_id" added; an attempt still running at the deadline is recorded as timed out.
    """
    jobs = [
        (rank, iface, addr, int(port), info.get("id"))
        for rank, info in sorted(peers.items())
        if rank != my_rank
        for iface, eps in sorted((info.get("endpoints") or {}).items())
        for addr, port in eps
    ]
    mine = set(own_addresses or ())
    local_ok = set(same_host or ())
    deadline_s = budget.mesh_s if deadline_s is None else deadline_s
    timeout_s = budget.connect_attempt_s if timeout_s is None else timeout_s
    end = budget.deadline(max(budget.socket_floor_s, deadline_s))
    per = max(budget.socket_floor_s, min(timeout_s, deadline_s))
    lag = [0.0]
    done = _probe_pass(my_rank, jobs, per, end, max_workers, mine, budget, lag, local_ok)
    suspects = [j for j in jobs if is_suspect(done.get(j) or {})]
    recovered = 0
    if suspects and budget.remaining(end) > budget.socket_floor_s:
        again = _probe_pass(my_rank, suspects, max(per, budget.probe_suspect_s), end, max_workers, mine, budget, lag,
                            local_ok)
        for job in suspects:
            rec = again.get(job)
            if rec is None:
                continue
            if rec.get("ok"):
                recovered += 1
            elif rec.get("error") != MESH_DEADLINE:
                rec["error"] = f"{rec['error']} (and on a retry with {max(per, budget.probe_suspect_s):g} s)"
            else:
                rec = done[job]  # the retry ran out of mesh time: the first attempt's evidence stands
            done[job] = rec
    if stats is not None:
        stats.update(lag_ms=int(lag[0] * 1000), retried=len(suspects), recovered=recovered)
    out = []
    for job in jobs:
        rank, iface, addr, port, nid = job
        rec = done.get(job) or _attempt(addr, port, MESH_DEADLINE)
        rec.update(peer=rank, iface=iface, expected_id=nid)
        out.append(rec)
    return out


def _probe_pass(my_rank: int, jobs: list, per: float, end: float, max_workers: int, mine: set, budget: Budget,
                lag: list, local_ok: frozenset | set = frozenset()) -> dict:
    """One pass over `jobs`, each attempt bounded by `per` and all by `end`: {job: attempt record}."""
    sel = selectors.DefaultSelector()
    todo, live, done = list(reversed(jobs)), 0, {}

    def step_ready(timeout: float) -> None:
        nonlocal live
        t = time.monotonic()
        events = sel.select(timeout=timeout)
        if not events and timeout > 0:
            lag[0] = max(lag[0], time.monotonic() - t - timeout)  # woke this much after its tick: starved
        for key, ev in events:
            p = key.data
            if _step(p, sel, ev):
                done[p.job] = p.rec
                live -= 1

    try:
        while todo or live:
            while todo and live < max(1, max_workers):
                job = todo.pop()
                if job[2] in mine and job[0] not in local_ok:  # one of our own addresses (docker0 everywhere)
                    done[job] = _attempt(job[2], job[3], OWN_ADDRESS)
                    continue
                p = _Probe(job, my_rank, min(end, budget.deadline(per)))
                if _start(p, sel):
                    live += 1
                else:
                    done[job] = p.rec
            step_ready(min(budget.select_tick_s, budget.remaining(end)))
            now = time.monotonic()
            if any(key.data.deadline <= now for key in sel.get_map().values()):
                step_ready(0)  # a reply already in the buffer is an answer, however late this loop woke
            now = time.monotonic()
            for key in list(sel.get_map().values()):
                p = key.data
                if p.deadline <= now:
                    if p.deadline >= end:
                        p.rec["error"] = MESH_DEADLINE
                    elif p.t0:
                        p.rec["error"] = f"{LATE}: accepted, then no reply within {per:g} s"
                    else:
                        p.rec["error"] = f"{NO_ANSWER}: the TCP connect was not answered within {per:g} s"
                    _finish(p, sel)
                    done[p.job] = p.rec
                    live -= 1
            if now >= end:
                for job in todo:
                    done[job] = _attempt(job[2], job[3], MESH_DEADLINE)
                todo = []
    finally:
        for key in list(sel.get_map().values()):
            _finish(key.data, sel)
        sel.close()
    return done


def _start(p: _Probe, sel: selectors.BaseSelector) -> bool:
    addr, port = p.job[2], p.job[3]
    try:
        s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
    except OSError as e:
        p.rec["error"] = f"{classify(e)}: {e}"
        return False
    s.setblocking(False)
    p.sock = s
    err = s.connect_ex((addr, port))
    if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
        p.rec["error"] = f"{classify(OSError(err, os.strerror(err)))}: [Errno {err}] {os.strerror(err)}"
        s.close()
        return False
    sel.register(s, selectors.EVENT_WRITE, p)
    return True


def _step(p: _Probe, sel: selectors.BaseSelector, events: int) -> bool:
    """Advance one probe on a readiness event; True when it finished (p.rec is final)."""
    s = p.sock
    assert s is not None
    try:
        if events & selectors.EVENT_WRITE and not p.t0:
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise OSError(err, os.strerror(err))
            p.t0 = time.time()
            s.send(json.dumps({"magic": MAGIC, "from": p.me, "nonce": p.nonce}).encode() + b"\n")
            sel.modify(s, selectors.EVENT_READ, p)
            return False
        chunk = s.recv(_MAX_LINE)
        p.buf += chunk
        if chunk and b"\n" not in p.buf and len(p.buf) < _MAX_LINE:
            return False
        if not p.buf:  # accepted, then closed before any reply: the peer's listener gave up on us (busy)
            p.rec["error"] = f"{LATE}: accepted, then closed without a reply"
        else:
            _reply_record(p.rec, p.buf.split(b"\n", 1)[0], p.nonce, p.t0, time.time())
    except BlockingIOError:
        return False
    except OSError as e:
        if p.t0 and isinstance(e, ConnectionResetError):  # reset after an accepted connect: the same, not a wall
            p.rec["error"] = f"{LATE}: accepted, then reset without a reply"
        else:
            p.rec["error"] = f"{classify(e)}: {e}"
    _finish(p, sel)
    return True


def _finish(p: _Probe, sel: selectors.BaseSelector) -> None:
    if p.sock is not None:
        try:
            sel.unregister(p.sock)
        except (KeyError, ValueError):
            pass
        p.sock.close()
        p.sock = None


class Lifeline:
    """Node 0's plain listener, closed only once its rendezvous store is gone: a member of a job with no launcher
    agent (srun, mpirun, env://) holds a connection to it and leaves ncclcheck when it closes, so its next TCPStore
    client (the script's own init on the same MASTER_PORT) can only meet the script's store, never ncclcheck's
    closing one. Nothing is ever accepted or sent: closing the listener resets the connections waiting in its
    backlog, which is the whole message."""

    def __init__(self, host: str, backlog: int = 4096) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def await_lifeline(addr: str, port: int, deadline: float, budget: Budget = FIXED) -> bool:
    """A member: connect to node 0's Lifeline and block until node 0 closes it (reset, end of stream, or refused
    because it is already closed): True. False at the deadline or on any other error (the caller leaves anyway)."""
    try:
        s = socket.create_connection((addr, port), timeout=max(budget.lifeline_floor_s, budget.left(deadline)))
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    with s:
        while not budget.passed(deadline):
            s.settimeout(max(budget.lifeline_floor_s, budget.left(deadline)))
            try:
                if not s.recv(1):
                    return True
            except ConnectionResetError:
                return True
            except TimeoutError:
                return False
            except OSError:
                return False
    return False
