"""Exceptions that map to exit codes. Only cli.py turns them into exits."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user (flags, sizes, paths): one line, exit code 2."""


class WorldError(Exception):
    """The world could not form (peer missing, rendezvous refused). Reported as a failed check, exit code 1."""


# Every exit code a process (and the exit_code of its JSON report) may have; the schema's enum is tested against it.
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 3, 130, 143
EXIT_CODES = (EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_TERMINATED)


class Terminated(KeyboardInterrupt):
    """SIGTERM: what Slurm sends at a time limit or on scancel, Kubernetes on a pod's deletion, torchrun to its
    workers when it stops. The CLI's handler raises it in the main thread; being a KeyboardInterrupt, it takes
    every path Ctrl-C takes (ranks stopped, the partial report written), and the process exits 143 (128 + 15)."""


def interruption(exc: BaseException) -> str:
    """How a report words what cut the run short: 'SIGTERM' or 'Ctrl-C'."""
    return "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C"


def first_line(exc: BaseException) -> str:
    """torch errors carry C++ frames after the first line; the first line is the diagnosis."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()
