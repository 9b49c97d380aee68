"""A command's own peak RSS, which the kernel's accounting overstates when a large process starts it.

At exec, Linux keeps the high-water RSS of the address space the new program replaces (fs/exec.c, exec_mmap ->
setmax_mm_hiwater_rss) in the process's ru_maxrss. A command forked (or vforked, as subprocess does) from a pytest
worker that has grown to 1.7 GB reports ru_maxrss >= 1.7 GB whatever it used itself: tests/live/test_watch_bounds.py
read "watch peaked at 1,699 MiB" in the full suite and 150 MiB alone. So the command is started by a small launcher
(a fresh interpreter of a few MB, standard library only) that execs it from its own small address space and writes
the wait4 figure of that child to a file. The launcher leads its own session so a bound can kill the whole tree.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import Optional

_LAUNCHER = """
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss * 1024))
code = os.waitstatus_to_exitcode(status)
if code < 0:  # killed by a signal: die of the same one, so the caller reads what the command did
    if -code != signal.SIGKILL:
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def popen(argv: Sequence[str], rss_file: str, **kw) -> subprocess.Popen:
    """Start argv under the launcher; its peak RSS lands in rss_file when it ends (read it with peak())."""
    return subprocess.Popen([sys.executable, "-c", _LAUNCHER, rss_file, *argv], start_new_session=True, **kw)


def kill(p: subprocess.Popen) -> None:
    """Kill the launcher and the command under it."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def peak(rss_file: str) -> Optional[int]:
    """The peak RSS in bytes the launcher wrote, None if the command never ended under it."""
    try:
        with open(rss_file) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def run(argv: Sequence[str], rss_file: str, timeout: float, **kw) -> tuple[subprocess.CompletedProcess, Optional[int]]:
    """subprocess.run for argv with its own peak RSS; past timeout the tree is killed and TimeoutExpired raised."""
    if kw.pop("capture_output", False):
        kw.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p = popen(argv, rss_file, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(p)
        p.communicate()
        raise
    return subprocess.CompletedProcess(p.args[4:], p.returncode, out, err), peak(rss_file)
