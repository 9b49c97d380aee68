"""NCCL's debug output read as data: the NCCL_DEBUG=INFO parser (interfaces, transports, version, warnings) and the
prefixes launchers put before each line (torchrun `[rank3]:`, `srun --label` `3: `, `mpirun --tag-output`
`[1,3]<stderr>:`), so one combined launcher output splits back into ranks. Pure: text in, dicts out; tested on real
log lines (NVIDIA/nccl issue threads and our own captures).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Optional

from .linear import MAX_LINE_CHARS, Prefilter, Then
from .prefixes import peel

# Every pattern below runs on what a job printed: each is linear in the line (nccl/linear.py) and sees at most
# MAX_LINE_CHARS of it. A name or an address inside NCCL's lists is short, so its run is bounded ({1,64}, {1,128}):
# unbounded, a line of "[0]a:" repeated made each item scan the rest of the line (quadratic).
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+(\S+))?")
# "Bootstrap : Using eth0:10.10.6.118<0>", older "Bootstrap : Using [0]eth0:172.17.0.2<0>", IPv6 "ib0:fe80::1%ib0<0>"
_BOOTSTRAP = re.compile(r"Bootstrap\s*:\s*Using\s+(?:\[\d+\])?([^:\s\[]{1,64}):(\S{1,128}?)<\d+>")
_SOCKET_LINE = re.compile(r"NET/Socket\s*:\s*Using\s+(.*)")
_IF_ITEM = re.compile(r"\[(\d+)\]([^:\s\[]{1,64}):(\S{1,128}?)<\d+>")
_IB_LINE = re.compile(r"NET/IB\s*:\s*Using\s+(.*)")
_IB_ITEM = re.compile(r"\[(\d+)\]([\w.-]+):(\d+)/(IB|RoCE)")
_OOB = re.compile(r"OOB\s+([^:\s]{1,64}):(\S{1,128}?)<\d+>")
_IB_NONE = re.compile(r"NET/IB\s*:\s*No device found")
_NETWORK = re.compile(r"Using network (\S+(?: \S+)?)\s*$")
_VIA = re.compile(r"Channel (\d+)(?:/(\d+))?\s*:\s*(\d+)\[[^\]]{0,64}\]\s*->\s*(\d+)\[[^\]]{0,64}\]"
                  r"(?:\s*\[(send|receive)\])?\s*via\s+(\S+)")
_COLL_CHANNELS = re.compile(r"(?<!\d)(\d+) coll channels")  # from a run's first digit only: one try per run
# "(NCCL_\w+) set by environment to": tried from every "NCCL_" of a run of word characters, each scanning to the
# run's end; here one try per run (from its first character), the name from its first "NCCL_" (the same answer)
_ENV = re.compile(r"(?<!\w)(\w+) set by environment to (\S*)")
_WARN = re.compile(r"NCCL WARN (.*)")
# "rank (\d+) nranks (\d+) .*Init COMPLETE": the first "rank N nranks M " followed on its line by Init COMPLETE
_INIT_COMPLETE = Then(r"rank (\d+) nranks (\d+) ", r"Init COMPLETE")
_INIT_HEAD = re.compile(r"rank (\d+) nranks (\d+) ", re.IGNORECASE)
_DESTROYED = re.compile(r"- Destroy COMPLETE")  # init.cc: "comm %p rank %d nranks %d ... - Destroy COMPLETE"
MAX_WARNINGS = 20
# NCCL's error trace (src/include/checks.h NCCLCHECK: "%s:%d -> %d", group.cc adding " [Async thread]"): printed at
# each frame a failed call's error goes up through, never for success nor ncclInProgress
_ERROR_RETURN = re.compile(r"(?<![\w./+-])([\w./+-]{1,200}\.(?:cc|cu|cpp|h|hpp|cuh):\d{1,6}) -> (\d{1,2})"
                           r"(?: \[Async thread\])?\s{0,4}$")
# what a line must hold for the parser to read anything from it (lower case): the log reader passes over the rest
PARSE_LITERALS = Prefilter([_VERSION, _BOOTSTRAP, _SOCKET_LINE, _IB_LINE, _IB_NONE, _NETWORK, _COLL_CHANNELS, _ENV,
                            _WARN, _INIT_COMPLETE, _DESTROYED, _ERROR_RETURN]).literals
VIA_LITERALS = Prefilter([_VIA]).literals


def _transport_kind(via: str) -> str:
    """'NET/IB/0/GDRDMA' -> 'NET/IB', 'P2P/IPC/read' -> 'P2P', 'SHM/direct/direct' -> 'SHM'."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return f"NET/{parts[1]}"
    return parts[0]


def via_of(line: str) -> Optional[tuple]:
    """(channel, transport) of a "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC" line, or None."""
    m = _VIA.search(line[:MAX_LINE_CHARS])
    return (int(m.group(1)), m.group(6)) if m else None


def env_of(line: str) -> Optional[tuple]:
    """(NCCL_X, value) of an "NCCL_X set by environment to value" line, or None."""
    pos = 0
    while m := _ENV.search(line, pos):
        run = m.group(1)
        k = run.find("NCCL_")
        if 0 <= k < len(run) - 5:
            return run[k:], m.group(2)
        pos = m.end(1)  # the value may itself start a name ("... to NCCL_X set by environment to y")
    return None


class NcclDebugState:
    """parse_nccl_debug's reading, fed one line at a time, in a form that merges: each value keeps the number of the
    line that gave it (first seen, or last seen where a later line overrides), so the lines of one rank read from
    several sources (its launcher-prefixed lines, its NCCL process's own) give what reading them in order gives."""

    __slots__ = ("version", "bootstrap", "sock", "ib", "ib_oob", "ib_no_device", "network", "via", "channels",
                 "coll_channels", "env", "warnings", "nranks", "destroyed", "error_return")

    def __init__(self) -> None:
        self.version: Optional[tuple] = None  # (at, version, cuda): the first
        self.bootstrap: dict = {}  # (ifname, addr) -> at: the first of each
        self.sock: dict = {}
        self.ib: dict = {}  # (device, port) -> (at, link_layer)
        self.ib_oob: Optional[tuple] = None  # (at, {ifname, addr}): the first
        self.ib_no_device = False
        self.network: Optional[tuple] = None  # (at, name): the last
        self.via: dict = {}  # transport -> [connections, at of the first]
        self.channels: set = set()
        self.coll_channels: Optional[int] = None  # the largest
        self.env: dict = {}  # NCCL_X -> (at of the first, at of the last, the last value)
        self.warnings: list = []  # [(at, text)]: the first MAX_WARNINGS
        self.nranks: Optional[tuple] = None  # (at, nranks): the last
        self.destroyed = False  # a communicator of it was destroyed (the job's teardown)
        self.error_return: Optional[tuple] = None  # (at, "file:line -> code"): the first error trace line

    def add_via(self, channel: int, via: str, at) -> None:
        self.channels.add(channel)
        got = self.via.get(via)
        if got is None:
            self.via[via] = [1, at]
        else:
            got[0] += 1

    def feed(self, line: str, at=0) -> None:
        """One line (cut at MAX_LINE_CHARS); `at` orders it among the rank's lines (its line number)."""
        line = line[:MAX_LINE_CHARS]
        if "NCCL version" in line and self.version is None and (m := _VERSION.search(line)):
            self.version = (at, m.group(1), m.group(2))
        if "Bootstrap" in line and (m := _BOOTSTRAP.search(line)):
            self.bootstrap.setdefault(m.groups(), (at, 0))
        if "NET/Socket" in line and (m := _SOCKET_LINE.search(line)):
            for k, (_, ifname, addr) in enumerate(_IF_ITEM.findall(m.group(1))):
                self.sock.setdefault((ifname, addr), (at, k))
        if "NET/IB" in line:
            self._ib(line, at)
        if "Channel " in line and (v := via_of(line)):
            self.add_via(v[0], v[1], at)
        self._scalars(line, at)

    def _ib(self, line: str, at) -> None:
        if _IB_NONE.search(line):
            self.ib_no_device = True
        m = _IB_LINE.search(line)
        if not m:
            return
        for k, (_, dev, port, ll) in enumerate(_IB_ITEM.findall(m.group(1))):
            self.ib.setdefault((dev, port), ((at, k), ll))
        o = _OOB.search(m.group(1))
        if o and self.ib_oob is None:
            self.ib_oob = (at, {"ifname": o.group(1), "addr": o.group(2)})

    def _scalars(self, line: str, at) -> None:
        """One-value lines: the network in use, collective channels, NCCL_* echoed back, warnings, the rank count."""
        if "Using network " in line and (m := _NETWORK.search(line)):
            self.network = (at, m.group(1).strip())
        if " coll channels" in line and (m := _COLL_CHANNELS.search(line)):
            self.coll_channels = max(int(m.group(1)), self.coll_channels or 0)
        if " set by environment to " in line and (e := env_of(line)):
            self.env[e[0]] = (self.env.get(e[0], (at,))[0], at, e[1].rstrip("."))
        if "NCCL WARN " in line and len(self.warnings) < MAX_WARNINGS and (m := _WARN.search(line)):
            self.warnings.append((at, m.group(1).strip()))
        if "Destroy COMPLETE" in line and _DESTROYED.search(line):
            self.destroyed = True
        if _INIT_COMPLETE.search(line):
            self.nranks = (at, int(_INIT_HEAD.search(line).group(2)))
        if " -> " in line and self.error_return is None and (m := _ERROR_RETURN.search(line)):
            self.error_return = (at, f"{m.group(1)} -> {m.group(2)}")

    @staticmethod
    def result(states: list) -> dict:
        """parse_nccl_debug's dict from one rank's states (read apart, merged by line number)."""
        def first(attr):
            got = [getattr(s, attr) for s in states if getattr(s, attr) is not None]
            return min(got, key=lambda t: t[0]) if got else None

        def last(attr):
            got = [getattr(s, attr) for s in states if getattr(s, attr) is not None]
            return max(got, key=lambda t: t[0]) if got else None

        def unique(attr):  # key -> at, the first of each key, in first-seen order
            seen: dict = {}
            for s in states:
                for key, at in getattr(s, attr).items():
                    seen[key] = min(seen.get(key, at), at)
            return sorted(seen, key=seen.get)

        out = _empty_parse()
        v = first("version")
        if v:
            out["version"], out["cuda"] = v[1], v[2]
        out["bootstrap"] = [{"ifname": i, "addr": a} for i, a in unique("bootstrap")]
        out["socket_interfaces"] = [{"ifname": i, "addr": a} for i, a in unique("sock")]
        ibs: dict = {}
        for s in states:
            for key, (at, ll) in s.ib.items():
                if key not in ibs or at < ibs[key][0]:
                    ibs[key] = (at, ll)
        out["ib_devices"] = [{"device": d, "port": int(p), "link_layer": ibs[(d, p)][1]}
                             for d, p in sorted(ibs, key=lambda k: ibs[k][0])]
        oob = first("ib_oob")
        out["ib_oob"] = oob[1] if oob else None
        out["ib_no_device"] = any(s.ib_no_device for s in states)
        net = last("network")
        out["network"] = net[1] if net else None
        via: dict = {}
        for s in states:
            for name, (n, at) in s.via.items():
                c, a = via.get(name, (0, at))
                via[name] = (c + n, min(a, at))
        kinds: dict = {}
        for name in sorted(via, key=lambda k: via[k][1]):
            out["via"][name] = via[name][0]
            kind = _transport_kind(name)
            kinds[kind] = kinds.get(kind, 0) + via[name][0]
            out["gdrdma"] = out["gdrdma"] or "GDRDMA" in name
        out["transports"] = kinds
        channels = set().union(*(s.channels for s in states)) if states else set()
        out["channels"] = (max(channels) + 1) if channels else None
        colls = [s.coll_channels for s in states if s.coll_channels is not None]
        out["coll_channels"] = max(colls) if colls else None
        env: dict = {}  # a name keeps the place its first line gave it, and the value its last line gave
        for s in states:
            for name, (at0, at, value) in s.env.items():
                was = env.get(name, (at0, at, value))
                env[name] = (min(at0, was[0]), *max((at, value), was[1:], key=lambda t: t[0]))
        out["env"] = {name: env[name][2] for name in sorted(env, key=lambda k: env[k][0])}
        out["warnings"] = [t for _, t in sorted((w for s in states for w in s.warnings), key=lambda w: w[0])]
        out["warnings"] = out["warnings"][:MAX_WARNINGS]
        n = last("nranks")
        out["nranks"] = n[1] if n else None
        e = first("error_return")
        out["error_return"] = e[1] if e else None
        nets = [k for k in out["transports"] if k.startswith("NET/")]
        if nets:
            kinds_ = [k.split("/", 1)[1] for k in nets]
            out["net_transport"] = "IB" if "IB" in kinds_ else kinds_[0]
        return out


def _empty_parse() -> dict:
    return {
        "version": None, "cuda": None, "bootstrap": [], "socket_interfaces": [], "ib_devices": [], "ib_oob": None,
        "ib_no_device": False, "network": None, "transports": {}, "via": {}, "gdrdma": False,
        "net_transport": None, "channels": None, "coll_channels": None, "env": {}, "warnings": [], "nranks": None,
        "error_return": None,
    }


def parse_nccl_debug(text: str) -> dict:
    """Facts from NCCL INFO output (one or many ranks' lines):

    version, cuda (the "+cuda12.4" tail), bootstrap [{ifname, addr}], socket_interfaces [{ifname, addr}],
    ib_devices [{device, port, link_layer}], ib_oob {ifname, addr}, ib_no_device, network ("IB", "Socket" or a
    plugin's name), transports {"NET/IB": n_connections, "P2P": n, ...}, via {"NET/IB/0/GDRDMA": n, ...}, gdrdma,
    net_transport ("IB" | "Socket" | plugin | None when no inter-node connection was logged), channels,
    coll_channels, env {NCCL_X: value}, warnings [text], nranks.
    """
    state = NcclDebugState()
    for i, line in enumerate((text or "").splitlines()):
        state.feed(line, i)
    return NcclDebugState.result([state])


_LINE_HOST = re.compile(r"^(?:\[[^\]\n]{0,64}\d\d:\d\d:\d\d[^\]\n]{0,32}\] ?)?([\w.-]+):\d+:\d+ \[\d+\] NCCL",
                        re.M)


def read_capture(lines: Iterable[str], at: int = 0) -> tuple[NcclDebugState, Optional[str], int]:
    """One saved capture's lines (a file streamed line by line: infile.Lines) fed to a state, numbered from `at`:
    (the state, the host its first NCCL line names or None, the number after its last line). States of one host's
    captures merge with NcclDebugState.result, as their texts joined would parse."""
    state, host, n = NcclDebugState(), None, at - 1
    for n, line in enumerate(lines, at):
        state.feed(line, n)
        if host is None:
            m = _LINE_HOST.match(line)
            host = m.group(1) if m else None
    return state, host, n + 1


def capture_host(path: str, text: str) -> Optional[str]:
    """The host a saved NCCL_DEBUG capture came from: its lines' `host:pid:tid` prefix, else an nccl.<host>.<pid>
    file name."""
    m = _LINE_HOST.search(text or "")
    return m.group(1) if m else host_of_name(path)


def host_of_name(path: str) -> Optional[str]:
    """The host an nccl.<host>.<pid> file name (NCCL_DEBUG_FILE's %h.%p) names, or None."""
    parts = os.path.basename(path).split(".")
    return parts[1] if len(parts) >= 3 and parts[0] == "nccl" else None


# ---------------------------------------------------------------------------------------------------------------
# launchers' line prefixes: which rank wrote a line of a combined output (nccl/prefixes.py peels every layer)

# NCCL's own line header: "host:pid:tid [cudaDev] NCCL ..." (the device is the local GPU index), after the timestamp
# NCCL puts before WARN lines by default (src/debug.cc: NCCL_DEBUG_TIMESTAMP_LEVELS defaults to WARN, the format
# NCCL_DEBUG_TIMESTAMP_FORMAT to "[%F %T] ")
_TS = r"(?:\[[^\]\n]{0,64}\d\d:\d\d:\d\d[^\]\n]{0,32}\] ?)?"
_NCCL_HEADER = re.compile(r"^" + _TS + r"([\w.-]+):(\d+):(\d+) \[(\d+)\] ")
_INIT_RANK = re.compile(r"\bcomm 0x[0-9a-f]+ rank (\d+) nRanks (\d+)", re.IGNORECASE)
RANK_LITERALS = Prefilter([_INIT_RANK]).literals  # what an init line stating a rank holds (lower case)


def split_prefix(line: str) -> tuple[Optional[int], str]:
    """(rank the launcher's prefix names, the line without its prefixes); (None, line) when it has none."""
    return peel(line)


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
