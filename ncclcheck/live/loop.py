"""The responder's connections: one thread and one selector, and what a stranger can make it do bounded before any work.

A responder lives inside a training process: every connection, hello and reply it handles is CPU the training loop
does not get (issue 45: a thread per connection and no limit cut a pinned training loop's iterations by ~60 % under
a flood of connections or requests; 8 idle reconnecting connections kept watch out of a healthy rank). So:
- slots go to requests, not idle sockets: at most MAX_CONNECTIONS open, at most PER_ADDRESS from one address; a new
  connection that finds them full takes the slot of the oldest idle connection (its request not read yet), of its
  own address first, else of the address holding the most idle ones; a connection whose request was read and
  accepted (sealed, with a key) keeps its slot; a request is read within Budget.live_request_s;
- the loop's own CPU (accepting, hellos, reading and checking requests, sending) is charged to the address it was
  spent on, each held to LOOP_SHARE of one core over each Budget.live_share_window_s: past it that address's
  connections are parked (accepted, not greeted or read) until the window ends, so a stranger's flood of refused
  requests costs his own share and cannot starve the job's hosts (issue 63: one shared bucket was throttled in every
  window of a flood, and watch's probe blamed the healthy host behind it); every address together is held to
  LOOP_SHARE_ALL: past it the listening socket is not read until the window ends (the kernel queues new connections,
  then drops them; a real client's connect retries);
- work goes to Workers: a few requests per address waiting, the addresses served in turn (a flooding address waits
  its turn like anyone), a request not started within Budget.live_queue_s answered "busy"; building a reply is held
  to WORK_SHARE of one core by a Spend (a bucket of Budget.live_work_burst_s, so one watcher's look is built at
  once): past it the owner serves the reply it built last, so a flood of requests costs sends, not builds.
Nothing here knows the protocol's meaning: the owner (live/responder.py) says what a hello is and what a request
asks for.
"""

from __future__ import annotations

import collections
import logging
import selectors
import socket
import threading
import time
from typing import Any, Callable, Optional

from ..rendezvous.budget import Budget
from . import wire

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64  # open at once (a descriptor each; an idle one costs nothing else): a watcher needs one or two
PER_ADDRESS = 16  # open at once from one address: one address cannot hold every slot, and a watcher sharing its
# address with a stranger who keeps reconnecting idle sockets still has 15 of his arrivals to send its request
ACCEPT_BATCH = 4  # connections accepted per wake: requests that came meanwhile are read first, and the CPU share
# is looked at between batches
LOOP_SHARE = 0.01  # of one core, per address, for accepting, hellos, reading requests and sending replies
MAX_ACCEPTED = 4096  # addresses remembered as the job's (one a host: more hosts than this share the loop's whole)
LOOP_SHARE_ALL = 0.03  # of one core, every address together: a flood from many addresses still costs at most this
WORK_SHARE = 0.01  # of one core, for building replies under a flood (one watcher's requests fit the bucket)
WORK_PER_ADDRESS = 4  # requests of one address waiting for a worker
READ_CHUNK = 1 << 16
THREAD_PREFIX = "ncclcheck-live"  # the responder's own threads: never in the stacks it sends (its noise is no cause)
READ, WORK, SEND = "read", "work", "send"


class Conn:
    __slots__ = ("sock", "addr", "since", "deadline", "state", "inbuf", "need", "out", "challenge", "ctx", "prepaid",
                 "parked", "greeted", "keep", "kept")

    def __init__(self, sock: socket.socket, addr: str, now: float, deadline: float, challenge: str) -> None:
        self.sock, self.addr, self.since, self.deadline = sock, addr, now, deadline
        self.state = READ
        self.inbuf = bytearray()
        self.need = 0  # the request frame's announced length, once its header came
        self.out: list = []  # memoryviews of the frame left to send
        self.challenge = challenge
        self.prepaid = False  # what it sends was paid for by its owner (Outcome.prepaid): not the loop's share
        self.ctx: Any = None  # what the owner keeps for this connection's reply (its seal)
        self.parked = False  # its address spent its share of this window: not read (or greeted) until the next
        self.greeted = True  # its hello was sent (a connection parked as it was accepted gets it when unparked)
        self.keep = False  # its accepted request asked to keep the connection: greeted again after the reply
        self.kept = False  # greeted again after a reply: idle until the asker's next request, within live_keep_s


class Outcome:
    """What the owner made of a request: a refusal sent at once, or work for one of its Workers. prepaid: the
    owner charged sending the reply to its own Spend (a probe's blob: 1 MiB costs the whole of the loop's share of a
    window, which then stopped accepting until the window ended: 0.5 s a download, a probe's turns made seconds).
    now: the job is the loop's own, run at once on its thread (a reply as cheap as a hello, within the loop's share,
    that a worker's queue would only make later: the wall clock)."""

    __slots__ = ("refusal", "worker", "job", "prepaid", "now", "keep")

    def __init__(self, refusal: Optional[str] = None, worker: Optional[str] = None,
                 job: Optional[Callable[[], Any]] = None, prepaid: bool = False, now: bool = False,
                 keep: bool = False) -> None:
        self.refusal, self.worker, self.job, self.prepaid, self.now = refusal, worker, job, prepaid, now
        self.keep = keep  # the request asked to keep the connection (wire: "keep"): greeted again after the reply


class Spend:
    """CPU seconds that building replies may take: a bucket of Budget.live_work_burst_s (one watcher's look is built
    at once), refilled at `share` of one core. An owner that finds it empty serves what it built before."""

    def __init__(self, budget: Budget, share: float = WORK_SHARE) -> None:
        self.budget, self.share = budget, share
        self._bucket = budget.live_work_burst_s
        self._filled = time.monotonic()
        self._lock = threading.Lock()
        self.spent = 0.0

    def allows(self, credit: float = 0.0) -> bool:
        """Is there CPU left to spend? `credit`: how far past empty the bucket may be (the refill, `share` of a
        core, still bounds what a flood of such work costs over time)."""
        with self._lock:
            now = time.monotonic()
            self._bucket = min(self.budget.live_work_burst_s, self._bucket + (now - self._filled) * self.share)
            self._filled = now
            return self._bucket > -credit

    def charge(self, cpu_s: float) -> None:
        with self._lock:
            self._bucket -= cpu_s
            self.spent += cpu_s


class Workers:
    """One thread per kind of work, started when first needed (the one a look's "all" goes to, wire.KINDS: with the
    loop): at most WORK_PER_ADDRESS requests of one address waiting, the addresses served in turn (a flooding address
    waits its turn like anyone), a request that waited past Budget.live_queue_s answered "busy"."""

    def __init__(self, name: str, budget: Budget, done: Callable[[Conn, bytes], None],
                 busy: Callable[[Conn], bytes]) -> None:
        self.name, self.budget, self.done, self.busy = name, budget, done, busy
        self._queue: collections.OrderedDict = collections.OrderedDict()  # addr -> deque of (conn, job, since)
        self._cv = threading.Condition()
        self._stop = False
        self._thread: Optional[threading.Thread] = None
        self.served = 0
        self.cpu_used = 0.0  # what its work took (replies are built within the owner's Spend)

    def submit(self, conn: Conn, job: Callable[[], bytes]) -> bool:
        """Queue conn's work; False when its address already has WORK_PER_ADDRESS requests waiting here."""
        with self._cv:
            mine = self._queue.setdefault(conn.addr, collections.deque())
            if len(mine) >= WORK_PER_ADDRESS:
                return False
            mine.append((conn, job, time.monotonic()))
            self._start()
            self._cv.notify()
        return True

    def start(self) -> None:
        with self._cv:
            self._start()

    def _start(self) -> None:
        if self._thread is None and not self._stop:
            self._thread = threading.Thread(target=self._run, name=f"{THREAD_PREFIX}-{self.name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()

    def join(self, timeout: float) -> bool:
        """Wait for the thread to end (after stop(): once its current work returned); False when it still runs."""
        t = self._thread
        if t is not None:
            t.join(timeout)
        return t is None or not t.is_alive()

    def _next(self) -> Optional[tuple]:
        """The first address's oldest request; that address goes to the back of the turn."""
        while not self._queue and not self._stop:
            self._cv.wait()
        if self._stop:
            return None
        addr, mine = self._queue.popitem(last=False)
        item = mine.popleft()
        if mine:
            self._queue[addr] = mine
        return item

    def _run(self) -> None:
        while True:
            with self._cv:
                item = self._next()
            if item is None:
                return
            conn, job, since = item
            t0 = time.thread_time()
            try:
                out = job() if self.budget.within(since, self.budget.live_queue_s) else self.busy(conn)
                self.served += 1
                self.done(conn, out)
            except Exception as exc:  # noqa: BLE001 - a reply that could not be built closes its connection only
                log.debug("live: %s work failed: %s", self.name, exc)
                self.done(conn, b"")
            self.cpu_used += time.thread_time() - t0


class Loop:
    """The listening socket and its connections, served by one thread (see the module's docstring)."""

    def __init__(self, sock: socket.socket, owner: Any, budget: Budget) -> None:
        self.sock, self.owner, self.budget = sock, owner, budget
        self.sock.setblocking(False)
        self.sel = selectors.DefaultSelector()
        self.conns: dict = {}  # socket -> Conn
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._done: collections.deque = collections.deque()  # (conn, reply frame) from the workers
        self._stop = threading.Event()
        self.workers = {name: Workers(name, budget, self._finished, owner.busy) for name in owner.WORKERS}
        self.cpu_used = 0.0  # the loop's own CPU, all windows together
        self._listening = False
        self._window_end = 0.0
        self._window_cpu = 0.0
        self._addr_cpu: dict = {}  # address -> the loop's CPU spent on it in this window
        # addresses a request was accepted from (the job's own hosts: with a token, sealed): held only to the loop's
        # whole share, never parked by their own, as a host whose ranks download the probe's blobs would otherwise be
        # (its transfers held to the next window, the probe blamed it)
        self._accepted: set = set()
        self._over: set = set()  # addresses past their share in this window: their connections parked
        self.parked = 0  # connections parked (their address past its share), all windows together
        self._sent = 0  # bytes sent in this turn of the loop
        self._prepaid_cpu = 0.0  # ... and this turn's CPU of sends its owner paid for (Outcome.prepaid)
        self.evicted = 0
        self.throttled = 0  # windows in which the loop stopped reading the listening socket
        # when this loop last turned a stranger away (a request refused from an address none of whose requests was
        # accepted, a connection parked or evicted, the listening socket throttled): a transfer it served or made
        # near then shared the host with that traffic, and the probe does not judge the host's link by it
        self.stranger_at: Optional[float] = None

    def quiet_s(self) -> Optional[float]:
        """Seconds since this loop last turned a stranger away; None: never."""
        return None if self.stranger_at is None else max(0.0, time.monotonic() - self.stranger_at)

    def _stranger(self) -> None:
        self.stranger_at = time.monotonic()

    # --- the thread
    def start(self) -> Loop:
        threading.Thread(target=self._run, name=f"{THREAD_PREFIX}-accept", daemon=True).start()
        # the worker every look asks is waiting before the first look: started by that look's request, it was a
        # thread start inside a busy process on the way to the rank's first reply (at 4,096 simulated ranks the
        # first look took 3.6-4.2 s, against 3.9-4.3 s)
        self.workers[wire.KINDS["all"]].start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._wake()
        for w in self.workers.values():
            w.stop()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass  # already woken (its buffer full) or closed

    def _run(self) -> None:
        self.sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._listen(True)
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                timeout = self._timeout(now)
                events = self.sel.select(timeout)
                t0 = time.thread_time()
                self._roll(time.monotonic())
                # requests first: a connection that spoke is read before a new one can take an idle slot
                for key, mask in sorted(events, key=lambda e: e[0].data == "listen"):
                    if key.data == "listen":
                        self._accept()
                    elif key.data == "wake":
                        self._drain_wake()
                    else:
                        self._on(key.data, lambda c=key.data, mask=mask: self._event(c, mask))
                self._take_done()
                self._expire(time.monotonic())
                # what this turn cost this process's core: its own CPU, and the kernel's work for the bytes it sent
                # (on loopback the receiving side's TCP runs on the sender's core, charged to whatever runs there)
                self._account(time.thread_time() - t0 - self._prepaid_cpu
                              + self._sent / (1 << 20) * self.budget.live_send_cost_s)
                self._sent, self._prepaid_cpu = 0, 0.0
        finally:
            for c in list(self.conns.values()):
                self._close(c)
            try:
                self.sock.close()
            except OSError:
                pass
            self.sel.close()
            self._wake_r.close()
            self._wake_w.close()

    def _timeout(self, now: float) -> Optional[float]:
        ends = [c.deadline for c in self.conns.values() if c.state != WORK]  # a parked one's: the window's end
        if not self._listening:
            ends.append(self._window_end)
        return None if not ends else max(0.0, min(ends) - now)

    def _roll(self, now: float) -> None:
        """A new window: every address's share afresh, the listening socket read again, parked connections read."""
        if now < self._window_end:
            return
        self._window_end, self._window_cpu = now + self.budget.live_share_window_s, 0.0
        self._addr_cpu.clear()
        self._over.clear()
        self._listen(True)
        for c in [c for c in self.conns.values() if c.parked]:
            self._on(c, lambda c=c: self._unpark(c, now))

    def _on(self, c: Conn, fn: Callable[[], Any]) -> None:
        """fn() on c's behalf: its CPU and the bytes it sent charged to c's address."""
        t0, sent0 = time.thread_time(), self._sent
        fn()
        self._charge(c.addr, time.thread_time() - t0 + (self._sent - sent0) / (1 << 20) * self.budget.live_send_cost_s)

    def _charge(self, addr: str, cpu: float) -> None:
        if addr in self._accepted:
            return
        spent = self._addr_cpu[addr] = self._addr_cpu.get(addr, 0.0) + cpu
        if addr not in self._over and spent > LOOP_SHARE * self.budget.live_share_window_s:
            self._over.add(addr)

    def _park(self, c: Conn) -> None:
        """Stop reading c until the window ends (its address spent its share): the kernel keeps what it sends."""
        self.parked += 1
        self._stranger()
        c.parked, c.deadline = True, self._window_end
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass

    def _unpark(self, c: Conn, now: float) -> None:
        c.parked, c.deadline = False, now + self.budget.live_request_s
        if not c.greeted:
            hello, c.challenge = self.owner.hello()
            try:
                c.sock.send(wire.frame(hello))
            except OSError:
                self._close(c)
                return
            c.greeted = True
        try:
            self.sel.register(c.sock, selectors.EVENT_READ, c)
        except (KeyError, ValueError):
            self._close(c)

    def _listen(self, on: bool) -> None:
        if on and not self._listening:
            self.sel.register(self.sock, selectors.EVENT_READ, "listen")
        elif not on and self._listening:
            self.sel.unregister(self.sock)
        self._listening = on

    def _account(self, cpu: float) -> None:
        """The loop's CPU in this window, every address together; past LOOP_SHARE_ALL, stop reading the listening
        socket until the window ends."""
        self._roll(time.monotonic())
        self._window_cpu += cpu
        self.cpu_used += cpu
        if self._listening and self._window_cpu > LOOP_SHARE_ALL * self.budget.live_share_window_s:
            self.throttled += 1
            self._stranger()
            self._listen(False)

    # --- connections
    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            t0 = time.thread_time()
            try:
                s, peer = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors: the idle ones make room for the next one
                self.owner.note(f"accept: {exc.strerror or exc}")
                return
            addr = peer[0][7:] if peer[0].startswith("::ffff:") else peer[0]
            self._admit_one(s, addr)
            self._charge(addr, time.thread_time() - t0)

    def _admit_one(self, s: socket.socket, addr: str) -> None:
        if not self._admit(addr):
            self.owner.note(f"{addr}: every slot is answering a request: connection closed")
            s.close()
            return
        s.setblocking(False)
        now = time.monotonic()
        if addr in self._over:  # its address spent its share: greeted when the window ends, in its turn
            c = Conn(s, addr, now, self._window_end, "")
            c.greeted = False
            self.conns[s] = c
            self._park(c)
            return
        hello, challenge = self.owner.hello()
        c = Conn(s, addr, now, now + self.budget.live_request_s, challenge)
        try:
            s.send(wire.frame(hello))  # a few hundred bytes into an empty socket buffer: sent whole
        except OSError:
            s.close()
            return
        self.conns[s] = c
        self.sel.register(s, selectors.EVENT_READ, c)

    def _admit(self, addr: str) -> bool:
        """Make room for a new connection from addr: False when every slot it could take is answering a request."""
        mine = [c for c in self.conns.values() if c.addr == addr]
        if len(mine) >= PER_ADDRESS:
            idle = [c for c in mine if c.state == READ]
            if not idle:
                return False
            self._evict(min(idle, key=lambda c: c.since))
        if len(self.conns) >= MAX_CONNECTIONS:
            idle = [c for c in self.conns.values() if c.state == READ]
            if not idle:
                return False
            count = collections.Counter(c.addr for c in idle)
            worst = max(count, key=lambda a: (count[a], a == addr))
            self._evict(min((c for c in idle if c.addr == worst), key=lambda c: c.since))
        return True

    def _evict(self, c: Conn) -> None:
        self.evicted += 1
        self._stranger()
        self.owner.note(f"{c.addr}: an idle connection (no request in {time.monotonic() - c.since:.2f} s) closed "
                        "for a new one")
        self._close(c)

    def _close(self, c: Conn) -> None:
        if self.conns.pop(c.sock, None) is None:
            return
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        try:
            c.sock.close()
        except OSError:
            pass

    def _event(self, c: Conn, mask: int) -> None:
        if c.sock not in self.conns:
            return
        if c.state == READ and c.addr in self._over:  # its address spent its share: read in the next window
            self._park(c)
            return
        if c.state == READ and mask & selectors.EVENT_READ:
            self._read(c)
        elif c.state == SEND and mask & selectors.EVENT_WRITE:
            self._send(c)
        elif mask & selectors.EVENT_READ:  # a peer that speaks (or closes) while its work runs: only a close matters
            try:
                if not c.sock.recv(READ_CHUNK):
                    self._close(c)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._close(c)

    def _read(self, c: Conn) -> None:
        try:
            data = c.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.owner.note(f"{c.addr}: closed before its request")
            self._close(c)
            return
        if c.kept and not c.inbuf:  # the asker's next request begins: read within the usual bound
            c.deadline = time.monotonic() + self.budget.live_request_s
        c.inbuf += data
        if not c.need and len(c.inbuf) >= wire.HEADER.size:
            (c.need,) = wire.HEADER.unpack_from(c.inbuf)
            if c.need > wire.MAX_REQUEST or c.need == 0:
                self._refuse(c, f"request: a frame of {c.need:,} bytes, over the {wire.MAX_REQUEST:,}-byte limit"
                             if c.need else "request: an empty frame")
                return
        if c.need and len(c.inbuf) >= wire.HEADER.size + c.need:
            if len(c.inbuf) > wire.HEADER.size + c.need:
                self._refuse(c, "request: more than one frame")
                return
            out: Outcome = self.owner.request(c, bytes(c.inbuf[wire.HEADER.size:]))
            c.inbuf = bytearray()
            if out.refusal is None and len(self._accepted) < MAX_ACCEPTED:
                self._accepted.add(c.addr)
                self._over.discard(c.addr)
            c.keep = out.refusal is None and out.keep
            if out.refusal is not None:
                self._refuse(c, out.refusal)
            elif out.now:
                self._reply(c, self._run_now(out.job))
            elif not self.workers[out.worker].submit(c, out.job):
                self._refuse(c, f"busy: this address already has {WORK_PER_ADDRESS} requests waiting")
            else:
                c.state, c.prepaid = WORK, out.prepaid

    @staticmethod
    def _run_now(job: Callable[[], Any]) -> Any:
        try:
            return job()
        except Exception as exc:  # noqa: BLE001 - as a worker's: a reply that could not be built closes its connection
            log.debug("live: a reply failed: %s", exc)
            return b""

    def _refuse(self, c: Conn, why: str) -> None:
        if c.addr not in self._accepted:
            self._stranger()
        self.owner.note(f"{c.addr}: {why}")
        self._reply(c, self.owner.refusal(why))

    def _reply(self, c: Conn, data: Any) -> None:
        """Send one frame of `data` (bytes, or a tuple of parts sent as one frame without joining them: a reply
        served from the owner's cache is a few bytes of its own and a large shared body)."""
        parts = [memoryview(p) for p in (data if isinstance(data, tuple) else (data,)) if len(p)]
        if not parts:
            self._close(c)
            return
        c.state = SEND
        c.out = [memoryview(wire.HEADER.pack(sum(len(p) for p in parts))), *parts]
        c.deadline = time.monotonic() + self.budget.live_send_s
        try:
            self.sel.modify(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
        except (KeyError, ValueError):
            self._close(c)
            return
        self._send(c)

    def _send(self, c: Conn) -> None:
        t0 = time.thread_time() if c.prepaid else 0.0
        try:
            n = c.sock.sendmsg(c.out[:8])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(c)
            return
        finally:
            if c.prepaid:  # the kernel's copy runs on this thread: paid by the owner too
                self._prepaid_cpu += time.thread_time() - t0
        if not c.prepaid:
            self._sent += n
        while n and c.out:
            k = min(n, len(c.out[0]))
            n -= k
            c.out[0] = c.out[0][k:]
            if not len(c.out[0]):
                c.out.pop(0)
        if not c.out:
            if c.keep and not self._stop.is_set():
                self._again(c)
            else:
                self._close(c)

    def _again(self, c: Conn) -> None:
        """The reply to a request that asked to keep its connection is sent: a fresh hello (a new challenge: every
        request is sealed for its own), then the connection waits idle for the asker's next request within
        Budget.live_keep_s. Idle, it is the first a new connection's admission evicts, as any idle one."""
        hello, challenge = self.owner.hello()
        now = time.monotonic()
        c.state, c.inbuf, c.need, c.out, c.ctx, c.prepaid = READ, bytearray(), 0, [], None, False
        c.challenge, c.keep, c.kept = challenge, False, True
        c.since, c.deadline = now, now + self.budget.live_keep_s
        frame = wire.frame(hello)
        try:
            # a few hundred bytes into a socket whose buffer just emptied: sent whole, or the connection ends (a cut
            # hello would hold the asker's next request to its bound)
            if c.sock.send(frame) < len(frame):
                return self._close(c)
            self.sel.modify(c.sock, selectors.EVENT_READ, c)
        except (OSError, KeyError, ValueError):
            self._close(c)

    def _finished(self, c: Conn, data: Any) -> None:
        """A worker's reply (any thread): the loop sends it."""
        self._done.append((c, data))
        self._wake()

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError, OSError):
            pass

    def _take_done(self) -> None:
        while self._done:
            c, data = self._done.popleft()
            if c.sock in self.conns:
                self._on(c, lambda c=c, data=data: self._reply(c, data))

    def _expire(self, now: float) -> None:
        for c in [c for c in self.conns.values() if c.state != WORK and not c.parked and now >= c.deadline]:
            if c.state == READ and c.kept and not c.inbuf:  # the asker did not come back: closed, nothing said
                self._close(c)
            elif c.state == READ:
                self._on(c, lambda c=c: self._refuse(c, "request: no complete frame within the bound"))
                if c.sock in self.conns and c.state == SEND:
                    c.deadline = now + self.budget.live_request_s  # the refusal itself gets a short bound
            else:
                self.owner.note(f"{c.addr}: the reply was not taken within the bound: closed")
                self._close(c)
