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
        self.done = 0  # records taken so far (index of the last one read or skipped)

    def append(self, record: Any) -> int:
        """Add a record; returns its index (1-based)."""
        i = self.st.add(f"{self.name}/count", 1)
        self.st.set(f"{self.name}/{i}", record)
        return i

    def count(self) -> int:
        return self.st.count(f"{self.name}/count", self.cap)

    def read_since(self) -> list[tuple[int, Any]]:
        """[(index, record)] after the ones already taken, in order. A record counted but not yet written stops the
        read there (the next call picks it up); a written record that is bad is skipped (the store names it)."""
        out = []
        n = self.count()
        while self.done < n:
            key = f"{self.name}/{self.done + 1}"
            if not self.st.has(key):
                break
            self.done += 1
            v = self.st.get_now(key, self.check)
            if v is not None:
                out.append((self.done, v))
        return out

    def wait_next(self, deadline: float, budget: Budget) -> bool:
        """Block until the record after the ones taken exists, or the deadline: True if it does."""
        if self.done >= self.cap:
            return False
        return self.st.wait([f"{self.name}/{self.done + 1}"], deadline, budget)
