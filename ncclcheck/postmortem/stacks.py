"""An armed rank's stacks file (training/arm.py writes it: `stacks_rank_<rank>.txt`): a header saying who and why,
then (when it raised) the exception's traceback, then faulthandler's text of every thread. Read here as untrusted
text: who wrote it, why, and where the rank was (where it raised, else its main thread's innermost frame in the job's
own code, with the library frame it waited in: a DataLoader that never yields waits in selectors.py, the user's line
is the `for batch in loader`), for the verdict to say where a culprit was.
"""

from __future__ import annotations

import re
from typing import Optional

from ..nccl.linear import MAX_LINE_CHARS
from .bound import clip

HEADER = "ncclcheck stacks:"  # the file's first words (the writer uses this constant too)
NAME = "stacks_rank_"  # + rank + ".txt"
TOLD_TO_STOP = "told to stop"  # the reason's first words when a SIGTERM made the rank write it (a launcher's stop)
RAISED = "raised "  # ... when an exception ended the script: "raised RuntimeError: simulated bug"
EXITED = "sys.exit("  # ... when the script asked for a failing exit code: "sys.exit(3)"
AT = ("raised at: ", "exited at: ")  # the header line saying the script's own frame that raised or called sys.exit
# the header line saying what came after the script's own end (its reason stays that end): "then: told to stop
# (SIGTERM)" when the launcher stopped a rank that had raised or asked sys.exit and was still exiting
THEN = "then: "
LAUNCHER = "launcher: "  # the header line naming who started the rank (live/pace.launcher_of)
_HEAD = re.compile(r"ncclcheck stacks: rank (\d{1,7}) pid (\d{1,10})")
_HOST = re.compile(r" host ([A-Za-z0-9][A-Za-z0-9.\-_]{0,252})(?: |$)")
_THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-f]{1,16}) \(most recent call first\):$")
_FRAME = re.compile(r'^\s+File "(.{1,1000})", line (\d{1,9}) in (.{1,200})$')
# a Python traceback's frame (", in": faulthandler writes " in"); a chained exception opens a traceback of its own
_TB_FRAME = re.compile(r'^\s+File "(.{1,1000})", line \d{1,9}, in ')
_TRACEBACK = "Traceback (most recent call last):"
# where a collective raises: torch.distributed's Python (c10d, its wrappers), whatever the install's prefix
_COLLECTIVE = re.compile(r"[/\\]torch[/\\]distributed[/\\]")
_STAMP = re.compile(r" time (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})")
_LAUNCHER_NAME = re.compile(r"^[a-z]{1,16}$")
_OWN = ("/ncclcheck/training/arm.py", "/threading.py")  # the dump's own frames: never where the rank was
MAX_LINES = 20_000  # faulthandler writes at most 100 threads x 100 frames
HEADER_LINES = 32  # a stacks file's header (up to its blank line) is read within these
MAX_CHAINED = 8  # exceptions of one traceback read (Python chains one per `except` that raised again)
# frames that are not the job's own code, wherever the job ran: the standard library and installed packages (under
# lib/pythonX.Y/, site-packages, dist-packages), frozen and generated modules, torch from a source tree, ncclcheck's
# own arming and responder
_LIBRARY = re.compile(r"/lib/python\d(?:\.\d{1,3})?/|[/\\](?:site|dist)-packages[/\\]|^<[^>]{0,64}>$|/torch/|"
                      r"/ncclcheck/(?:training|live)/|/ncclcheck/__init__\.py$|/threading\.py$")


def is_library(path: str) -> bool:
    """A frame of the standard library, an installed package, torch or ncclcheck: not the job's own line."""
    return _LIBRARY.search(path) is not None


def where_text(own: Optional[str], inner: Optional[str]) -> Optional[str]:
    """'train.py:42 in main (inside selectors.py:415 in select)': the job's own innermost frame, and the library
    frame it waited in when that is deeper; the innermost alone when no frame is the job's."""
    if own is None or own == inner:
        return own or inner
    return f"{own} (inside {inner.rsplit('/', 1)[-1]})" if inner else own


def is_stacks(text: str) -> bool:
    return text.startswith(HEADER)


def parse(text: str, path: str) -> Optional[dict]:
    """{"rank", "pid", "reason", "where", "path", "time", "host", "launcher", "from_collective", "chain", "then"} or
    None when the header is not one. then: what came after the end the reason says (a stop), None when nothing did.
    from_collective: an exception of the file's traceback (the one that ended the script, or one
    it was raised while handling) came out of torch.distributed, as a peer's death or a timeout reaches a survivor;
    chain: those exceptions' own lines."""
    lines = [ln[:MAX_LINE_CHARS] for ln in text.splitlines()[:MAX_LINES]]
    m = _HEAD.match(lines[0]) if lines else None
    if not m:
        return None
    reason = next((ln[len("reason: "):] for ln in lines[1:6] if ln.startswith("reason: ")), "")
    raised_at = next((ln.split(": ", 1)[1] for ln in lines[1:6] if ln.startswith(AT)), None)
    said = next((ln[len(LAUNCHER):].strip() for ln in lines[1:6] if ln.startswith(LAUNCHER)), "")
    then = next((ln[len(THEN):].strip() for ln in lines[1:6] if ln.startswith(THEN)), "")
    stamp = _STAMP.search(lines[0])
    host = _HOST.search(lines[0])
    collective, chain = _traceback(lines) if reason.startswith(RAISED) else (False, [])
    where = where_text(*_main_frames(lines))
    where = raised_at or where  # an exception's own frame says more than the hook that was running
    return {"rank": int(m.group(1)), "pid": int(m.group(2)), "reason": clip(reason, 300),
            "where": clip(where, 400) if where else None, "path": path,
            "time": stamp.group(1) if stamp else None, "host": host.group(1) if host else None,
            "launcher": said if _LAUNCHER_NAME.match(said) else None,
            "from_collective": collective, "chain": chain, "then": clip(then, FIELDS["then"]) if then else None}


def told_to_stop(said: Optional[dict]) -> bool:
    """The rank's stacks say it was told to stop: the stop made it write them, or came after its own end."""
    said = said or {}
    return any((said.get(k) or "").startswith(TOLD_TO_STOP) for k in ("reason", "then"))


def job_frame(text: str) -> Optional[str]:
    """The main thread's innermost frame of the job's own code in a stacks text, None when it holds none (the script
    was past its last line: an excepthook, atexit, or no Python frame at all)."""
    return _main_frames([ln[:MAX_LINE_CHARS] for ln in text.splitlines()[:MAX_LINES]])[0]


def _main_frames(lines: list) -> tuple:
    """(the job's own innermost frame, the innermost frame) of the main thread (the first thread that has a frame
    when the header names none), the dump's own frames left out."""
    main = None
    for ln in lines[1:HEADER_LINES]:  # the header: reason, its lines (at, then, launcher), notes, threads
        if not ln:
            break
        if ln.startswith("threads: "):
            for part in ln[len("threads: "):].split(", "):
                ident, _, name = part.partition(" ")
                if name == "MainThread":
                    main = ident.lower()
    own, inner, current, inner_thread = None, None, None, None
    for ln in lines:
        t = _THREAD.match(ln)
        if t:
            current = t.group(1).lower()
            continue
        f = _FRAME.match(ln)  # most recent call first: the first frame kept is the innermost
        if f is None or current is None or (main is not None and not _same(current, main)) or own is not None:
            continue
        if f.group(1).endswith(_OWN) or f.group(3).endswith("excepthook") or \
                (inner_thread is not None and current != inner_thread):
            continue  # the dump's own frames; with no main thread named, the first thread that has a frame
        frame = f"{f.group(1)}:{f.group(2)} in {f.group(3)}"
        inner, inner_thread = inner or frame, current
        if not is_library(f.group(1)):
            own = frame
    return own, inner


def _traceback(lines: list) -> tuple:
    """(did any exception of the traceback come out of torch.distributed, the exceptions' own lines, at most
    MAX_CHAINED): the file's text before the threads' stacks, where a chained exception ("During handling of the
    above exception ...") has a traceback of its own; each one's innermost frame says where it was raised."""
    inner, inside, collective, said = None, False, False, []
    for ln in lines:
        if _THREAD.match(ln):
            break
        if ln.startswith(_TRACEBACK):
            inside, inner = True, None
            continue
        f = _TB_FRAME.match(ln) if inside else None
        if f:
            inner = f.group(1)
        elif inside and ln and not ln[0].isspace():  # the exception's own line ends the block
            collective = collective or (inner is not None and _COLLECTIVE.search(inner) is not None)
            if len(said) < MAX_CHAINED:
                said.append(clip(ln, 300))
            inside = False
    return collective, said


TB_FRAME_LINE = re.compile(r'^\s*File "(.{1,1000})", line (\d{1,9}), in (.{1,200})$')
TB_LOOKBACK = 200  # lines above an exception's line read for its traceback's frames


def raised_at(lines: list, i: int) -> Optional[str]:
    """'train.py:12 in main': the innermost frame of the job's own code in the Python traceback that ends at
    lines[i] (a log's exception line), None when the traceback shows none (a library's frames only, or no frames)."""
    for ln in reversed(lines[max(0, i - TB_LOOKBACK):i]):
        if _TRACEBACK in ln:  # the top of this traceback: no frame of the job's own
            return None
        f = TB_FRAME_LINE.match(ln)
        if f and not is_library(f.group(1)):
            return f"{f.group(1)}:{f.group(2)} in {f.group(3)}"
    return None


# the fields of parse() a rank's word carries when it is not a file (watch: the end record a rank left in the job's
# store, and what watch --dump keeps of it), each with its most characters
FIELDS = {"reason": 300, "where": 400, "time": 32, "launcher": 16, "then": 64}


def from_record(rank: int, v, path: str) -> Optional[dict]:
    """parse()'s dict from a record of those fields (read from a store or a file: hostile), None when it is not one:
    every field type-checked and bounded."""
    if not isinstance(v, dict) or not isinstance(v.get("reason"), str) or type(v.get("from_collective")) is not bool:
        return None
    for k, n in FIELDS.items():
        if v.get(k) is not None and (not isinstance(v[k], str) or len(v[k]) > n):
            return None
    chain = v.get("chain")
    if not isinstance(chain, list) or len(chain) > MAX_CHAINED or \
            not all(isinstance(x, str) and len(x) <= FIELDS["reason"] for x in chain):
        return None
    launcher = v.get("launcher")
    return {"rank": rank, "pid": None, "reason": v["reason"], "where": v.get("where"), "path": path,
            "time": v.get("time"), "launcher": launcher if launcher and _LAUNCHER_NAME.match(launcher) else None,
            "from_collective": v["from_collective"], "chain": list(chain), "then": v.get("then")}


def to_record(said: dict) -> dict:
    """The fields of parse()'s dict that from_record reads back, each cut to its bound."""
    return {**{k: said[k][:n] if isinstance(said.get(k), str) else None for k, n in FIELDS.items()},
            "chain": [x[:FIELDS["reason"]] for x in (said.get("chain") or [])[:MAX_CHAINED]],
            "from_collective": bool(said.get("from_collective"))}


def _same(a: str, b: str) -> bool:
    try:
        return int(a, 16) == int(b, 16)
    except ValueError:
        return False
