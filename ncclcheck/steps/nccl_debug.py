"""What NCCL really chose: a tiny NCCL init + all_reduce with NCCL_DEBUG=INFO written to files, the parser for those
files, and the nccl.transport check comparing the choice with ncclcheck's recommendation.

NCCL reads NCCL_DEBUG* once per process, at its first initialisation, so the variables must be in the worker's
environment before any NCCL communicator exists: agent/runner.py's run_job(env=nccl_debug_env(dir)) puts it into
the spawned workers' environment.
The parser is pure and tested on real log lines (NVIDIA/nccl issue threads); the job needs a GPU.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable
from typing import Any, Optional

from ..facts import hostname
from ..model import CheckResult, passed, skipped, warned

CHECK_ID = "nccl.transport"
DEBUG_SUBSYS = "INIT,BOOTSTRAP,NET,ENV"


def nccl_debug_env(log_dir: str, host: Optional[str] = None, dump_rank: Optional[int] = None) -> dict[str, str]:
    """Variables that make NCCL log its choices to <log_dir>/nccl.<host>.<pid> (NCCL expands %h and %p).

    With `host`, also the topology and graph dumps beside it, one per host (NCCL does not expand %h in these, so the
    name is ours): <log_dir>/nccl-topo.<host>.xml and nccl-graph.<host>.xml, written by the rank `dump_rank` (the
    node's first global rank, so that every host writes its own; NCCL's default is rank 0 only)."""
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": DEBUG_SUBSYS,
        "NCCL_DEBUG_FILE": os.path.join(log_dir, "nccl.%h.%p"),
    }
    if host:
        env["NCCL_TOPO_DUMP_FILE"] = os.path.join(log_dir, f"nccl-topo.{host}.xml")
        env["NCCL_GRAPH_DUMP_FILE"] = os.path.join(log_dir, f"nccl-graph.{host}.xml")
        if dump_rank is not None:
            env["NCCL_TOPO_DUMP_FILE_RANK"] = env["NCCL_GRAPH_DUMP_FILE_RANK"] = str(int(dump_rank))
    return env


def captures_section(results: Iterable[dict]) -> dict:
    """The report's `nccl_captures`: per host, the debug log, topology and graph dumps the GPU run left, so the
    report links them (files that were not written are left out)."""
    out: dict[str, dict] = {}
    for r in results:
        if not isinstance(r, dict):
            continue
        host = r.get("host") or f"node{r.get('node_rank')}"
        entry = out.setdefault(host, {"node_rank": r.get("node_rank"), "debug": []})
        if r.get("file") and r.get("parsed") is not None:
            entry["debug"].append(r["file"])
        for kind in ("topo", "graph"):
            if r.get(f"{kind}_file"):
                entry[kind] = r[f"{kind}_file"]
    return out


def transport_checks(results: Iterable[dict], recommendations: Iterable[Any] = ()) -> list[CheckResult]:
    """nccl.transport per node from the GPU run's parsed debug logs (the node's first rank that logged)."""
    by_node: dict = {}
    for r in results:
        if isinstance(r, dict) and r.get("parsed") is not None:
            by_node.setdefault(r.get("node_rank"), r["parsed"])
    if not by_node:
        return [compare_with_recommendation({}, recommendations)]
    return [compare_with_recommendation(p, recommendations, node=n) for n, p in sorted(by_node.items(),
                                                                                       key=lambda kv: kv[0] or 0)]


# ---------------------------------------------------------------------------------------------------------------
# parser

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


# ---------------------------------------------------------------------------------------------------------------
# comparison with the recommendation


def ifname_matches(spec: str, name: str) -> bool:
    """NCCL_SOCKET_IFNAME semantics (nccl.rules.parse_spec, the one implementation); an unset spec matches anything."""
    from ..nccl.rules import parse_spec

    parsed = parse_spec(spec)
    return True if parsed is None else parsed.matches(name)


def _rec_values(recommendations: Iterable[Any]) -> dict[str, str]:
    out = {}
    for r in recommendations or ():
        name = r.get("name") if isinstance(r, dict) else getattr(r, "name", None)
        value = r.get("value") if isinstance(r, dict) else getattr(r, "value", None)
        node = r.get("node") if isinstance(r, dict) else getattr(r, "node", None)
        if name and value is not None and (name not in out or node is None):
            out[name] = str(value)
    return out


def compare_with_recommendation(parsed: dict, recommendations: Iterable[Any], *, ib_active: Optional[bool] = None,
                                node: Optional[int] = None) -> CheckResult:
    """nccl.transport: warn when NCCL used another interface than recommended, or sockets while IB is active.

    `recommendations`: Recommendation objects or their JSON. `ib_active`: whether the node has an ACTIVE RDMA port
    (from the facts layer); when None it is inferred from an NCCL_IB_HCA recommendation."""
    if not parsed or not (parsed.get("version") or parsed.get("bootstrap") or parsed.get("transports")):
        return skipped(CHECK_ID, "no NCCL debug output to read (no GPU run, or NCCL_DEBUG_FILE was not honoured)",
                       node=node)
    rec = _rec_values(recommendations)
    problems: list[str] = []
    fixes: list[str] = []
    used_ifs = [i["ifname"] for i in parsed.get("bootstrap", [])] + \
               [i["ifname"] for i in parsed.get("socket_interfaces", [])]
    if parsed.get("ib_oob"):
        used_ifs.append(parsed["ib_oob"]["ifname"])
    used_ifs = list(dict.fromkeys(used_ifs))
    spec = rec.get("NCCL_SOCKET_IFNAME")
    if spec:
        wrong = [i for i in used_ifs if not ifname_matches(spec, i)]
        if wrong:
            problems.append(f"NCCL used {', '.join(wrong)} but the recommended NCCL_SOCKET_IFNAME is {spec}")
            fixes.append(f"export NCCL_SOCKET_IFNAME={spec}")
    ib_disabled = rec.get("NCCL_IB_DISABLE") == "1" or parsed.get("env", {}).get("NCCL_IB_DISABLE") == "1"
    if ib_active is None:
        ib_active = "NCCL_IB_HCA" in rec
    net = parsed.get("net_transport") or parsed.get("network")
    on_sockets = (net in ("Socket",)) or (parsed.get("ib_no_device") and not parsed.get("ib_devices"))
    if ib_active and not ib_disabled and on_sockets:
        problems.append("NCCL is using sockets although an RDMA port is active"
                        + (" (NET/IB : No device found)" if parsed.get("ib_no_device") else ""))
        hca = rec.get("NCCL_IB_HCA")
        fixes.append((f"export NCCL_IB_HCA={hca}; " if hca else "")
                     + "check that the IB port is ACTIVE and libibverbs is in the container; NCCL_NET=IB makes "
                       "NCCL fail loudly instead of falling back")
    hca = rec.get("NCCL_IB_HCA")
    if hca and parsed.get("ib_devices"):
        devs = [f"{d['device']}:{d['port']}" for d in parsed["ib_devices"]]
        off = [d for d in devs if not _hca_matches(hca, d)]
        if off:
            problems.append(f"NCCL used HCA(s) {', '.join(off)} outside the recommended NCCL_IB_HCA={hca}")
            fixes.append(f"export NCCL_IB_HCA={hca}")
    evidence = {"used_interfaces": used_ifs, "net_transport": net, "transports": parsed.get("transports", {}),
                "ib_devices": parsed.get("ib_devices", []), "version": parsed.get("version"),
                "recommended": {k: v for k, v in rec.items() if k.startswith("NCCL_")}}
    what = _describe(parsed, used_ifs)
    if problems:
        return warned(CHECK_ID, problems[0], detail="\n".join(problems + [f"NCCL chose: {what}"]),
                      fix="; ".join(dict.fromkeys(fixes)), node=node, evidence=evidence)
    return passed(CHECK_ID, f"NCCL chose {what}", node=node, evidence=evidence)


def _hca_matches(spec: str, dev_port: str) -> bool:
    """NCCL_IB_HCA semantics: '<hca>[:<port>]' list, '^' excludes, '=' exact device names."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    dev, _, port = dev_port.partition(":")
    hit = False
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        idev, _, iport = item.partition(":")
        if (dev == idev if exact else dev.startswith(idev)) and (not iport or iport == port):
            hit = True
    return not hit if exclude else hit


def _describe(parsed: dict, used_ifs: list[str]) -> str:
    bits = []
    if parsed.get("net_transport"):
        bits.append(f"NET/{parsed['net_transport']}" + (" with GPUDirect RDMA" if parsed.get("gdrdma") else ""))
    intra = [k for k in parsed.get("transports", {}) if not k.startswith("NET/")]
    if intra:
        bits.append("intra-node " + "/".join(intra))
    if parsed.get("ib_devices"):
        bits.append("HCAs " + ", ".join(f"{d['device']}:{d['port']}" for d in parsed["ib_devices"]))
    if used_ifs:
        bits.append("interfaces " + ", ".join(used_ifs))
    if parsed.get("version"):
        bits.append(f"NCCL {parsed['version']}")
    return "; ".join(bits) or "nothing it logged could be read"


_LINE_HOST = re.compile(r"^([\w.-]+):\d+:\d+ \[\d+\] NCCL", re.M)


def capture_host(path: str, text: str) -> Optional[str]:
    """The host a saved NCCL_DEBUG capture came from: its lines' `host:pid:tid` prefix, else an nccl.<host>.<pid>
    file name."""
    m = _LINE_HOST.search(text or "")
    if m:
        return m.group(1)
    parts = os.path.basename(path).split(".")
    return parts[1] if len(parts) >= 3 and parts[0] == "nccl" else None


def checks_from_captures(captures: dict[str, str], nodes: Iterable[Any] = (),
                         recommendations: Iterable[Any] = ()) -> list[CheckResult]:
    """nccl.transport for each saved capture (path -> text), on the node whose hostname it names when the report
    has that node; captures of one host are read together (one file per process)."""
    ranks = {str(getattr(n, "hostname", "")).split(".")[0]: getattr(n, "node_rank", None) for n in nodes}
    by_host: dict[str, list[str]] = {}
    for path, text in captures.items():
        by_host.setdefault(capture_host(path, text) or path, []).append(text)
    out = []
    for host, texts in by_host.items():
        node = ranks.get(host.split(".")[0])
        r = compare_with_recommendation(parse_nccl_debug("\n".join(texts)), recommendations, node=node)
        ev = dict(r.evidence, host=host)
        out.append(CheckResult(r.id, r.status, r.summary if node is not None or host in r.summary
                               else f"{host}: {r.summary}", r.detail, r.fix, r.node, ev))
    return out


# ---------------------------------------------------------------------------------------------------------------
# the GPU job


def nccl_debug_job(ctx, payload: dict) -> dict:
    """Job: a fresh NCCL communicator + one all_reduce, then every rank parses its own NCCL_DEBUG_FILE.

    payload: {"log_dir": optional dir (default ctx.log_dir), "bytes": optional all_reduce size (default 1 MiB)}.
    Returns {"rank", "node_rank", "host", "parsed", "file", "note"} plus "topo_file"/"graph_file" on a node's first
    rank when NCCL wrote those dumps; parsed is None when the run could not happen."""
    host = hostname().split(".")[0]
    base = {"rank": ctx.rank, "node_rank": ctx.node_rank, "host": host, "parsed": None, "file": None, "note": ""}
    if ctx.backend != "nccl" or not str(ctx.device).startswith("cuda"):
        return {**base, "note": "the NCCL transport check needs the nccl backend on a GPU"}
    import torch
    import torch.distributed as dist

    log_dir = payload.get("log_dir") or ctx.log_dir
    if not log_dir:
        return {**base, "note": "no log directory for NCCL_DEBUG_FILE"}
    os.makedirs(log_dir, exist_ok=True)
    note = ""
    want = nccl_debug_env(log_dir, host, dump_rank=ctx.node_rank * ctx.local_world_size)
    if os.environ.get("NCCL_DEBUG_FILE") != want["NCCL_DEBUG_FILE"]:
        # NCCL reads these once, at init: they must come from whoever started this rank (run_job(env=...) or the
        # launcher). Setting them here would be too late, and would change the user's environment.
        note = (f"NCCL_DEBUG_FILE is not {want['NCCL_DEBUG_FILE']} in this rank's environment: start the ranks with "
                "nccl_debug_env() (agent.runner.run_job(env=...))")
    torch.cuda.set_device(ctx.device)
    group = dist.new_group(backend="nccl")  # a fresh communicator, so its INIT/NET lines are logged now
    try:
        t = torch.ones(int(payload.get("bytes", 1 << 20)) // 4, dtype=torch.float32, device=ctx.device)
        dist.all_reduce(t, group=group)
        torch.cuda.synchronize()
    finally:
        dist.destroy_process_group(group)
    pid = os.getpid()
    if ctx.local_rank == 0:  # the node's dump rank wrote them (during the new group's init)
        for kind in ("topo", "graph"):
            dump = os.environ.get(f"NCCL_{kind.upper()}_DUMP_FILE")
            if dump and os.path.isfile(dump):
                base[f"{kind}_file"] = dump
    files = glob.glob(os.path.join(log_dir, f"nccl.*.{pid}"))
    path = files[0] if files else os.path.join(log_dir, f"nccl.{host}.{pid}")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return {**base, "file": path, "note": (note + "; " if note else "") + "NCCL wrote no debug file"}
    return {**base, "parsed": parse_nccl_debug(text), "file": path, "note": note}
