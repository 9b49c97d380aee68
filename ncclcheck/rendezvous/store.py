"""The c10d TCPStore, opened with every wait bounded and torch's native noise kept out of the console.

TCPStore clients print C++ warnings and stack frames to fd 2 on failed connect tries; users should see ncclcheck's
one-line diagnosis instead, so native calls run with fd 2 pointed at the run's log (`quiet_native`). Values are JSON
(never pickle: a peer must not be able to run code on us). torch is imported only when a store is opened.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable, Optional

_fd_lock = threading.Lock()


@contextlib.contextmanager
def quiet_native(log_path: Optional[str]) -> Iterator[None]:
    """Point fd 2 at log_path (or /dev/null) for the duration: C++ frames go to the log, not the terminal."""
    with _fd_lock:
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError, OSError):
            pass
        saved = os.dup(2)
        # O_CREAT only for a log file: creating os.devnull would turn a missing /dev/null into a growing file.
        target = (os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if log_path
                  else os.open(os.devnull, os.O_WRONLY))
        try:
            os.dup2(target, 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(target)


def first_line(exc: BaseException) -> str:
    """torch errors carry C++ frames after the first line; the first line is the diagnosis."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


class StoreLost(ConnectionError):
    """The store stopped answering (its host exited or crashed). The message is one line."""


class JsonStore:
    """JSON get/set/poll over a torch Store (optionally under a key prefix), every wait bounded by a deadline."""

    def __init__(self, store: Any, prefix: str = "", log_path: Optional[str] = None, server: bool = False):
        self.raw, self.prefix, self.log_path, self.server = store, prefix, log_path, server

    def _k(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def _call(self, fn: Any, *args: Any) -> Any:
        # A store whose server went away makes torch log C++ warnings on fd 2; keep them in the log.
        with quiet_native(self.log_path):
            try:
                return fn(*args)
            except Exception as exc:  # noqa: BLE001 - DistNetworkError/DistStoreError carry C++ frames
                raise StoreLost(first_line(exc)) from None

    def set(self, key: str, value: Any) -> None:
        self._call(self.raw.set, self._k(key), json.dumps(value, default=str))

    def add(self, key: str, n: int) -> int:
        return int(self._call(self.raw.add, self._k(key), n))

    def has(self, key: str) -> bool:
        return bool(self._call(self.raw.check, [self._k(key)]))

    def scoped(self, sub: str) -> JsonStore:
        """The same store under prefix + sub (a subclass stays a subclass: tests wrap stores to inject faults)."""
        return type(self)(self.raw, self.prefix + sub, self.log_path, self.server)

    def get(self, key: str) -> Any:
        """The value of a key known to exist (blocks on a missing key: use get_now or wait for unknown keys)."""
        return json.loads(self._call(self.raw.get, self._k(key)).decode("utf-8"))

    def wait(self, key: str, timeout_s: float, alive: Optional[Callable[[], Optional[str]]] = None,
             poll_s: float = 0.02) -> Any:
        """The value once it exists; TimeoutError after timeout_s, or as soon as `alive()` returns a reason.

        Polls instead of store.wait(): a blocking wait holds the client's lock, which would stall a heartbeat
        thread sharing this client."""
        end = time.monotonic() + timeout_s
        while not self.has(key):
            if alive is not None and (why := alive()):
                raise TimeoutError(why)
            if time.monotonic() > end:
                raise TimeoutError(f"no {key!r} within {timeout_s:.0f} s")
            time.sleep(poll_s)
        return self.get(key)

    def get_now(self, key: str) -> Any:
        """The value if the key exists now, else None (never blocks on a missing key)."""
        if not self.has(key):
            return None
        return self.get(key)

    def wait_get(self, key: str, deadline: float, poll_s: float = 0.05) -> Any:
        """The value once the key exists, or None at the deadline (a time.monotonic() value)."""
        while True:
            v = self.get_now(key)
            if v is not None or time.monotonic() >= deadline:
                return v
            time.sleep(poll_s)

    def wait_count(self, key: str, target: int, deadline: float, poll_s: float = 0.05) -> int:
        while True:
            n = self.add(key, 0)
            if n >= target or time.monotonic() >= deadline:
                return n
            time.sleep(poll_s)


def open_store(
    host: str,
    port: int,
    is_server: bool,
    timeout_s: float,
    log_path: Optional[str] = None,
    prefix: str = "",
) -> JsonStore:
    """Host (is_server) or join the TCPStore at host:port. Raises OSError-ish errors with a one-line message."""
    import torch.distributed as dist

    kw: dict = {"timeout": _dt.timedelta(seconds=max(1.0, timeout_s))}
    with quiet_native(log_path):
        try:
            if is_server:
                store = dist.TCPStore(host, port, None, True, wait_for_workers=False, **kw)
            else:
                store = dist.TCPStore(host, port, None, False, **kw)
        except Exception as exc:  # noqa: BLE001 - torch raises DistNetworkError/RuntimeError with C++ frames
            raise ConnectionError(first_line(exc)) from None
    return JsonStore(store, prefix, log_path, server=is_server)
