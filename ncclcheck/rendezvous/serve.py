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
    """The running front: its process, and what it reported."""

    proc: Any
    port: int
    events: list = field(default_factory=list)  # the front's reports, in order (at most MAX_EVENTS)
    on_event: Optional[Callable[[str], None]] = None

    MAX_EVENTS = 256

    def lines(self) -> list:
        return [describe(e) for e in self.events]

    def close(self) -> None:
        """End the front (it also ends by itself when this process does: its stdin closes)."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(Budget.thread_join_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()


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
                on_event: Optional[Callable[[str], None]] = None) -> Front:
    """Start the front on `port` (every address) relaying to the server on 127.0.0.1:server_port. ConnectionError
    (one line) when it cannot listen."""
    limits = limits if limits is not None else FrontLimits()
    args = dict(vars(limits), port=port, server_port=server_port, stall_s=budget.front_stall_s,
                idle_s=budget.front_idle_s, tick_s=budget.front_tick_s)
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
    front = Front(proc, int(first["ready"]), on_event=on_event)
    threading.Thread(target=_read_events, args=(front,), name="ncclcheck-store-front", daemon=True).start()
    return front


def _read_events(front: Front) -> None:
    for line in front.proc.stdout:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if not isinstance(ev, dict) or len(front.events) >= Front.MAX_EVENTS:
            continue
        front.events.append(ev)
        if front.on_event is not None:
            front.on_event(describe(ev))
    code = front.proc.wait()
    if code != 0:  # it ends with 0 only when node 0 closed it
        ev = {"event": "exit", "addr": "", "why": f"exit code {code}; the other nodes lost the store"}
        front.events.append(ev)
        if front.on_event is not None:
            front.on_event(describe(ev))


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


def serve_store(port: int, timeout: Any, on_event: Callable[[str], None], budget: Optional[Budget] = None) -> tuple:
    """(node 0's TCPStore, the Front): the server on a loopback port of its own, the front on `port`. ConnectionError
    (one line) when either cannot start. The front's bounds are fixed fields of the Budget (not T): a default one has
    them."""
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
    front = start_front(port, server_port, budget, on_event=on_event)
    # The master port is free again when node 0 lets go of its store, as it was with torch's server alone: the guard
    # drops it and waits for the port, which the training script's own TCPStore binds next.
    weakref.finalize(store, front.close)
    return store, front
