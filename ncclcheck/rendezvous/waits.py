"""What this process waits for, said while it waits (issue 53: no silent minute).

A wait that outlives a healthy one (budget.wait_notice_s) tells its observer what it waits for and what it has seen
so far, then again every budget.wait_notice_every_s while it lasts: at most one event per wait per interval, on a
terminal and into a pipe or a job log alike. The core never prints: it says what a wait is (`wait`) and what it has
seen (`Wait.seen`, or a `facts` function read at the moment the event is made), and the observer's optional
`wait(event)` turns the event into words (render/waits.py).

    with waits.wait("master", deadline, addr=addr, port=port) as w:
        ... w.seen(status="refused", tries=3) ...

The events are paced by one daemon thread, so a wait that blocks in one store request (c10d prints two lines per
request that times out: a wait is never cut into slices for the sake of a message) is still said while it blocks.
Without an observer that has `wait` (the Python API called without one, the scale simulator) nothing runs: no
thread, no event. The thread ends with close(); nothing stays behind (guard() leaves no thread).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional

from .budget import Budget

log = logging.getLogger(__name__)


class Wait:
    """One named wait: its kind, when it began and must end, and what it has seen so far."""

    def __init__(self, waits: Waits, what: str, until: float, quiet_s: float,
                 facts: Optional[Callable[[], dict]], seen: dict, since: Optional[float] = None) -> None:
        self.waits, self.what, self.until, self.facts = waits, what, until, facts
        b = waits.budget
        self.start = b.now() if since is None else since  # when its bound began (the join's: node 0's start)
        self.due = b.deadline(quiet_s)
        self._seen = dict(seen)
        self._said: Optional[dict] = None  # what the last event said, to tell a change from "still"

    def seen(self, at_once: bool = False, **facts: Any) -> None:
        """What this wait has seen now (the last try's outcome, who joined): the next event says it. at_once: a
        finding worth saying now rather than after the quiet time (a master that refused: known on the first
        connect), if this wait has said nothing yet."""
        with self.waits.lock:
            self._seen.update(facts)
            if at_once and self._said is None:
                self.due = min(self.due, self.waits.budget.now())
                self.waits.lock.notify_all()

    def end(self) -> None:
        self.waits._end(self)

    def __enter__(self) -> Wait:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.end()

    def event(self) -> dict:
        """The event the observer gets now (called by the pacing thread, the lock held)."""
        b = self.waits.budget
        facts = dict(self._seen)
        if self.facts is not None:
            try:
                facts.update(self.facts())
            except Exception:  # noqa: BLE001 - what a wait says must never end the wait
                log.exception("what the %s wait has seen could not be read", self.what)
        again = self._said is not None
        changed = not again or facts != self._said
        self._said = facts
        return dict(self.waits.who, **facts, wait=self.what, waited_s=b.since(self.start),
                    bound_s=self.until - self.start, again=again, changed=changed)


class _Silent:
    """A wait nobody hears: the Waits of a run without an observer."""

    def seen(self, at_once: bool = False, **facts: Any) -> None:
        pass

    def end(self) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


SILENT = _Silent()


class Waits:
    """This process's open waits (the innermost one is said) and the thread that paces what they say."""

    def __init__(self, observer: Any, budget: Budget, **who: Any) -> None:
        say = getattr(observer, "wait", None)
        self.say: Optional[Callable[[dict], None]] = say if callable(say) else None
        self.budget, self.who = budget, who  # who: the node (node_rank, host) every event names
        self.lock = threading.Condition()
        self._open: list[Wait] = []
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    @property
    def heard(self) -> bool:
        return self.say is not None

    def wait(self, what: str, until: float, quiet_s: Optional[float] = None,
             facts: Optional[Callable[[], dict]] = None, since: Optional[float] = None, **seen: Any) -> Any:
        """Open a wait of kind `what` that ends by `until` (a Budget deadline); said once it lasted quiet_s (default:
        budget.wait_notice_s, a healthy wait ends sooner); `since`: when its bound began, if before now (the events
        count from it). `facts()` is read when an event is made, in the pacing
        thread: it may read what the waiting thread adds to (a set's membership, a list's length), never iterate
        over something the waiting thread changes. End it with `end()` or a with block."""
        if self.say is None or self._closed:
            return SILENT
        w = Wait(self, what, until, self.budget.wait_notice_s if quiet_s is None else quiet_s, facts, seen, since)
        with self.lock:
            self._open.append(w)
            if self._thread is None:
                self._thread = threading.Thread(target=self._pace, name="ncclcheck-waits", daemon=True)
                self._thread.start()
            self.lock.notify_all()
        return w

    def _end(self, w: Wait) -> None:
        with self.lock:
            if w in self._open:
                self._open.remove(w)
                self.lock.notify_all()

    def close(self) -> None:
        """Stop the pacing thread (bounded); no event is said after this."""
        with self.lock:
            self._closed = True
            self._open.clear()
            self.lock.notify_all()
            t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(self.budget.thread_join_s)

    def _pace(self) -> None:
        b = self.budget
        while True:
            with self.lock:
                if self._closed:
                    return
                w = self._open[-1] if self._open else None
                if w is None or not b.passed(w.due) or b.passed(w.until):
                    # past its bound a wait is about to end and name what it waited for: nothing more to say
                    self.lock.wait(b.remaining(w.due) if w is not None and not b.passed(w.until) else None)
                    continue
                w.due = b.deadline(b.wait_notice_every_s)
                event = w.event()
            try:
                self.say(event)  # outside the lock: a slow terminal must not hold the waiting thread
            except Exception:  # noqa: BLE001 - a display that fails never stops the run
                log.exception("could not say what this process waits for")
