"""A rich Progress-backed Observer (start/advance/stop) for rank 0's sweeps; the core only knows the Protocol."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional, TextIO

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


def live_progress(is_tty: bool, env: Mapping[str, str], launcher: str = "ncclcheck") -> bool:
    """A live display only on a real terminal: not on a pipe or file, not with TERM=dumb, and not under mpirun
    (its ranks get a pseudo-terminal even when mpirun's output is a pipe)."""
    return is_tty and (env.get("TERM") or "") != "dumb" and launcher != "mpi"


def make_observer(stream: TextIO, env: Mapping[str, str], launcher: str = "ncclcheck") -> Optional[RichObserver]:
    """The progress bar for rank 0's terminal, or None where there must be no live display."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not live_progress(tty, env, launcher):
        return None
    from .console import make_console

    return RichObserver(make_console(stream, env, launcher), transient=True)
