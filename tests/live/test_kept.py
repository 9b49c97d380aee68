"""live/kept.py: a look's kept connections closed whatever their number; many of them off the caller's thread."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from ncclcheck.live.kept import CLOSE_INLINE, CLOSER, Kept


@pytest.mark.parametrize("n", [3, CLOSE_INLINE + 40])
def test_every_kept_connection_is_closed_and_none_stays_held(n):
    pairs = [socket.socketpair() for _ in range(n)]
    try:
        kept = Kept(n)
        for r, (a, _b) in enumerate(pairs):
            assert kept.put(r, a)
        assert not kept.put(n, pairs[0][0])  # full: a look past its room connects afresh
        kept.close()
        assert kept.socks == {} and kept.take(0) is None
        end = time.monotonic() + 10
        while time.monotonic() < end and any(a.fileno() != -1 for a, _ in pairs):
            time.sleep(0.01)
        assert all(a.fileno() == -1 for a, _ in pairs)
        for _a, b in pairs:  # the peer sees each one end
            b.settimeout(5)
            assert b.recv(1) == b""
    finally:
        for a, b in pairs:
            a.close()
            b.close()


@pytest.mark.parametrize("n", [3, CLOSE_INLINE + 1])
def test_many_are_closed_on_a_thread_of_their_own_a_few_at_once(monkeypatch, n):
    seen: list = []
    real = socket.socket.close

    def close(self):
        seen.append(threading.current_thread().name)
        real(self)

    pairs = [socket.socketpair() for _ in range(n)]
    try:
        monkeypatch.setattr(socket.socket, "close", close)
        kept = Kept(len(pairs))
        for r, (a, _b) in enumerate(pairs):
            kept.put(r, a)
        kept.close()
        end = time.monotonic() + 10
        while time.monotonic() < end and len(seen) < len(pairs):
            time.sleep(0.01)
        monkeypatch.undo()
        assert seen == [CLOSER if n > CLOSE_INLINE else threading.current_thread().name] * n
    finally:
        for a, b in pairs:
            a.close()
            b.close()
