"""NCCL's debug output read as data: the NCCL_DEBUG=INFO parser (interfaces, transports, version, warnings) and the
prefixes launchers put before each line (torchrun `[rank3]:`, `srun --label` `3: `, `mpirun --tag-output`
`[1,3]<stderr>:`), so one combined launcher output splits back into ranks. Pure: text in, dicts out; tested on real
log lines (NVIDIA/nccl issue threads and our own captures).
"""

from __future__ import annotations

import os
import re
from typing import Optional

_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+(\S+))?")
# "Bootstrap : Using eth0:10.10.6.118<0>", older "Bootstrap : Using [0]eth0:172.17.0.2<0>", IPv6 "ib0:fe80::1%ib0<0>"
_BOOTSTRAP = re.compile(r"Bootstrap\s*:\s*Using\s+(?:\[\d+\])?([^:\s\[]+):(\S+?)<\d+>")
_SOCKET_LINE = re.compile(r"NET/Socket\s*:\s*Using\s+(.*)")
_IF_ITEM = re.compile(r"\[(\d+)\]([^:\s\[]+):(\S+?)<\d+>")
_IB_LINE = re.compile(r"NET/IB\s*:\s*Using\s+(.*)")
_IB_ITEM = re.compile(r"\[(\d+)\]([\w.-]+):(\d+)/(IB|RoCE)")
_OOB = re.compile(r"OOB\s+([^:\s]+):(\S+?)<\d+>")
_IB_NONE = re.compile(r"NET/IB\s*:\s*No device found")
_NETWORK = re.compile(r"Using network (\S+(?: \S+)?)\s*$")
_VIA = re.compile(r"Channel (\d+)(?:/(\d+))?\s*:\s*(\d+)\[[^\]]*\]\s*->\s*(\d+)\[[^\]]*\](?:\s*\[(send|receive)\])?"
                  r"\s*via\s+(\S+)")
_COLL_CHANNELS = re.compile(r"(\d+) coll channels")
_ENV = re.compile(r"(NCCL_\w+) set by environment to (\S*)")
_WARN = re.compile(r"NCCL WARN (.*)")
_INIT_COMPLETE = re.compile(r"rank (\d+) nranks (\d+) .*Init COMPLETE", re.IGNORECASE)


def _transport_kind(via: str) -> str:
    """'NET/IB/0/GDRDMA' -> 'NET/IB', 'P2P/IPC/read' -> 'P2P', 'SHM/direct/direct' -> 'SHM'."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return f"NET/{parts[1]}"
    return parts[0]


def _empty_parse() -> dict:
    return {
        "version": None, "cuda": None, "bootstrap": [], "socket_interfaces": [], "ib_devices": [], "ib_oob": None,
        "ib_no_device": False, "network": None, "transports": {}, "via": {}, "gdrdma": False,
        "net_transport": None, "channels": None, "coll_channels": None, "env": {}, "warnings": [], "nranks": None,
    }


def _add_unique(out: dict, field: str, seen: set, key: tuple, value: dict) -> None:
    # Every rank logs the same interfaces: keep each once, in first-seen order.
    if key not in seen:
        seen.add(key)
        out[field].append(value)


def _on_version(line: str, out: dict, st: dict) -> None:
    m = _VERSION.search(line)
    if m and out["version"] is None:
        out["version"], out["cuda"] = m.group(1), m.group(2)


def _on_bootstrap(line: str, out: dict, st: dict) -> None:
    m = _BOOTSTRAP.search(line)
    if m:
        _add_unique(out, "bootstrap", st["boot"], m.groups(), {"ifname": m.group(1), "addr": m.group(2)})


def _on_socket(line: str, out: dict, st: dict) -> None:
    m = _SOCKET_LINE.search(line)
    for _, ifname, addr in _IF_ITEM.findall(m.group(1)) if m else ():
        _add_unique(out, "socket_interfaces", st["sock"], (ifname, addr), {"ifname": ifname, "addr": addr})


def _on_ib(line: str, out: dict, st: dict) -> None:
    if _IB_NONE.search(line):
        out["ib_no_device"] = True
    m = _IB_LINE.search(line)
    if not m:
        return
    for _, dev, port, ll in _IB_ITEM.findall(m.group(1)):
        _add_unique(out, "ib_devices", st["ib"], (dev, port), {"device": dev, "port": int(port), "link_layer": ll})
    o = _OOB.search(m.group(1))
    if o and out["ib_oob"] is None:
        out["ib_oob"] = {"ifname": o.group(1), "addr": o.group(2)}


def _on_channel(line: str, out: dict, st: dict) -> None:
    m = _VIA.search(line)
    if not m:
        return
    st["channels"].add(int(m.group(1)))
    via = m.group(6)
    out["via"][via] = out["via"].get(via, 0) + 1
    kind = _transport_kind(via)
    out["transports"][kind] = out["transports"].get(kind, 0) + 1
    out["gdrdma"] = out["gdrdma"] or "GDRDMA" in via


def _on_scalars(line: str, out: dict, st: dict) -> None:
    """One-value lines: the network in use, collective channels, NCCL_* echoed back, warnings, the rank count."""
    if m := _NETWORK.search(line):
        out["network"] = m.group(1).strip()
    if m := _COLL_CHANNELS.search(line):
        out["coll_channels"] = max(int(m.group(1)), out["coll_channels"] or 0)
    if m := _ENV.search(line):
        out["env"][m.group(1)] = m.group(2).rstrip(".")
    if (m := _WARN.search(line)) and len(out["warnings"]) < 20:
        out["warnings"].append(m.group(1).strip())
    if m := _INIT_COMPLETE.search(line):
        out["nranks"] = int(m.group(2))


_LINE_PARSERS = (_on_version, _on_bootstrap, _on_socket, _on_ib, _on_channel, _on_scalars)


def parse_nccl_debug(text: str) -> dict:
    """Facts from NCCL INFO output (one or many ranks' lines):

    version, cuda (the "+cuda12.4" tail), bootstrap [{ifname, addr}], socket_interfaces [{ifname, addr}],
    ib_devices [{device, port, link_layer}], ib_oob {ifname, addr}, ib_no_device, network ("IB", "Socket" or a
    plugin's name), transports {"NET/IB": n_connections, "P2P": n, ...}, via {"NET/IB/0/GDRDMA": n, ...}, gdrdma,
    net_transport ("IB" | "Socket" | plugin | None when no inter-node connection was logged), channels,
    coll_channels, env {NCCL_X: value}, warnings [text], nranks.
    """
    out = _empty_parse()
    state: dict = {"boot": set(), "sock": set(), "ib": set(), "channels": set()}
    for line in (text or "").splitlines():
        for parse in _LINE_PARSERS:
            parse(line, out, state)
    out["channels"] = (max(state["channels"]) + 1) if state["channels"] else None
    nets = [k for k in out["transports"] if k.startswith("NET/")]
    if nets:
        kinds = [k.split("/", 1)[1] for k in nets]
        out["net_transport"] = "IB" if "IB" in kinds else kinds[0]
    return out



_LINE_HOST = re.compile(r"^(?:\[[^\]\n]{0,64}\d\d:\d\d:\d\d[^\]\n]{0,32}\] ?)?([\w.-]+):\d+:\d+ \[\d+\] NCCL",
                        re.M)


def capture_host(path: str, text: str) -> Optional[str]:
    """The host a saved NCCL_DEBUG capture came from: its lines' `host:pid:tid` prefix, else an nccl.<host>.<pid>
    file name."""
    m = _LINE_HOST.search(text or "")
    if m:
        return m.group(1)
    parts = os.path.basename(path).split(".")
    return parts[1] if len(parts) >= 3 and parts[0] == "nccl" else None


# ---------------------------------------------------------------------------------------------------------------
# launchers' line prefixes: which rank wrote a line of a combined output

# torchrun's `[rank3]:` (torch's own per-rank prefix of a worker's stderr), mpirun --tag-output `[1,3]<stderr>:`
# (job id, rank), srun --label `3: ` (Slurm pads the number: ` 3: ` with 10+ tasks). torchrun --tee's `[default3]:`
# names a LOCAL rank (its role name + local rank), so it is not read as a global rank.
_PREFIXES = (
    re.compile(r"^\[rank(\d+)\]:\s?"),
    re.compile(r"^\[\d+,(\d+)\]<(?:stdout|stderr)>:\s?"),
    re.compile(r"^\s*(\d+): "),
)
# NCCL's own line header: "host:pid:tid [cudaDev] NCCL ..." (the device is the local GPU index), after the timestamp
# NCCL puts before WARN lines by default (src/debug.cc: NCCL_DEBUG_TIMESTAMP_LEVELS defaults to WARN, the format
# NCCL_DEBUG_TIMESTAMP_FORMAT to "[%F %T] ")
_TS = r"(?:\[[^\]\n]{0,64}\d\d:\d\d:\d\d[^\]\n]{0,32}\] ?)?"
_NCCL_HEADER = re.compile(r"^" + _TS + r"([\w.-]+):(\d+):(\d+) \[(\d+)\] ")
_INIT_RANK = re.compile(r"\bcomm 0x[0-9a-f]+ rank (\d+) nRanks (\d+)", re.IGNORECASE)


def split_prefix(line: str) -> tuple[Optional[int], str]:
    """(rank the launcher's prefix names, the line without it); (None, line) when it has none."""
    for pat in _PREFIXES:
        m = pat.match(line)
        if m:
            return int(m.group(1)), line[m.end():]
    return None, line


def nccl_header(line: str) -> Optional[dict]:
    """{host, pid, cuda_dev} from an NCCL line's header, or None."""
    m = _NCCL_HEADER.match(line)
    return {"host": m.group(1), "pid": int(m.group(2)), "cuda_dev": int(m.group(4))} if m else None


def rank_of_line(line: str) -> Optional[int]:
    """The global rank an NCCL init line states ("comm 0x.. rank 5 nRanks 16 ..."), else None."""
    m = _INIT_RANK.search(line)
    return int(m.group(1)) if m else None


def split_by_rank(text: str) -> dict:
    """A combined output split into ranks, in order: {rank or None: [lines]}. A line without a launcher prefix
    belongs to the rank its NCCL process (host, pid) states in an init line, else to None (the launcher's own)."""
    lines = [split_prefix(raw) for raw in (text or "").splitlines()]
    pid_rank: dict = {}
    for rank, line in lines:
        head = nccl_header(line)
        stated = rank_of_line(line) if head else None
        if head and stated is not None:
            pid_rank.setdefault((head["host"], head["pid"]), stated if rank is None else rank)
    out: dict = {}
    for rank, line in lines:
        if rank is None and (head := nccl_header(line)):
            rank = pid_rank.get((head["host"], head["pid"]))
        out.setdefault(rank, []).append(line)
    return out
