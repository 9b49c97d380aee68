"""What else the evidence says about a cause's host, for the classes a user cannot act on without it: the socket
interface NCCL was told to use and the interfaces that host has; the network plugins NCCL tried and why each failed.

Interfaces come only from evidence: that host's own NCCL lines (its bootstrap, socket and IB out-of-band interfaces,
a /sys/class/net path it read), a preflight report's facts of that host, or this machine's when diagnose runs on the
host the log names (the caller reads them through facts/). With none of these, the verdict says how to list them
there. Lines and dicts in, a dict out (the host's lines read again through inputs.reread_lines); the words are
render/words.py's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Optional

from ..nccl.debuglog import nccl_header, parse_nccl_debug, split_prefix
from ..nccl.linear import MAX_LINE_CHARS
from ..render import words
from .bound import clip
from .inputs import reread_lines
from .precedence import header_anywhere

MAX_HOST_LINES = 20_000  # of one host's NCCL lines: its init says all this in its first few hundred
MAX_NAMES = 64  # interfaces named in a verdict
_NAME = r"[\w.:@-]{1,32}"
# NCCL echoes the interface setting it read (src/misc/socket.cc: "NCCL_SOCKET_IFNAME set to %s"; others "%s set by
# environment to %s")
_IF_SET = re.compile(r"NCCL_SOCKET_IFNAME set (?:by environment )?to (\S{0,256})")
# ... or the job's own lines set it: a pasted `export NCCL_SOCKET_IFNAME=...`, an env dump ("NCCL_SOCKET_IFNAME:  eth1")
_IF_ASSIGNED = re.compile(r"\bNCCL_SOCKET_IFNAME\s{0,4}[=:]\s{0,8}[\"']?([^\s\"',;]{1,256})")
IB_KINDS = ("ib_completion_error", "ib_flush", "ib_registration", "ib_gid", "ib_async_event", "ib_device", "memlock",
            "dmabuf", "gdr")
_SYS_NET = re.compile(r"/sys/class/net/(" + _NAME + r")/")
_NET_PATH = re.compile(r"network path \(name = (" + _NAME + r")\)")
# src/plugin/net.cc: "Failed to initialize NET plugin %s", "Initialized NET plugin %s"; the IB plugin's reason
_PLUGIN_FAILED = re.compile(r"Failed to initialize NET plugin (\w{1,32})")
_PLUGIN_LOADED = re.compile(r"Initialized NET plugin (\w{1,32})")
_PLUGIN_WHY = re.compile(r"NET/(\w{1,32})\s*:\s*(No device found\.?)")


def host_lines(logs: Iterable, host: str) -> list:
    """The NCCL lines of `host` (their header's host) in the logs read (LogScans: each file read again from its
    start, which the one reading did not keep: only causes of these two classes need it), at most MAX_HOST_LINES."""
    out: list = []
    for log in logs:
        for line in reread_lines(log.source, holding=host):
            line = line[:MAX_LINE_CHARS]
            if host not in line:  # a header naming the host holds its name: the rest of a job's log is passed over
                continue
            head = nccl_header(split_prefix(line)[1]) or header_anywhere(line)
            if head and head["host"] == host:
                out.append(line)
                if len(out) >= MAX_HOST_LINES:
                    return out
    return out


def interfaces_in(lines: list) -> list:
    """Interface names a host's own NCCL lines show it has, first-seen order."""
    parsed = parse_nccl_debug("\n".join(lines))
    names = [i["ifname"] for i in parsed["bootstrap"] + parsed["socket_interfaces"]]
    if parsed.get("ib_oob"):
        names.append(parsed["ib_oob"]["ifname"])
    for line in lines:
        names += _SYS_NET.findall(line) + _NET_PATH.findall(line)
    return list(dict.fromkeys(names))[:MAX_NAMES]


def _preflight_interfaces(preflight: Optional[dict], host: str) -> list:
    for n in (preflight or {}).get("nodes") or []:
        if n.get("hostname", "").split(".")[0] == host.split(".")[0] and n.get("interfaces"):
            return list(n["interfaces"])[:MAX_NAMES]
    return []


def socket_interface(host: str, lines: list, preflight: Optional[dict],
                     here: Optional[Callable[[], Optional[dict]]], logs: Iterable = ()) -> dict:
    """{"text", "fix", "setting", "interfaces", "from"} for "no socket interface found" on `host`: the setting as
    NCCL echoed it on that host, else as the job's own lines assign it."""
    m = next((m for m in map(_IF_SET.search, lines) if m), None) or _assigned(logs)
    setting = clip(m.group(1), 256) if m else None
    names, source = interfaces_in(lines), "nccl"
    if not names:
        names, source = _preflight_interfaces(preflight, host), "preflight"
    if not names and here is not None:
        mine = here()
        if mine and mine.get("host", "").split(".")[0] == host.split(".")[0]:
            names, source = list(mine.get("interfaces") or [])[:MAX_NAMES], "here"
    usable = [n for n in names if n != "lo"]  # NCCL passes over loopback unless asked for it
    text = words.socket_setting(setting, host) + words.interfaces_there(host, names, source if names else None)
    return {"text": text, "fix": words.socket_fix(host, usable), "setting": setting, "interfaces": names,
            "from": source if names else None}


def _assigned(logs: Iterable) -> Optional[re.Match]:
    """The first NCCL_SOCKET_IFNAME assignment any of the logs holds, or None."""
    for log in logs:
        for line in reread_lines(log.source):
            m = _IF_ASSIGNED.search(line[:MAX_LINE_CHARS])
            if m:
                return m
    return None


def ib_ports(host: str, lines: list) -> dict:
    """{"text"} naming the InfiniBand/RoCE ports NCCL said it used on `host` (its "NET/IB : Using" line)."""
    ports = [f"{d['device']}:{d['port']}" for d in parse_nccl_debug("\n".join(lines)).get("ib_devices", [])]
    return {"text": words.ib_ports_used(host, ports) if ports else ""}


def net_plugins(lines: list) -> dict:
    """{"text", "tried": {plugin: why}, "loaded": [plugins]} from a host's NCCL lines."""
    why = {m.group(1): m.group(2).rstrip(".") for m in map(_PLUGIN_WHY.search, lines) if m}
    tried = {m.group(1): f"NET/{m.group(1)} : {why[m.group(1)]}" if m.group(1) in why else ""
             for m in map(_PLUGIN_FAILED.search, lines) if m}
    loaded = list(dict.fromkeys(m.group(1) for m in map(_PLUGIN_LOADED.search, lines) if m))
    return {"text": words.net_plugins_tried(tried, loaded), "tried": tried, "loaded": loaded}


def explain(kind: str, host: Optional[str], logs: Iterable, preflight: Optional[dict],
            here: Optional[Callable[[], Optional[dict]]]) -> Optional[dict]:
    """What the evidence adds to a cause of class `kind` on NCCL's `host`, or None for a class that needs nothing."""
    if host is None or kind not in ("no_socket_interface", "net_plugin", "socket_family", *IB_KINDS):
        return None
    lines = host_lines(logs, host)
    if kind == "no_socket_interface":
        return socket_interface(host, lines, preflight, here, logs)
    if kind in IB_KINDS:
        got = ib_ports(host, lines)
        return got if got["text"] else None
    if kind == "socket_family":
        names = interfaces_in(lines)
        return {"text": words.interfaces_chosen(host, names)} if names else None
    got = net_plugins(lines)
    return got if got["text"] else None
