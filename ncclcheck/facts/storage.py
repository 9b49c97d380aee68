"""Storage facts: which filesystem a path is on (this node's mount table), its free space and inodes, and the file
operations the --shared-dir step needs (write-then-COMPLETE, bounded reads, removal, a small throughput figure).

Everything here is about this node's view; whether the nodes share one filesystem is decided across nodes
(preflight/shared_dirs.py) and judged in checks/storage.py. Names in a shared directory are opened with O_NOFOLLOW
and created with O_EXCL: another user of a shared filesystem must not be able to redirect our writes.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable
from typing import Optional

from .roots import procfs, read_text

MOUNTINFO_LIMIT = 4 << 20  # a node with tens of thousands of mounts (containers) still fits; bigger is not parsed
READ_LIMIT = 4096  # the nonce and marker files are a few dozen bytes
CHUNK = 1 << 20  # throughput probe writes and reads in 1 MiB pieces
_WHY = {errno.EROFS: "read-only filesystem", errno.EACCES: "permission denied", errno.EPERM: "operation not "
        "permitted", errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
        errno.ENOENT: "no such file or directory", errno.ENOTDIR: "not a directory", errno.EEXIST: "already exists"}


def _now_us() -> int:
    return time.monotonic_ns() // 1000


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo (octal)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list:
    """/proc/self/mountinfo -> [{mount_point, root, device, options, fs_type, source, super_options}], in order."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        a, b = left.split(), right.split()
        if len(a) < 6 or len(b) < 2:
            continue
        out.append({"mount_point": _unescape(a[4]), "root": _unescape(a[3]), "device": a[2], "options": a[5],
                    "fs_type": b[0], "source": _unescape(b[1]), "super_options": b[2] if len(b) > 2 else ""})
    return out


def _under(path: str, mount_point: str) -> bool:
    return mount_point == "/" or path == mount_point or path.startswith(mount_point.rstrip("/") + "/")


def mount_of(path: str, mounts: Optional[list] = None) -> dict:
    """The mount a path is on, from this node's mount table: the deepest mount point above it, the topmost of those
    (a later entry covers an earlier one at the same point), preferring entries whose device is the path's own
    (st_dev) so that a stale entry is not taken for the live one. {"unavailable": why} without a mount table."""
    if mounts is None:
        text = read_text(procfs("self", "mountinfo"), MOUNTINFO_LIMIT)
        if text is None:
            return {"unavailable": f"cannot read {procfs('self', 'mountinfo')}"}
        mounts = parse_mountinfo(text)
    real = os.path.realpath(os.path.abspath(os.path.expanduser(path)))
    dev = None
    try:
        st = os.stat(real)
        dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    except OSError:
        pass
    cands = [m for m in mounts if _under(real, m["mount_point"])]
    if not cands:
        return {"unavailable": f"no mount above {real} in the mount table"}
    same_dev = [m for m in cands if m["device"] == dev]
    pool = same_dev or cands
    depth = max(len(m["mount_point"].rstrip("/")) for m in pool)
    m = [m for m in pool if len(m["mount_point"].rstrip("/")) == depth][-1]
    opts = m["options"].split(",")
    return {"mount_point": m["mount_point"], "fs_type": m["fs_type"], "source": m["source"], "device": m["device"],
            "root": m["root"], "read_only": "ro" in opts or "ro" in m["super_options"].split(","),
            "options": m["options"], "st_dev": dev}


def space(path: str) -> dict:
    """Free bytes and inodes as the job's user sees them (f_bavail/f_favail: what is left after root's reserve)."""
    try:
        s = os.statvfs(path)
    except OSError as e:
        return {"unavailable": f"statvfs failed: {e.strerror or e}"}
    return {"free_bytes": s.f_bavail * s.f_frsize, "total_bytes": s.f_blocks * s.f_frsize,
            "free_inodes": s.f_favail, "total_inodes": s.f_files,
            "read_only": bool(s.f_flag & getattr(os, "ST_RDONLY", 1))}


def describe(path: str) -> dict:
    """One --shared-dir as this node sees it, without writing: exists, a directory, access, mount, space."""
    p = os.path.abspath(os.path.expanduser(path))
    out: dict = {"path": path, "exists": os.path.exists(p), "is_dir": os.path.isdir(p), "reason": None}
    if not out["exists"]:
        out["reason"] = "does not exist"
    elif not out["is_dir"]:
        out["reason"] = "not a directory"
    out["access"] = {"read": os.access(p, os.R_OK | os.X_OK), "write": os.access(p, os.W_OK | os.X_OK)}
    out["mount"] = mount_of(p) if out["exists"] else None
    out["space"] = space(p) if out["is_dir"] else None
    return out


def collect(dirs: Iterable[str] = (), need_bytes: Optional[int] = None) -> dict:
    """The `storage` fact group: each --shared-dir as this node sees it, and --need (bytes) as given."""
    return {"need_bytes": need_bytes, "dirs": [describe(d) for d in dirs]}


# ---------------------------------------------------------------------------------------------------------------
# File operations of the --shared-dir step. Each returns a small JSON-able record; none raises for an OSError.


def why(e: OSError) -> str:
    """'read-only filesystem (EROFS)': what a user needs from an errno."""
    name = errno.errorcode.get(e.errno or 0, "")
    text = _WHY.get(e.errno or 0) or e.strerror or str(e)
    return f"{text} ({name})" if name else text


def write_complete(directory: str, name: str, data: bytes) -> dict:
    """The checkpoint pattern: create NAME.tmp (exclusive), write, fsync, rename to NAME, fsync the directory.

    {"ok", "step" (the one that failed), "error", "errno", "elapsed_us"}; a half-written NAME.tmp is removed."""
    final, tmp = os.path.join(directory, name), os.path.join(directory, name + ".tmp")
    t0, step = _now_us(), "create"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            step = "write"
            os.write(fd, data)
            step = "fsync"
            os.fsync(fd)
        finally:
            os.close(fd)
        step = "rename"
        os.rename(tmp, final)
        step = "fsync directory"
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.EBADF):  # some filesystems cannot fsync a directory: not a fault
                raise
        finally:
            os.close(dfd)
    except OSError as e:
        if step != "create":
            remove(tmp)
        return {"ok": False, "step": step, "error": why(e), "errno": errno.errorcode.get(e.errno or 0),
                "elapsed_us": _now_us() - t0}
    return {"ok": True, "step": None, "error": None, "errno": None, "elapsed_us": _now_us() - t0}


def read_small(path: str, limit: int = READ_LIMIT) -> Optional[bytes]:
    """A small file's bytes (at most limit), or None when it cannot be opened (absent, a symlink, unreadable).

    open() is what NFS's close-to-open consistency revalidates, so it sees another client's closed file sooner than
    a stat of a cached name would."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def remove(path: str) -> Optional[str]:
    """Unlink path (never follows a link): None when it is gone or was never there, else why it stays."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return why(e)
    return None


def remove_all(directory: str, names: Iterable[str]) -> list:
    """Remove each name (and its .tmp) in directory: ["name: why"] for those that could not be removed."""
    errs = []
    for n in names:
        for x in (n, n + ".tmp"):
            e = remove(os.path.join(directory, x))
            if e is not None and os.path.lexists(os.path.join(directory, x)):
                errs.append(f"{x}: {e}")
    return errs


def throughput(directory: str, name: str, nbytes: int, deadline: float) -> dict:
    """Write nbytes to NAME (fsync'd), drop it from the page cache, read it back, remove it; bounded by deadline.

    {"bytes", "write_us", "read_us", "cache_dropped", "error"}: write_us includes the fsync (what a checkpoint
    waits for); read_us is from the device unless the filesystem keeps the file in memory anyway (tmpfs)."""
    path = os.path.join(directory, name)
    out: dict = {"bytes": 0, "write_us": None, "read_us": None, "cache_dropped": False, "error": None}
    buf = os.urandom(min(CHUNK, max(1, nbytes)))  # random: compressing or deduplicating storage must not flatter us
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as e:
        out["error"] = why(e)
        return out
    try:
        t0 = _now_us()
        while out["bytes"] < nbytes and time.monotonic() < deadline:
            out["bytes"] += os.write(fd, buf[: nbytes - out["bytes"]])
        os.fsync(fd)
        out["write_us"] = max(1, _now_us() - t0)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            out["cache_dropped"] = True
        os.lseek(fd, 0, os.SEEK_SET)
        t0, got = _now_us(), 0
        while got < out["bytes"] and time.monotonic() < deadline:
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            got += len(chunk)
        out["read_us"] = max(1, _now_us() - t0) if got == out["bytes"] else None
        if got != out["bytes"]:
            out["error"] = f"read back {got} of {out['bytes']} bytes before the deadline"
    except OSError as e:
        out["error"] = why(e)
    finally:
        os.close(fd)
        if (e := remove(path)) is not None:
            out["error"] = out["error"] or f"could not remove the probe file: {e}"
    return out
