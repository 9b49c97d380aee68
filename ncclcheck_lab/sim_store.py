"""A pure-Python client of c10d's TCPStore wire protocol (as torch 2.13 speaks it), for bench_scale.py's virtual nodes.

torch's client is C++ and blocks its OS thread in every wait, so a simulator that gives each virtual node a torch
client needs an OS thread per node: at 4,096 nodes that was ~1,000 threads per worker process and most of the run
was the kernel handing the GIL between them (futex system time). This client speaks the same bytes over a plain
Python socket, so in a worker where gevent has patched `socket`, every virtual node is a greenlet and one OS thread
serves hundreds of them. Node 0 keeps torch's real TCPStore (server and client); only the other nodes use this.

The bytes were read off the wire between torch 2.13's client and server (tests/bench/test_sim_store.py checks this
client against a real TCPStore server): a 1-byte command, strings as an 8-byte little-endian length and the bytes,
keys under the client's "/" prefix; connect sends VALIDATE (the magic) and PING (a nonce the server echoes); GET and
MULTI_GET first WAIT for their keys (with the store's timeout), as torch's client does; a WAIT that times out is
cancelled with CANCEL_WAIT and raises DistStoreError("... timeout ..."), which is what rendezvous.store reads.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import struct
import time
from typing import Optional

VALIDATE, SET, GET, ADD, CHECK, WAIT, MULTI_GET, CANCEL_WAIT, PING = 0, 1, 3, 4, 5, 6, 10, 12, 13
VALIDATION_MAGIC = 0x3C85F7CE
READY = 0  # CHECK's reply
STOP_WAITING, WAIT_CANCELED = 0, 1  # WAIT's replies
KEY_PREFIX = "/"
RECV_CHUNK = 1 << 16  # one read takes what the store sent, up to this
CONNECT_RETRY_S = 0.1  # a refused connect (node 0 not listening yet) is retried after this, up to the timeout


class DistStoreError(RuntimeError):
    """Named as torch's: rendezvous.store tells a wait's timeout from a lost store by this name and 'timeout'."""


class DistNetworkError(RuntimeError):
    """Named as torch's: the connection to the store failed or was lost."""


def _s(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def _key(k: str) -> bytes:
    return _s((KEY_PREFIX + k).encode())


class WireStore:
    """The subset of torch.distributed.TCPStore that rendezvous.store.JsonStore uses, as a client only."""

    def __init__(self, host: str, port: int, timeout: _dt.timedelta, connect_s: Optional[float] = None,
                 source: Optional[str] = None):
        self.host, self.port, self.timeout = host, port, timeout
        self._buf = b""  # bytes the store sent beyond the reply read so far
        src = (source, 0) if source else None  # the virtual node's own loopback address (bench_scale.node_address)
        end = time.monotonic() + (timeout.total_seconds() if connect_s is None else connect_s)
        while True:
            try:
                self._sock = socket.create_connection((host, port), timeout=max(0.05, end - time.monotonic()),
                                                      source_address=src)
                break
            except (ConnectionRefusedError, socket.timeout) as e:
                if time.monotonic() >= end:
                    raise DistNetworkError(f"could not connect to the store at {host}:{port}: {e}") from None
                time.sleep(CONNECT_RETRY_S)
            except OSError as e:
                raise DistNetworkError(f"could not connect to the store at {host}:{port}: {e}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.settimeout(None)
        nonce = (os.getpid() ^ id(self)) & 0xFFFFFFFF
        self._send(bytes([VALIDATE]) + struct.pack("<I", VALIDATION_MAGIC) + bytes([PING]) + struct.pack("<I", nonce))
        if struct.unpack("<I", self._recv(4))[0] != nonce:
            raise DistNetworkError("the store answered the ping with another nonce")

    # --- bytes
    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as e:
            raise DistNetworkError(f"lost the store: {e}") from None

    def _recv(self, n: int, timeout_s: Optional[float] = None) -> bytes:
        """Exactly n bytes; socket.timeout (before any byte) when timeout_s is given and passes.

        Reads whatever the store has sent (up to RECV_CHUNK) and keeps the rest for the next call: a reply's length
        and its bytes arrive together, and two system calls and greenlet waits for them were a simulator cost (each
        virtual node's CPU is the run's bottleneck on 2 cores). The bytes on the wire are the same."""
        buf = self._buf
        if len(buf) >= n:
            self._buf = buf[n:]
            return bytes(buf[:n])
        self._sock.settimeout(timeout_s)
        try:
            while len(buf) < n:
                try:
                    chunk = self._sock.recv(RECV_CHUNK)
                except socket.timeout:
                    if buf:
                        raise DistNetworkError("the store stopped mid-reply") from None
                    raise
                except OSError as e:
                    raise DistNetworkError(f"lost the store: {e}") from None
                if not chunk:
                    raise DistNetworkError("the store closed the connection")
                buf += chunk
                self._sock.settimeout(None)  # the rest of a reply that began comes without a bound
        finally:
            self._sock.settimeout(None)
        self._buf = buf[n:]
        return bytes(buf[:n])

    def _recv_bytes(self) -> bytes:
        return self._recv(struct.unpack("<Q", self._recv(8))[0])

    # --- the Store API
    def set(self, key: str, value) -> None:
        self._send(bytes([SET]) + _key(key) + _s(value.encode() if isinstance(value, str) else bytes(value)))

    def get(self, key: str) -> bytes:
        self._wait([key], self.timeout.total_seconds())
        self._send(bytes([GET]) + _key(key))
        return self._recv_bytes()

    def add(self, key: str, n: int) -> int:
        self._send(bytes([ADD]) + _key(key) + struct.pack("<q", n))
        return struct.unpack("<q", self._recv(8))[0]

    def check(self, keys: list) -> bool:
        self._send(bytes([CHECK]) + struct.pack("<Q", len(keys)) + b"".join(_key(k) for k in keys))
        return self._recv(1)[0] == READY

    def multi_get(self, keys: list) -> list:
        self._wait(keys, self.timeout.total_seconds())
        self._send(bytes([MULTI_GET]) + struct.pack("<Q", len(keys)) + b"".join(_key(k) for k in keys))
        return [self._recv_bytes() for _ in keys]

    def wait(self, keys: list, timeout: Optional[_dt.timedelta] = None) -> None:
        self._wait(keys, (timeout or self.timeout).total_seconds())

    def clone(self) -> WireStore:
        return WireStore(self.host, self.port, self.timeout)

    def _wait(self, keys: list, timeout_s: float) -> None:
        self._send(bytes([WAIT]) + struct.pack("<Q", len(keys)) + b"".join(_key(k) for k in keys))
        try:
            r = self._recv(1, max(0.001, timeout_s))[0]
        except socket.timeout:
            self._send(bytes([CANCEL_WAIT]))
            r = self._recv(1)[0]
            if r == STOP_WAITING:  # the keys came just before the cancel: its reply follows
                r = self._recv(1)[0]
            if r != WAIT_CANCELED:
                raise DistNetworkError(f"the store answered a cancelled wait with {r}") from None
            raise DistStoreError(f"wait timeout after {timeout_s * 1000:.0f}ms, keys: "
                                 + ", ".join(KEY_PREFIX + k for k in keys)) from None
        if r != STOP_WAITING:
            raise DistNetworkError(f"the store answered a wait with {r}")


# The address a client connects from, asked at each connect: bench_scale gives each virtual node its own loopback
# address (its node_address); None is the kernel's choice.
def source_address() -> Optional[str]:
    return None


def client(host: str, port: int, try_s: float, timeout_s: float) -> WireStore:
    """A member's store client as rendezvous.store.STORE_CLIENT makes one (same arguments as torch_client's): the
    connect retried while refused for torch's tries of try_s each, requests bounded by timeout_s."""
    from ncclcheck.rendezvous.budget import FIXED

    return WireStore(host, port, _dt.timedelta(seconds=timeout_s), connect_s=try_s * FIXED.store_tries,
                     source=source_address())
