"""Plain-socket probes: is the master reachable (before any torch rendezvous), and which interfaces connect which nodes.

`probe_master` is a bounded, retried TCP connect to MASTER_ADDR:MASTER_PORT; `check_bind` tells node 0 whether it can
host the rendezvous port. The full-mesh probe is `MeshListener` (an ephemeral-port listener on every candidate
address, answering with the node's identity and wall clock) plus `probe_peers` (connect to every other node's
endpoints in parallel); nccl/reachability.py turns the attempts into the per-interface matrix. Only JSON travels on
the wire.
"""

from __future__ import annotations

import errno
import json
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from ..config import FIXED_BOUNDS_S
from ..facts.net import is_local_address, resolve_host

MAGIC = "NCCLCHECK-PROBE/1"
CONNECT_TIMEOUT_S = FIXED_BOUNDS_S["connect_attempt"]
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


def _classify(exc: BaseException) -> str:
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
    interval_s: float = 0.25,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    resolve_grace_s: float = 5.0,
    resolve: Callable[[str], list] = resolve_host,
) -> MasterProbe:
    """Connect to addr:port, retrying until `deadline` (a time.monotonic() value): node 0 may start after us.

    Refused and timed-out connects are retried; a name that still does not resolve after resolve_grace_s is given
    up early (a typo will not start resolving). The last failure's class is the verdict. `resolve` is injectable
    so tests never send a name query to the machine's resolver.
    """
    start = time.monotonic()
    attempts, last_error, status, resolved = 0, None, "timeout", []
    while True:
        attempts += 1
        now = time.monotonic()
        try:
            resolved = resolve(addr)
            target = resolved[0]
            family = socket.AF_INET6 if ":" in target else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(max(0.05, min(connect_timeout_s, deadline - now)))
                s.connect((target, port))
            return MasterProbe(addr, port, "ok", attempts, time.monotonic() - start, None, resolved, target)
        except OSError as e:
            status, last_error = _classify(e), f"{type(e).__name__}: {e}"
        now = time.monotonic()
        if now >= deadline or (status == "unresolvable" and now - start >= resolve_grace_s):
            return MasterProbe(addr, port, status, attempts, now - start, last_error, resolved)
        time.sleep(min(interval_s, max(0.0, deadline - now)))


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
# Full-mesh probe


def _read_line(sock: socket.socket, deadline: float) -> bytes:
    buf = b""
    while b"\n" not in buf and len(buf) < _MAX_LINE:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(_MAX_LINE)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n", 1)[0]


class MeshListener:
    """Listens on an ephemeral port on each candidate address and answers probes with this node's identity.

    Use as a context manager; `endpoints` is what to publish: {iface: [[addr, port], ...]}, and `bind_errors`
    names addresses that could not be bound.
    """

    def __init__(self, node_rank: int, node_id: str, addresses: dict[str, list[str]]):
        self.node_rank, self.node_id = node_rank, node_id
        self.endpoints: dict[str, list[list]] = {}
        self.bind_errors: dict[str, str] = {}
        self._socks: list[socket.socket] = []
        self._sel = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
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
                self._sel.register(s, selectors.EVENT_READ)
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
        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=0.1):
                try:
                    conn, _peer = key.fileobj.accept()  # type: ignore[union-attr]
                except OSError:
                    continue
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                line = _read_line(conn, time.monotonic() + CONNECT_TIMEOUT_S)
                req = json.loads(line.decode("utf-8"))
                if not isinstance(req, dict) or req.get("magic") != MAGIC:
                    return
                reply = {"magic": MAGIC, "node": self.node_rank, "id": self.node_id, "nonce": req.get("nonce"),
                         "time": time.time()}
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except (OSError, ValueError):
                return

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        for s in self._socks:
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()
        self._socks = []
        self._sel.close()


def probe_endpoint(addr: str, port: int, my_rank: int, timeout_s: float = CONNECT_TIMEOUT_S) -> dict:
    """One probe: connect, send a nonce, read back who answered. Returns a JSON-able attempt record."""
    nonce = f"{my_rank}-{time.monotonic_ns()}"
    rec: dict = {"addr": addr, "port": port, "ok": False, "reached": None, "reached_id": None, "error": None,
                 "rtt_us": None, "offset_s": None}
    deadline = time.monotonic() + timeout_s
    try:
        with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect((addr, port))
            t0 = time.time()
            s.sendall(json.dumps({"magic": MAGIC, "from": my_rank, "nonce": nonce}).encode() + b"\n")
            line = _read_line(s, deadline)
            t1 = time.time()
        reply = json.loads(line.decode("utf-8")) if line else None
        if not isinstance(reply, dict) or reply.get("magic") != MAGIC or reply.get("nonce") != nonce:
            rec["error"] = "connected, but something other than an ncclcheck probe answered"
            return rec
        rec.update(ok=True, reached=reply.get("node"), reached_id=reply.get("id"), rtt_us=(t1 - t0) * 1e6)
        if isinstance(reply.get("time"), (int, float)):
            rec["offset_s"] = reply["time"] - (t0 + t1) / 2  # NTP-style: remote clock minus our midpoint
    except (OSError, ValueError) as e:
        rec["error"] = _classify(e) if isinstance(e, OSError) else "garbled reply"
        if isinstance(e, OSError):
            rec["error"] = f"{rec['error']}: {e}"
    return rec


def probe_peers(
    my_rank: int,
    peers: dict[int, dict],
    timeout_s: float = CONNECT_TIMEOUT_S,
    deadline_s: float = 30.0,
    max_workers: int = 64,
) -> list[dict]:
    """Probe every endpoint of every other node in parallel.

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
    if not jobs:
        return []
    out: list[dict] = []
    pool = ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(jobs))), thread_name_prefix="ncclcheck-probe")
    try:
        per = max(0.05, min(timeout_s, deadline_s))
        futs = {pool.submit(probe_endpoint, a, p, my_rank, per): (r, i, a, p, nid) for r, i, a, p, nid in jobs}
        done, _ = wait(futs, timeout=max(0.05, deadline_s))
        for fut, (rank, iface, addr, port, nid) in futs.items():
            if fut in done:
                rec = fut.result()
            else:
                rec = {"addr": addr, "port": port, "ok": False, "reached": None, "reached_id": None,
                       "error": "timeout: the mesh probe's deadline passed", "rtt_us": None, "offset_s": None}
            rec.update(peer=rank, iface=iface, expected_id=nid)
            out.append(rec)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return out
