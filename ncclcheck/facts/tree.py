"""Deterministic, bounded directory walks: the same tree gives the same hash on every node, whatever its mtimes."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
import time
from collections.abc import Iterable
from typing import Optional

SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache",
                       ".ruff_cache", ".tox", ".hypothesis"})
# What a running job writes beside its code, not code: sbatch's default slurm-%j.out in the submit directory, nohup.out,
# a launcher's or the script's own logs. They grow while the nodes hash the tree, so on a shared working directory each
# node read a different length and code.consistent failed on a healthy job (issue 27's 64-host lab, 6 of 64 nodes).
JOB_OUTPUT_GLOBS = ("*.out", "*.err", "*.log")


def hash_file(path: str, h: hashlib._Hash, budget: int) -> int:
    """Feed up to budget bytes of a file into h; return the bytes read (0 when unreadable)."""
    n = 0
    try:
        with open(path, "rb") as f:
            while n < budget:
                chunk = f.read(min(1 << 20, budget - n))
                if not chunk:
                    break
                h.update(chunk)
                n += len(chunk)
    except OSError:
        h.update(b"\0unreadable")
    return n


def walk(root: str, *, contents: bool, max_files: int, max_bytes: int, deadline_s: float,
         skip_dirs: Iterable[str] = (), skip_files: Iterable[str] = ()) -> dict:
    """Hash relative paths + sizes (+ contents up to max_bytes in total) of every file under root, sorted.

    Symlinks are hashed by their target text, never followed (a link to / must not walk the machine).
    The caps are counts, not time, so identical trees stop at the same file on every node; the deadline is a last
    resort and, when hit, the fingerprint is withheld (it would differ between nodes for no reason).
    """
    skip = frozenset(skip_dirs)
    skip_globs = tuple(skip_files)
    h = hashlib.sha256()
    files = total = hashed = 0
    truncated = False
    reason: Optional[str] = None
    end = time.monotonic() + deadline_s
    for dirpath, dirnames, filenames in os.walk(root, onerror=None, followlinks=False):
        if time.monotonic() > end:
            truncated, reason = True, f"timed out after {deadline_s:g}s"
            break
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        for name in sorted(filenames):
            if skip_globs and any(fnmatch.fnmatchcase(name, g) for g in skip_globs):
                continue
            if files >= max_files:
                truncated, reason = True, f"stopped after {max_files} files"
                break
            if time.monotonic() > end:
                truncated, reason = True, f"timed out after {deadline_s:g}s"
                break
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            try:
                st = os.lstat(full)
            except OSError:
                continue
            files += 1
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(full)
                except OSError:
                    target = ""
                h.update(f"L {rel}\0{target}\n".encode("utf-8", "surrogateescape"))
                continue
            total += st.st_size
            h.update(f"F {rel}\0{st.st_size}\n".encode("utf-8", "surrogateescape"))
            if contents and stat.S_ISREG(st.st_mode):
                if hashed < max_bytes:
                    hashed += hash_file(full, h, max_bytes - hashed)
                if hashed >= max_bytes and not truncated:
                    truncated, reason = True, f"contents hashed up to {max_bytes} bytes"
        else:
            continue
        break
    timed_out = reason is not None and reason.startswith("timed out")
    return {"files": files, "bytes": total, "hash": None if timed_out else "sha256:" + h.hexdigest(),
            "truncated": truncated, "reason": reason}
