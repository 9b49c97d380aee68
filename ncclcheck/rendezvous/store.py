"""The one JSON wrapper over c10d's TCPStore: every read checked, every wait blocking and bounded, safe from threads.

Everything that crosses the network between ncclcheck's processes goes through `JsonStore`, so this is where what
arrives is distrusted (anyone who can reach the master port can write keys, as with torch.distributed's own store):
- values are JSON, never pickle; a value that is not JSON, too large, of the wrong type, or (with a job token)
  unsigned or mis-signed is dropped and named in `store.rejected`, never raised;
- the bytes read per run are capped (`Limits`), and counters read back are capped by the caller (`count`);
- with a job key (a token, or the per-run key of rendezvous/trust.py) every value is HMAC-SHA256-signed over the
  run's nonce, its full key and its JSON, so a record signed in another run of the same job key (a replay) is dropped
  and named too.
Waits block in the store (`TCPStore.wait`, one request per slice of a couple of seconds so Ctrl-C is answered) and
never poll. A c10d client serialises its calls, so a wait on it would stall every other thread using it: each thread
gets its own connection (`clone()`), and no lock is held across a wait. fd 2 is never touched here: the plain-socket
probe runs first, so a connect does not retry noisily, and the CLI keeps torch's native lines in the run's log
(cli.py). torch is imported only to open a store.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..clean import load_json
from ..errors import first_line
from .budget import FIXED, Budget

# A signed value: SIGNED + the run (up to RUN_CHARS hex digits; empty before the signer knows it) + ":" + 64 hex
# digits of HMAC-SHA256(key, run \0 full key \0 JSON) + ":" + the JSON.
SIGNED = b"ncclcheck-hmac2:"
RUN_CHARS = 32
# The only records signed before their writer knows the run: a member's challenge (rendezvous/trust.py), which asks
# node 0 for the run. Replaying one only makes node 0 answer a challenge nobody waits for.
PRERUN = "trust/hello/"


class StoreLost(ConnectionError):
    """The store stopped answering (its host exited or crashed). The message is one line."""


class ConnectTimedOut(ConnectionError):
    """A client's connect got no answer within its try (a refused or unreachable port reads the same to torch's
    client: whether the store is there is the caller's to know, from a probe of its port). One line."""


@dataclass
class Limits:
    """How much a run reads from the store: per value, and in total (a stranger must not exhaust our memory)."""

    max_value_bytes: int = 8 << 20
    max_total_bytes: int = 1 << 30

    @classmethod
    def for_nodes(cls, nnodes: int) -> Limits:
        """Node 0 reads one join record (facts) and one mesh row per node: the total grows with n, bounded."""
        return cls(max_total_bytes=(256 << 20) + (2 << 20) * max(1, nnodes))


def counter_cap(nnodes: int) -> int:
    """The most a counter of a world of nnodes may honestly reach: every node twice (a duplicate, a retry) + slack."""
    return 2 * max(1, nnodes) + 16


@dataclass
class Guard:
    """What a process's store clients share: the job token, the limits, the bytes read, and what was dropped."""

    token: Optional[bytes] = None
    # This run's nonce (rendezvous/trust.py): node 0 makes it, every member learns it in a signed answer to its own
    # challenge; once set, a value signed for another run is refused as a replay. None until then (and without a key).
    run: Optional[str] = None
    limits: Limits = field(default_factory=Limits)
    read_bytes: int = 0
    rejected: list = field(default_factory=list)  # ["key: why"], in order, at most MAX_REJECTED kept
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # counters only, never across I/O

    MAX_REJECTED = 64

    def reject(self, key: str, why: str) -> None:
        with self._lock:
            if len(self.rejected) < self.MAX_REJECTED and f"{key}: {why}" not in self.rejected:
                self.rejected.append(f"{key}: {why}")

    def charge(self, key: str, n: int) -> bool:
        """Count n bytes read; False (and named) once the run's total would pass the cap."""
        with self._lock:
            if self.read_bytes + n > self.limits.max_total_bytes:
                over = True
            else:
                self.read_bytes += n
                over = False
        if over:
            self.reject(key, f"the run already read {self.read_bytes:,} bytes from the store (cap "
                             f"{self.limits.max_total_bytes:,}): value ignored")
        return not over

    def _mac(self, run: bytes, full_key: str, text: bytes) -> bytes:
        assert self.token is not None
        return hmac.new(self.token, run + b"\0" + full_key.encode() + b"\0" + text, hashlib.sha256).hexdigest().encode()

    def seal(self, full_key: str, text: bytes) -> bytes:
        if self.token is None:
            return text
        run = (self.run or "").encode()
        return SIGNED + run + b":" + self._mac(run, full_key, text) + b":" + text

    def open(self, full_key: str, data: bytes) -> tuple[Optional[bytes], str]:
        """(the JSON text, "") or (None, why): the signature checked when this run has a key, and (once this process
        knows the run) that it was signed for this run."""
        parts = _signed_parts(data)
        if self.token is None:  # a peer with a key we lack: its JSON is still readable, unchecked
            return (parts[2] if parts else data), ""
        if parts is None:
            return None, "not signed with the job token"
        run, mac, text = parts
        if not hmac.compare_digest(mac, self._mac(run, full_key, text)):
            return None, "signed with another token (or changed on the way)"
        if self.run is not None and run.decode() != self.run and not (run == b"" and PRERUN in full_key):
            return None, (f"a replay: signed with the job's key in another run ({run.decode()[:8] or 'none'}; this "
                          f"run is {self.run[:8]})")
        return text, ""


def _signed_parts(data: bytes) -> Optional[tuple[bytes, bytes, bytes]]:
    """(run, mac, JSON) of a signed value, None when it is not one."""
    if not data.startswith(SIGNED):
        return None
    rest = data[len(SIGNED):]
    i = rest.find(b":", 0, RUN_CHARS + 1)
    if i < 0 or not all(c in b"0123456789abcdef" for c in rest[:i]):
        return None
    run, rest = rest[:i], rest[i + 1:]
    if rest[64:65] != b":":
        return None
    return run, rest[:64], rest[65:]


class JsonStore:
    """JSON values over a torch Store under a key prefix; reads checked and capped, waits blocking and bounded."""

    def __init__(self, store: Any, prefix: str = "", server: bool = False, guard: Optional[Guard] = None):
        self.raw, self.prefix, self.server = store, prefix, server
        self.guard = guard if guard is not None else Guard()
        self.front: Any = None  # node 0: the master port's front (serve.Front), whose reports name floods
        self._owner = threading.get_ident()
        self._local = threading.local()
        self._raw_busy = False  # an interrupted wait's helper still blocks on the raw connection (see wait)

    @property
    def rejected(self) -> list:
        return self.guard.rejected

    def _k(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def _client(self) -> Any:
        """This thread's connection: the store's own in the thread that made it, a clone in any other thread (a
        c10d client serialises its calls, so one thread's blocking wait would stall the others')."""
        if threading.get_ident() == self._owner and not self._raw_busy:
            return self.raw
        c = getattr(self._local, "client", None)
        if c is None:
            try:
                c = self.raw.clone()
            except Exception:  # noqa: BLE001 - a store without clone() (HashStore, a test's fake) is shared
                c = self.raw
            self._local.client = c
        return c

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self._client(), name)(*args)
        except Exception as exc:  # noqa: BLE001 - DistNetworkError/DistStoreError carry C++ frames
            raise StoreLost(first_line(exc)) from None

    def scoped(self, sub: str) -> JsonStore:
        """The same store under prefix + sub (a subclass stays a subclass: tests wrap stores to inject faults)."""
        return type(self)(self.raw, self.prefix + sub, self.server, self.guard)

    # --- writes
    def set(self, key: str, value: Any) -> None:
        full = self._k(key)
        self._call("set", full, self.guard.seal(full, json.dumps(value, default=str).encode()))

    def claim(self, key: str, value: Any, check: Callable[[Any], Optional[str]], tries: int = 4) -> Any:
        """The key's value when it holds one that passes `check`, else `value`, written atomically (compare-and-set)
        where the key is absent or still holds exactly the bad value read (a stranger's, another job's): of several
        processes claiming at once, one writes and the others read its value. None when a writer keeps replacing it
        faster than `tries` rounds (named in rejected)."""
        full = self._k(key)
        mine = self.guard.seal(full, json.dumps(value, default=str).encode())
        expected = b""
        for _ in range(tries):
            cur = bytes(self._call("compare_set", full, expected, mine))
            if cur == mine:
                return value
            got = self._decode(key, cur, check)
            if got is not None:
                return got
            expected = cur
        return None

    def add(self, key: str, n: int) -> int:
        return int(self._call("add", self._k(key), n))

    def count(self, key: str, cap: int) -> int:
        """A counter's value, at most `cap` (a counter raised past what the world can honestly reach is named)."""
        n = self.add(key, 0)
        if n > cap or n < 0:
            self.guard.reject(key, f"counter at {n:,}, past what this world can reach ({cap:,}): read as {cap:,}")
            return max(0, min(n, cap))
        return n

    # --- reads
    def _decode(self, key: str, data: Any, check: Optional[Callable[[Any], Optional[str]]]) -> Any:
        full = self._k(key)
        data = bytes(data)
        if not self.guard.charge(key, len(data)):
            return None
        if len(data) > self.guard.limits.max_value_bytes:
            self.guard.reject(key, f"{len(data):,} bytes, over the {self.guard.limits.max_value_bytes:,}-byte cap")
            return None
        text, why = self.guard.open(full, data)
        if text is None:
            self.guard.reject(key, why)
            return None
        try:
            # cleaned where it enters (clean.load_json): another node's strings reach reports, logs and terminals
            value = load_json(text.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            self.guard.reject(key, "not JSON")
            return None
        bad = check(value) if check is not None else None
        if bad:
            self.guard.reject(key, bad)
            return None
        return value

    def has(self, key: str) -> bool:
        return bool(self._call("check", [self._k(key)]))

    def get_now(self, key: str, check: Optional[Callable[[Any], Optional[str]]] = None) -> Any:
        """The value if the key exists now and passes `check` (a function returning why a value is bad), else
        None. Never blocks on a missing key."""
        if not self.has(key):
            return None
        return self._read(key, check)

    def _read(self, key: str, check: Optional[Callable[[Any], Optional[str]]]) -> Any:
        """The value of a key known to exist (a get would block on a missing one), decoded and checked."""
        return self._decode(key, self._call("get", self._k(key)), check)

    def wait(self, keys: list[str], deadline: float, budget: Budget) -> bool:
        """Block in the store until every key exists or the deadline passes: True if all do.

        One blocking request for the whole wait, so the c10d client never times out before the deadline: each
        timeout of a c10d request prints two `[c10d] waitForInput ... timed out` lines into the job's output (the
        guard printed them on every healthy job when its waits were cut into slices). c10d's wait does not return
        for a signal, so in the main thread the request is made by a helper thread (on this thread's connection,
        which this thread leaves alone meanwhile) and the main thread waits for it in slices of
        budget.wait_slice_s: Ctrl-C is answered at once. A wait that is expected to end at its deadline (a grace,
        a look for a record being written) is `poll`, never this."""
        if not keys:
            return True
        if budget.passed(deadline):
            return all(self.has(k) for k in keys)
        full = [self._k(k) for k in keys]
        client = self._client()
        if threading.current_thread() is not threading.main_thread():
            return _blocking_wait(client, full, deadline, budget)
        out: dict = {}

        def run() -> None:
            try:
                out["ok"] = _blocking_wait(client, full, deadline, budget)
            except StoreLost as exc:
                out["lost"] = exc

        helper = threading.Thread(target=run, name="ncclcheck-store-wait", daemon=True)
        helper.start()
        try:
            while helper.is_alive():
                helper.join(budget.wait_slice_s)  # a signal interrupts this join, never the c10d request
        except BaseException:
            # Ctrl-C / SIGTERM: the helper keeps its connection until its deadline; what this thread does next (the
            # partial report's agreement, the store's close) goes through a connection of its own.
            if client is self.raw:
                self._raw_busy = True
            else:
                self._local.client = None
            raise
        if "lost" in out:
            raise out["lost"]
        return bool(out.get("ok"))

    def poll(self, keys: list[str], deadline: float, budget: Budget) -> bool:
        """True as soon as every key exists, False at the deadline: a look every budget.journal_pending_s. For waits
        whose usual end is the deadline (node 0's grace for a late duplicate join): a blocking c10d request would
        time out there and print its warning into every healthy job's output."""
        while True:
            if all(self.has(k) for k in keys):
                return True
            if budget.passed(deadline):
                return False
            budget.pause(deadline, budget.journal_pending_s)

    def wait_get(self, key: str, deadline: float, budget: Budget,
                 check: Optional[Callable[[Any], Optional[str]]] = None) -> Any:
        """The value of key once it exists (blocking in the store), or None at the deadline or when it is bad.

        The wait proved the key exists (keys are never deleted during a run), so it is read at once: a check
        request between them (get_now's) cost every member one more round trip through node 0's front per value it
        waits for (four of a member's ~26 requests at 16,384 nodes)."""
        if not self.wait([key], deadline, budget):
            return None
        return self._read(key, check)

    def wait_alive(self, key: str, deadline: float, budget: Budget, alive: Callable[[], Optional[str]],
                   slice_s: float, check: Optional[Callable[[Any], Optional[str]]] = None) -> Any:
        """wait_get in blocking slices of slice_s, asking `alive()` between them; TimeoutError (with alive()'s
        reason, or the key's name) when the other side died or the deadline passed."""
        while True:
            if self.wait([key], min(deadline, budget.deadline(slice_s)), budget):
                v = self._read(key, check)  # the wait proved it exists, as in wait_get
                if v is None:
                    raise TimeoutError(f"{key!r} was unreadable ({self.rejected[-1] if self.rejected else 'bad'})")
                return v
            if why := alive():
                raise TimeoutError(why)
            if budget.passed(deadline):
                raise TimeoutError(f"no {key!r} within the bound")

    def get_many(self, keys: list[str], check: Optional[Callable[[Any], Optional[str]]] = None) -> list:
        """The values of keys that all exist, in one request (None where a value is bad)."""
        if not keys:
            return []
        raw = self._call("multi_get", [self._k(k) for k in keys])
        return [self._decode(k, v, check) for k, v in zip(keys, raw)]


    def read_present(self, keys: list[str], check: Optional[Callable[[Any], Optional[str]]] = None) -> list:
        """[(exists, value)] per key, value None where absent or bad; never blocks on a missing key.

        Two requests per GET_CHUNK keys when they all exist (one check, one multi-get), two per key in a chunk with
        a missing one: node 0 reading 8,192 rows or joins one key at a time spent seconds on round trips (issue 27)."""
        out: list = []
        for i in range(0, len(keys), GET_CHUNK):
            self._read_part(keys[i:i + GET_CHUNK], check, out)
        return out

    def _read_part(self, part: list[str], check: Optional[Callable[[Any], Optional[str]]], out: list) -> None:
        """read_present of one chunk: a chunk with a missing key is halved until the halves are small. Node 0
        reading joins as they stream in nearly always finds the newest one counted but not yet written, and reading
        every key of such a chunk alone cost it ~4 requests per join at 16,384 nodes; halving finds the few missing
        keys in ~2 log2(chunk) checks. When most keys are missing it costs at most ~25% more than key by key."""
        if self._call("check", [self._k(k) for k in part]):
            out.extend((True, v) for v in self.get_many(part, check))
            return
        if len(part) > BISECT_MIN:
            half = len(part) // 2
            self._read_part(part[:half], check, out)
            self._read_part(part[half:], check, out)
            return
        # A look at each key, then one multi-get of those present (a get each cost a request per present key more:
        # node 0 reading 16,384 rows, thousands of them late, was 3.6 requests per row)
        present = [k for k in part if self.has(k)]
        values = dict(zip(present, self.get_many(present, check)))
        out.extend((k in values, values.get(k)) for k in part)

    def get_present(self, keys: list[str], check: Optional[Callable[[Any], Optional[str]]] = None) -> list:
        """The values of keys, None where a key is absent or its value bad (read_present's values)."""
        return [v for _, v in self.read_present(keys, check)]


def _blocking_wait(client: Any, full: list[str], deadline: float, budget: Budget) -> bool:
    """One c10d wait for `full` until the deadline: True when they exist, False at the deadline."""
    try:
        client.wait(full, _dt.timedelta(seconds=budget.left(deadline)))
        return True
    except Exception as exc:  # noqa: BLE001 - DistStoreError on timeout, DistNetworkError when lost
        if type(exc).__name__ == "DistStoreError" and "timeout" in str(exc).lower():
            return False
        raise StoreLost(first_line(exc)) from None


GET_CHUNK = 512  # keys per multi-get: a reply of a few hundred KiB of mesh rows, not the whole world's at once
BISECT_MIN = 8  # read_present reads a part of at most this many keys with a missing one key by key


def preload() -> None:
    """Import torch.distributed now: a node that waits for node 0 with the plain-socket probe must connect the
    moment node 0 listens, not seconds later after torch's import (on a loaded host that missed node 0's window)."""
    import torch.distributed  # noqa: F401


def torch_client(host: str, port: int, try_s: float, timeout_s: float) -> Any:
    """torch's TCPStore client of the store at host:port: each connect try bounded by try_s, requests by timeout_s."""
    import torch.distributed as dist

    store = dist.TCPStore(host, port, None, False, timeout=_dt.timedelta(seconds=try_s))
    store.set_timeout(_dt.timedelta(seconds=timeout_s))
    return store


# How a member connects to node 0's store: (host, port, try_s, timeout_s) -> a client with torch's Store methods.
# torch's, always, in the product. The one seam for another client of the same wire protocol: the scale simulator's
# (ncclcheck_lab/sim_store.py) runs hundreds of virtual nodes per OS thread, where torch's blocks a thread per wait.
# tests/rendezvous/test_store.py holds open_store to this signature, so a simulator that uses it cannot drift.
STORE_CLIENT: Callable[[str, int, float, float], Any] = torch_client


def open_store(host: str, port: int, is_server: bool, timeout_s: float, prefix: str = "",
               guard: Optional[Guard] = None, connect_s: Optional[float] = None, clients: int = 0) -> JsonStore:
    """Host (is_server) or join the TCPStore at host:port. A client's connect is bounded by connect_s (default
    timeout_s), its requests by timeout_s. clients: how many connections the server should hold room for (the
    world's nodes; serve.front_shards). Raises ConnectionError with a one-line message."""
    if is_server:  # torch's server on loopback, the bounded front on the master port (serve.py, issue 36)
        from .serve import serve_store

        guard = guard if guard is not None else Guard()
        store, front = serve_store(port, _dt.timedelta(seconds=timeout_s), lambda why: guard.reject(MASTER_PORT, why),
                                   clients=clients)
        st = JsonStore(store, prefix, server=True, guard=guard)
        st.front = front
        return st
    # torch retries a failed connect once, a whole timeout more after a backoff (budget.store_tries): given the
    # bound as its timeout, a member that came just after node 0 closed waited 2.4x --timeout for nothing.
    bound = timeout_s if connect_s is None else connect_s
    try:
        store = STORE_CLIENT(host, port, FIXED.store_try_s(bound), timeout_s)
    except Exception as exc:  # noqa: BLE001 - torch raises DistNetworkError/RuntimeError with C++ frames
        said = f"{first_line(exc)} (connect bounded by {bound:.1f} s)"
        raise (ConnectTimedOut if "timed out" in str(exc).lower() else ConnectionError)(said) from None
    return JsonStore(store, prefix, server=is_server, guard=guard)


MASTER_PORT = "master port"  # the key under which what the store's front saw is named in store.rejected
