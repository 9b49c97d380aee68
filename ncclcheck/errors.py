"""Exceptions that map to exit codes. Only cli.py turns them into exits."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user (flags, sizes, paths): one line, exit code 2."""


class WorldError(Exception):
    """The world could not form (peer missing, rendezvous refused). Reported as a failed check, exit code 1."""
