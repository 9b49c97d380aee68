"""Progress from a spawned rank 0 to its agent's terminal, through the world's store.

Rank 0 of a launcher-mode job is a spawned process with no terminal of its own: its jobs call a StoreObserver, which
appends each start/advance/stop/row to the store (`progress/count` + `progress/<i>`, JSON); the agent on node 0 replays
them into its real Observer (the console's progress bar) from a thread. Progress is best-effort: a lost store only
stops the display, never the job.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any, Callable, Optional

from ..rendezvous.store import JsonStore, StoreLost
from .context import show_row

log = logging.getLogger(__name__)
POLL_S = 0.1


class StoreObserver:
    """An Observer that writes its calls into the store for the agent to replay."""

    def __init__(self, st: JsonStore) -> None:
        self.st = st

    def _put(self, event: dict) -> None:
        try:
            i = self.st.add("progress/count", 1)
            self.st.set(f"progress/{i}", event)
        except StoreLost:
            pass

    def start(self, total: int, label: str) -> None:
        self._put({"op": "start", "total": int(total), "label": label})

    def advance(self, label: str = "") -> None:
        self._put({"op": "advance", "label": label})

    def stop(self) -> None:
        self._put({"op": "stop"})

    def row(self, kind: str, data: dict) -> None:
        self._put({"op": "row", "kind": kind, "data": data})


def replay(st: JsonStore, observer: Any, done: int) -> int:
    """Feed the events after the first `done` into observer; returns how many have been replayed."""
    n = st.add("progress/count", 0)
    while done < n:
        ev = st.get_now(f"progress/{done + 1}")
        if ev is None:  # counted but not written yet: next poll
            break
        done += 1
        op = ev.get("op")
        if op == "start":
            observer.start(int(ev.get("total") or 0), str(ev.get("label") or ""))
        elif op == "advance":
            observer.advance(str(ev.get("label") or ""))
        elif op == "stop":
            observer.stop()
        elif op == "row" and isinstance(ev.get("data"), dict):
            show_row(observer, str(ev.get("kind") or ""), ev["data"])
    return done


@contextlib.contextmanager
def relay(open_client: Callable[[], JsonStore], observer: Optional[Any]) -> Iterator[None]:
    """While the body runs, replay rank 0's progress into observer (its own store client, in a thread)."""
    if observer is None:
        yield
        return
    stop = threading.Event()

    def run() -> None:
        try:
            st = open_client()
            done = 0
            while not stop.wait(POLL_S):
                done = replay(st, observer, done)
            replay(st, observer, done)
        except Exception as exc:  # noqa: BLE001 - progress is best-effort; the job's outcome is what matters
            log.debug("progress relay stopped: %s", exc)
        finally:
            observer.stop()

    t = threading.Thread(target=run, name="ncclcheck-progress", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(2.0)
