"""What NCCL really chose: a tiny NCCL init + all_reduce with NCCL_DEBUG=INFO written to files, the parser for those
files, and the nccl.transport check comparing the choice with ncclcheck's recommendation.

NCCL reads NCCL_DEBUG* once per process, at its first initialisation, so the variables must be in the worker's
environment before any NCCL communicator exists: agent/runner.py's run_job(env=nccl_debug_env(dir)) puts it into
the spawned workers' environment.
The parser is nccl/debuglog.py (shared with `diagnose`); the job needs a GPU.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from typing import Any, Optional

from ..clean import clean_name
from ..facts import hostname
from ..model import CheckResult, passed, skipped, warned
from ..nccl import failures, rules
from ..nccl.debuglog import NcclDebugState, host_of_name, read_capture
from ..nccl.linear import MAX_LINE_CHARS

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
            fixes.append(rules.exports([("NCCL_SOCKET_IFNAME", spec)]))
    ib_disabled = rec.get("NCCL_IB_DISABLE") == "1" or parsed.get("env", {}).get("NCCL_IB_DISABLE") == "1"
    if ib_active is None:
        ib_active = "NCCL_IB_HCA" in rec
    net = parsed.get("net_transport") or parsed.get("network")
    on_sockets = (net in ("Socket",)) or (parsed.get("ib_no_device") and not parsed.get("ib_devices"))
    if ib_active and not ib_disabled and on_sockets:
        problems.append("NCCL is using sockets although an RDMA port is active"
                        + (" (NET/IB : No device found)" if parsed.get("ib_no_device") else ""))
        hca = rec.get("NCCL_IB_HCA")
        fixes.append((rules.exports([("NCCL_IB_HCA", hca)]) + "; " if hca else "")
                     + "check that the IB port is ACTIVE and libibverbs is in the container; NCCL_NET=IB makes "
                       "NCCL fail loudly instead of falling back")
    hca = rec.get("NCCL_IB_HCA")
    if hca and parsed.get("ib_devices"):
        devs = [f"{d['device']}:{d['port']}" for d in parsed["ib_devices"]]
        off = [d for d in devs if not _hca_matches(hca, d)]
        if off:
            problems.append(f"NCCL used HCA(s) {', '.join(off)} outside the recommended "
                            f"{rules.assignment('NCCL_IB_HCA', hca)}")
            fixes.append(rules.exports([("NCCL_IB_HCA", hca)]))
    for text in parsed.get("warnings") or []:  # NCCL's WARN lines, read by the one failure table (as diagnose does)
        cls = failures.classify(f"NCCL WARN {text}")
        if cls is not None and cls.cause:
            problems.append(f"NCCL warned: {cls.what} (NCCL: \"{text[:300]}\")")
            fixes.append(cls.fix)
    evidence = {"used_interfaces": used_ifs, "net_transport": net, "transports": parsed.get("transports", {}),
                "ib_devices": parsed.get("ib_devices", []), "version": parsed.get("version"),
                "recommended": {k: v for k, v in rec.items() if k.startswith("NCCL_")}}
    what = _describe(parsed, used_ifs)
    if problems:
        return warned(CHECK_ID, problems[0], detail="\n".join(problems + [f"NCCL chose: {what}"]),
                      findings=tuple(problems),
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


MAX_CAPTURE_BYTES = 256 << 20  # of a saved capture (--nccl-debug FILE), its first bytes read: NCCL's init lines,
# where every fact the check reads is, come first (one process's INIT,NET output is a few MB)


def checks_from_files(paths: Iterable[str], nodes: Iterable[Any] = (),
                      recommendations: Iterable[Any] = ()) -> list[CheckResult]:
    """checks_from_captures on saved captures (--nccl-debug FILE ...), each streamed within its bounds (infile.Lines:
    its first MAX_CAPTURE_BYTES, lines cut at MAX_LINE_CHARS), what was not read as it is said in the check."""
    from ..infile import Lines

    return checks_from_captures({p: Lines(p, f"--nccl-debug {p}", MAX_CAPTURE_BYTES, MAX_LINE_CHARS)
                                 for p in paths}, nodes, recommendations)


def checks_from_captures(captures: dict[str, Any], nodes: Iterable[Any] = (),
                         recommendations: Iterable[Any] = ()) -> list[CheckResult]:
    """nccl.transport for each saved capture (path -> its text, or its lines: infile.Lines), on the node whose
    hostname it names when the report has that node; captures of one host are read together (one file per
    process)."""
    ranks = {str(getattr(n, "hostname", "")).split(".")[0]: getattr(n, "node_rank", None) for n in nodes}
    by_host: dict[str, list] = {}
    said: dict[str, list] = {}
    at = 0
    for path, capture in captures.items():
        state, host, at = read_capture(capture.splitlines() if isinstance(capture, str) else capture, at)
        host = host or host_of_name(path) or clean_name(path)
        by_host.setdefault(host, []).append(state)
        if getattr(capture, "said", None) and capture.said():
            said.setdefault(host, []).append(capture.said())
    out = []
    for host, states in by_host.items():
        node = ranks.get(host.split(".")[0])
        r = compare_with_recommendation(NcclDebugState.result(states), recommendations, node=node)
        ev = dict(r.evidence, host=host)
        detail = r.detail
        if said.get(host):
            ev["read"] = said[host]
            detail = "\n".join(x for x in (detail, "read within bounds: " + "; ".join(said[host])) if x)
        out.append(CheckResult(r.id, r.status, r.summary if node is not None or host in r.summary
                               else f"{host}: {r.summary}", detail, r.fix, r.node, ev, r.findings))
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
    from ..errors import UsageError
    from ..infile import Lines

    try:  # NCCL's file, in a directory others may write to: read within the same bounds as a saved capture
        lines = Lines(path, path, MAX_CAPTURE_BYTES, MAX_LINE_CHARS)
        state = read_capture(lines)[0]
    except (UsageError, OSError):
        return {**base, "file": path, "note": (note + "; " if note else "") + "NCCL wrote no debug file"}
    note = "; ".join(x for x in (note, lines.said()) if x)
    return {**base, "parsed": NcclDebugState.result([state]), "file": path, "note": note}
