"""An armed rank's stacks file (training/arm.py writes it: `stacks_rank_<rank>.txt`): a header saying who and why,
then (when it raised) the exception's traceback, then faulthandler's text of every thread. Read here as untrusted
text: who wrote it, why, and where the rank was (where it raised, else its main thread's innermost frame that is not
the arming's own, threading's or an excepthook), for the verdict to say where a culprit was.
"""

from __future__ import annotations

import re
from typing import Optional

from .bound import clip

HEADER = "ncclcheck stacks:"  # the file's first words (the writer uses this constant too)
NAME = "stacks_rank_"  # + rank + ".txt"
TOLD_TO_STOP = "told to stop"  # the reason's first words when a SIGTERM made the rank write it (a launcher's stop)
_HEAD = re.compile(r"ncclcheck stacks: rank (\d{1,7}) pid (\d{1,10})")
_THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-f]{1,16}) \(most recent call first\):$")
_FRAME = re.compile(r'^\s+File "(.{1,1000})", line (\d{1,9}) in (.{1,200})$')
_OWN = ("/ncclcheck/training/arm.py", "/threading.py")  # the dump's own frames: never where the rank was
MAX_LINES = 20_000  # faulthandler writes at most 100 threads x 100 frames


def is_stacks(text: str) -> bool:
    return text.startswith(HEADER)


def parse(text: str, path: str) -> Optional[dict]:
    """{"rank", "pid", "reason", "where", "path"} or None when the header is not one."""
    lines = text.splitlines()[:MAX_LINES]
    m = _HEAD.match(lines[0]) if lines else None
    if not m:
        return None
    reason = next((ln[len("reason: "):] for ln in lines[1:6] if ln.startswith("reason: ")), "")
    raised_at = next((ln[len("raised at: "):] for ln in lines[1:6] if ln.startswith("raised at: ")), None)
    main = None
    for ln in lines[1:8]:
        if ln.startswith("threads: "):
            for part in ln[len("threads: "):].split(", "):
                ident, _, name = part.partition(" ")
                if name == "MainThread":
                    main = ident.lower()
    where, current = None, None
    for ln in lines:
        t = _THREAD.match(ln)
        if t:
            current = t.group(1).lower()
            continue
        f = _FRAME.match(ln)
        if f and current is not None and (main is None or _same(current, main)) and where is None:
            if not f.group(1).endswith(_OWN) and not f.group(3).endswith("excepthook"):
                where = f"{f.group(1)}:{f.group(2)} in {f.group(3)}"
    where = raised_at or where  # an exception's own frame says more than the hook that was running
    return {"rank": int(m.group(1)), "pid": int(m.group(2)), "reason": clip(reason, 300),
            "where": clip(where, 400) if where else None, "path": path}


def _same(a: str, b: str) -> bool:
    try:
        return int(a, 16) == int(b, 16)
    except ValueError:
        return False
