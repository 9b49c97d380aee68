"""The kernel log's GPU errors: NVIDIA's Xid lines (a GPU's driver reporting a fault) and SXid lines (an NVSwitch's),
within a window of this boot, read from /dev/kmsg or `journalctl -k`, bounded, never a lifetime count.

Which window was read is part of the fact: since boot when the ring buffer still holds the boot's first message (or
the journal has the whole boot), else from the oldest message it still holds; `window_s` narrows it to the last N
seconds. When nothing can be read (dmesg_restrict without CAP_SYSLOG, no journal access) the fact says so and why,
and the check says "could not read", never "no Xid". Lines are matched, counted per (kind, device, code) and the
first and last time kept, so a flood of one Xid costs a few bytes in the facts.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections.abc import Sequence
from typing import Callable, Optional

from .nvml import normal_bus_id
from .roots import devfs, procfs, read_text
from .util import run_cmd

Runner = Callable[[Sequence[str], float], str]
JOURNAL_TIMEOUT_S = 5.0  # journalctl -k -b: a boot's kernel lines from the journal files, read locally
MAX_RECORDS = 400_000  # /dev/kmsg records read at most (a 16 MiB ring buffer holds ~150,000)
MAX_BYTES = 64 << 20  # bytes read at most from /dev/kmsg (a fake file) or journalctl
MAX_RECORD_BYTES = 64 << 10  # of one /dev/kmsg line (the kernel writes records of at most ~8 KiB)
MAX_EVENTS = 64  # distinct (kind, device, code) kept
MAX_TEXT = 240  # characters of a line kept as its example

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus." (older drivers: no "PCI:")
XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\): (\d+)\b")
# "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 44 ..." / "..., Fatal, ..."
SXID_RE = re.compile(r"(nvidia-nvswitch\d*): SXid \((?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
                     r"(?:\.[0-7])?)\): (\d+)\b")
# journalctl -o short-monotonic: "[  123.456789] host kernel: NVRM: ..."
_MONO = re.compile(r"^\s*\[\s*(\d+(?:\.\d+)?)\]\s")


def uptime_s() -> Optional[float]:
    text = read_text(procfs("uptime"))
    try:
        return float(text.split()[0]) if text else None
    except (ValueError, IndexError):
        return None


def match(msg: str) -> Optional[dict]:
    """An Xid or SXid line as {"kind", "bus_id", "code", "fatal"?}; None for any other line."""
    m = XID_RE.search(msg)
    if m:
        return {"kind": "Xid", "bus_id": normal_bus_id(m.group(1)), "code": int(m.group(2))}
    m = SXID_RE.search(msg)
    if m:
        tail = msg[m.end():m.end() + 40].lower()
        return {"kind": "SXid", "bus_id": normal_bus_id(m.group(2)), "code": int(m.group(3)),
                "switch": m.group(1), "fatal": "non-fatal" not in tail and "fatal" in tail}
    return None


class _Events:
    """Matched lines counted per (kind, device, code), with the first and last time (seconds after boot)."""

    def __init__(self, from_s: float) -> None:
        self.from_s = from_s
        self.by_key: dict = {}
        self.lines = 0
        self.dropped = 0

    def add(self, t_s: Optional[float], msg: str) -> None:
        if "Xid" not in msg:
            return
        ev = match(msg)
        if ev is None or (t_s is not None and t_s < self.from_s):
            return
        self.lines += 1
        key = (ev["kind"], ev["bus_id"], ev["code"])
        cur = self.by_key.get(key)
        if cur is None:
            if len(self.by_key) >= MAX_EVENTS:
                self.dropped += 1
                return
            cur = self.by_key[key] = {**ev, "count": 0, "first_s": t_s, "last_s": t_s, "text": msg[:MAX_TEXT]}
        cur["count"] += 1
        cur["last_s"] = t_s
        cur["last_text"] = msg[:MAX_TEXT]

    def out(self) -> list:
        return list(self.by_key.values())


def _dmesg_restrict() -> Optional[int]:
    text = read_text(procfs("sys", "kernel", "dmesg_restrict"))
    return int(text) if text and text.isdigit() else None


def read_kmsg(events: _Events, path: Optional[str] = None) -> dict:
    """Every record of /dev/kmsg ("prio,seq,usec,flags;message", one per read) into `events`. A regular file (a
    test's) is read as lines of that form. {"readable", "reason", "oldest_s", "wrapped"}."""
    path = path or devfs("kmsg")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        why = e.strerror or str(e)
        if e.errno in (errno.EPERM, errno.EACCES):
            restrict = _dmesg_restrict()
            why = (f"{path}: {why} (kernel.dmesg_restrict = {restrict}: reading the kernel log needs root or "
                   "CAP_SYSLOG)" if restrict else f"{path}: {why}")
        else:
            why = f"{path}: {why}"
        return {"readable": False, "reason": why}
    oldest, first_seq, nread, nbytes, pending, skipping = None, None, 0, 0, b"", False
    try:
        while nread < MAX_RECORDS and nbytes < MAX_BYTES:
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                break  # the end of the ring buffer
            except OSError as e:
                if e.errno == errno.EPIPE:
                    continue  # records overwritten while reading: the next read resumes at the oldest kept
                if e.errno == errno.EINVAL and nread == 0:
                    return {"readable": False, "reason": f"{path}: {e.strerror or e}"}
                break
            if not chunk:
                break  # end of a regular file
            nbytes += len(chunk)
            if skipping:  # the rest of a line longer than any record: up to its end, not kept
                nl = chunk.find(b"\n")
                if nl < 0:
                    continue
                chunk, skipping = chunk[nl:], False
            data = pending + chunk
            lines = data.split(b"\n")
            pending = lines.pop()
            if len(pending) > MAX_RECORD_BYTES:  # kept whole, a line without end made each read copy all of it
                pending, skipping = pending[:MAX_RECORD_BYTES], True
            for raw in lines:
                if not raw or raw[:1] == b" ":
                    continue  # a record's dictionary lines (" SUBSYSTEM=pci") follow it, indented
                nread += 1
                head, sep, msg = raw.partition(b";")
                if not sep:
                    continue
                fields = head.split(b",")
                try:
                    seq, t_s = int(fields[1]), int(fields[2]) / 1e6
                except (IndexError, ValueError):
                    continue
                if first_seq is None:
                    first_seq, oldest = seq, t_s
                events.add(t_s, msg.decode("utf-8", "replace"))
    finally:
        os.close(fd)
    if first_seq is None:  # nothing read is not "no Xid": a container may link /dev/kmsg to /dev/null or a console
        return {"readable": False, "reason": f"{path} gave no kernel log record (read {nbytes:,} bytes: not the "
                                             "kernel's log, e.g. /dev/null or a console in a container)"}
    return {"readable": True, "reason": None, "oldest_s": oldest, "wrapped": bool(first_seq)}


def read_journal(events: _Events, run: Runner) -> dict:
    """This boot's kernel messages from the journal (`journalctl -k -b 0 -o short-monotonic`): the whole boot even
    when the ring buffer has wrapped. A user without access to the system journal gets no kernel line at all and
    exit 0, so "no line" is "not readable", never "no Xid"."""
    try:
        out = run(["journalctl", "-k", "-b", "0", "-o", "short-monotonic", "--no-pager", "-q"], JOURNAL_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - RuntimeError from run_cmd: not installed, timed out, failed
        return {"readable": False, "reason": f"journalctl -k: {e}"}
    lines = out[:MAX_BYTES].splitlines()
    if not lines:
        return {"readable": False, "reason": "journalctl -k shows no kernel message of this boot (no access to the "
                                             "system journal: root, or the systemd-journal or adm group)"}
    oldest = None
    for line in lines:
        m = _MONO.match(line)
        t_s = float(m.group(1)) if m else None
        if oldest is None and t_s is not None:
            oldest = t_s
        events.add(t_s, line)
    return {"readable": True, "reason": None, "oldest_s": oldest, "wrapped": False}


# The boot's first message is stamped within this many seconds of boot: a log whose oldest message is later lost
# its start (the ring buffer wrapped) and covers "since its oldest message", not "since boot".
BOOT_MESSAGE_S = 60.0


def collect(window_s: Optional[float] = None, run: Optional[Runner] = None,
            which: Optional[Callable[[str], Optional[str]]] = None, kmsg_path: Optional[str] = None) -> dict:
    """This boot's Xid/SXid events within the window (None: since boot), and which window was actually read."""
    run = run or (lambda argv, t: run_cmd(argv, t))
    which = which or shutil.which
    up = uptime_s()
    from_s = max(0.0, up - window_s) if (window_s is not None and up is not None) else 0.0
    asked = {"hours": None if window_s is None else window_s / 3600, "from_s": from_s, "uptime_s": up}
    events = _Events(from_s)
    got = read_kmsg(events, kmsg_path)
    source = "/dev/kmsg"
    lost_start = got.get("readable") and got.get("wrapped") and (got.get("oldest_s") or 0) > max(from_s,
                                                                                                BOOT_MESSAGE_S)
    if (not got["readable"] or lost_start) and which("journalctl") is not None:
        jevents = _Events(from_s)
        j = read_journal(jevents, run)
        if j["readable"]:
            events, got, source = jevents, j, "journalctl -k"
        elif not got["readable"]:
            got = {**got, "reason": f"{got['reason']}; {j['reason']}"}
    if not got["readable"]:
        return {"readable": False, "source": None, "reason": got["reason"], "window": asked, "events": []}
    oldest = got.get("oldest_s")
    covers_from = from_s
    partial = None
    if oldest is not None and oldest > max(from_s, BOOT_MESSAGE_S):
        covers_from = oldest
        partial = (f"the log's oldest message is {oldest:.0f} s after boot (older ones were overwritten): the "
                   "window starts there")
    return {"readable": True, "source": source, "reason": partial, "window": asked, "covers_from_s": covers_from,
            "events": events.out(), "lines": events.lines, "dropped": events.dropped}


__all__ = ["collect", "match", "read_journal", "read_kmsg", "uptime_s"]
