"""Small helpers shared by the collectors: calls bounded in time, sha256 formatting, safe directory listing."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Sequence
from typing import Any, Callable, Optional


class CommandFailed(RuntimeError):
    """A command that exited non-zero: its one-line reason, with what it printed on stdout kept (nvidia-smi -q prints
    every GPU it can read and exits non-zero for the one it cannot)."""

    def __init__(self, message: str, stdout: Any = "", returncode: Optional[int] = None) -> None:
        super().__init__(message)
        self.stdout = stdout
        self.returncode = returncode


class Timeout(Exception):
    """A bounded call did not finish in time (its thread is left to finish on its own, as a daemon)."""


def bounded(fn: Callable[[], Any], timeout_s: float) -> Any:
    """fn() in a daemon thread; its result, its exception re-raised, or Timeout.

    Used for resolver calls: socket.getfqdn()/getaddrinfo() block for the resolver's full retry cycle on broken DNS,
    and there is no portable way to pass them a timeout.
    """
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name="ncclcheck-bounded", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise Timeout(f"timed out after {timeout_s:g}s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def run_cmd(argv: Sequence[str], timeout_s: float = 5.0, cwd: Optional[str] = None, env: Optional[dict] = None,
            text: bool = True):
    """Run a command, return stdout (bytes when text=False); RuntimeError with a one-line reason on failure."""
    try:
        proc = subprocess.run(
            list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"{argv[0]} timed out after {timeout_s:g}s") from e
    except OSError as e:
        raise RuntimeError(f"{argv[0]}: {e.strerror or e}") from e
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        out = proc.stdout.decode("utf-8", "replace") if text else proc.stdout
        raise CommandFailed(f"{argv[0]} exited {proc.returncode}" + (f": {err[0]}" if err else ""), out,
                            proc.returncode)
    return proc.stdout.decode("utf-8", "replace") if text else proc.stdout


def hostname() -> str:
    """This machine's hostname (the UTS name, as NCCL_DEBUG_FILE's %h and Slurm use it)."""
    import socket

    return socket.gethostname()


def listdir(path: str, limit: int = 4096) -> list:
    """Sorted directory entries, [] when missing/unreadable; capped so a hostile tree cannot make us slow."""
    try:
        names = os.listdir(path)
    except (OSError, ValueError):
        return []
    return sorted(names)[:limit]


def link_name(path: str) -> Optional[str]:
    """The last component of a symlink's target (device/driver -> 'mlx5_core'), or None."""
    try:
        return os.path.basename(os.readlink(path)) or None
    except (OSError, ValueError):
        return None
