"""IMEX on a node of a multi-node NVLink domain (GB200/GB300 NVL72): the channels a process imports GPU memory of
other trays through, and the IMEX daemon's view of its domain. Read-only: a directory listing and one query.

NCCL's multi-node NVLink (MNNVL) shares GPU memory across trays as CUDA fabric handles, which a process can import
only through an IMEX channel (`/dev/nvidia-caps-imex-channels/channelN`, a character device whose major the kernel
lists as `nvidia-caps-imex-channels` in /proc/devices), served by the `nvidia-imex` daemon of every tray of the
domain. A container sees a channel only when it is passed in (docker `--device`, a Kubernetes ComputeDomain).

The fact ({"channels", "major", "daemon"}):
- channels: the channel names under /dev/nvidia-caps-imex-channels that are character devices ([] when the directory
  is there but holds none), None when the directory is not there;
- major: whether /proc/devices lists the channels' driver (the driver was loaded with IMEX channel support);
- daemon: `nvidia-imex-ctl -N` read: {"domain_state": "UP" | "DEGRADED" | "DOWN" | as printed, "nodes": [{"index",
  "addr", "state"}], "not_connected": [[from, to, letter], ...]}; {"unavailable": why} when it did not answer.

`nvidia-imex-ctl -N` prints (NVIDIA's IMEX guide, "The nvidia-imex-ctl Tool"; captures posted in public repositories:
NVIDIA's k8s-dra-driver-gpu issue threads, AWS ParallelCluster's GB200 tests) a legend of connection letters (C
connected, N never connected, R recovering, D disconnected, A authenticating, I invalid), a timestamp, `Nodes:` with
one `Node #<i> - <address> - <STATE>` line per node of the domain (READY when its daemon serves), a `Nodes From\\To`
matrix of those letters, and `Domain State: UP` (every node READY and connected), `DEGRADED` (some are not) or
another word.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Callable, Optional

from .roots import devfs, procfs, read_bytes
from .util import TOOL_S

CHANNEL_DIR = "nvidia-caps-imex-channels"
CTL = "nvidia-imex-ctl"
MAX_CHANNELS = 64  # names kept (the driver creates up to 2,048; a job uses channel0)
MAX_NODES = 1024  # node lines kept (an NVL72 domain has 18 trays; NVL576 144)
MAX_NOT_CONNECTED = 64  # matrix cells other than C kept (then counted)
MAX_WORD = 32

_NODE = re.compile(r"^\s*Node\s*#\s*(\d{1,5})\s*-\s*(\S{1,64})\s*-\s*([A-Za-z_ ]{1,32}?)\s*$")
_DOMAIN = re.compile(r"^\s*Domain State:\s*([A-Za-z_]{1,32})\s*$")
_HEADER = re.compile(r"^\s*Nodes From\\To\s+([\d\s]+)$")
_ROW = re.compile(r"^\s*(\d{1,5})\s+((?:[A-Z]\s*){1,2048})$")


def channels() -> Optional[list]:
    """The channel names that are character devices, [] for a directory without any, None without the directory."""
    root = devfs(CHANNEL_DIR)
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return None
    out = []
    for n in names:
        try:
            if stat.S_ISCHR(os.stat(os.path.join(root, n)).st_mode):
                out.append(n[:MAX_WORD])
        except OSError:
            continue
        if len(out) >= MAX_CHANNELS:
            break
    return out


def driver_has_channels() -> bool:
    text = read_bytes(procfs("devices")) or b""
    return any(line.split()[-1:] == [CHANNEL_DIR.encode()] for line in text.splitlines())


def parse_domain(text: str) -> dict:
    """`nvidia-imex-ctl -N`'s text read into the daemon fact (see the module's docstring)."""
    out: dict = {"domain_state": None, "nodes": [], "not_connected": [], "not_connected_n": 0}
    cols: list = []
    for line in text.splitlines():
        if m := _DOMAIN.match(line):
            out["domain_state"] = m.group(1).upper()
        elif m := _NODE.match(line):
            if len(out["nodes"]) < MAX_NODES:
                out["nodes"].append({"index": int(m.group(1)), "addr": m.group(2),
                                     "state": m.group(3).strip().upper().replace(" ", "_")})
        elif m := _HEADER.match(line):
            cols = [int(c) for c in m.group(1).split()]
        elif cols and (m := _ROW.match(line)):
            for to, letter in zip(cols, m.group(2).split()):
                if letter != "C":
                    out["not_connected_n"] += 1
                    if len(out["not_connected"]) < MAX_NOT_CONNECTED:
                        out["not_connected"].append([int(m.group(1)), to, letter])
    return out


def domains(gpus: list) -> list:
    """The multi-node NVLink domains (fabric cluster UUIDs other than all zeros) the GPUs are trained into, sorted."""
    out = set()
    for g in gpus:
        u = (g.get("fabric") or {}).get("cluster_uuid") if isinstance(g, dict) else None
        if isinstance(u, str) and u.strip("0-"):
            out.add(u)
    return sorted(out)


def collect(run: Callable, which: Callable[[str], Optional[str]]) -> dict:
    """The IMEX fact of this node (asked only on a node whose GPUs are in a multi-node NVLink domain)."""
    out: dict = {"channels": channels(), "major": driver_has_channels(), "daemon": None}
    if which(CTL) is None:
        out["daemon"] = {"unavailable": f"{CTL} is not installed (or not on PATH)"}
        return out
    try:
        text = run([CTL, "-N"], TOOL_S)  # one query of the local daemon's command service: milliseconds when it serves
    except RuntimeError as e:
        out["daemon"] = {"unavailable": str(e)[:300]}
        return out
    got = parse_domain(str(text))
    out["daemon"] = got if got["domain_state"] or got["nodes"] else {
        "unavailable": f"{CTL} -N printed no domain state ({len(str(text))} bytes)"}
    return out
