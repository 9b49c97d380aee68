"""Small helpers shared by the collectors: the one bounded runner for local tools and blocking reads, sha256
formatting, safe directory listing.

Every local tool (nvidia-smi, journalctl, git...) runs through `run_cmd` and every call that can block in the kernel
(NVML's init, a collector's sysfs reads) through `call_bounded`, both under one collection's bound (`collection`):
- a call's time is the smaller of its own bound and what is left of the collection's; one that does not answer is
  left behind (a process killed and not waited on past a moment, a thread left as a daemon) and named ("nvidia-smi
  did not answer in 5 s: the driver may be wedged"); the same source is then not asked again in that collection,
  so a wedged driver costs one bound, not one per call;
- a tool's output is read up to OUTPUT_BYTES (the rest cut, the tool stopped, a note kept), its error text up to
  ERROR_BYTES, and the first line of that, cut at ERROR_CHARS, is all a reason ever holds;
- what was not answered or cut is listed on the collection (`said()`), for the facts' `sources` entry.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

log = logging.getLogger(__name__)

# facts/ sits below the Budget (rendezvous/budget.py): these bounds are on local tools and reads, not on waits for
# other processes (tests/rendezvous/test_budget.py names this module).
TOOL_S = 5.0  # one local tool or NVML's init: each answers in well under a second on a healthy node
FLOOR_S = 0.5  # a call made after the collection's bound was spent still gets this long (a healthy tool answers)
OUTPUT_BYTES = 16 << 20  # of one tool's output: nvidia-smi -q of 8 GPUs is ~0.3 MiB, a kernel log a few MiB
ERROR_BYTES = 64 << 10  # of one tool's error text (only its first line is kept)
ERROR_CHARS = 300  # of that first line, in a reason
REAP_S = 1.0  # a killed tool is waited for this long; one stuck in the kernel (D state) is left to a daemon thread
GROUP_GRACE_S = 1.5  # a whole collector outlives the calls inside it by this much: a tool that did not answer is
# named by its own bound first (the collector then says why its facts are missing), the collector only when a read
# of its own blocks
CHUNK = 1 << 16
# What a source that does not answer says about the node: the GPU driver's tools block inside the driver.
HINTS = {"nvidia-smi": "the driver may be wedged", "NVML": "the driver may be wedged",
         "journalctl": "journald or the kernel log may be stuck"}


class CommandFailed(RuntimeError):
    """A command that exited non-zero: its one-line reason, with what it printed on stdout kept (nvidia-smi -q prints
    every GPU it can read and exits non-zero for the one it cannot)."""

    def __init__(self, message: str, stdout: Any = "", returncode: Optional[int] = None) -> None:
        super().__init__(message)
        self.stdout = stdout
        self.returncode = returncode


class Timeout(Exception):
    """A bounded call did not finish in time (its thread is left to finish on its own, as a daemon)."""


class Unanswered(RuntimeError):
    """A source (a tool, NVML, a read) did not answer within its bound; the message names it, one line."""


class Output(str):
    """A tool's output as text; `cut` > 0 when more than OUTPUT_BYTES came and the rest was not read."""

    cut: int = 0


def first_line(text: str, limit: int = ERROR_CHARS) -> str:
    """The first non-empty line of `text`, cut at `limit` characters with a mark."""
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= limit else f"{line[:limit]}... [cut]"


class Collection:
    """One collection's bound (a deadline, or none) and what its sources did: the ones that did not answer and the
    outputs that were cut. Shared by the threads of one collection (call_bounded carries it into them)."""

    def __init__(self, bound_s: Optional[float] = None) -> None:
        self.bound_s = bound_s
        self.deadline = time.monotonic() + bound_s if bound_s else None
        self.unanswered: dict = {}  # source -> its one-line reason
        self.cut: dict = {}  # source -> its one-line note
        self._lock = threading.Lock()

    def time_for(self, want_s: float) -> float:
        """The bound of one call that would take up to want_s: never past the collection's deadline, but at least
        FLOOR_S (a call after the deadline still gets a healthy tool's moment)."""
        if self.deadline is None:
            return want_s
        return max(FLOOR_S, min(want_s, self.deadline - time.monotonic()))

    def left(self) -> Optional[float]:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def mark_unanswered(self, source: str, why: str) -> None:
        with self._lock:
            self.unanswered.setdefault(source, why)
        log.warning("%s", why)

    def mark_cut(self, source: str, note: str) -> None:
        with self._lock:
            self.cut.setdefault(source, note)
        log.warning("%s", note)

    def forget_cut(self, source: str) -> None:
        """A cut its reader recovered from (facts/smiread.py: the GPUs past nvidia-smi -q's cap asked one by one)."""
        with self._lock:
            self.cut.pop(source, None)

    def said(self) -> dict:
        """The facts' `sources` entry: {"unanswered": [{"source", "why"}], "cut": [{"source", "why"}]}."""
        with self._lock:
            return {"bound_s": self.bound_s,
                    "unanswered": [{"source": s, "why": w} for s, w in self.unanswered.items()],
                    "cut": [{"source": s, "why": w} for s, w in self.cut.items()]}


_CURRENT: contextvars.ContextVar = contextvars.ContextVar("ncclcheck_collection", default=None)
_NONE = Collection()  # no collection opened (a test calling one collector): the calls' own bounds only


def current() -> Collection:
    return _CURRENT.get() or _NONE


@contextlib.contextmanager
def collection(bound_s: Optional[float] = None) -> Iterator[Collection]:
    """Open one collection's bound for the calls made inside (in this thread and the threads bounded() starts)."""
    c = Collection(bound_s)
    token = _CURRENT.set(c)
    try:
        yield c
    finally:
        _CURRENT.reset(token)


def unanswered_words(source: str, seconds: float) -> str:
    hint = HINTS.get(source)
    return f"{source} did not answer in {round(seconds, 1):g} s" + (f": {hint}" if hint else "")


def bounded(fn: Callable[[], Any], timeout_s: float) -> Any:
    """fn() in a daemon thread (in the caller's collection); its result, its exception re-raised, or Timeout.

    Used for resolver calls (socket.getfqdn()/getaddrinfo() block for the resolver's full retry cycle on broken DNS,
    and there is no portable way to pass them a timeout), NVML's init and whole collectors whose reads can block.
    """
    box: dict = {}
    ctx = contextvars.copy_context()

    def target() -> None:
        try:
            box["value"] = ctx.run(fn)
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


def call_bounded(source: str, fn: Callable[[], Any], timeout_s: float = TOOL_S, grace_s: float = 0.0) -> Any:
    """fn() (a call that can block in the kernel: NVML's init, a read) under the collection's bound (plus grace_s:
    GROUP_GRACE_S for a whole collector); Unanswered naming `source` when it does not return in time, and at once
    for a source that already did not answer."""
    c = current()
    if source in c.unanswered:
        raise Unanswered(c.unanswered[source])
    t = c.time_for(timeout_s) + grace_s
    try:
        return bounded(fn, t)
    except Timeout:
        why = unanswered_words(source, t)
        c.mark_unanswered(source, why)
        raise Unanswered(why) from None


_RUNNING: set = set()  # tools started and not yet reaped or stopped (a collector left behind may still wait on one)
_RUNNING_LOCK = threading.Lock()


@atexit.register
def _stop_running() -> None:
    """At exit, stop every tool still running: a collector left behind in a daemon thread dies with the process,
    and its tool (in a session of its own) must not outlive it."""
    with _RUNNING_LOCK:
        left = list(_RUNNING)
    for proc in left:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)


def _stop(proc: subprocess.Popen) -> None:
    """Kill a tool (its session: a wrapper's children too) and reap it if the kernel lets it go soon."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        with contextlib.suppress(OSError):
            proc.kill()
    try:
        proc.wait(REAP_S)
    except subprocess.TimeoutExpired:  # stuck in the kernel: reaped whenever it leaves it
        threading.Thread(target=proc.wait, name="ncclcheck-reap", daemon=True).start()


def _read(proc: subprocess.Popen, end: float, limit: int) -> tuple:
    """(stdout bytearray, stderr bytearray, bytes of stdout cut, finished in time) reading both pipes until they
    close, the deadline passes, or stdout passes `limit` (then the tool is stopped: it would print without end). Not
    copied to bytes: a tool at its limit is held once less."""
    out, err = bytearray(), bytearray()
    cut = 0
    sel = selectors.DefaultSelector()
    for f, buf in ((proc.stdout, out), (proc.stderr, err)):
        if f is not None:
            sel.register(f, selectors.EVENT_READ, buf)
    try:
        while sel.get_map():
            left = end - time.monotonic()
            if left <= 0:
                return out, err, cut, False
            for key, _ in sel.select(left):
                data = os.read(key.fd, CHUNK)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                buf = key.data
                room = (limit if buf is out else ERROR_BYTES) - len(buf)
                buf += data[:max(0, room)]
                if buf is out and len(data) > room:
                    cut += len(data) - max(0, room)
                    return out, err, cut, True
    finally:
        sel.close()
    return out, err, cut, True


def run_cmd(argv: Sequence[str], timeout_s: float = TOOL_S, cwd: Optional[str] = None, env: Optional[dict] = None,
            text: bool = True, limit: int = OUTPUT_BYTES):
    """Run a local tool under the collection's bound: its stdout (text, an Output; bytes when text=False), at most
    `limit` bytes of it; RuntimeError with a one-line reason on failure (Unanswered when it did not answer)."""
    source = os.path.basename(str(argv[0]))
    c = current()
    if source in c.unanswered:  # asked once already in this collection and it did not answer: not again
        raise Unanswered(c.unanswered[source])
    t = c.time_for(timeout_s)
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"{argv[0]}: {getattr(e, 'strerror', None) or e}") from e
    end = time.monotonic() + t
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    finished, cut = False, 0
    try:
        out, err, cut, finished = _read(proc, end, limit)
        if finished and not cut:
            try:
                proc.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                finished = False  # closed its output and went on: still running at its bound
    finally:
        for f in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                f.close()
        if not finished or cut:  # at its bound, cut, or interrupted: stopped, never left running
            _stop(proc)
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)
    if not finished:
        why = unanswered_words(source, t)
        c.mark_unanswered(source, why)
        raise Unanswered(why)
    if cut:
        c.mark_cut(source, f"{source} printed more than {limit >> 20} MiB: its first {limit >> 20} MiB read, the "
                           "rest cut and the tool stopped")
    elif proc.returncode != 0:
        line = first_line(err.decode("utf-8", "replace"))
        kept = bytes(out) if not text else Output(out.decode("utf-8", "replace"))
        raise CommandFailed(f"{argv[0]} exited {proc.returncode}" + (f": {line}" if line else ""), kept,
                            proc.returncode)
    if not text:
        return bytes(out)
    res = Output(out.decode("utf-8", "replace"))
    res.cut = cut
    return res


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
