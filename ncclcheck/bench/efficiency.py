"""Is this busbw normal? Each bench row against the bound of the links it crossed (ncclcheck/nccl/bounds.py).

Each node's local rank 0 emits its link facts (`node_links` records, through the job's store like bench rows);
node 0 turns them into one bound per op, writes `bound_gbps`, `bound_by` and `efficiency` into every row and the
summary, and judges the largest size per op: check ids `bench.efficiency` (one per op) and, with
`--min-efficiency F`, `bench.min_efficiency`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

from ..model import BenchRow, CheckResult, failed, passed, sig, skipped, warned
from ..nccl import bounds as B

RECORD_KIND = "node_links"
MAX_RECORD_NODES = 65536


def link_record(ctx: Any) -> Optional[dict]:
    """This node's link facts as an emit record (local rank 0 only; never raises: a bound is a nicety)."""
    if getattr(ctx, "local_rank", 0) != 0:
        return None
    from ..facts import hostname
    from ..facts.links import collect_for_job, store_host

    try:
        links = collect_for_job(with_gpus=str(getattr(ctx, "device", "cpu")).startswith("cuda"),
                                peer=store_host(getattr(ctx, "store", None)))
    except Exception as e:  # noqa: BLE001 - reported as unavailable, the bound then says so
        links = {"unavailable": f"{type(e).__name__}: {e}"}
    return {"node": int(getattr(ctx, "node_rank", 0)), "hostname": hostname(), "links": links}


def links_by_node(records: Iterable[Any]) -> dict:
    """node rank -> link facts, from emitted records (anything malformed is ignored: records come off the wire)."""
    out: dict[int, dict] = {}
    for e in records:
        if not isinstance(e, dict) or e.get("kind") != RECORD_KIND:
            continue
        d = e.get("data")
        if not isinstance(d, dict) or not isinstance(d.get("node"), int) or isinstance(d.get("node"), bool):
            continue
        if 0 <= d["node"] < MAX_RECORD_NODES and isinstance(d.get("links"), dict):
            out.setdefault(d["node"], d["links"])
    return out


def op_bounds(ops: Iterable[str], nnodes: int, backend: str, ranks_per_node: int, by_node: dict) -> dict:
    """op -> Bound for this world (pure: the same records give the same bounds)."""
    on_gpu = backend == "nccl"
    intras = {n: B.intra_node(f, ranks_per_node, on_gpu, n if nnodes > 1 else None) for n, f in by_node.items()}
    intra = (B._min(list(intras.values())) or next(iter(intras.values()), None)) if intras else \
        B.intra_node(None, ranks_per_node, on_gpu)
    # In a ring every node sends and receives at the ring's rate: its bound is the slower of its two sides.
    nets = {n: B.pair_bound(B.nic_path(f, backend, n), B.nic_path(f, backend, n, "ingress"))
            for n, f in by_node.items()}
    missing = [n for n in range(nnodes) if n not in by_node]
    if nnodes > 1 and missing:
        nets[missing[0]] = B.Bound(None, f"node {missing[0]} sent no link facts")
    return {op: B.op_bound(op, nnodes, backend, ranks_per_node, nets, intra) for op in ops}


def hardware(nnodes: int, backend: str, ranks_per_node: int, by_node: dict) -> Optional[dict]:
    """What gates.reference_note matches the published per-SKU figures on (the second opinion beside the bound):
    GPU name and count per node from NVML, the NIC speed from the first active RDMA port."""
    if not by_node:
        return None
    first = by_node[min(by_node)]
    try:
        gpus = ((first.get("nvlink") or {}).get("gpus") or []) if isinstance(first.get("nvlink"), dict) else []
        ports = [p for p in first.get("ib_ports") or [] if p.get("state") == "ACTIVE" and B._num(p.get("rate_gbps"))]
        name = gpus[0].get("name") if gpus and isinstance(gpus, list) else None
        return {"nnodes": nnodes, "gpus_per_node": ranks_per_node if backend == "nccl" else 0,
                "gpu_name": name if isinstance(name, str) else None,
                "nic_gbit": int(B._num(ports[0]["rate_gbps"])) if ports else None}
    except B.MALFORMED:  # facts off the wire: no second opinion rather than no report
        return None


def annotate(rows: list[BenchRow], bounds: dict) -> None:
    """Write bound_gbps, bound_by and efficiency into each row (rows keep such fields in `extra`)."""
    for r in rows:
        b = bounds.get(r.op)
        if b is None:
            continue
        eff = B.efficiency(r.busbw_gbps, b)
        r.extra.update({"bound_gbps": sig(b.gbps) if b.gbps is not None else None, "bound_by": b.by,
                        "efficiency": sig(eff) if eff is not None else None})
        if B.bound_wrong(r.busbw_gbps, b):
            r.extra["bound_trusted"] = False  # the figure beat the bound: no efficiency, the bound is named wrong


def summarize(per_op: list, bounds: dict) -> None:
    """The summary's entries gain the bound of their op and the efficiency at the largest size."""
    for e in per_op:
        b = bounds.get(e.get("op"))
        if b is None:
            continue
        eff = B.efficiency(e.get("busbw_gbps"), b)
        e.update({"bound_gbps": sig(b.gbps) if b.gbps is not None else None, "bound_by": b.by,
                  "efficiency": sig(eff) if eff is not None else None})
        if B.bound_wrong(e.get("busbw_gbps"), b):
            e["bound_trusted"] = False
        frac = B.expected_fraction(b)
        if frac is not None:
            e["expected_efficiency"] = frac


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def efficiency_check(op: str, row: Optional[BenchRow], b: B.Bound, multi_rank: bool) -> CheckResult:
    """bench.efficiency for one op at its gate size: pass at or above the expected fraction of the bound for its
    transport, warn below it (naming the limiting link) or when the bound is unknown; skip (shown, not judged) when
    it is virtual."""
    cid = "bench.efficiency"
    ev: dict[str, Any] = {"op": op, **b.to_json()}
    if row is None:
        return skipped(cid, f"{op}: not measured at the gate size", evidence=ev)
    ev.update({"bytes": row.bytes, "busbw_gbps": row.busbw_gbps})
    if not multi_rank:
        return skipped(cid, f"{op}: one rank, nothing crosses a link", evidence=ev)
    if b.gbps is None:
        if b.transport == B.NO_LINK:
            return skipped(cid, f"{op}: {b.by}", evidence=ev)
        return warned(cid, f"{op}: bound unknown ({b.by}); efficiency not judged", detail="\n".join(b.notes),
                      fix="Read the interface's speed (ethtool IF) or set NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to "
                          "an interface that reports one.", evidence=ev)
    if B.bound_wrong(row.busbw_gbps, b):
        ev["bound_trusted"] = False
        return warned(cid, f"bound of {op} is wrong: measured busbw {row.busbw_gbps:.3g} GB/s > bound {b.gbps:.4g} "
                           f"GB/s (bound_by {b.by}); efficiency not judged", detail="\n".join(b.notes), evidence=ev,
                      fix="A limit ncclcheck read is not what carried the traffic (a shaper on another interface, a "
                          "virtual device's fixed speed, NVLS/Tree on 2 nodes): check the interface the backend uses.")
    eff = row.busbw_gbps / b.gbps
    ev["efficiency"] = sig(eff)
    frac = B.expected_fraction(b)
    ev["expected_efficiency"] = frac
    head = f"{op}: busbw {row.busbw_gbps:.3g} GB/s = {_pct(eff)} of the {b.gbps:.4g} GB/s bound ({b.by})"
    detail = "\n".join(b.notes)
    if frac is None:
        # A veth/tun reads 10 Gb/s whatever carries it (a pod's eth0 is a veth): shown, but no verdict on it.
        return skipped(cid, f"{head}; the bound is a virtual device's fixed figure, not judged", detail=detail,
                       evidence=ev)
    if eff >= frac:
        return passed(cid, f"{head}, expected >= {_pct(frac)} for {b.transport}", detail=detail, evidence=ev)
    return warned(cid, f"{head}, below the {_pct(frac)} expected for {b.transport}: limited by {b.by}",
                  detail=detail, evidence=ev,
                  fix="Run `ncclcheck links` to find a slow node or link; compare the transport NCCL chose "
                      "(--nccl-capture) with the fast interface.")


def min_efficiency_check(need: float, at: dict, bounds: dict, multi_rank: bool) -> CheckResult:
    """bench.min_efficiency: every op's efficiency at the gate size >= need; an unknown bound cannot pass."""
    cid = "bench.min_efficiency"
    low, unknown, ok = [], [], []
    for op, row in at.items():
        b = bounds.get(op)
        eff = B.efficiency(row.busbw_gbps, b) if (row is not None and b is not None and multi_rank) else None
        if eff is None:
            wrong = row is not None and b is not None and B.bound_wrong(row.busbw_gbps, b)
            unknown.append(f"{op}: " + ("not measured" if row is None else
                                        "one rank, nothing crosses a link" if not multi_rank else
                                        f"bound wrong (busbw {row.busbw_gbps:.3g} > bound {b.gbps:.4g} GB/s, "
                                        f"{b.by}): cannot gate" if wrong else
                                        f"bound unknown ({b.by if b else 'no bound'})"))
        elif eff < need:
            low.append(f"{op}: efficiency {_pct(eff)} < required {_pct(need)} (busbw {row.busbw_gbps:.3g} of "
                       f"{b.gbps:.4g} GB/s, {b.by})")
        else:
            ok.append((op, eff))
    ev = {"required": need, "ops": {op: (sig(e) if (e := B.efficiency(r.busbw_gbps, bounds[op])) is not None else None)
                                    if r is not None and op in bounds else None for op, r in at.items()}}
    bad = low + unknown
    if bad:
        return failed(cid, bad[0] + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""), detail="\n".join(bad),
                      fix="Run `ncclcheck links` to find the slow node or link; an unknown bound cannot be gated "
                          "(the interface reports no speed).", evidence=ev)
    worst = min(ok, key=lambda x: x[1])
    return passed(cid, f"efficiency >= {_pct(need)} for every op (lowest {worst[0]} {_pct(worst[1])})", evidence=ev)


def evaluate(rows: list[BenchRow], gate_at: dict, world: Optional[dict], min_efficiency: Optional[float]
             ) -> tuple[list, dict, Optional[dict]]:
    """(checks, bounds, hardware) for a bench run. world: {"nnodes", "backend", "ranks_per_node", "records"}; None
    (a caller that gathered no link facts) leaves rows as they are and checks nothing unless a gate was asked."""
    if world is None:
        if min_efficiency is None:
            return [], {}, None
        return [failed("bench.min_efficiency", "no link facts were gathered: efficiency cannot be gated")], {}, None
    nnodes = int(world.get("nnodes") or 1)
    rpn = int(world.get("ranks_per_node") or 1)
    backend = str(world.get("backend") or "gloo")
    ops = list(dict.fromkeys([r.op for r in rows] + list(gate_at)))
    by_node = links_by_node(world.get("records") or [])
    bounds = op_bounds(ops, nnodes, backend, rpn, by_node)
    annotate(rows, bounds)
    multi = nnodes * rpn > 1
    checks = [efficiency_check(op, gate_at.get(op), bounds[op], multi) for op in gate_at]
    if min_efficiency is not None:
        checks.append(min_efficiency_check(min_efficiency, gate_at, bounds, multi))
    return checks, bounds, hardware(nnodes, backend, rpn, by_node)
