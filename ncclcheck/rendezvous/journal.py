"""An append-only list in the store: `<name>/count` (a counter) and `<name>/<i>` (JSON records, i from 1).

Writers append from any process; one reader takes the records after the ones it has, in order. The counter is read
capped (a stranger may raise it), a record that is bad is dropped and named by the store, and a reader can block
until the next record exists (one request) instead of polling. Used for preflight's joins, spawned ranks' emits and
progress, and links' per-round reports.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .budget import Budget
from .store import JsonStore


class Journal:
    def __init__(self, st: JsonStore, name: str, cap: int,
                 check: Optional[Callable[[Any], Optional[str]]] = None) -> None:
        self.st, self.name, self.cap, self.check = st, name, cap, check
        self.done = 0  # the highest index looked at so far
        self.pending: set[int] = set()  # indices counted but not written yet when last looked at

    def append(self, record: Any) -> int:
        """Add a record; returns its index (1-based)."""
        i = self.st.add(f"{self.name}/count", 1)
        self.st.set(f"{self.name}/{i}", record)
        return i

    def count(self) -> int:
        return self.st.count(f"{self.name}/count", self.cap)

    def read_since(self) -> list[tuple[int, Any]]:
        """[(index, record)] not taken yet, in index order. A record counted but not written yet is looked for
        again next time (a stranger who raises the counter without writing cannot hide the records after it); a
        written record that is bad is dropped (the store names it). At most `cap` indices are ever looked at."""
        n = self.count()
        todo = sorted(self.pending) + list(range(self.done + 1, n + 1))
        self.done = max(self.done, n)
        out = []
        for i, (exists, v) in zip(todo, self.st.read_present([f"{self.name}/{i}" for i in todo], self.check)):
            if not exists:
                self.pending.add(i)
                continue
            self.pending.discard(i)
            if v is not None:
                out.append((i, v))
        return out

    def wait_next(self, deadline: float, budget: Budget) -> bool:
        """Block until a record after the ones looked at exists, or the deadline: True if it does (or may: see
        below), False at the deadline or at the cap."""
        if self.done >= self.cap:
            return False
        if self.pending:
            # A writer counted its record but had not written it when we looked (it was between its two requests).
            # Waiting for the next index would sleep to the deadline when that writer was the last one (issue 27:
            # node 0 waited out its whole join bound at 1,024 nodes); wait for the pending one, briefly, and look
            # again. A stranger who only raised the counter costs a look every journal_pending_s, no more.
            # A look, not a blocking request: this short wait often ends unanswered (c10d would log its timeout).
            self.st.poll([f"{self.name}/{min(self.pending)}"],
                         min(deadline, budget.deadline(budget.journal_pending_s)), budget)
            return not budget.passed(deadline)
        return self.st.wait([f"{self.name}/{self.done + 1}"], deadline, budget)

    def poll_next(self, deadline: float, budget: Budget) -> bool:
        """wait_next for a wait whose usual end is the deadline (node 0's grace after every node joined): looks
        every budget.journal_pending_s instead of one request that would time out and print c10d's warning."""
        if self.done >= self.cap:
            return False
        if self.pending:
            return self.wait_next(deadline, budget)
        return self.st.poll([f"{self.name}/{self.done + 1}"], deadline, budget)
