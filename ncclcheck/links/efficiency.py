"""Each links direction a -> b against its bound (ncclcheck/nccl/bounds.py: a's egress, b's ingress): bound and
efficiency matrices beside matrix_gbps, what sets each bound, the directions whose figure beat their bound (the bound
is wrong: `bound_trusted` false, no efficiency, named in `wrong_bounds` and by links.efficiency), and the checks
`links.efficiency` and (with --min-efficiency) `links.min_efficiency`.

Each participating node publishes its link facts under `links/<node>` in the run's store, beside `host/<node>`;
the coordinator reads them once all rounds are done.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from ..model import CheckResult, failed, passed, sig, skipped, warned
from ..nccl import bounds as B


def node_bounds(by_node: dict, n: int, backend: str, side: str = "egress") -> list:
    """[Bound per node] of one side (egress: what it sends; ingress: what it receives); a node that sent nothing:
    unknown, saying so."""
    out = []
    for x in range(n):
        f = by_node.get(x)
        out.append(B.nic_path(f, backend, x, side) if isinstance(f, dict) else
                   B.Bound(None, f"node {x} sent no link facts"))
    return out


class Bounds:
    """Each node's egress and ingress Bound; `of(a, b)` the bound of direction a -> b."""

    def __init__(self, tx: list, rx: Optional[list] = None):
        self.tx, self.rx = tx, rx if rx is not None else tx

    @classmethod
    def read(cls, by_node: dict, n: int, backend: str) -> Bounds:
        return cls(node_bounds(by_node, n, backend), node_bounds(by_node, n, backend, "ingress"))

    def of(self, a: int, b: int) -> B.Bound:
        return B.direction_bound(self.tx[a], self.rx[b])

    def __len__(self) -> int:
        return len(self.tx)

    def __iter__(self):
        return (self[x] for x in range(len(self.tx)))

    def __getitem__(self, x: int) -> B.Bound:
        """Node x's own network bound (what node_bounds reports and explain_slow compares): the slower side."""
        return B.pair_bound(self.tx[x], self.rx[x])


def _as_bounds(nb: Any) -> Bounds:
    return nb if isinstance(nb, Bounds) else Bounds(list(nb))


def section_fields(matrix: list, nb: Any, unit: str) -> dict:
    """bound_gbps, efficiency, bound_by and bound_trusted matrices (directed, [a][b]), wrong_bounds and node_bounds,
    for the links section. A direction that beat its bound keeps its GB/s and the bound's figure, but no efficiency:
    bound_trusted is false there and wrong_bounds names it."""
    nb = _as_bounds(nb)
    n = len(matrix)
    if unit != "node":
        why = "ranks on one host: their pairs cross no network link"
        return {"bound_gbps": [[None] * n for _ in range(n)], "efficiency": [[None] * n for _ in range(n)],
                "bound_by": [[None if a == b else why for b in range(n)] for a in range(n)]}
    bound = [[None] * n for _ in range(n)]
    eff = [[None] * n for _ in range(n)]
    by = [[None] * n for _ in range(n)]
    trusted: list = [[None] * n for _ in range(n)]
    wrong = []
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            pb = nb.of(a, b)
            bound[a][b] = sig(pb.gbps) if pb.gbps is not None else None
            by[a][b] = pb.by
            g = matrix[a][b] if isinstance(matrix[a][b], (int, float)) else None
            if pb.gbps is not None and g is not None:
                trusted[a][b] = not B.bound_wrong(g, pb)
                if not trusted[a][b]:
                    wrong.append({"a": a, "b": b, "gbps": sig(g), "bound_gbps": sig(pb.gbps), "bound_by": pb.by})
            e = B.efficiency(g, pb)
            eff[a][b] = sig(e) if e is not None else None
    return {"bound_gbps": bound, "efficiency": eff, "bound_by": by, "bound_trusted": trusted, "wrong_bounds": wrong,
            "node_bounds": {str(x): {"bound_gbps": sig(b.gbps) if b.gbps is not None else None, "bound_by": b.by}
                            for x, b in enumerate(nb)}}


def floors(matrix: list, nb: Any, relative: float) -> list:
    """Per direction a -> b the GB/s below which it is slow by its bound alone (links/analyze.classify): `relative`
    x the share of the bound a healthy run reaches (EXPECTED_FRACTION) x the bound; with the default 0.5 a socket
    link is slow under a quarter of its shaper or line rate (a healthy gloo link reaches 0.85-0.97 of it).

    None (no absolute judgement: the relative rule alone) where the bound is unknown, a virtual device's fixed
    figure, or crosses no link, and on every direction of a node one of whose measured directions beat its bound:
    a bound proven wrong there says its facts do not describe what carries its traffic, so none of its bounds may
    call anything slow (issue 32)."""
    nb = _as_bounds(nb)
    n = len(matrix)
    untrusted = {x for a, b, g, pb in _pairs(matrix, nb) if B.bound_wrong(g, pb) for x in (a, b)}
    out: list = [[None] * n for _ in range(n)]
    for a in range(n):
        for b in range(n):
            if a == b or a in untrusted or b in untrusted or a >= len(nb) or b >= len(nb):
                continue
            pb = nb.of(a, b)
            frac = B.expected_fraction(pb)
            if frac is not None and pb.transport != B.NO_LINK and pb.gbps is not None and pb.gbps > 0:
                out[a][b] = relative * frac * pb.gbps
    return out


def limits(matrix: list, nb: Any) -> list:
    """Per direction a -> b the lowest real limit known on either side (a's egress, b's ingress: a shaper, a line
    rate), or None (neither side known, or only a virtual device's fixed figure). Unlike `floors` one side suffices:
    a direction can never beat either side's limit, so a figure at one of them proves that the network, not a CPU,
    set it (links/analyze.classify's tight rule asks that of most directions). None on every direction of a node one
    of whose measured directions beat such a limit: its facts do not describe what carries its traffic."""
    nb = _as_bounds(nb)
    n = len(matrix)

    def limit(a: int, b: int) -> Optional[float]:
        if a >= len(nb.tx) or b >= len(nb.rx):
            return None
        real = [x.gbps for x in (nb.tx[a], nb.rx[b]) if x.gbps is not None and x.gbps > 0 and not x.virtual
                and x.transport != B.NO_LINK]
        return min(real) if real else None

    out: list = [[None if a == b else limit(a, b) for b in range(n)] for a in range(n)]
    wrong = {x for a in range(n) for b in range(n) if a != b and out[a][b] is not None
             and isinstance(matrix[a][b], (int, float)) and matrix[a][b] > out[a][b] * (1 + B.ABOVE_LIMIT_NOISE)
             for x in (a, b)}
    return [[None if a in wrong or b in wrong else out[a][b] for b in range(n)] for a in range(n)]


def _pairs(matrix: list, nb: Any) -> list:
    nb = _as_bounds(nb)
    n = len(matrix)
    out = []
    for a in range(n):
        for b in range(n):
            if a != b and isinstance(matrix[a][b], (int, float)):
                out.append((a, b, matrix[a][b], nb.of(a, b)))
    return out


def _wrong_text(a: int, b: int, g: float, pb: B.Bound, name) -> str:
    return (f"bound of {name(a)} -> {name(b)} is wrong: measured {g:.3g} GB/s > bound {pb.gbps:.4g} GB/s "
            f"(bound_by {pb.by})")


def efficiency_check(matrix: list, nb: Any, unit: str, hosts: Optional[list] = None) -> CheckResult:
    """links.efficiency: every measured direction against the expected fraction of its pair's bound."""
    cid = "links.efficiency"
    if unit != "node":
        return skipped(cid, "ranks on one host: their pairs cross no network link")
    pairs = _pairs(matrix, nb)
    if not pairs:
        return skipped(cid, "no pair was measured")

    def name(x: int) -> str:
        return f"node {x}" + (f" ({hosts[x]})" if hosts and x < len(hosts) and hosts[x] else "")

    if all(pb.transport == B.NO_LINK for *_, pb in pairs):
        return skipped(cid, f"no pair crossed a link: {pairs[0][3].by}")
    unknown = [(a, b, g, pb) for a, b, g, pb in pairs if pb.gbps is None]
    if unknown:
        # No bound is no verdict here (a virtual NIC's fixed speed, a NIC that reports none): said with why, and the
        # hosts are still compared with each other by links.slow, which names an outlier without any bound.
        a, b, _, pb = unknown[0]
        return skipped(cid, f"bound unknown for {len(unknown)} of {len(pairs)} directions ({pb.by}): efficiency "
                            "not judged; the hosts are compared with each other (links.slow)",
                       detail="\n".join(dict.fromkeys(n for *_, p in unknown for n in p.notes)),
                       evidence={"unknown": [[a, b] for a, b, *_ in unknown]})
    wrong = [(a, b, g, pb) for a, b, g, pb in pairs if B.bound_wrong(g, pb)]
    if wrong:
        # A figure above its bound proves the bound wrong: it is named, and no efficiency is judged against it.
        a, b, g, pb = wrong[0]
        lines = [_wrong_text(*w, name) for w in wrong]
        return warned(cid, lines[0] + (f" (+{len(wrong) - 1} more)" if len(wrong) > 1 else ""),
                      detail="\n".join(lines + list(dict.fromkeys(n for *_, p in pairs for n in p.notes))),
                      fix="A limit ncclcheck read is not what carried the traffic (a shaper on another interface or "
                          "path, a virtual device's fixed speed): check `tc qdisc show` and the interface the "
                          "backend uses; the figures are kept in the JSON (matrix_gbps, bound_gbps).",
                      evidence={"wrong_bounds": [[a, b] for a, b, *_ in wrong]})
    low, virtual = [], []
    for a, b, g, pb in pairs:
        frac = B.expected_fraction(pb)
        if frac is None:
            virtual.append((a, b, g, pb))
        elif g / pb.gbps < frac:
            low.append((a, b, g, pb, frac))
    effs = [g / pb.gbps for _, _, g, pb in pairs]
    ev: dict[str, Any] = {"min_efficiency": sig(min(effs)), "max_efficiency": sig(max(effs)),
                          "below_expected": [[a, b] for a, b, *_ in low]}
    notes = "\n".join(dict.fromkeys(n for *_, pb in pairs for n in pb.notes))
    if low:
        a, b, g, pb, frac = min(low, key=lambda x: x[2] / x[3].gbps)
        return warned(cid, f"{len(low)} of {len(pairs)} directions below the {frac * 100:.0f}% expected: "
                           f"{name(a)} -> {name(b)} {g:.3g} GB/s = {100 * g / pb.gbps:.0f}% of {pb.gbps:.4g} GB/s "
                           f"({pb.by})",
                      detail=notes, evidence=ev,
                      fix="links.slow names the slow node or link; compare its NIC, cable and switch port.")
    if virtual:
        pb = virtual[0][3]
        # A veth/tun reads 10 Gb/s whatever carries it (a pod's eth0 is a veth): shown, but no verdict on it.
        return skipped(cid, f"bound is a virtual device's fixed figure ({pb.by}): efficiency "
                            f"{100 * min(effs):.0f}-{100 * max(effs):.0f}% shown, not judged",
                       detail=notes, evidence=ev)
    return passed(cid, f"every direction reached its expected share of the bound (efficiency "
                       f"{100 * min(effs):.0f}-{100 * max(effs):.0f}%)", detail=notes, evidence=ev)


def explain_slow(check: CheckResult, nb: Any, slow_nodes: list, hosts: Optional[list]) -> CheckResult:
    """When links.slow named nodes and each is slow because its own bound is the lowest (a shaper, a slower NIC), the
    efficiency check says so: the fix is that link's rate, not a fault."""
    known = [b.gbps for b in nb if b.gbps is not None]
    if check.status.value != "pass" or not slow_nodes or len(known) < 2:
        return check
    top = max(known)
    why = [f"node {x}" + (f" ({hosts[x]})" if hosts and x < len(hosts) and hosts[x] else "")
           + f": {nb[x].gbps:.3g} GB/s, {nb[x].by}"
           for x in slow_nodes if 0 <= x < len(nb) and nb[x].gbps is not None and nb[x].gbps < 0.75 * top]
    if len(why) != len(slow_nodes):
        return check
    return replace(check, summary=check.summary + "; the slow node's own bound explains it (" + "; ".join(why) + ")",
                   evidence={**check.evidence, "explained_slow_nodes": list(slow_nodes)})


def min_efficiency_check(need: float, matrix: list, nb: Any, unit: str) -> CheckResult:
    """links.min_efficiency: every measured direction >= need x its bound; an unknown bound cannot pass."""
    cid = "links.min_efficiency"
    if unit != "node":
        return failed(cid, "ranks on one host cross no network link: efficiency cannot be gated")
    pairs = _pairs(matrix, nb)
    bad = []
    for a, b, g, pb in pairs:
        if pb.gbps is None:
            bad.append(f"{a} -> {b}: bound unknown ({pb.by})")
        elif B.bound_wrong(g, pb):
            bad.append(f"{a} -> {b}: bound wrong (measured {g:.3g} > bound {pb.gbps:.4g} GB/s, {pb.by}): cannot gate")
        elif g / pb.gbps < need:
            bad.append(f"{a} -> {b}: efficiency {100 * g / pb.gbps:.0f}% < required {100 * need:.0f}% "
                       f"({g:.3g} of {pb.gbps:.4g} GB/s, {pb.by})")
    if not pairs:
        bad.append("no pair was measured")
    if bad:
        return failed(cid, bad[0] + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""), detail="\n".join(bad),
                      evidence={"required": need}, fix="links.slow names the slow node or link.", findings=tuple(bad))
    return passed(cid, f"every direction >= {100 * need:.0f}% of its bound", evidence={"required": need})


def evaluate(matrix: list, by_node: dict, backend: str, unit: str, hosts: Optional[list],
             min_efficiency: Optional[float], slow_nodes: list = ()) -> tuple[dict, list]:
    """(fields for the links section, checks). slow_nodes: links.slow's verdict, explained where a node's own
    bound is what makes it slow."""
    nb = Bounds.read(by_node, len(matrix), backend)
    fields = section_fields(matrix, nb, unit)
    checks = [explain_slow(efficiency_check(matrix, nb, unit, hosts), nb, slow_nodes, hosts)]
    if min_efficiency is not None:
        checks.append(min_efficiency_check(min_efficiency, matrix, nb, unit))
    return fields, checks
