"""Observers (start/advance/stop/row/wait) for the console: a rich progress bar on a terminal, plain flushed lines
elsewhere; both print each measured row (bench, links) the moment it exists. The core only knows the Protocol.
What a process waits for (rendezvous/waits.py's events, render/waits.py's words) is said by every node's leader, on
a terminal and into a pipe or a job log alike, on stderr (stdout may carry `--json -`): WaitLines where the process
shows no progress (nodes 1..N, guard()'s node leaders, rank 0 with --json -), above the bar on rank 0's terminal.

Rows as they are measured, like nccl-tests (issue 24): `ncclcheck bench ... > f` has its rows in f before the sweep
ends, a Slurm job log fills as the job runs, and a job killed at its time limit leaves what it measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class RowText:
    """Measured rows as plain lines: bench rows under a title and header per (op, dtype), links pairs one each."""

    def __init__(self, width: Optional[int] = None) -> None:
        from .bench import RowLines

        self.bench = RowLines(width)  # legend lines wrapped to this many columns (render/bench.py's wrap_note)
        self.count = 0

    def lines(self, kind: str, data: dict) -> list[str]:
        if kind == "bench_row":
            from ..model import BenchRow

            try:
                out = self.bench.lines(BenchRow.from_json(data))
            except (TypeError, ValueError, KeyError):
                return []
        elif kind == "links_row":
            out = [pair_line(data)]
        elif kind == "slow_event":  # watch --follow: a slowdown starts or ends (live/straggle.py's words)
            out = [" ".join(str(data.get("text", "")).split())]
        else:
            return []
        self.count += 1
        return out

    def close(self) -> list[str]:
        """What the last table streamed still owes its reader: its legend."""
        return self.bench.close()


def pair_line(d: dict) -> str:
    """'round 1  0 -> 1 12.34 GB/s, 1 -> 0 12.10 GB/s' (each direction named: '12.34 / 12.10' did not say which was
    which), or the pair's error."""
    def gbps(x: Any) -> str:
        return f"{x:.2f} GB/s" if isinstance(x, (int, float)) else "not measured"

    a, b = d.get("a"), d.get("b")
    head = f"round {int(d.get('round') or 0) + 1}"
    if d.get("error"):
        return f"{head}  {a} <-> {b}  {' '.join(str(d['error']).split())}"
    return f"{head}  {a} -> {b} {gbps(d.get('gbps_ab'))}, {b} -> {a} {gbps(d.get('gbps_ba'))}"


def _write(stream: TextIO, lines: list[str]) -> None:
    if not lines:
        return
    try:
        stream.write("".join(line.rstrip() + "\n" for line in lines))  # one write: lines of two threads never mix
        stream.flush()
    except (OSError, ValueError):
        pass  # a closed pipe stops the display, never the run


class WaitLines:
    """Only what this process waits for, a plain flushed line each on `stream` (stderr): the observer of a process
    that shows no progress. Its start/advance/stop/row do nothing."""

    streamed = 0  # measured rows shown (none): the CLI prints them in the report
    progress = False  # no rank's progress is worth relaying here (agent/runner.py)

    def __init__(self, stream: TextIO, **who: object) -> None:
        self.stream, self.who = stream, who  # who: what every line names (the command)

    def start(self, total: int, label: str) -> None:
        pass

    def advance(self, label: str = "") -> None:
        pass

    def stop(self) -> None:
        pass

    def row(self, kind: str, data: dict) -> None:
        pass

    def wait(self, event: dict) -> None:
        from .waits import wait_line

        _write(self.stream, [wait_line({**self.who, **event})])


class LineObserver:
    """Where there is no live display (a pipe, a file, a job log): each measured row as a line, and one line per
    phase when it ends ("nodes joined: 3 of 3"); every line flushed at once. What the process waits for goes to
    `waits` (stderr), so a `--json -` or a `> report.txt` holds the report only. `width`: the columns legend lines
    are wrapped to (the report console's, so a job log reads the same above and below)."""

    def __init__(self, stream: TextIO, waits: Optional[WaitLines] = None, width: Optional[int] = None) -> None:
        self.stream = stream
        self.text = RowText(width)
        self._phase: Optional[tuple] = None  # (label, total, done)
        self.waits = waits

    @property
    def streamed(self) -> int:
        return self.text.count

    def _write(self, lines: list[str]) -> None:
        _write(self.stream, lines)

    def wait(self, event: dict) -> None:
        if self.waits is not None:
            self.waits.wait(event)

    def start(self, total: int, label: str) -> None:
        self.stop()
        self._phase = (label, max(0, int(total)), 0)

    def advance(self, label: str = "") -> None:
        if self._phase is not None:
            name, total, done = self._phase
            self._phase = (name, total, done + 1)

    def stop(self) -> None:
        legend = self.text.close()
        if self._phase is not None:
            name, total, done = self._phase
            self._phase = None
            self._write(legend + [f"{name}: {done} of {total}"])
        else:
            self._write(legend)

    def row(self, kind: str, data: dict) -> None:
        self._write(self.text.lines(kind, data))


class RichObserver:
    """ncclcheck.worker.Observer on a rich Progress bar. Safe to start/stop more than once (one bar per phase)."""

    def __init__(self, console: Optional[Console] = None, transient: bool = True, **who: object) -> None:
        self.console = console or Console(stderr=True)
        self.transient = transient
        self.who = who
        self._progress: Optional[Progress] = None
        self._task = None
        self._label = ""
        self.text = RowText()

    @property
    def streamed(self) -> int:
        return self.text.count

    def _width(self) -> None:
        self.text.bench.width = self.console.width  # read at each print: a terminal pane can be resized mid-sweep

    def row(self, kind: str, data: dict) -> None:
        """Above the bar (rich keeps a live display below what is printed through its console)."""
        self._width()
        for line in self.text.lines(kind, data):
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def wait(self, event: dict) -> None:
        """Above the bar, through the bar's own console (a write to the terminal beside rich's live display would
        be drawn over); plain text, as in a log."""
        from .waits import wait_line

        self.console.print(wait_line({**self.who, **event}), markup=False, highlight=False, soft_wrap=True)

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
        self._width()
        for line in self.text.close():  # above the bar, under the rows it explains
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._task = None


def live_progress(is_tty: bool, env: Mapping[str, str], launcher: str = "ncclcheck") -> bool:
    """A live display only on a real terminal: not on a pipe or file, not with TERM=dumb, and not under mpirun
    (its ranks get a pseudo-terminal even when mpirun's output is a pipe)."""
    return is_tty and (env.get("TERM") or "") != "dumb" and launcher != "mpi"


def make_observer(stream: TextIO, env: Mapping[str, str], launcher: str = "ncclcheck",
                  waits: Optional[TextIO] = None, command: str = ""):
    """The progress bar for rank 0's terminal, or plain flushed lines where there must be no live display; what the
    process waits for on `waits` (stderr) beside them, above the bar on a terminal."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    from .console import make_console, pipe_width

    if not live_progress(tty, env, launcher):
        return LineObserver(stream, WaitLines(waits, command=command) if waits is not None else None,
                            width=pipe_width(env))

    return RichObserver(make_console(stream, env, launcher), transient=True, command=command)
