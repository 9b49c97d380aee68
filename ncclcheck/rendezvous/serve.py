"""How node 0 serves the store: torch's TCPStore server on loopback, behind the bounded front on the master port.

Node 0's own connection goes straight to the server; every other process (the other nodes, and node 0's spawned
ranks) comes through rendezvous/front.py, a child process whose memory is capped and which hands the server one
request at a time per client, so no client can make node 0 queue replies it never reads or keep others out with idle
connections (issue 36). What the front saw (a flood, idle connections, a client closed) is named in the run's
`store.rejected` as "master port: ..." lines, with the client's address.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .budget import Budget

FRONT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "front.py")


@dataclass(frozen=True)
class FrontLimits:
    """The front's bounds in bytes and counts (docs/trust.md lists them); seconds come from the Budget."""

    unread_bytes: int = 16 << 20  # replies a client has not read before its next request is held back
    value_bytes: int = (8 << 20) + 4096  # one value: the readers' cap (store.Limits) + a signature
    written_bytes: int = 256 << 20  # all values written through the master port in one run
    keys_per_request: int = 4096  # keys named by one CHECK / WAIT / MULTI_GET (ncclcheck asks 512 at most)
    key_bytes: int = 4096
    connections: int = 60000  # open at once (further capped by the front's descriptor limit)
    memory_bytes: int = 512 << 20  # the front's own address space (RLIMIT_AS)
    idle_report: int = 16  # never-spoken connections from one address worth naming


@dataclass
class Front:
    """The running front: its processes (one, or several sharing the port: front_shards), and what they reported."""

    procs: list
    port: int
    events: list = field(default_factory=list)  # the fronts' reports, in order, each once (at most MAX_EVENTS)
    on_event: Optional[Callable[[str], None]] = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    MAX_EVENTS = 256

    @property
    def proc(self) -> Any:
        return self.procs[0]

    def lines(self) -> list:
        return [describe(e) for e in self.events]

    def add(self, ev: dict) -> None:
        """A shard's report, once: shards see the same flooder (the kernel spreads its connections over them)."""
        with self._lock:
            said = {(e.get("event"), e.get("addr")) for e in self.events}
            if (ev.get("event"), ev.get("addr")) in said or len(self.events) >= Front.MAX_EVENTS:
                return
            self.events.append(ev)
        if self.on_event is not None:
            self.on_event(describe(ev))

    def close(self) -> None:
        """End the fronts (each also ends by itself when this process does: its stdin closes)."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        for proc in self.procs:
            try:
                proc.wait(Budget.thread_join_s)
            except subprocess.TimeoutExpired:
                proc.kill()


# A front holds two descriptors per client that speaks (the client's and its own to the server) under the same hard
# RLIMIT_NOFILE as node 0's process, whose torch server holds one: past half the limit one front would close joining
# nodes (at 16,384 nodes and a hard limit of 20,000, scripts/bench_scale.py: 6,400 refused). So several fronts share
# the master port (SO_REUSEPORT; the kernel spreads connections over them by address and port), and node 0 needs no
# more of the limit than torch's own server does (agent/limits.py). The room is for the kernel's uneven spread.
SHARD_ROOM = 1.25
MAX_SHARDS = 16


def front_shards(clients: int, hard_nofile: Optional[int]) -> int:
    """How many fronts share the master port for `clients` clients under this hard open-file limit (None: none)."""
    if clients <= 0 or hard_nofile is None or hard_nofile <= 0:
        return 1
    from .front import conns_cap

    return max(1, min(MAX_SHARDS, -(-int(clients * SHARD_ROOM) // conns_cap(hard_nofile))))


def _front_log() -> Any:
    """Where the front's own stderr goes: a file named by NCCLCHECK_FRONT_LOG (to debug it), else nowhere."""
    path = os.environ.get("NCCLCHECK_FRONT_LOG")
    return open(path, "ab") if path else subprocess.DEVNULL  # noqa: SIM115 - the child owns it once started


def describe(ev: dict) -> str:
    kind, addr, why = ev.get("event"), ev.get("addr") or "?", ev.get("why", "")
    if kind == "flood":
        return f"the store on the master port was flooded by {addr}: {why}"
    if kind == "idle":
        return f"the master port was flooded with idle connections by {addr}: {why}"
    if kind == "exit":
        return f"the store's front on the master port exited: {why}"
    return f"the store on the master port closed a client, {addr}: {why}"


def start_front(port: int, server_port: int, budget: Budget, limits: Optional[FrontLimits] = None,
                on_event: Optional[Callable[[str], None]] = None, shards: int = 1) -> Front:
    """Start the front on `port` (every address) relaying to the server on 127.0.0.1:server_port: `shards` processes
    sharing the port (front_shards), the per-run write budget split between them. ConnectionError (one line) when it
    cannot listen."""
    limits = limits if limits is not None else FrontLimits()
    args = dict(vars(limits), port=port, server_port=server_port, stall_s=budget.front_stall_s,
                idle_s=budget.front_idle_s, tick_s=budget.front_tick_s, reuse_port=shards > 1,
                written_bytes=limits.written_bytes // max(1, shards))
    front: Optional[Front] = None
    try:
        for _ in range(max(1, shards)):
            proc, got = _start_one(args, budget)
            if front is None:
                front = Front([proc], got, on_event=on_event)
                args["port"] = got  # the others join the port the first was given (port 0: the kernel's pick)
            else:
                front.procs.append(proc)
            threading.Thread(target=_read_events, args=(front, proc), name="ncclcheck-store-front",
                             daemon=True).start()
    except ConnectionError:
        if front is not None:
            front.close()
        raise
    assert front is not None
    return front


def _start_one(args: dict, budget: Budget) -> tuple:
    """One front process: (the process, the port it listens on)."""
    err = _front_log()
    try:
        proc = subprocess.Popen([sys.executable or "python3", "-I", FRONT, json.dumps(args)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, close_fds=True)
    except OSError as e:
        raise ConnectionError(f"cannot start the store's front on the master port: {e}") from None
    finally:
        if err is not subprocess.DEVNULL:
            err.close()  # the child has its own copy
    end = budget.deadline(budget.front_start_s)
    ready, _, _ = select.select([proc.stdout], [], [], budget.left(end))
    line = proc.stdout.readline() if ready else b""
    try:
        first = json.loads(line) if line else {}
    except ValueError:
        first = {}
    if "ready" not in first:
        proc.kill()
        proc.wait()
        raise ConnectionError(first.get("error") or "the store's front on the master port did not start")
    return proc, int(first["ready"])


def _read_events(front: Front, proc: Any) -> None:
    for line in proc.stdout:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict):
            front.add(ev)
    code = proc.wait()
    if code != 0:  # it ends with 0 only when node 0 closed it
        front.add({"event": "exit", "addr": "", "why": f"exit code {code}; the other nodes lost the store"})


def _loopback_listener(avoid: int):
    """A listening socket on 127.0.0.1 at a port the kernel picks, never `avoid` (the master port the front binds
    next on every address: a free master port in the ephemeral range can be the very port the kernel hands out)."""
    import socket

    held = []
    try:
        for _ in range(8):
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(ls)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind(("127.0.0.1", 0))  # torch binds every address itself; a socket of ours binds what we say
            if ls.getsockname()[1] != avoid:  # the one at `avoid` stays bound while we take another
                ls.listen(4096)
                held.remove(ls)
                return ls
        raise OSError(f"the kernel kept handing out the master port {avoid}")
    finally:
        for s in held:
            s.close()


def serve_store(port: int, timeout: Any, on_event: Callable[[str], None], budget: Optional[Budget] = None,
                clients: int = 0) -> tuple:
    """(node 0's TCPStore, the Front): the server on a loopback port of its own, the front on `port`, sharded for
    `clients` connections (front_shards; 0: one front). ConnectionError (one line) when either cannot start. The
    front's bounds are fixed fields of the Budget (not T): a default one has them."""
    budget = budget if budget is not None else Budget()

    import torch.distributed as dist

    from ..errors import first_line

    try:
        ls = _loopback_listener(port)
    except OSError as e:
        raise ConnectionError(f"cannot listen on loopback for the store: {e}") from None
    server_port = ls.getsockname()[1]
    try:
        store = dist.TCPStore("127.0.0.1", server_port, None, True, wait_for_workers=False, timeout=timeout,
                              master_listen_fd=ls.detach())
    except Exception as exc:  # noqa: BLE001 - torch raises DistNetworkError/RuntimeError with C++ frames
        raise ConnectionError(first_line(exc)) from None
    from ..facts.host import nofile

    shards = front_shards(clients, nofile()["hard"])
    front = start_front(port, server_port, budget, on_event=on_event, shards=shards)
    if shards > 1:  # one front binds without SO_REUSEPORT: a port anyone holds is refused at the bind
        from ..facts.ports import other_listener

        other = other_listener(front.port, [p.pid for p in front.procs])
        if other is not None:
            front.close()
            raise ConnectionError(f"the master port {front.port} is also held by {other}, sharing it (SO_REUSEPORT) "
                                  "with this node's fronts: part of the nodes would reach a store this node did not "
                                  "create")
    # The master port is free again when node 0 lets go of its store, as it was with torch's server alone: the guard
    # drops it and waits for the port, which the training script's own TCPStore binds next.
    weakref.finalize(store, front.close)
    return store, front
