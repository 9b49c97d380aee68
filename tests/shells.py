"""Real shells for the tests of what ncclcheck prints to be pasted or sourced: syntax checks (`bash -n`, `zsh -n`),
sourcing a file in a subprocess and reading the variables back, and pasting into an interactive shell on a
pseudo-terminal the way a terminal pastes (bracketed paste), with the shell's own startup files left out."""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import subprocess
import time
from typing import Optional

# Shells that read a sourced file: sh and dash are POSIX, bash and zsh what people type into.
SOURCING = [s for s in ("sh", "dash", "bash", "zsh") if shutil.which(s)]
# Interactive shells as installed, no rc files: zsh -f is zsh's defaults (interactive_comments off).
INTERACTIVE = {"bash": ["bash", "--norc", "--noprofile", "-i"], "zsh": ["zsh", "-f", "-i"]}
# What a shell says when a pasted line is not what it looked like.
PASTE_ERRORS = ("command not found", "syntax error", "parse error", "unexpected", "quote>", "dquote>", "bquote>",
                "cmdsubst>", "number expected", "no such", "bad pattern", "unknown file attribute", "not found",
                "not valid", "invalid")
_RANK_VARS = ("NCCLCHECK_NODE_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_NODEID", "JOB_COMPLETION_INDEX",
              "PET_NODE_RANK")


def _env(home: str, extra: Optional[dict] = None) -> dict:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "TERM": "xterm", "LANG": "C.UTF-8",
            **(extra or {})}


def syntax_ok(shell: str, path: str) -> subprocess.CompletedProcess:
    """`shell -n path`: parsed, nothing run."""
    return subprocess.run([shell, "-n", path], capture_output=True, text=True, timeout=20)


def _printer(names: list) -> str:
    return "; ".join(f'printf "%s=%s\\0" {n} "${{{n}-<unset>}}"' for n in names)


def source(shell: str, path: str, names: list, home: str, env: Optional[dict] = None,
           how: str = "source") -> tuple[dict, str]:
    """Source (`.`) or `eval "$(cat path)"` the file in `shell`, then print `names`: ({name: value}, stderr).
    Raises CalledProcessError when the shell fails."""
    run = f'. "{path}"' if how == "source" else f'eval "$(cat "{path}")"'
    out = subprocess.run([shell, "-c", f"{run}; {_printer(names)}"], capture_output=True, check=True, timeout=20,
                         env=_env(home, env), cwd=home)
    got = dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)
    return got, out.stderr.decode(errors="replace")


def paste(shell: str, text: str, names: list, home: str, setup: str = "", bound_s: float = 15.0) -> tuple[dict, str]:
    """Paste `text` into an interactive `shell` on a pseudo-terminal as a terminal does (bracketed paste, then
    Enter), then read `names` back: ({name: value}, what the shell wrote to the terminal, escapes removed). `setup`
    is typed first (e.g. `setopt interactive_comments`). A paste that leaves the shell waiting (an open quote) never
    reaches the read-back: the dict is empty."""
    result = os.path.join(home, "paste.out")
    if os.path.exists(result):
        os.unlink(result)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the shell, its terminal the pty
        try:
            os.chdir(home)
            os.execvpe(INTERACTIVE[shell][0], INTERACTIVE[shell], _env(home, {"PS1": "$ ", "PROMPT": "$ "}))
        finally:
            os._exit(127)
    out = b""
    deadline = time.monotonic() + bound_s

    def read_until(needle: bytes) -> bool:
        nonlocal out, deadline
        while needle not in out:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    return False
                if not chunk:
                    return False
                out += chunk
        return True

    try:
        if setup:
            os.write(fd, setup.encode() + b"\r")
        os.write(fd, b"\x1b[200~" + text.replace("\n", "\r").encode() + b"\x1b[201~\r")
        # the marker is split where it is typed, so only the printf's output matches
        os.write(fd, f"{{ {_printer(names)}; }} > {result}; printf '%s\\n' 'PASTE-''DONE'\r".encode())
        if not read_until(b"PASTE-DONE"):  # waiting at a continuation prompt: interrupt it
            os.write(fd, b"\x03")
            time.sleep(0.2)
        os.write(fd, b"exit\r")
        deadline = min(deadline, time.monotonic() + 3)
        read_until(b"\x00never")  # drain until the shell has gone (EOF) or the bound
    finally:
        for _ in range(50):
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    got: dict = {}
    if os.path.exists(result):
        with open(result, "rb") as f:
            got = dict(item.split("=", 1) for item in f.read().decode().split("\0") if "=" in item)
    return got, _plain(out.decode(errors="replace"))


def paste_errors(transcript: str) -> list:
    """The lines of a paste's transcript where the shell complained."""
    return [line for line in transcript.splitlines() if any(e in line for e in PASTE_ERRORS)]


def _plain(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z~]|\x1b[=>]|\r", "", text)


__all__ = ["SOURCING", "INTERACTIVE", "PASTE_ERRORS", "syntax_ok", "source", "paste", "paste_errors"]
