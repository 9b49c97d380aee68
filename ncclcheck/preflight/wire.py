"""preflight's codecs: what travels through the store, packed. The compact verdict node 0 publishes to every other
node (what went wrong and where, sized by the problems found, not by the number of nodes; the full per-node detail
stays in node 0's report files), the mesh probe's rows and endpoint directory, and the checks on what is read back.
Pure functions."""

from __future__ import annotations

import base64
import json
import re
import socket
import struct
from typing import Optional

from ..model import CheckResult, Recommendation, Status
from ..render.common import group_checks, group_summary

OWN_ADDRESS = "not probed: the prober has this address too"  # a duplicated address needs no connect to be judged
MAX_TEXT = 2000  # characters of a summary/detail/fix on the wire
MAX_EVIDENCE_ITEM = 512  # evidence entries larger than this (JSON characters) stay in node 0's report only
MAX_NAMED = 16  # node ranks listed per status in an aggregated check's evidence (the counts are exact)


def _cap(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _per_node(v: object) -> bool:
    """A map keyed by node rank ({"0": ..., "1": ...}), or a map of such maps: it grows with n, so it stays home."""
    if not isinstance(v, dict) or not v:
        return False
    return all(str(k).isdigit() for k in v) or all(_per_node(x) for x in v.values())


def _small_evidence(ev: dict) -> dict:
    out = {}
    for k, v in (ev or {}).items():
        if _per_node(v) or (isinstance(v, list) and len(v) > MAX_NAMED):
            continue
        try:
            if len(json.dumps(v, default=str)) <= MAX_EVIDENCE_ITEM:
                out[k] = v
        except (TypeError, ValueError):
            continue
    return out


def compact_check(c: CheckResult) -> dict:
    """A check as it travels to the other nodes: texts capped, only the small evidence entries kept."""
    return {"id": c.id, "status": c.status.value, "node": c.node, "summary": _cap(c.summary),
            "detail": _cap(c.detail), "fix": _cap(c.fix), "evidence": _small_evidence(c.evidence)}


def aggregate_local(local: list[CheckResult], hosts: dict[int, str]) -> list[CheckResult]:
    """One cross-node result per node-local check that did not pass everywhere: 'fail on node 17 (gpu017): ...'.

    Checks that passed (or were skipped) on every node are left out: the other nodes need only the exceptions.
    """
    out = []
    for g in group_checks([c for c in local if c.node is not None]):
        if g.status not in (Status.FAIL, Status.WARN):
            continue
        nodes = {st.value: g.nodes_with(st)[:MAX_NAMED] for st in (Status.FAIL, Status.WARN) if g.nodes_with(st)}
        counts = {st.value: len(g.nodes_with(st)) for st in Status if g.nodes_with(st)}
        out.append(CheckResult(g.id, g.status, group_summary(g, hosts), fix=g.fix, node=None,
                               evidence={"aggregated": True, "nodes": nodes, "counts": counts}))
    return out


def build_result(cross: list[CheckResult], local: list[CheckResult], recs: list[Recommendation],
                 hosts: dict[int, str], mesh: Optional[dict] = None) -> dict:
    """The payload of `world/result`: cross-node checks, aggregated node-local exceptions, recommendations."""
    return {"checks": [compact_check(c) for c in cross],
            "local": [compact_check(c) for c in aggregate_local(local, hosts)],
            "recommendations": [r.to_json() for r in recs],
            "mesh": mesh or {}}


def read_result(d: object) -> tuple[list[CheckResult], list[CheckResult], list[Recommendation], dict]:
    """(cross-node checks, aggregated local exceptions, recommendations, mesh info) from a `world/result` payload."""
    if not isinstance(d, dict):
        return [], [], [], {}

    def checks(key: str) -> list[CheckResult]:
        return [CheckResult.from_json(c) for c in d.get(key) or [] if isinstance(c, dict) and c.get("id")]

    recs = [Recommendation.from_json(r) for r in d.get("recommendations") or [] if isinstance(r, dict)]
    return checks("checks"), checks("local"), recs, d.get("mesh") if isinstance(d.get("mesh"), dict) else {}


def compact_world(verdict: dict, last_join: int) -> dict:
    """The world verdict without the per-node lists (members, joined): what every node needs to know it is in."""
    out = {k: v for k, v in verdict.items() if k not in ("members", "joined")}
    out["last_join"] = last_join
    out["members_n"] = len(verdict.get("members") or [])
    return out


# ---------------------------------------------------------------------------------------------------------------
# A probe row on the wire. In a healthy full mesh every node reaches every peer on the same interfaces, so successful
# probes travel as runs of peer ranks per (interface, address index): [[0, 0, [[1, 15]]]] says "reached peers 1..15
# on interface 0's first address", the same few bytes at 4 nodes or 32. Node 0 knows the addresses from the published
# endpoints. Round-trip time and clock offset travel only for the peers in `timed` (the clock check reads them for the
# pairs that include the reference node, nothing else reads them). Only failures carry text.


def _same_id(reached: object, expected: object) -> bool:
    """The answerer is the node that published the endpoint: its id, or the id prefix a directory carries."""
    return not expected or (isinstance(reached, str) and reached.startswith(str(expected)))


def _runs(peers: list[int]) -> list:
    """[1, 2, 3, 5, 7, 8] -> [[1, 3], 5, [7, 8]]."""
    out: list = []
    for p in sorted(set(peers)):
        last = out[-1] if out else None
        if isinstance(last, list) and last[1] == p - 1:
            last[1] = p
        elif isinstance(last, int) and last == p - 1:
            out[-1] = [last, p]
        else:
            out.append(p)
    return out


def _unruns(runs: object) -> list[int]:
    out: list[int] = []
    for item in runs if isinstance(runs, list) else []:
        if isinstance(item, int):
            out.append(item)
        elif isinstance(item, list) and len(item) == 2 and all(isinstance(x, int) for x in item) \
                and 0 <= item[1] - item[0] <= 1_000_000:
            out.extend(range(item[0], item[1] + 1))
    return out


def pack_row(attempts: list[dict], peers: dict[int, dict], timed: Optional[set] = None) -> dict:
    """Attempt records -> {"if": [iface names], "okr": [[i, a, runs of peers]], "ok": [[peer, i, a, rtt_us,
    offset_us]], "fail": [[peer, i, addr, port, reached, error]]}. Successful probes of peers in `timed` (all when
    None) keep their timings in "ok"; the others go into "okr". The answerer's identity is checked here, so ids need
    not travel."""
    ifaces: list[str] = []
    ok_rows, fail_rows = [], []
    groups: dict[tuple, list[int]] = {}
    for a in attempts:
        if a.get("error") == OWN_ADDRESS:
            continue  # node 0 sees the duplicate in the published endpoints; the row need not repeat it
        iface = a.get("iface")
        if iface not in ifaces:
            ifaces.append(iface)
        i = ifaces.index(iface)
        good = bool(a.get("ok")) and a.get("reached") == a.get("peer") and _same_id(a.get("reached_id"),
                                                                                    a.get("expected_id"))
        addrs = [e[0] for e in ((peers.get(a.get("peer")) or {}).get("endpoints") or {}).get(iface, [])]
        if good and a.get("addr") in addrs:
            if timed is not None and a["peer"] not in timed:
                groups.setdefault((i, addrs.index(a["addr"])), []).append(a["peer"])
                continue
            rtt, off = a.get("rtt_us"), a.get("offset_s")
            ok_rows.append([a["peer"], i, addrs.index(a["addr"]), None if rtt is None else int(rtt),
                            None if off is None else int(off * 1e6)])
            continue
        err = a.get("error")
        if a.get("ok") and not _same_id(a.get("reached_id"), a.get("expected_id")):
            err = f"answered by {a.get('reached_id')!s:.12}, not the node that published the endpoint"
        fail_rows.append([a.get("peer"), i, a.get("addr"), a.get("port"), a.get("reached"),
                          err or ("answered by another node" if a.get("ok") else "failed")])
    row: dict = {"if": ifaces, "ok": ok_rows, "fail": fail_rows}
    if groups:
        row["okr"] = [[i, ai, _runs(ps)] for (i, ai), ps in sorted(groups.items())]
    return row


def read_load(v: object, loaded_lag_s: float) -> dict:
    """A row's "load" (what a node measured of its own prober), checked: {"lag_ms", "retried", "recovered",
    "loaded"}; "loaded" when its own loop woke loaded_lag_s or more late (starved of CPU). Anything else: {}."""
    if not isinstance(v, dict):
        return {}
    out = {k: v[k] for k in ("lag_ms", "retried", "recovered") if type(v.get(k)) is int and 0 <= v[k] < 1 << 40}
    if "lag_ms" in out:
        out["loaded"] = out["lag_ms"] >= loaded_lag_s * 1000
    return out


def unpack_row(row: object, endpoints: dict[int, dict]) -> list[dict]:
    """A packed row -> attempt records as nccl/reachability.build_matrix and the clock check read them.

    endpoints: {node rank: {iface: [[addr, port], ...]}} as published (to recover successful probes' addresses)."""
    if not isinstance(row, dict) or not isinstance(row.get("if"), list):
        return []
    ifaces = row["if"]
    items = [item for item in row.get("ok") or [] if isinstance(item, list)]
    for group in row.get("okr") or []:
        try:
            i, ai, runs = group
        except (TypeError, ValueError):
            continue
        items.extend([peer, i, ai, None, None] for peer in _unruns(runs))
    out = []
    for item in items:
        try:
            peer, i, ai, rtt, off = item
            addr, port = ((endpoints.get(peer) or {}).get(ifaces[i]) or [])[ai]
        except (TypeError, ValueError, IndexError):
            continue
        out.append({"peer": peer, "iface": ifaces[i], "addr": addr, "port": port, "ok": True, "reached": peer,
                    "error": None, "rtt_us": rtt, "offset_s": None if off is None else off / 1e6})
    for item in row.get("fail") or []:
        try:
            peer, i, addr, port, reached, err = item
            iface = ifaces[i]
        except (TypeError, ValueError, IndexError):
            continue
        out.append({"peer": peer, "iface": iface, "addr": addr, "port": port, "ok": False, "reached": reached,
                    "error": err, "rtt_us": None, "offset_s": None})
    return out


# ---------------------------------------------------------------------------------------------------------------
# The endpoint directory of a full mesh: node 0 gathers every node's published endpoints and publishes them once, so a
# node reads one value instead of naming n-1 keys twice (wait, then read). Each IPv4 node packs into 12 bytes
# (base64): 4 bytes of its id, an endpoint count, then per endpoint an interface index, the address and the port.
# A node with an id or address that does not fit goes into "x" as published; a node that published nothing is absent.

ID_PREFIX_HEX = 8  # hex digits of a node id the directory carries; the answerer's full id must start with them
_NODE = struct.Struct(">4sB")
_ENDPOINT = struct.Struct(">B4sH")
_ABSENT = 0xFF


def _packable(info: dict, ifaces: list[str]) -> bool:
    nid = str(info.get("id") or "")
    try:
        bytes.fromhex(nid[:ID_PREFIX_HEX])
        eps = info.get("endpoints") or {}
        pairs = [(i, a, p) for i, v in eps.items() for a, p in v]
        for _, addr, port in pairs:
            socket.inet_aton(addr)
            if addr.count(".") != 3 or not 0 <= int(port) < 65536:
                return False
    except (ValueError, TypeError, OSError, AttributeError):
        return False
    return len(nid) >= ID_PREFIX_HEX and len(pairs) < _ABSENT and len(ifaces) + len(eps) < 256


def pack_directory(endpoints: dict[int, dict], n: int) -> dict:
    """{rank: {"id", "endpoints"}} of ranks 0..n-1 -> {"n": n, "if": [names], "b": base64, "x": {rank: info}}."""
    ifaces: list[str] = []
    buf, extra = bytearray(), {}
    for r in range(n):
        info = endpoints.get(r)
        if not isinstance(info, dict) or not _packable(info, ifaces):
            buf += _NODE.pack(b"\0\0\0\0", _ABSENT)
            if isinstance(info, dict):
                extra[str(r)] = {"id": info.get("id"), "endpoints": info.get("endpoints") or {}}
            continue
        pairs = [(i, a, p) for i, v in sorted((info.get("endpoints") or {}).items()) for a, p in v]
        buf += _NODE.pack(bytes.fromhex(str(info["id"])[:ID_PREFIX_HEX]), len(pairs))
        for iface, addr, port in pairs:
            if iface not in ifaces:
                ifaces.append(iface)
            buf += _ENDPOINT.pack(ifaces.index(iface), socket.inet_aton(addr), int(port))
    out: dict = {"n": n, "if": ifaces, "b": base64.b64encode(bytes(buf)).decode("ascii")}
    if extra:
        out["x"] = extra
    shared = host_claims(endpoints, n)
    if shared:
        out["h"] = shared
    return out


HOST_KEY = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/[0-9]{1,20}$")


def host_key(v: object) -> Optional[str]:
    """A network identity claim (facts.host.network_identity's key) as read from the network, or None."""
    return v if isinstance(v, str) and HOST_KEY.match(v) else None


def host_claims(endpoints: dict, n: int) -> dict:
    """{identity key: [ranks]} for the keys two or more of ranks 0..n-1 claim in their endpoint records: the
    directory carries only these (a key nobody shares decides nothing), so it stays O(n)."""
    by_key: dict = {}
    for r in range(n):
        info = endpoints.get(r)
        key = host_key(info.get("host")) if isinstance(info, dict) else None
        if key:
            by_key.setdefault(key, []).append(r)
    return {k: rs for k, rs in by_key.items() if len(rs) > 1}


def unpack_directory(d: object) -> dict[int, dict]:
    """A packed directory -> {rank: {"id": id prefix, "endpoints": {iface: [[addr, port], ...]}}} (absent: left out)."""
    if not isinstance(d, dict) or not isinstance(d.get("if"), list):
        return {}
    try:
        buf, n = base64.b64decode(str(d.get("b") or "")), int(d.get("n") or 0)
    except (ValueError, TypeError):
        return {}
    ifaces, out, pos = d["if"], {}, 0
    for r in range(n):
        try:
            nid, count = _NODE.unpack_from(buf, pos)
            pos += _NODE.size
            if count == _ABSENT:
                continue
            eps: dict = {}
            for _ in range(count):
                i, addr, port = _ENDPOINT.unpack_from(buf, pos)
                pos += _ENDPOINT.size
                eps.setdefault(ifaces[i], []).append([socket.inet_ntoa(addr), port])
        except (struct.error, IndexError):
            break
        out[r] = {"id": nid.hex(), "endpoints": eps}
    for r, info in (d.get("x") or {}).items():
        if str(r).isdigit() and isinstance(info, dict):
            out[int(r)] = info
    claims = d.get("h")
    for key, ranks in (claims.items() if isinstance(claims, dict) else ()):
        if host_key(key) and isinstance(ranks, list):
            for r in ranks[:n]:
                if isinstance(r, int) and r in out:
                    out[r] = dict(out[r], host=key)
    return out
