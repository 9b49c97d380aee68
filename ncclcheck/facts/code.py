"""The code a job would run (`--code PATH`, default cwd): git HEAD + diff + untracked files, or a bounded tree hash."""

from __future__ import annotations

import fnmatch
import hashlib
import os
from collections.abc import Sequence
from typing import Callable, Optional

from .tree import JOB_OUTPUT_GLOBS, SKIP_DIRS, hash_file, walk
from .util import run_cmd

GIT_TIMEOUT_S = 5.0
MAX_DIFF_BYTES = 32 << 20
MAX_UNTRACKED = 5000
MAX_FILES = 10000
MAX_BYTES = 32 << 20
DEADLINE_S = 3.0

GitRunner = Callable[[Sequence[str], str], bytes]


def _git(args: Sequence[str], cwd: str) -> bytes:
    """git output (bounded in time and size); RuntimeError with git's first stderr line on failure."""
    # GIT_OPTIONAL_LOCKS=0: `git diff` must not take index.lock under the user's own git commands.
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return run_cmd(["git", *args], GIT_TIMEOUT_S, cwd=cwd, env=env, text=False)


def _base(path: str, kind: str) -> dict:
    return {"path": path, "kind": kind, "hash": None, "git_head": None, "dirty": None, "files": None,
            "bytes": None, "untracked": None, "truncated": False, "reason": None}


def _job_output(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(base, g) for g in JOB_OUTPUT_GLOBS)


def from_git(path: str, git: GitRunner = _git) -> dict:
    """HEAD + `git diff HEAD` + the untracked (not ignored) file names with sizes; raises when not a usable repo."""
    top = git(["rev-parse", "--show-toplevel"], path).decode().strip()
    head = git(["rev-parse", "--verify", "HEAD"], top).decode().strip()
    diff = git(["diff", "HEAD", "--no-ext-diff", "--no-color", "--binary"], top)
    untracked = sorted(n for n in git(["ls-files", "--others", "--exclude-standard", "-z"], top)
                       .decode("utf-8", "surrogateescape").split("\0") if n and not _job_output(n))
    out = _base(top, "git")
    h = hashlib.sha256(f"HEAD {head}\n".encode())
    truncated = len(diff) > MAX_DIFF_BYTES or len(untracked) > MAX_UNTRACKED
    h.update(diff[:MAX_DIFF_BYTES])
    hashed = 0
    for name in untracked[:MAX_UNTRACKED]:
        full = os.path.join(top, name)
        try:
            size = os.lstat(full).st_size
        except OSError:
            size = -1
        h.update(f"\nU {name}\0{size}\n".encode("utf-8", "surrogateescape"))
        # a new script that exists on one node only, or differs there, is exactly what this check is for
        if hashed < MAX_BYTES and os.path.isfile(full) and not os.path.islink(full):
            hashed += hash_file(full, h, MAX_BYTES - hashed)
    truncated = truncated or hashed >= MAX_BYTES
    out.update(hash="sha256:" + h.hexdigest(), git_head=head, dirty=bool(diff or untracked),
               bytes=len(diff), files=len(untracked), untracked=untracked[:50], truncated=truncated,
               reason="diff or untracked list capped" if truncated else None)
    return out


def collect(code_path: Optional[str] = None, git: GitRunner = _git) -> dict:
    path = os.path.abspath(os.path.expanduser(code_path or os.getcwd()))
    if not os.path.exists(path):
        return dict(_base(path, "missing"), reason="does not exist")
    if os.path.isfile(path):
        out = _base(path, "file")
        h = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
        except OSError as e:
            return dict(out, reason=f"unreadable: {e.strerror or e}")
        h.update(data[:MAX_BYTES])
        return dict(out, hash="sha256:" + h.hexdigest(), files=1, bytes=os.path.getsize(path),
                    truncated=len(data) > MAX_BYTES)
    git_reason = None
    try:
        return from_git(path, git)
    except RuntimeError as e:
        # not a repo, no commits yet, git missing, "dubious ownership": fall back to hashing the tree
        git_reason = str(e)
    w = walk(path, contents=True, max_files=MAX_FILES, max_bytes=MAX_BYTES, deadline_s=DEADLINE_S,
             skip_dirs=SKIP_DIRS, skip_files=JOB_OUTPUT_GLOBS)
    out = _base(path, "tree")
    out.update(hash=w["hash"], files=w["files"], bytes=w["bytes"], truncated=w["truncated"], reason=w["reason"])
    if git_reason and "not a git repository" not in git_reason:
        out["reason"] = "; ".join(r for r in (f"git unusable ({git_reason})", w["reason"]) if r)
    return out
