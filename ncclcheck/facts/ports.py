"""Who listens on a TCP port of this host: /proc/net/tcp{,6} for the socket, /proc/<pid>/fd for its owner.

Used when node 0 finds the rendezvous port taken, to name the holder (pid and program) instead of joining a store it
did not create. Best-effort: another user's processes are not readable without privileges, so the answer may be
only "a socket owned by uid N", or None.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Optional

from ..model import clean_text
from .roots import procfs_root as proc_root

_LISTEN = "0A"


def _listening_inodes(port: int) -> dict[str, str]:
    """{socket inode: owner uid} of the sockets listening on `port` (IPv4 and IPv6)."""
    out: dict[str, str] = {}
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc_root(), "net", name), encoding="ascii", errors="replace") as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    if len(cols) < 10 or cols[3] != _LISTEN:
                        continue
                    local_port = cols[1].rsplit(":", 1)[-1]
                    if int(local_port, 16) == port:
                        out[cols[9]] = cols[7]
        except (OSError, ValueError):
            continue
    return out


def _program(pid: str) -> str:
    try:
        with open(os.path.join(proc_root(), pid, "cmdline"), "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        argv = []
    # Another user's command line may hold anything: one line, no control characters (the ingestion rule).
    return " ".join(clean_text(" ".join(argv)[:120]).split())


def port_holder(port: int, scan_limit: int = 65536) -> Optional[str]:
    """'pid 1234 (python3 -m http.server 29500)' for the process listening on port, 'uid 1000' when its processes
    are not readable, or None when nothing is found."""
    inodes = _listening_inodes(port)
    return _holder(inodes, scan_limit) if inodes else None


def other_listener(port: int, ours: Iterable[int], scan_limit: int = 65536) -> Optional[str]:
    """Who else listens on `port` than the processes `ours` (their pids): port_holder's words for the first socket
    listening there that is none of theirs, None when every one is theirs. Several sockets may listen on one port
    with SO_REUSEPORT (the kernel spreads connections over them), and the kernel lets any process of the same user
    join such a group: a listener that is not ours gets some of the connections meant for ours."""
    inodes = _listening_inodes(port)
    mine: set = set()
    for pid in ours:
        fd_dir = os.path.join(proc_root(), str(pid), "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                mine.add(link[8:-1])
    others = {i: uid for i, uid in inodes.items() if i not in mine}
    return _holder(others, scan_limit) if others else None


def _holder(inodes: dict[str, str], scan_limit: int) -> str:
    """port_holder's words for the process holding one of these listening sockets ({inode: uid})."""
    want = {f"socket:[{i}]" for i in inodes}
    root = proc_root()
    try:
        pids = [p for p in os.listdir(root) if p.isdigit()][:scan_limit]
    except OSError:
        pids = []
    for pid in pids:
        fd_dir = os.path.join(root, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in want:
                    return f"pid {pid} ({_program(pid)})"
            except OSError:
                continue
    return f"a process of uid {next(iter(inodes.values()))}"
