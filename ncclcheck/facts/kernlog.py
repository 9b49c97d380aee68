"""The kernel log's GPU faults: NVIDIA's Xid lines (a GPU's driver reporting a fault), SXid lines (an NVSwitch's) and
the driver's other fault lines (a GPU fallen off the bus at probe, a probe or an initialisation that failed, "reset
required", "GPU lost"), within a window of this boot, read from /dev/kmsg or `journalctl -k`, bounded, never a
lifetime count.

Which window was read is part of the fact: since boot when the ring buffer still holds the boot's first message (or
the journal has the whole boot), else from the oldest message it still holds; `window_s` narrows it to the last N
seconds. When nothing can be read (dmesg_restrict without CAP_SYSLOG, no journal access) the fact says so and why,
and the check says "could not read", never "no Xid". Lines are matched, counted per (kind, device, code) and the
first and last time kept, so a flood of one Xid costs a few bytes in the facts. Which action each line calls for is
the checks' (checks/xid.py); this module only says what a line is.
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
# Characters of a line that are matched: a kernel record is at most ~1 KiB (printk's line limit), so a longer line
# is no driver line and the patterns never pay for its length.
MAX_MATCH = 2048
MAX_CAUSES = 8  # distinct "caused by previous Xid N" kept per Xid event

_BUS = r"(?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus." (older drivers: no "PCI:";
# a MIG GPU instance adds " GPU-I:05" and " GPU-CI:01": kernel_rc.c XID_PRINT_WITH_ATTR, open-gpu-kernel-modules)
XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?" + _BUS + r"(?: GPU-I:\d+)?(?: GPU-CI:\d+)?\): (\d+)\b")
# Xid 45's root cause, from driver 570.124.04 on: kernel_rc.c appends " caused by previous Xid %d" when the GSP names
# it (the Xid 45 lines an operator posted in NVIDIA/open-gpu-kernel-modules#1150 end so). Older drivers print none.
CAUSE_RE = re.compile(r" caused by previous Xid (\d+)\b")
# Blackwell's NVLink5 Xids (144-150) state the unit, the severity and the link in the line itself, right after the
# code: "NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 ...)" (operators'
# lines in leptonai/gpud#1174 and NVIDIA/nccl#2241), "149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (...)" (gpud#1160),
# "149, NETIR Fatal XC0 i0 Link -1 (...)" (gpud#1174: -1 names no one link). The word is the severity of the row of
# NVIDIA's Xid catalogue ("XID 144-150 Decode") the event fell in, so the line says which action it calls for.
XID_STATED_RE = re.compile(r",\s*(?P<unit>[A-Z][A-Z0-9_/]*) (?P<sev>Nonfatal|Non-fatal|Fatal)\b(?: XC\d+ i\d+)?"
                           r"(?: Link (?P<link>-?\d+))?")
_XID_SEVERITY_RANK = {None: 0, "nonfatal": 1, "non-fatal": 1, "fatal": 2}
MAX_LINKS = 18  # distinct NVLink links kept per event (a Blackwell GPU has 18)
# "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 44 ..." (common_nvswitch.h NVSWITCH_PRINT_SXID:
# "nvidia-%s: SXid (PCI:...): %05d, " then the report's own text)
SXID_RE = re.compile(r"(nvidia-nvswitch\d*): SXid \((?:PCI:)?" + _BUS + r"\): (\d+)\b,? ?")
# The first word of an SXid's text, where the driver states it (error_nvswitch.h / intr_nvswitch.h: "Fatal, ...",
# "Non-fatal, ...", "Correctable, ..."); thermal, SOE and cable reports state none.
SXID_SEVERITY = (("Fatal,", "fatal"), ("Non-fatal,", "non-fatal"), ("Correctable,", "correctable"))
# One SXid event's follow-on lines (error_nvswitch.c _nvswitch_dump_error_entry: "Severity %d Engine instance %02d
# Sub-engine instance %02d", then one or two "Data {0x..., ...}"): the same event, never counted again. Their
# "Severity N" is a number whose meaning changed between drivers (0/1 in today's enum; operators' logs show 5), so it
# is kept as a value and never read as fatal or non-fatal.
SXID_FOLLOW = ("Severity ", "Data {")
_SEVERITY_N = re.compile(r"Severity (\d+)")

# The driver's fault lines beyond Xid, one row each: (name, needle, pattern). The pattern is the driver's format string
# (cited from NVIDIA/open-gpu-kernel-modules, or the kernel's for a failed probe); its group "bus", where it has one,
# is the GPU's bus id; the needle, a plain substring of it, keeps the pattern off every other line. What each means
# and the action it calls for are checks/xid.py's NVRM table, keyed by the same names.
NVRM_LINES = (
    # osinit.c osHandleGpuLost: NV_DEV_PRINTF(..., "GPU has fallen off the bus.\n"), "NVRM: GPU %04x:%02x:%02x.%x: "
    # first (os-interface.h NV_DEV_PRINTF); it follows the Xid 79 line of the same GPU. Drivers before R515 print
    # "NVRM: GPU at 0000:01:00.0 has fallen off the bus." (operators' posted logs of those drivers)
    ("fallen_off_bus", "has fallen off the bus",
     re.compile(r"NVRM: GPU (?:at )?" + _BUS + r"(?:: GPU)? has fallen off the bus")),
    # osapi.c, at probe, before any Xid: "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\n" "NVRM: (PCI ID: %04x:%04x)
    # installed in this system has\n" "NVRM: fallen off the bus and is not responding to commands.\n": one record of
    # three lines (NVIDIA/NVSentinel#155, leptonai/gpud#1209); its bus id is on the first (_GPU_HEAD)
    ("fallen_off_bus_at_probe", "not responding to commands",
     re.compile(r"NVRM: fallen off the bus and is not responding to commands")),
    # nv.c: "NVRM: The NVIDIA probe routine failed for %d device(s).\n" (no bus id: the node's)
    ("probe_failed", "probe routine failed", re.compile(r"NVRM: The NVIDIA probe routine failed for (?P<devices>\d+) "
                                                        r"device")),
    # the kernel's drivers/base/dd.c for the same failure, by bus id: dev_err "probe with driver %s failed with error
    # %d" (newer kernels), pr_warn "%s: probe of %s failed with error %d" (older ones)
    ("probe_failed", "probe with driver nvidia failed",
     re.compile(r"\bnvidia " + _BUS + r": probe with driver nvidia failed with error")),
    ("probe_failed", "nvidia: probe of", re.compile(r"\bnvidia: probe of " + _BUS + r" failed with error")),
    # osinit.c RmInitAdapter: NV_DEV_PRINTF(..., "RmInitAdapter failed! (0x%x:0x%x:%d)\n") (R515 and later); older
    # drivers print it with no bus id (operators' logs: NVIDIA/gpu-operator#1146 and #649, open-gpu-kernel-modules#789)
    ("init_failed", "RmInitAdapter failed!", re.compile(r"NVRM: (?:GPU " + _BUS + r": )?RmInitAdapter failed!")),
    # nvassert.c "Assertion failed: %s (0x%08X) returned from ..." / "Check failed: %s ...", %s being nvstatus.c's
    # "<text> [<NAME>]": "Reset required [NV_ERR_RESET_REQUIRED]", "GPU lost from the bus [NV_ERR_GPU_IS_LOST]". The
    # brackets tell a returned status from an asserted expression naming the same code ("status == NV_ERR_...").
    ("reset_required", "[NV_ERR_RESET_REQUIRED]", re.compile(r"\[NV_ERR_RESET_REQUIRED\]")),
    ("gpu_lost", "[NV_ERR_GPU_IS_LOST]", re.compile(r"\[NV_ERR_GPU_IS_LOST\]")),
    # kernel_gsp.c: "NVRM: Rate limiting GSP RPC error prints for GPU at PCI:%04x:%02x:%02x (printing 1 of every %d).
    # The GPU likely needs to be reset."
    ("gsp_rpc_errors", "Rate limiting GSP RPC error prints",
     re.compile(r"NVRM: Rate limiting GSP RPC error prints for GPU at PCI:" + _BUS)),
)
# The first line of the three-line "fallen off the bus" record (osapi.c, above): "NVRM: The NVIDIA GPU 0000:b3:00.0"
_GPU_HEAD = re.compile(r"NVRM: The NVIDIA GPU " + _BUS)
_HEAD_LINES = 3  # a remembered first line names the GPU of the record's next lines only
# A /dev/kmsg record escapes a newline inside it as "\x0a"; the journal prints each on its own line
_SPLIT = re.compile(r"\\x0a|\n")
# journalctl -o short-monotonic: "[  123.456789] host kernel: NVRM: ..."
_MONO = re.compile(r"^\s*\[\s*(\d+(?:\.\d+)?)\]\s")


def uptime_s() -> Optional[float]:
    text = read_text(procfs("uptime"))
    try:
        return float(text.split()[0]) if text else None
    except (ValueError, IndexError):
        return None


def _sxid(m: re.Match, msg: str) -> dict:
    tail = msg[m.end():m.end() + 16]
    sev = next((word for lead, word in SXID_SEVERITY if tail.startswith(lead)), None)
    ev = {"kind": "SXid", "bus_id": normal_bus_id(m.group(2)), "code": int(m.group(3)), "switch": m.group(1),
          "severity": sev}
    if tail.startswith(SXID_FOLLOW):
        ev["follow_on"] = True
        n = _SEVERITY_N.match(tail)
        if n:
            ev["severity_field"] = int(n.group(1))
    return ev


def match(msg: str) -> Optional[dict]:
    """One line as {"kind", "bus_id", "code", ...}: an Xid ("caused_by" where the driver names Xid 45's cause;
    "severity", "unit" and "link" where the line states them, as Blackwell's NVLink Xids do), an
    SXid ("severity" as the line states it, else None; "follow_on" for an event's Severity/Data lines) or one of the
    driver's other fault lines (kind "NVRM", code a name of NVRM_LINES, bus_id None where the line names no GPU);
    None for any other line."""
    msg = msg[:MAX_MATCH]
    m = XID_RE.search(msg) if "Xid (" in msg else None
    if m:
        ev = {"kind": "Xid", "bus_id": normal_bus_id(m.group(1)), "code": int(m.group(2))}
        cause = CAUSE_RE.search(msg, m.end()) if ev["code"] == 45 else None  # kernel_rc.c adds it to Xid 45 only
        if cause:
            ev["caused_by"] = int(cause.group(1))
        stated = XID_STATED_RE.match(msg, m.end())
        if stated:
            ev["severity"], ev["unit"] = stated.group("sev"), stated.group("unit")  # the driver's words, as printed
            if stated.group("link") is not None and int(stated.group("link")) >= 0:
                ev["link"] = int(stated.group("link"))
        return ev
    m = SXID_RE.search(msg) if "SXid (" in msg else None
    if m:
        return _sxid(m, msg)
    if "NVRM" not in msg and "nvidia" not in msg:
        return None
    for name, needle, pattern in NVRM_LINES:
        m = pattern.search(msg) if needle in msg else None
        if m:
            got = m.groupdict()
            ev = {"kind": "NVRM", "bus_id": normal_bus_id(got.get("bus")), "code": name}
            if got.get("devices"):
                ev["devices"] = int(got["devices"])
            return ev
    return None


_SEVERITY_RANK = {None: 0, "correctable": 1, "non-fatal": 2, "fatal": 3}


class _Events:
    """Matched lines counted per (kind, device, code), with the first and last time (seconds after boot). An SXid's
    follow-on lines join its event; the first line of the driver's three-line "fallen off the bus" record is
    remembered for the two lines after it, which name no GPU themselves."""

    def __init__(self, from_s: float) -> None:
        self.from_s = from_s
        self.by_key: dict = {}
        self.lines = 0
        self.dropped = 0
        self._head: Optional[tuple] = None  # (bus id, t_s, lines left, line) of "NVRM: The NVIDIA GPU <bus>"

    def add(self, t_s: Optional[float], msg: str) -> None:
        msg = msg[:MAX_MATCH]  # every scan below is bounded by a record's length, however long the line
        if "NVRM" not in msg and "nvidia" not in msg:
            self._head = None
            return
        for part in _SPLIT.split(msg) if ("\\x0a" in msg or "\n" in msg) else (msg,):
            self._add_line(t_s, part)

    def _add_line(self, t_s: Optional[float], msg: str) -> None:
        head, self._head = self._head, None
        m = _GPU_HEAD.search(msg) if "The NVIDIA GPU" in msg else None
        if m:
            self._head = (normal_bus_id(m.group("bus")), t_s, _HEAD_LINES - 1, msg)
        elif head is not None and head[2] > 1:
            self._head = (head[0], head[1], head[2] - 1, head[3])
        ev = match(msg)
        if ev is None:
            return
        if ev["kind"] == "NVRM" and ev["code"] == "fallen_off_bus_at_probe" and head is not None:
            ev["bus_id"] = ev["bus_id"] or head[0]
            t_s = head[1] if t_s is None else t_s
            msg = f"{head[3].strip()} / {msg.strip()}"  # the example names the GPU, as the record does
        if t_s is not None and t_s < self.from_s:
            return
        key = (ev["kind"], ev["bus_id"], ev["code"])
        cur = self.by_key.get(key)
        if ev.get("follow_on") and cur is not None:
            # part of the event already counted: it adds what it says, never a count
            if "severity_field" in ev:
                cur["severity_field"] = ev["severity_field"]
            return
        self.lines += 1
        if cur is None:
            if len(self.by_key) >= MAX_EVENTS:
                self.dropped += 1
                return
            ev.pop("follow_on", None)
            cur = self.by_key[key] = {**ev, "count": 0, "first_s": t_s, "last_s": t_s, "text": msg[:MAX_TEXT]}
            cur.pop("caused_by", None)
            if ev["kind"] == "Xid":  # what its lines state is gathered over them below
                for k in ("link", "severity", "unit"):
                    cur.pop(k, None)
        cur["count"] += 1
        cur["last_s"] = t_s
        cur["last_text"] = msg[:MAX_TEXT]
        if ev["kind"] == "SXid" and _SEVERITY_RANK[ev.get("severity")] > _SEVERITY_RANK[cur.get("severity")]:
            cur["severity"] = ev["severity"]  # the line that states it; the worst stated when lines differ
        if ev["kind"] == "Xid" and ev.get("severity"):
            self._xid_stated(cur, ev, msg)
        if "caused_by" in ev:
            causes = cur.setdefault("caused_by", [])
            if ev["caused_by"] not in causes and len(causes) < MAX_CAUSES:
                causes.append(ev["caused_by"])
        if "devices" in ev:
            cur["devices"] = max(cur.get("devices") or 0, ev["devices"])

    @staticmethod
    def _xid_stated(cur: dict, ev: dict, msg: str) -> None:
        """What an Xid line states of itself (severity, unit, link), gathered over the event: the lines per severity
        word, the worst word with the line that said it (so a fatal line among nonfatal ones is the one shown), the
        distinct links."""
        sev = ev["severity"]
        by = cur.setdefault("by_severity", {})
        by[sev] = by.get(sev, 0) + 1
        rank = _XID_SEVERITY_RANK.get
        if rank(sev.lower(), 0) > rank((cur.get("severity") or "").lower() or None, 0):
            cur["severity"], cur["unit"], cur["severity_text"] = sev, ev.get("unit"), msg[:MAX_TEXT]
        if "link" in ev:
            links = cur.setdefault("links", [])
            if ev["link"] not in links and len(links) < MAX_LINKS:
                links.append(ev["link"])

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
    """This boot's Xid, SXid and driver fault events within the window (None: since boot), and which window was
    actually read."""
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
