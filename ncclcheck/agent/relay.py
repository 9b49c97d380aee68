"""Progress from a spawned rank 0 to its agent's terminal, through the world's store.

Rank 0 of a launcher-mode job is a spawned process with no terminal of its own: its jobs call a StoreObserver, which
appends each start/advance/stop/row to the `progress` journal; the agent on node 0 replays them into its real Observer
(the console's progress bar, or the line printer off a terminal) from a thread. Progress is best-effort: a lost store
only stops the display, never the job.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any, Callable, Optional

from ..rendezvous.budget import Budget
from ..rendezvous.journal import Journal
from ..rendezvous.store import JsonStore, StoreLost
from .context import show_row

log = logging.getLogger(__name__)
# A sweep's progress events: a start, a stop and an advance per step; a journal past this is not an honest one.
MAX_EVENTS = 1 << 20


def _event(v: Any) -> Optional[str]:
    if not isinstance(v, dict) or v.get("op") not in ("start", "advance", "stop", "row"):
        return "not a progress event"
    return None


def progress_journal(st: JsonStore) -> Journal:
    return Journal(st, "progress", MAX_EVENTS, _event)


class StoreObserver:
    """An Observer that writes its calls into the store for the agent to replay."""

    def __init__(self, st: JsonStore) -> None:
        self.journal = progress_journal(st)

    def _put(self, event: dict) -> None:
        try:
            self.journal.append(event)
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


def replay(journal: Journal, observer: Any) -> int:
    """Feed the events after the ones already replayed into observer; returns how many have been replayed."""
    for _, ev in journal.read_since():
        op = ev.get("op")
        if op == "start":
            total = ev.get("total")
            observer.start(total if type(total) is int and total >= 0 else 0, str(ev.get("label") or ""))
        elif op == "advance":
            observer.advance(str(ev.get("label") or ""))
        elif op == "stop":
            observer.stop()
        elif op == "row" and isinstance(ev.get("data"), dict):
            show_row(observer, str(ev.get("kind") or ""), ev["data"])
    return journal.done


@contextlib.contextmanager
def relay(open_client: Callable[[], JsonStore], observer: Optional[Any], budget: Budget) -> Iterator[None]:
    """While the body runs, replay rank 0's progress into observer (its own store client, in a thread)."""
    if observer is None:
        yield
        return
    stop = threading.Event()

    def run() -> None:
        try:
            journal = progress_journal(open_client())
            # A display refresh, not a wait for an answer: a blocking wait that times out makes c10d log two
            # lines, which an idle bar would do several times a second.
            while not stop.wait(budget.relay_poll_s):
                replay(journal, observer)
            replay(journal, observer)
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
        t.join(budget.thread_join_s)
