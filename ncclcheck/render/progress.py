"""A rich Progress-backed Observer (start/advance/stop) for rank 0's sweeps; the core only knows the Protocol."""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class RichObserver:
    """ncclcheck.worker.Observer on a rich Progress bar. Safe to start/stop more than once (one bar per phase)."""

    def __init__(self, console: Optional[Console] = None, transient: bool = True) -> None:
        self.console = console or Console(stderr=True)
        self.transient = transient
        self._progress: Optional[Progress] = None
        self._task = None
        self._label = ""

    def start(self, total: int, label: str) -> None:
        self.stop()
        self._label = label
        self._progress = Progress(
            TextColumn("[bold]{task.fields[phase]}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.description}"), TimeElapsedColumn(),
            console=self.console, transient=self.transient,
        )
        self._progress.start()
        self._task = self._progress.add_task("", total=max(0, int(total)), phase=label)

    def advance(self, label: str = "") -> None:
        if self._progress is None:
            return
        self._progress.update(self._task, advance=1, description=label)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._task = None
