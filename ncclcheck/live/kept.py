"""Connections kept between requests (wire: a request that says "keep" is greeted again after its reply), one per
rank: what fetch's looks and pace's exchanges ask on before they connect again."""

from __future__ import annotations

import socket
import threading
from typing import Optional

# Kept connections closed on the caller's thread at most: more are closed on a thread of their own. A close on loopback
# runs the peer's side of the FIN in the closing thread (~40 us each): at 4,096 ranks, 0.16 s between watch's second
# look and its answer, which nothing waits for.
CLOSE_INLINE = 64
CLOSER = "ncclcheck-watch-close"


class Kept:
    """Connections a look's answers left open for the next look, rank -> socket (wire: a request that says "keep"
    is greeted again after its reply): watch's second look and its re-asks reuse them instead of connecting again
    (at 4,096 ranks a second look of fresh connections was ~1 s of watch's CPU: connect, hello, close). At most
    `limit` (fetch.keep_room: within the descriptors a look leaves free); closed by whoever made it, once its looks
    are done. A host's clock tries keep theirs in one too (pace.exchange)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.socks: dict = {}

    def put(self, rank: int, sock: socket.socket) -> bool:
        if len(self.socks) >= self.limit or rank in self.socks:
            return False
        self.socks[rank] = sock
        return True

    def take(self, rank: int) -> Optional[socket.socket]:
        return self.socks.pop(rank, None)

    def close(self) -> None:
        """Every kept connection closed, past CLOSE_INLINE of them on a daemon thread (the caller does not wait)."""
        socks = list(self.socks.values())
        self.socks.clear()
        if len(socks) <= CLOSE_INLINE:
            _close(socks)
        else:
            threading.Thread(target=_close, args=(socks,), name=CLOSER, daemon=True).start()

    def __enter__(self) -> Kept:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close(socks: list) -> None:
    for sock in socks:
        sock.close()
