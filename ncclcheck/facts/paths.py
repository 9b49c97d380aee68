"""`--path P` facts: exists, readable, kind, file count, bytes, a fingerprint over relative path + size, and the
filesystem it is on (type, source, device from this node's mount table)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

from .storage import mount_of
from .tree import walk

MAX_FILES = 20000
DEADLINE_S = 3.0


def fingerprint(path: str) -> dict:
    p = os.path.abspath(os.path.expanduser(path))
    out = {"path": path, "exists": False, "readable": False, "kind": "missing", "files": 0, "bytes": 0,
           "fingerprint": None, "truncated": False, "reason": None}
    if not os.path.lexists(p):
        out["reason"] = "does not exist"
        return out
    out["exists"] = True
    out["mount"] = mount_of(p)
    if os.path.isdir(p):
        out["kind"] = "dir"
        out["readable"] = os.access(p, os.R_OK | os.X_OK)
        if not out["readable"]:
            out["reason"] = "directory not readable"
            return out
        # mtimes differ between identical copies on different nodes: path + size only
        w = walk(p, contents=False, max_files=MAX_FILES, max_bytes=0, deadline_s=DEADLINE_S)
        out.update(files=w["files"], bytes=w["bytes"], fingerprint=w["hash"], truncated=w["truncated"],
                   reason=w["reason"])
        return out
    out["kind"] = "file"
    out["readable"] = os.access(p, os.R_OK)
    try:
        size = os.stat(p).st_size
    except OSError as e:
        out["reason"] = f"stat failed: {e.strerror or e}"
        return out
    out.update(files=1, bytes=size,
               fingerprint="sha256:" + hashlib.sha256(f"F {os.path.basename(p)}\0{size}\n".encode()).hexdigest())
    if not out["readable"]:
        out["reason"] = "file not readable"
    return out


def collect(paths: Iterable[str] = ()) -> list:
    return [fingerprint(p) for p in paths]
