"""The bounded front of node 0's store: a child process on the master port that relays to torch's TCPStore server.

torch's TCPStore server (libuv, C++) trusts its clients, and the master port is open to anyone (issue 36):
- a client that pipelines GETs of a 4 MiB value and never reads the replies makes it queue every reply (node 0 grew to
  24 GB and the OOM killer ended it): the server builds every reply of a read chunk at once, so no amount of draining
  behind it helps; only not handing it the requests does;
- it accepts about 50 connections and then nothing for ~5 s per further batch of 50 (measured on torch 2.13): 500
  idle connections kept a real node out for 50 s, and node 0 blamed it ("node rank 1 never joined").
So node 0's server listens on loopback only, and this front holds the master port. It accepts at once, opens a
server connection only when a client first speaks, and relays the c10d wire protocol request by request: a request
that expects a reply goes on only when the previous reply was wholly received and the client has read all but
`--unread` bytes of what it was sent (a c10d client is synchronous, so a real one never waits here). A client whose
unread replies stay above that bound for `--stall` seconds, that speaks something that is not the protocol, or
writes more than the bounds allow is closed and reported; connections that never spoke are counted per address,
reported, and closed oldest first when connections run out. Its own memory is capped (RLIMIT_AS), so whatever a
client does, node 0's tree stays bounded. Reports go to stdout as JSON lines; stdin's end (node 0 gone) ends it.

Requests are framed incrementally (Parser): a client dripping a request a byte at a time costs its length once.
Standard library only, started by path (no package import): `python3 front.py '<json args>'`.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import socket
import struct
import sys
import time
from collections import Counter
from typing import Optional

VALIDATE, SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, DELETE_KEY, APPEND, MULTI_GET, MULTI_SET, \
    CANCEL_WAIT, PING = range(14)
STOP_WAITING, WAIT_CANCELED = 0, 1
READ_CHUNK = 1 << 16
NONE, FIXED, VEC, WAITING = "none", "fixed", "vec", "wait"


class Bad(Exception):
    """The client spoke something that is not the c10d store protocol, or past a bound."""


class Limits:
    """The front's bounds (bytes, counts, seconds), given by node 0 (seconds from its Budget)."""

    def __init__(self, a: dict):
        self.unread = int(a["unread_bytes"])  # a client's replies not yet read before its next request waits
        self.value = int(a["value_bytes"])  # one value written (SET, APPEND, COMPARE_SET, MULTI_SET)
        self.written = int(a["written_bytes"])  # all values written through the front in this run
        self.keys = int(a["keys_per_request"])  # keys named by one CHECK / WAIT / MULTI_GET / MULTI_SET
        self.key = int(a["key_bytes"])  # one key
        self.conns = int(a["connections"])  # connections open at once
        self.memory = int(a["memory_bytes"])  # this process's address space (RLIMIT_AS)
        self.stall_s = float(a["stall_s"])  # a client over `unread` for this long is closed
        self.idle_s = float(a["idle_s"])  # a connection that never spoke for this long is closed
        self.tick_s = float(a["tick_s"])  # how often the loop looks at the clock
        self.idle_report = int(a["idle_report"])  # never-spoken connections from one address worth a report


_U64 = struct.Struct("<Q")
_FAST = {GET: (VEC, 1), ADD: (FIXED, 8), CHECK: (FIXED, 1), WAIT: (WAITING,)}  # command -> its reply


def _u64(buf: bytearray, pos: int):
    """A little-endian u64 at pos, once the buffer holds it (a step of _request: yields the length it needs)."""
    yield pos + 8
    return _U64.unpack_from(buf, pos)[0]


def _blob(buf: bytearray, pos: int, cap: int, what: str):
    """A length-prefixed blob at pos: its end, once the buffer holds it all; Bad as soon as its announced length is
    over cap (before a byte of it is waited for)."""
    size = yield from _u64(buf, pos)
    if size > cap:
        raise Bad(f"a {what} of {size:,} bytes (cap {cap:,})")
    yield pos + 8 + size
    return pos + 8 + size, size


def _count(buf: bytearray, pos: int, lim: Limits):
    count = yield from _u64(buf, pos)
    if count > lim.keys:
        raise Bad(f"{count:,} keys in one request (cap {lim.keys:,})")
    return pos + 8, count


def _request(buf: bytearray, lim: Limits):
    """One request framed from buf[0:] as its bytes arrive: a generator that yields the length of buf it needs next
    (an announced length is waited for whole, never re-parsed) and returns (length, command, reply, value bytes,
    key count); Bad if it is not a request. reply: (NONE,), (FIXED, n), (VEC, n vectors) or (WAITING,)."""
    cmd = buf[0]
    pos, value, count = 1, 0, 0
    if cmd in (VALIDATE, PING):
        yield 5
        pos, reply = 5, (NONE,) if cmd == VALIDATE else (FIXED, 4)
    elif cmd in (SET, APPEND, COMPARE_SET):
        pos, _ = yield from _blob(buf, pos, lim.key, "key")
        for _ in range(2 if cmd == COMPARE_SET else 1):
            pos, size = yield from _blob(buf, pos, lim.value, "value")
            value += size
        reply = (VEC, 1) if cmd == COMPARE_SET else (NONE,)
    elif cmd in (GET, DELETE_KEY):
        pos, _ = yield from _blob(buf, pos, lim.key, "key")
        reply = (VEC, 1) if cmd == GET else (FIXED, 8)
    elif cmd == ADD:
        pos, _ = yield from _blob(buf, pos, lim.key, "key")
        yield pos + 8
        pos, reply = pos + 8, (FIXED, 8)
    elif cmd in (CHECK, WAIT, MULTI_GET):
        pos, count = yield from _count(buf, pos, lim)
        seen: set = set()
        for _ in range(count):
            start = pos
            pos, _ = yield from _blob(buf, pos, lim.key, "key")
            if cmd == MULTI_GET:
                k = bytes(buf[start:pos])
                if k in seen:  # one 8 MiB value asked for 1,024 times would be an 8 GiB reply
                    raise Bad("a key named twice in one MULTI_GET")
                seen.add(k)
        reply = {CHECK: (FIXED, 1), WAIT: (WAITING,), MULTI_GET: (VEC, count)}[cmd]
    elif cmd == MULTI_SET:
        pos, count = yield from _count(buf, pos, lim)
        for _ in range(count):
            pos, _ = yield from _blob(buf, pos, lim.key, "key")
        for _ in range(count):
            pos, size = yield from _blob(buf, pos, lim.value, "value")
            value += size
        reply = (NONE,)
    elif cmd == GETNUMKEYS:
        reply = (FIXED, 8)
    elif cmd == CANCEL_WAIT:
        reply = (FIXED, 1)
    else:
        raise Bad(f"command byte {cmd}, not one of the store's")
    return pos, cmd, reply, value, count


class Parser:
    """A client's requests framed incrementally: where the last look stopped is kept (a generator paused on the length
    it needs), so a request that arrives a byte at a time costs its length once, not its length squared (issue 45: four
    clients dripping multi-key requests a byte at a time made a real client's 100 SET/GET take 6-8 s)."""

    def __init__(self, lim: Limits) -> None:
        self.lim = lim
        self._gen = None  # the request being framed, paused
        self._need = 0  # the length of the buffer it waits for
        self.done: Optional[tuple] = None  # a request framed and not yet taken (see taken())

    def next(self, buf: bytearray) -> Optional[tuple]:
        """The first complete request in buf (the same one until taken()), None while incomplete; Bad if it is not
        one. buf is the same bytearray between calls, only appended to until the request is taken."""
        if self.done is not None:
            return self.done
        if len(buf) < max(1, self._need):
            return None
        if self._gen is None:
            fast = _fast(buf, self.lim)
            if fast is not None:
                self.done = fast
                return fast
            self._gen = _request(buf, self.lim)
            self._need = 0
        try:
            while len(buf) >= self._need:
                self._need = self._gen.send(None)
        except StopIteration as stop:
            self._gen, self._need, self.done = None, 0, stop.value
        except Bad:
            self._gen = None
            raise
        return self.done

    def taken(self) -> None:
        """The request returned by next() was removed from the front of the buffer."""
        self.done = None


def _fast(buf: bytearray, lim: Limits) -> Optional[tuple]:
    """Most of a run's requests, whole in the buffer: GET and ADD of one key, CHECK and WAIT of one key."""
    n = len(buf)
    fast = _FAST.get(buf[0]) if n >= 17 else None
    if fast is None:
        return None
    cmd = buf[0]
    if cmd in (CHECK, WAIT):
        if _U64.unpack_from(buf, 1)[0] == 1:
            klen = _U64.unpack_from(buf, 9)[0]
            if klen <= lim.key and n >= 17 + klen:
                return 17 + klen, cmd, fast, 0, 1
    else:
        klen = _U64.unpack_from(buf, 1)[0]
        end = 9 + klen + (8 if cmd == ADD else 0)
        if klen <= lim.key and n >= end:
            return end, cmd, fast, 0, 0
    return None


def parse(buf: bytearray, lim: Limits) -> Optional[tuple]:
    """(length, command, reply, value bytes, key count) of the first complete request in buf, None if incomplete;
    Bad if it is not a request (one look: a connection keeps a Parser across its reads)."""
    return Parser(lim).next(buf) if buf else None


class Replies:
    """Counts the bytes of the replies a connection is owed, as they arrive from the server (no copy kept)."""

    def __init__(self) -> None:
        self.owed: list = []  # [(FIXED, bytes left)] or [(VEC, vectors left, header bytes so far, bytes left)]
        self.waiting = False  # a WAIT was relayed and its one-byte answer has not come
        self.cancelled = False  # ... and a CANCEL_WAIT followed it

    def busy(self) -> bool:
        return bool(self.owed) or self.waiting

    def expect(self, reply: tuple) -> None:
        if reply[0] == FIXED:
            self.owed.append([FIXED, reply[1]])
        elif reply[0] == VEC and reply[1] > 0:
            self.owed.append([VEC, reply[1], b"", 0])
        elif reply[0] == WAITING:
            self.waiting = True

    def take(self, data: memoryview) -> None:
        """Account for bytes the server sent; Bad if it sent more than it owed."""
        i = 0
        while i < len(data):
            if self.waiting and not self.owed:
                # A WAIT is answered once (STOP_WAITING); a CANCEL_WAIT after it is answered WAIT_CANCELED, which
                # also ends the wait when the keys never came.
                b = data[i]
                i += 1
                if b == WAIT_CANCELED:
                    self.waiting = self.cancelled = False
                elif self.cancelled:
                    self.waiting, self.cancelled = False, False
                    self.owed.append([FIXED, 1])  # the cancel's own answer follows
                else:
                    self.waiting = False
                continue
            if not self.owed:
                raise Bad("the store server sent a reply nobody asked for")
            o = self.owed[0]
            if o[0] == FIXED:
                k = min(o[1], len(data) - i)
                o[1] -= k
                i += k
                if o[1] == 0:
                    self.owed.pop(0)
                continue
            if o[3] == 0 and len(o[2]) < 8:  # a vector's length header
                k = min(8 - len(o[2]), len(data) - i)
                o[2] += bytes(data[i:i + k])
                i += k
                if len(o[2]) == 8:
                    o[3] = struct.unpack("<Q", o[2])[0]
                    if o[3] == 0:
                        self._next_vec(o)
                continue
            k = min(o[3], len(data) - i)
            o[3] -= k
            i += k
            if o[3] == 0:
                self._next_vec(o)

    def _next_vec(self, o: list) -> None:
        o[1] -= 1
        o[2], o[3] = b"", 0
        if o[1] == 0:
            self.owed.pop(0)


class Conn:
    def __init__(self, sock: socket.socket, addr: str, now: float):
        self.sock, self.addr, self.since = sock, addr, now
        self.up: Optional[socket.socket] = None  # the connection to the server, opened when the client speaks
        self.inbuf = bytearray()  # the client's bytes not yet relayed
        self.out = bytearray()  # the server's bytes not yet sent to the client
        self.replies = Replies()
        self.over_since: Optional[float] = None  # when its unread replies went over the bound
        self.requests = 0
        self.watched = selectors.EVENT_READ  # its selector events (0: held back with nothing to send: not registered)
        self.parser: Optional[Parser] = None  # its requests framed as they arrive (the Front makes it: its limits)


class Front:
    def __init__(self, listen: socket.socket, server_port: int, lim: Limits, report):
        self.lsock, self.server_port, self.lim, self.report = listen, server_port, lim, report
        self.sel = selectors.DefaultSelector()
        self.sel.register(listen, selectors.EVENT_READ, "accept")
        self.conns: dict = {}  # client socket -> Conn
        self.ups: dict = {}  # server socket -> Conn
        self.written = 0
        self.multi: Optional[Conn] = None  # the connection whose MULTI_GET the server is answering
        self.held: set = set()  # connections whose MULTI_GET waits for that one
        self.reported: set = set()
        self.idle_closed: Counter = Counter()

    # --- events
    def say(self, kind: str, addr: str, why: str) -> None:
        if (kind, addr) not in self.reported:
            self.reported.add((kind, addr))
            self.report({"event": kind, "addr": addr, "why": why})

    def close(self, c: Conn, kind: str = "", why: str = "") -> None:
        self.held.discard(c)
        if self.multi is c:
            self.multi = None
        if kind:
            self.say(kind, c.addr, why)
        for s, table in ((c.sock, self.conns), (c.up, self.ups)):
            if s is None:
                continue
            table.pop(s, None)
            try:
                self.sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()

    def accept(self, now: float) -> None:
        while True:
            try:
                s, peer = self.lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors: the idle ones go first (below), the next accept gets a place
                self.evict_idle(now)
                return
            if len(self.conns) >= self.lim.conns:
                self.evict_idle(now)
                if len(self.conns) >= self.lim.conns:
                    self.say("connections", str(peer[0]), f"{len(self.conns):,} connections open (cap "
                                                     f"{self.lim.conns:,}): a new one was refused")
                    s.close()
                    continue
            s.setblocking(False)
            host = peer[0][7:] if peer[0].startswith("::ffff:") else peer[0]  # IPv4 on the dual-stack socket
            c = Conn(s, f"{host}:{peer[1]}", now)
            c.parser = Parser(self.lim)
            self.conns[s] = c
            self.sel.register(s, selectors.EVENT_READ, c)

    def evict_idle(self, now: float) -> None:
        silent = [c for c in self.conns.values() if c.up is None and not c.inbuf]
        if silent:
            c = min(silent, key=lambda c: c.since)
            self.idle_closed[c.addr.rsplit(":", 1)[0]] += 1
            self.close(c)
            self.say_idle()

    def say_idle(self) -> None:
        now = time.monotonic()  # a real client speaks within milliseconds; one silent past the stall bound never will
        open_silent = Counter(c.addr.rsplit(":", 1)[0] for c in self.conns.values()
                              if c.up is None and not c.inbuf and now - c.since > self.lim.stall_s)
        for host, n in (open_silent + self.idle_closed).items():
            if n >= self.lim.idle_report:
                self.say("idle", host, f"{n:,} connections that never spoke (at most {self.lim.idle_s:.0f} s "
                                       f"each, then closed)")

    def from_client(self, c: Conn, now: float) -> None:
        try:
            data = c.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.close(c)
            return
        c.inbuf += data
        if c.up is None:
            try:
                c.up = socket.create_connection(("127.0.0.1", self.server_port))
            except OSError as e:
                self.report({"event": "server", "addr": c.addr, "why": f"the store server refused: {e}"})
                self.close(c)
                return
            c.up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.up.setblocking(False)
            self.ups[c.up] = c
            self.sel.register(c.up, selectors.EVENT_READ, c)
        self.relay(c, now)

    def relay(self, c: Conn, now: float) -> None:
        """Hand the server the client's complete requests that may go now (see the module's docstring)."""
        while c.inbuf:
            try:
                req = c.parser.next(c.inbuf)
            except Bad as e:
                self.close(c, "protocol", str(e))
                return
            if req is None:
                break
            size, cmd, reply, value, _ = req
            if cmd == CANCEL_WAIT and c.replies.waiting:
                c.replies.cancelled = True
                reply = (NONE,)  # its answer is counted by Replies when the wait's byte comes
            elif c.replies.busy() or (reply[0] != NONE and len(c.out) > self.lim.unread):
                break  # one reply at a time, and only to a client that reads them
            elif cmd == MULTI_GET and self.multi is not None and self.multi is not c:
                self.held.add(c)  # one MULTI_GET in the server at a time: its reply can be the whole store
                break
            if cmd == MULTI_GET:
                self.multi = c
            if value:
                self.written += value
                if self.written > self.lim.written:
                    self.close(c, "written", f"the clients wrote {self.written:,} bytes of values through the "
                                             f"master port (cap {self.lim.written:,})")
                    return
            c.replies.expect(reply)
            c.requests += 1
            try:
                data = bytes(c.inbuf[:size])
                n = c.up.send(data)
                if n < len(data):  # a big value: the rest goes blocking, to a loopback server that always reads
                    c.up.setblocking(True)
                    c.up.sendall(data[n:])
                    c.up.setblocking(False)
            except BlockingIOError:
                c.up.setblocking(True)
                c.up.sendall(data)
                c.up.setblocking(False)
            except OSError as e:
                self.report({"event": "server", "addr": c.addr, "why": f"lost the store server: {e}"})
                self.close(c)
                return
            del c.inbuf[:size]
            c.parser.taken()
        self.interest(c)

    def from_server(self, c: Conn, now: float) -> None:
        try:
            data = c.up.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.close(c)
            return
        try:
            c.replies.take(memoryview(data))
        except Bad as e:
            self.close(c, "protocol", str(e))
            return
        c.out += data
        if self.multi is c and not c.replies.busy():
            self.multi = None
        self.flush(c, now)
        self.relay(c, now)

    def flush(self, c: Conn, now: float) -> None:
        if c.out:
            try:
                n = c.sock.send(c.out)
                del c.out[:n]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self.close(c)
                return
        if len(c.out) > self.lim.unread:
            if c.over_since is None:
                # A c10d client reads each reply before it asks again (at most one value, <= value_bytes, unread):
                # more than the bound unread is pipelining, not a slow reader.
                self.say("flood", c.addr, f"{len(c.out):,} bytes of replies left unread (bound {self.lim.unread:,}) "
                                          f"after {c.requests:,} requests; the rest are held, and the connection "
                                          f"is closed after {self.lim.stall_s:g} s unless it reads")
            c.over_since = c.over_since or now
        else:
            c.over_since = None

    def interest(self, c: Conn) -> None:
        if c.sock not in self.conns:
            return
        ev = selectors.EVENT_WRITE if c.out else 0
        # A client with a request held back is not read further than one request (its kernel buffer then fills
        # and its writes block): what it sends waits in its own memory, not ours.
        if len(c.inbuf) <= self.lim.value + self.lim.key + READ_CHUNK:
            ev |= selectors.EVENT_READ
        if ev == c.watched:
            return
        if ev and c.watched:
            self.sel.modify(c.sock, ev, c)
        elif ev:
            self.sel.register(c.sock, ev, c)
        else:  # nothing to send and nothing more taken from it: wait for the server's reply
            self.sel.unregister(c.sock)
        c.watched = ev
        # The server's side is always read (registered once): at most one reply, and torch's server must never queue.

    def sweep(self, now: float) -> None:
        for c in list(self.conns.values()):
            if c.over_since is not None and now - c.over_since > self.lim.stall_s:
                self.close(c, "flood", f"{len(c.out):,} bytes of replies unread for {self.lim.stall_s:g} s, "
                                       "connection closed")
            elif c.up is None and not c.inbuf and now - c.since > self.lim.idle_s:
                self.idle_closed[c.addr.rsplit(":", 1)[0]] += 1
                self.close(c)
        self.say_idle()

    def run(self, stdin_fd: int) -> None:
        self.sel.register(stdin_fd, selectors.EVENT_READ, "stdin")
        last = time.monotonic()
        while True:
            events = self.sel.select(self.lim.tick_s)
            now = time.monotonic()
            for key, mask in events:
                if key.data == "accept":
                    self.accept(now)
                elif key.data == "stdin":
                    if not os.read(stdin_fd, 4096):
                        return  # node 0 is gone (or closed its store): so is its store
                else:
                    c = key.data
                    if key.fileobj is c.up:
                        if c.sock in self.conns:
                            self.from_server(c, now)
                    else:
                        if mask & selectors.EVENT_WRITE:
                            self.flush(c, now)
                            self.relay(c, now)
                        if mask & selectors.EVENT_READ and c.sock in self.conns:
                            self.from_client(c, now)
            if self.held and self.multi is None:
                for c in list(self.held):
                    self.held.discard(c)
                    if c.sock in self.conns:
                        self.relay(c, now)
            if now - last >= self.lim.tick_s:
                self.sweep(now)
                last = now


def conns_cap(nofile: int) -> int:
    """Connections one front holds under this open-file limit: two descriptors each (the client's, and its own to
    the server once the client speaks), a few for itself. serve.front_shards divides a world by it."""
    return max(16, nofile // 2 - 16)


def listen(port: int, reuse_port: bool = False) -> socket.socket:
    """The master port on every address, as torch's server binds it (dual-stack where the host has IPv6). reuse_port:
    one of several fronts sharing the port (serve.front_shards); the kernel lets only the same user's sockets join."""
    try:
        if not socket.has_dualstack_ipv6():
            raise OSError("no IPv6")
        s = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=4096,
                                 reuse_port=reuse_port)
    except OSError:  # IPv6 off in this namespace or host: IPv4's every address, as torch falls back too
        s = socket.create_server(("", port), backlog=4096, reuse_port=reuse_port)
    s.setblocking(False)
    return s


def main() -> int:
    args = json.loads(sys.argv[1])
    lim = Limits(args)
    resource.setrlimit(resource.RLIMIT_AS, (lim.memory, lim.memory))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:  # two descriptors per client that speaks; the kernel's own cap is the hard limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    lim.conns = min(lim.conns, conns_cap(hard if hard > 0 else soft))

    def report(ev: dict) -> None:
        sys.stdout.write(json.dumps(ev) + "\n")
        sys.stdout.flush()

    try:
        sock = listen(int(args["port"]), bool(args.get("reuse_port")))
    except OSError as e:
        report({"error": f"cannot listen on port {args['port']}: {e}"})
        return 1
    report({"ready": sock.getsockname()[1]})
    try:
        Front(sock, int(args["server_port"]), lim, report).run(sys.stdin.fileno())
    except MemoryError:
        report({"event": "memory", "addr": "", "why": f"the front reached its {lim.memory:,}-byte cap"})
        return 1
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
