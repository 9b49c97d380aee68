"""`ncclcheck.arm(DIR)`: every rank of a job (NCCL or gloo) leaves its evidence in DIR when it fails.

    import ncclcheck
    ncclcheck.arm("/shared/pm")          # before init_process_group; guard(postmortem_dir=) calls it too
    dist.init_process_group("gloo")

Torch dumps the flight recorder only from NCCL's watchdog on a timeout; a gloo rank that times out, a survivor that
torchrun stops with SIGTERM after a peer died, a rank that raised or that Slurm stops at its time limit leaves
nothing. Armed, a rank writes into DIR, per rank:
- `<prefix><rank>.json`: torch's flight recorder as JSON (`_dump_fr_trace_json`, the form `diagnose` reads without a
  pickle), the prefix being the basename of TORCH_FR_DUMP_TEMP_FILE (`nccl_trace_rank_`, or the guard's per-host
  one) so that diagnose's dump discovery finds it beside what NCCL's watchdog writes;
- `stacks_rank_<rank>.txt`: every thread's Python stack (faulthandler's text under a header saying why and when),
when it:
- raises out of the script (sys.excepthook; a collective that timed out raises there: the except path) or asks
  `sys.exit` for a failing code (atexit);
- is told to stop: SIGTERM. Python runs a signal handler only when the main thread is back in the interpreter, and
  a rank stuck in a collective is not, so the C-level handler's wake-up byte (signal.set_wakeup_fd) wakes a small
  thread that writes the evidence at once; then the previous handler runs (the main thread's Python handler calls
  the script's own) or, when it was the default, the rank dies by SIGTERM as it would have (same exit status);
- is asked: SIGUSR1 (`dump_signal`; kill -USR1 PID, `scancel --signal=USR1`) writes the evidence and the job goes on.
Bounded: a dump is given up after the Budget's evidence_dump_s, the flight recorder is cut to diagnose's own JSON
bound (newest entries kept) and the stacks to STACK_BYTES, each cut said in the file. A healthy rank writes nothing
(writing a file is the only thing arming adds to a failure, and only to one). arm() sets the variables the installed
torch reads for its flight recorder from recommend/postmortem.py's table (where unset) and is idempotent. A forked
child (a DataLoader worker) is never armed: it would overwrite its parent's files and kill its parent on SIGTERM.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, MutableMapping
from typing import Any, Optional

from ..postmortem.stacks import AT as STACKS_AT
from ..postmortem.stacks import EXITED, MAX_CHAINED, RAISED, TOLD_TO_STOP, is_library, job_frame
from ..postmortem.stacks import HEADER as STACKS_HEADER  # the reader's constants: one format
from ..postmortem.stacks import LAUNCHER as STACKS_LAUNCHER
from ..postmortem.stacks import NAME as STACKS_NAME
from ..postmortem.stacks import THEN as STACKS_THEN
from ..postmortem.stacks import parse as parse_stacks

TRACEBACK_CHARS = 64 << 10  # the end of the exception's traceback kept above the stacks (its innermost frames)
STACK_BYTES = 1 << 20  # one rank's stacks file: faulthandler's own caps (100 threads x 100 frames) fit in ~1 MiB
OWN_THREADS = ("ncclcheck-evidence", "ncclcheck-dump")  # the dump's own threads: left out of the stacks
DEFAULT_PREFIX = "nccl_trace_rank_"  # torch's own default dump name (TORCH_FR_DUMP_TEMP_FILE unset)
RANK_VARS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")  # a rank before init_process_group


@dataclasses.dataclass(frozen=True)
class Armed:
    """What arm() did in this process: the directory, the variables it set, the hooks it installed, and notes (what
    it could not do and why)."""

    directory: str
    env: dict
    hooks: tuple
    notes: tuple = ()
    live: Optional[str] = None  # the responder's address (host:port) when one answers `ncclcheck watch`


_LOCK = threading.Lock()
_STATE: dict = {}  # the one arming of this process: {"armed": Armed, "evidence": _Evidence} (a process-wide fact)


def arm(directory: str, dump_signal: Optional[int] = signal.SIGUSR1, nodes: Iterable = (),
        node_rank: Optional[int] = None, env: Optional[MutableMapping[str, str]] = None, live: bool = True,
        responder_args: Optional[dict] = None) -> Armed:
    """Arm this rank: its flight recorder and Python stacks are written into `directory` when it fails, times out,
    is told to stop (SIGTERM) or is asked to (`dump_signal`, None: none). Call it before init_process_group (torch
    reads the flight recorder's variables then). A second call returns the first one's Armed and does nothing.
    nodes / node_rank: the preflight's nodes, for per-host dump names (guard); env: os.environ.
    live: also start this rank's responder (live/responder.py) so `ncclcheck watch` can fetch its flight recorder,
    stacks and progress while the job runs or hangs (docs/live.md); responder_args: its placement and token when the
    caller knows them (guard), else the launcher's variables. The responder's address is in the notes."""
    from ..recommend.postmortem import recommend_postmortem

    with _LOCK:
        if "armed" in _STATE and _STATE["pid"] == os.getpid():
            return _STATE["armed"]
        env = os.environ if env is None else env
        directory = os.path.abspath(directory)
        os.makedirs(directory, exist_ok=True)
        notes = []
        set_env = set_unset(recommend_postmortem(directory, nodes), env, 0 if node_rank is None else node_rank,
                             None)
        dist = sys.modules.get("torch.distributed")
        if dist is not None and getattr(dist, "is_initialized", lambda: False)():
            notes.append("armed after init_process_group: torch read TORCH_FR_BUFFER_SIZE already (set it before, "
                         "or call arm() first, for the flight recorder to record)")
        evidence = _Evidence(directory, env)
        hooks = evidence.install(dump_signal, notes)
        armed = Armed(directory, set_env, hooks, tuple(notes))
        _STATE.update(armed=armed, evidence=evidence, pid=os.getpid())
        described = responder_args or all(env.get(k) for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))
        if live and not described:
            notes.append("live: no responder (no RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT to register in)")
            armed = dataclasses.replace(armed, notes=tuple(notes))
            _STATE.update(armed=armed)
        elif live:  # after the hooks: it reads what they would write and never changes them or the exit code
            from ..live.responder import start

            try:
                # torch imported here, in the caller's thread, before the responder's thread may touch it: a thread
                # importing torch.distributed while the script's main thread is half-way through `import torch`
                # breaks both imports ("torch._C is not a package"); the script imports it next anyway.
                import torch.distributed  # noqa: F401

                responder = start(env, **(responder_args or {}))
            except Exception as e:  # a responder that cannot start is a note, never the job's failure
                responder, why = None, f"{type(e).__name__}: {e}"
            else:
                why = "no RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT to register in"
            notes.append(f"live: answers `ncclcheck watch` at {responder.addr}:{responder.port}"
                         + (f" (requests authenticated: {responder.level})" if responder.auth else "")
                         if responder is not None else f"live: no responder ({why})")
            armed = dataclasses.replace(armed, notes=tuple(notes), live=None if responder is None
                                        else f"{responder.addr}:{responder.port}")
            _STATE.update(armed=armed, responder=responder)
        return armed


def dump_now(reason: str = "asked") -> Optional[dict]:
    """Write this rank's evidence now (what the hooks do); None when this process is not armed. Returns
    {"flight_recorder": path or None, "stacks": path or None, "notes": [...]}."""
    ev = _STATE.get("evidence")
    if ev is None or _STATE.get("pid") != os.getpid():
        return None
    return ev.write(reason)


class _Evidence:
    """The hooks of one armed process and the one place that writes its files."""

    def __init__(self, directory: str, env: MutableMapping[str, str]) -> None:
        from ..live.pace import launcher_of
        from ..rendezvous.budget import Budget

        self.directory = directory
        self.env = env
        self.launcher = launcher_of(env)  # who started this rank, said in its stacks (diagnose's header)
        self.pid = os.getpid()
        self.bound_s = Budget().evidence_dump_s
        self.write_lock = threading.Lock()
        self.previous: dict = {}  # signum -> the handler before ours
        self.wakeup: Optional[tuple] = None  # (read fd, write fd) of the wake-up pipe
        self.done = threading.Event()  # set after each signal-driven write: the main thread's handler waits on it
        self.exit_code: Any = None  # what sys.exit was asked for
        self.exit_at: Optional[str] = None  # ... and the script's own frame that asked for it
        self.dumped_on: Optional[str] = None
        self.end: Optional[tuple] = None  # (reason, at, at label, traceback) of the script's own end, once written
        # an uncaught exception Python already printed before arm() (an interactive session's): not this run's end
        self.raised_before = getattr(sys, "last_value", None)

    # ---- installing
    def install(self, dump_signal: Optional[int], notes: list) -> tuple:
        hooks = ["excepthook", "atexit"]
        self.prev_excepthook = sys.excepthook
        sys.excepthook = self._excepthook
        self.prev_exit = sys.exit
        sys.exit = self._exit
        atexit.register(self._atexit)
        os.register_at_fork(after_in_child=_disarm_child)
        if threading.current_thread() is not threading.main_thread():
            notes.append("not armed for signals: arm() ran outside the main thread (Python installs signal handlers "
                         "only there)")
            return tuple(hooks)
        signums = [signal.SIGTERM] + ([dump_signal] if dump_signal not in (None, signal.SIGTERM) else [])
        for s in signums:
            prev = signal.getsignal(s)
            if prev is None:  # a handler installed from C: Python can neither call nor restore it
                notes.append(f"{signal.Signals(s).name} left alone: its handler was not installed from Python")
                continue
            self.previous[s] = prev
            signal.signal(s, self._on_signal)
            hooks.append(signal.Signals(s).name)
        r, w = os.pipe()
        os.set_blocking(w, False)
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        if old != -1:  # asyncio (or the script) owns the one wake-up fd: leave it; handlers run in the main thread
            signal.set_wakeup_fd(old)
            os.close(r)
            os.close(w)
            notes.append("signal evidence is written by the main thread (the wake-up fd is taken): a rank stuck in a "
                         "collective writes it only when the collective returns")
        else:
            self.wakeup = (r, w)
            threading.Thread(target=self._watch, name="ncclcheck-evidence", daemon=True).start()
            hooks.append("watcher")
        return tuple(hooks)

    # ---- triggers
    def _excepthook(self, etype, value, tb) -> None:
        if self._mine() and not issubclass(etype, SystemExit):
            import traceback

            at = raised_at(tb)
            text = "".join(traceback.format_exception(etype, value, tb))
            self.bounded_write(f"{RAISED}{etype.__name__}: {value}", at, text[-TRACEBACK_CHARS:])
        self.prev_excepthook(etype, value, tb)

    def _exit(self, code: Any = None) -> None:
        self.exit_code = code
        if code not in (None, 0):  # the line that asked for it: at exit, the main thread's stack is gone
            frames, f = [], sys._getframe(1)
            while f is not None and len(frames) < _EXIT_FRAMES:
                frames.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
                f = f.f_back
            self.exit_at = own_frame(frames[::-1])
        self.prev_exit(code)

    def _atexit(self) -> None:
        code = self.exit_code
        # unless a stop was written first (a script's SIGTERM handler that calls sys.exit: the stop's consequence)
        # or the end already was; an earlier ask (SIGUSR1 while it ran) is no end
        if self._mine() and code not in (None, 0) and (not self.dumped_on or self.dumped_on.startswith(ASKED)):
            self.bounded_write(_exit_reason(code), self.exit_at, at_label=STACKS_AT[1])

    def _on_signal(self, signum: int, frame: Any) -> None:
        """The Python-level handler (main thread, once it is back in the interpreter)."""
        if self._mine():
            if self.wakeup is None:
                self.bounded_write(_signal_reason(signum))
            else:  # the watcher writes it; wait for that before a handler that may end the process
                self.done.wait(self.bound_s)
                self.done.clear()
        prev = self.previous.get(signum)
        if callable(prev):
            prev(signum, frame)
        elif prev == signal.SIG_DFL and signum == signal.SIGTERM:
            _die_by(signum)

    def _watch(self) -> None:
        """Wakes on the C-level handler's byte (even while the main thread is inside a collective)."""
        r = self.wakeup[0]
        while True:
            try:
                data = os.read(r, 64)
            except InterruptedError:
                continue
            except OSError:
                return
            if not data or not self._mine():
                return
            for signum in data:
                if signum not in self.previous:
                    continue
                self.bounded_write(_signal_reason(signum))
                self.done.set()
                if signum == signal.SIGTERM and self.previous[signum] == signal.SIG_DFL:
                    _die_by(signum)  # the main thread may be stuck in a collective for minutes: die as by default

    def _mine(self) -> bool:
        return os.getpid() == self.pid

    # ---- writing
    def bounded_write(self, reason: str, at: Optional[str] = None, detail: str = "",
                      at_label: str = STACKS_AT[0]) -> dict:
        """write() in a helper thread, waited for at most the Budget's evidence_dump_s."""
        out: dict = {}
        t = threading.Thread(target=lambda: out.update(self.write(reason, at, detail, at_label)),
                             name="ncclcheck-dump", daemon=True)
        t.start()
        t.join(self.bound_s)
        if t.is_alive():
            _note_given_up(self.directory, reason, self.bound_s)
        return out

    def write(self, reason: str, at: Optional[str] = None, detail: str = "", at_label: str = STACKS_AT[0]) -> dict:
        """This rank's flight recorder and stacks, each written to a temporary name and renamed (a rank killed
        mid-write leaves the previous whole file, or none)."""
        with self.write_lock:
            then = None
            if reason.startswith((RAISED, EXITED)):
                self.end = (reason, at, at_label, detail)
            else:
                # a stop (or an ask) that reached a rank whose script had already ended on its own, still exiting
                # (its excepthook, atexit handlers, a DataLoader's workers or the process group's teardown take a
                # while; torchrun stops every rank once one failed): its end stays the reason, the stop what came
                # after; the stop would otherwise have erased the rank's own word on why it ended
                end = self._script_end()
                if end is not None:
                    then, (reason, at, at_label, detail) = reason, end
            self.dumped_on = reason
            rank = current_rank(self.env)
            notes: list = []
            if then is None and reason.startswith(TOLD_TO_STOP):
                notes.extend(_handling())
            # the threads first, as they are now: dumping the flight recorder takes a while, and meanwhile a rank
            # told to stop may leave where it was (a DataLoader whose worker the same killpg ended raises in the main
            # thread; the stacks then showed the excepthook, not the user's loop)
            threads = threads_now()
            fr = self._flight_recorder(rank, notes)
            text = stacks_text(rank, reason, notes, at, detail, threads, at_label, self.launcher, then)
            # the snapshot's main thread holds no frame of the job's (the script ended while this was written: an
            # excepthook reading sources through linecache, atexit): where the script ended says where it was
            if at is None and job_frame(text.decode("utf-8", errors="replace")) is None:
                ending = self._script_end()
                if ending is not None:
                    said = ending[0] if ending[0].startswith(RAISED) else f"called {ending[0]}"
                    notes.append(f"the script had {said}: its frames were gone from the main thread's stack")
                    text = stacks_text(rank, reason, notes, ending[1], detail, threads, ending[2], self.launcher)
            stacks = _atomic(os.path.join(self.directory, f"{STACKS_NAME}{rank}.txt"), text)
            if not reason.startswith(ASKED):  # an end: said to watch too, where the rank registered for it
                _tell_watch(text, stacks or "")
            return {"flight_recorder": fr, "stacks": stacks, "notes": notes}

    def _script_end(self) -> Optional[tuple]:
        """(reason, the script's own frame, its label, the traceback's text) of the script's own end when it had
        ended: written already (the excepthook's, atexit's), or in flight: an exception reached the top (the
        excepthook, ours or the default one, may be reading source files through linecache for seconds) or it
        called sys.exit for a failing code (atexit handlers running). None while the script still runs."""
        if self.end is not None:
            return self.end
        # Python sets sys.last_value before it calls sys.excepthook, with no Python code in between
        exc = getattr(sys, "last_value", None)
        if isinstance(exc, BaseException) and exc is not self.raised_before and not isinstance(exc, SystemExit):
            return (f"{RAISED}{_said(exc)}", raised_at(getattr(sys, "last_traceback", None) or exc.__traceback__),
                    STACKS_AT[0], chain_text(exc)[-TRACEBACK_CHARS:])
        # a SystemExit the script caught is no end: past the script, Python has marked its main thread stopped
        if self.exit_code not in (None, 0) and self.exit_at and not threading.main_thread().is_alive():
            return _exit_reason(self.exit_code), self.exit_at, STACKS_AT[1], ""
        return None

    def _flight_recorder(self, rank: int, notes: list) -> Optional[str]:
        text = flight_recorder_json(notes)
        if text is None:
            return None
        prefix = os.path.basename(self.env.get("TORCH_FR_DUMP_TEMP_FILE") or
                                  self.env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") or DEFAULT_PREFIX)
        return _atomic(os.path.join(self.directory, f"{prefix}{rank}.json"), text.encode())


def _tell_watch(text: bytes, path: str) -> None:
    """The stacks file's word on how this rank ended (the reader's fields: one format), left in the job's store by
    this rank's responder: a rank that raised is gone when watch looks, its file on a disk watch does not read."""
    responder = _STATE.get("responder")
    said = parse_stacks(text.decode("utf-8", errors="replace"), path) if responder is not None else None
    if said is not None:
        try:
            responder.say_end(said)
        except Exception:  # noqa: BLE001 - telling watch is never the job's failure
            pass


# ---- the two readers, also for a live responder (issue 33 item 2): what a file would hold, as text, no file written
def flight_recorder_json(notes: list) -> Optional[str]:
    """torch's flight recorder of this process as JSON, cut to diagnose's bound; None (and why in `notes`) when
    torch.distributed is not imported, cannot dump, or recorded nothing."""
    torch = sys.modules.get("torch")
    torch_c = getattr(getattr(torch, "_C", None), "_distributed_c10d", None)
    if torch_c is None or not hasattr(torch_c, "_dump_fr_trace_json"):
        notes.append("no flight recorder: torch.distributed was never imported, or this torch has none")
        return None
    try:
        text = torch_c._dump_fr_trace_json()
    except Exception as exc:  # a torch that cannot dump still gets its stacks written
        notes.append(f"flight recorder not written: {type(exc).__name__}: {exc}")
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if '"entries"' not in text:  # torch leaves the key out when it recorded nothing
        notes.append("flight recorder empty: no collective recorded (no process group yet, or "
                     "TORCH_FR_BUFFER_SIZE unset when it was created): not written")
        return None
    return cut_flight_recorder(text, notes)


def threads_now() -> tuple:
    """(thread id -> name, faulthandler's text of every thread) at this instant."""
    import faulthandler
    import tempfile

    names = {t.ident: t.name for t in threading.enumerate()}
    try:
        with tempfile.TemporaryFile() as f:
            faulthandler.dump_traceback(f, all_threads=True)
            f.seek(0)
            body = f.read(STACK_BYTES + 1)
    except (OSError, ValueError, RuntimeError) as exc:
        body = f"stacks not read: {exc}\n".encode()
    return names, body


def stacks_text(rank: int, reason: str, notes: list, at: Optional[str] = None, detail: str = "",
                threads: Optional[tuple] = None, at_label: str = STACKS_AT[0], launcher: str = "none",
                then: Optional[str] = None) -> bytes:
    """The stacks file's bytes: the header (rank, pid, host, time, reason, where it raised or called sys.exit, what
    came after that end (`then`: a stop), who launched it, notes, thread names),
    `detail` (an exception's traceback), then every thread's stack less ncclcheck's own (threads_now(), or the
    snapshot `threads` taken earlier), cut at STACK_BYTES."""
    import socket

    names, body = threads if threads is not None else threads_now()
    head = [f"{STACKS_HEADER} rank {rank} pid {os.getpid()} host {socket.gethostname()} "
            f"time {time.strftime('%Y-%m-%dT%H:%M:%S%z')}",
            f"reason: {_clip(reason, 500)}",
            *([f"{at_label}{_clip(at, 500)}"] if at else []),
            *([f"{STACKS_THEN}{_clip(then, 64)}"] if then else []),
            *([f"{STACKS_LAUNCHER}{launcher}"] if launcher != "none" else []),
            *(f"note: {_clip(n, 500)}" for n in notes),
            "threads: " + ", ".join(f"0x{i:016x} {n}" for i, n in names.items()
                                    if i is not None and not n.startswith(OWN_THREADS)), ""]
    body = _without_threads(body, {i for i, n in names.items() if n.startswith(OWN_THREADS)})
    if len(body) > STACK_BYTES:
        body = body[:STACK_BYTES] + f"\n... cut at {STACK_BYTES} bytes\n".encode()
    if detail:
        body = detail.encode(errors="replace") + b"\n" + body
    return "\n".join(head).encode() + b"\n" + body


def cut_flight_recorder(text: str, notes: list) -> str:
    """The dump as torch wrote it, or, past diagnose's own JSON bound, its newest entries that fit, with the cut
    said in the dump (`ncclcheck_cut`) and in `notes`."""
    from ..postmortem.inputs import MAX_JSON_BYTES

    if len(text) <= MAX_JSON_BYTES:
        return text
    try:
        doc = json.loads(text)
        entries = doc["entries"]
    except (ValueError, KeyError, TypeError):
        notes.append(f"flight recorder of {len(text)} bytes, past {MAX_JSON_BYTES}, and not a dump: not written")
        return json.dumps({"version": "ncclcheck-cut", "entries": [], "ncclcheck_cut": notes[-1]})
    total, keep = len(entries), len(entries)
    while keep > 0:
        keep //= 2
        doc["entries"] = entries[total - keep:] if keep else []
        out = json.dumps(doc)
        if len(out) <= MAX_JSON_BYTES:
            break
    said = f"the flight recorder ({len(text)} bytes) was cut to its newest {keep} of {total} entries " \
           f"(the bound is {MAX_JSON_BYTES} bytes)"
    notes.append(said)
    doc["ncclcheck_cut"] = said
    return json.dumps(doc)


_EXIT_FRAMES = 256  # frames walked out from sys.exit's caller (a recursion's depth is not walked whole)


def own_frame(frames: list) -> Optional[str]:
    """'train.py:12 in main': the script's innermost frame of (file, line, function) outermost first, leaving out
    torch and the libraries (a timed-out collective raises inside torch's all_reduce, a DataLoader's timeout inside
    the standard library's queues, argparse calls sys.exit); the innermost of all when none is the script's."""
    torch_dir = os.path.dirname(getattr(sys.modules.get("torch"), "__file__", None) or "")
    own = [f for f in frames if not (torch_dir and f[0].startswith(torch_dir + os.sep)) and not is_library(f[0])]
    own = own or frames
    return f"{own[-1][0]}:{own[-1][1]} in {own[-1][2]}" if own else None


def chain_text(exc: BaseException) -> str:
    """An exception's traceback as Python prints it (each exception of its chain, the innermost frame last, then its
    own line), less the source lines: read off the frames with no file opened (linecache may take seconds, and a
    stop's write must not), for the reader's from_collective and chain."""
    import traceback

    chain, seen = [], set()
    while exc is not None and id(exc) not in seen and len(chain) < MAX_CHAINED:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    out = []
    for i, e in enumerate(reversed(chain)):
        if i:
            out.append("\nDuring handling of the above exception, another exception occurred:\n")
        out.append("Traceback (most recent call last):")
        out += [f'  File "{f.f_code.co_filename}", line {line}, in {f.f_code.co_name}'
                for f, line in traceback.walk_tb(e.__traceback__)]
        out.append("".join(traceback.format_exception_only(type(e), e)).rstrip("\n"))
    return "\n".join(out) + "\n"


def raised_at(tb: Any) -> Optional[str]:
    """own_frame() of a traceback, read off its frames (no source line is read: linecache may take seconds)."""
    import traceback

    return own_frame([(f.f_code.co_filename, line, f.f_code.co_name) for f, line in traceback.walk_tb(tb)])


def current_rank(env: MutableMapping[str, str]) -> int:
    """The global rank: torch's once the world formed, else the launcher's variable, else 0 (a lone process)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # a world torn down mid-failure: the launcher's variable still says who we are
        pass
    for name in RANK_VARS:
        v = str(env.get(name) or "").strip()
        if v.isdigit():
            return int(v)
    return 0


def _without_threads(body: bytes, idents: set) -> bytes:
    """faulthandler's text less the sections (blank-line separated) of the threads in `idents`."""
    keep = []
    for part in body.split(b"\n\n"):
        head = part.split(b"\n", 1)[0].split()
        ident = next((w for w in head if w.startswith(b"0x")), b"")
        try:
            if int(ident, 16) in idents:
                continue
        except ValueError:
            pass
        keep.append(part)
    return b"\n\n".join(keep)


def _atomic(path: str, data: bytes) -> Optional[str]:
    tmp = f"{path}.{os.getpid()}.part"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return path
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return None


def _note_given_up(directory: str, reason: str, bound_s: float) -> None:
    """The dump outlived its bound: say so where its stacks would have been (the thread may still finish it)."""
    rank = current_rank(os.environ)
    path = os.path.join(directory, f"{STACKS_NAME}{rank}.txt")
    if not os.path.exists(path):
        _atomic(path, f"{STACKS_HEADER} rank {rank} pid {os.getpid()}\nreason: {_clip(reason, 500)}\nnote: the "
                      f"dump took longer than {bound_s:g} s and was given up\n".encode())


ASKED = "asked"  # the reason of an on-demand dump (SIGUSR1, dump_now): the job goes on, no end to tell


def _handling() -> list:
    """[a note] when the main thread is handling an exception as a stop finds it (a `finally` or an `except` block
    running after a raise, e.g. a slow process-group teardown): it had not reached the script's top, so it may yet
    have been handled and is no end, but it is the rank's own word on what it was doing; [] otherwise."""
    try:
        got = sys._current_exceptions().get(threading.main_thread().ident)
    except Exception:  # noqa: BLE001 - a Python without it: the stop alone
        return []
    exc = got[1] if isinstance(got, tuple) else got  # a 3-tuple before Python 3.12, the exception since
    if not isinstance(exc, BaseException):
        return []
    at = raised_at(exc.__traceback__)
    return [f"its main thread was handling {_said(exc)}" + (f" (raised at {at})" if at else "") +
            " when told to stop: a finally or except block was running after it"]


def _said(exc: BaseException) -> str:
    """"Type: message" of an exception, its type alone when its __str__ fails (a stop's write must not)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails still has its type and frame
        return type(exc).__name__


def _exit_reason(code: Any) -> str:
    return f"{EXITED}{code!r})"


def _signal_reason(signum: int) -> str:
    return f"{TOLD_TO_STOP} (SIGTERM)" if signum == signal.SIGTERM else \
        f"{ASKED} ({signal.Signals(signum).name})"


def _die_by(signum: int) -> None:
    """End the process by `signum`'s default action, from any thread: the exit status a launcher sees (-15 in
    torchrun's table) is the one it would have seen unarmed."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal(signum, ctypes.c_void_p(0))  # SIG_DFL; Python's signal.signal works in the main thread only
        os.kill(os.getpid(), signum)
        time.sleep(_reap_s())
    except Exception:  # no ctypes (a stripped Python): the shell's convention for "killed by signum"
        pass
    os._exit(128 + signum)


def _reap_s() -> float:
    """The kernel delivers a pending fatal signal within this."""
    from ..rendezvous.budget import Budget

    return Budget().reap_s


def _disarm_child() -> None:
    """After fork: the child shares the wake-up pipe and the hooks' pid check keeps its hooks silent; closing the
    pipe's write end here keeps a child's SIGTERM from waking its parent's watcher."""
    ev = _STATE.get("evidence")
    if ev is None or ev.wakeup is None:
        return
    try:
        if threading.current_thread() is threading.main_thread():
            signal.set_wakeup_fd(-1)
    except (ValueError, OSError):
        pass


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def set_unset(recs: list, env: MutableMapping[str, str], node_rank: int, names: Optional[tuple]) -> dict:
    """Set each recommendation (of `names`, or all) meant for this node where the user has not set it."""
    chosen: dict = {}
    for r in recs:
        if (names is not None and r.name not in names) or (r.node is not None and r.node != node_rank):
            continue
        if r.node is not None or r.name not in chosen:
            chosen[r.name] = r.value
    applied = {}
    for name, value in chosen.items():
        if str(env.get(name) or "").strip():
            continue
        env[name] = value
        applied[name] = value
    return applied
