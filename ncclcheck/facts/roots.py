"""Where sysfs, procfs and /dev live. Tests point these at fake trees; a container with the host's /sys at /host/sys
too."""

from __future__ import annotations

import os


def sysfs_root() -> str:
    return os.environ.get("NCCLCHECK_SYSFS_ROOT") or "/sys"


def procfs_root() -> str:
    return os.environ.get("NCCLCHECK_PROCFS_ROOT") or "/proc"


def devfs_root() -> str:
    """Where /dev is: the kernel log's /dev/kmsg is read there (a fake file in tests)."""
    return os.environ.get("NCCLCHECK_DEVFS_ROOT") or "/dev"


def devfs(*parts: str) -> str:
    return os.path.join(devfs_root(), *parts)


def sysfs(*parts: str) -> str:
    return os.path.join(sysfs_root(), *parts)


def procfs(*parts: str) -> str:
    return os.path.join(procfs_root(), *parts)


def read_bytes(path: str, limit: int = 65536):
    """At most `limit` bytes of a sysfs/procfs file, or None when it is missing or unreadable."""
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except (OSError, ValueError):
        return None


def read_text(path: str, limit: int = 65536):
    """A small sysfs/procfs file as stripped text, or None when it is missing, unreadable or not text."""
    data = read_bytes(path, limit)
    if data is None:
        return None
    try:
        return data.decode("utf-8", "strict").strip()
    except UnicodeDecodeError:
        return None


def read_int(path: str):
    """An integer sysfs attribute (mtu, speed, numa_node), or None when missing or garbage."""
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text.split()[0], 0) if text else None
    except (ValueError, IndexError):
        return None
