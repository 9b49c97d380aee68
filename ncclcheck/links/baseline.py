"""`links.baseline`: every measured link against the same link in a saved links run; a link slower than its baseline
by more than --tolerance fails. Links are matched by the hostnames at both ends when both runs name their nodes (node
ranks move between runs; hosts do not), else by node rank."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ..errors import UsageError
from ..model import CheckResult, NodeInfo, failed, load_saved_report, passed, warned
from ..units import format_gbps

CHECK_ID = "links.baseline"


def load_links_baseline(path: str) -> dict:
    """The saved report's JSON (schema ncclcheck.report/1 with a links matrix). UsageError when it is not one."""
    data = load_saved_report(path, f"--baseline {path}")
    if not isinstance((data.get("links") or {}).get("matrix_gbps"), list):
        made = data.get("command") if isinstance(data.get("command"), str) else None
        what = f"a report of `ncclcheck {made}`" if made else "the report"
        raise UsageError(f"--baseline {path}: {what} holds no links matrix to compare; a links baseline is a report "
                         "of links or sweep (`ncclcheck links --save-baseline FILE`)")
    return data


def _pairs(matrix: Sequence, names: Mapping[int, str]) -> dict[tuple, float]:
    out: dict[tuple, float] = {}
    for a, row in enumerate(matrix or []):
        for b, gbps in enumerate(row or []):
            if a != b and isinstance(gbps, (int, float)) and gbps > 0:
                out[(names.get(a, a), names.get(b, b))] = float(gbps)
    return out


def _names(section: Mapping, nodes: Sequence[NodeInfo], n: int) -> dict[int, Any]:
    """matrix index -> hostname when every index has a distinct one (the section's own `hosts`, else the report's
    nodes); else {} (match by index)."""
    hosts = section.get("hosts")
    if isinstance(hosts, list) and hosts:
        names = {i: str(h) for i, h in enumerate(hosts)}
    else:
        names = {x.node_rank: x.hostname for x in nodes}
    if len(names) >= n and len(set(names.values())) == len(names) and "?" not in names.values():
        return names
    return {}


def compare_links(section: Optional[dict], nodes: Sequence[NodeInfo], base: dict, tolerance: float,
                  source: str = "baseline") -> CheckResult:
    """One links.baseline result: fail naming each link slower than (1 - tolerance) x its baseline."""
    matrix = (section or {}).get("matrix_gbps") or []
    base_matrix = base["links"]["matrix_gbps"]
    base_nodes = [NodeInfo(int(n.get("node_rank", i)), str(n.get("hostname", "?")))
                  for i, n in enumerate(base.get("nodes") or []) if isinstance(n, Mapping)]
    now_names = _names(section or {}, nodes, len(matrix))
    base_names = _names(base["links"], base_nodes, len(base_matrix))
    if not (now_names and base_names):
        now_names = base_names = {}
    now, then = _pairs(matrix, now_names), _pairs(base_matrix, base_names)
    compared, slow, absent = [], [], []
    for pair, gbps in now.items():
        ref = then.get(pair)
        if ref is None:  # not in the baseline: not compared, counted (a link it never measured is no slowdown)
            absent.append(list(pair))
            continue
        ratio = gbps / ref
        item = {"a": pair[0], "b": pair[1], "gbps": gbps, "baseline_gbps": ref, "ratio": round(ratio, 4)}
        compared.append(item)
        if ratio < 1.0 - tolerance:
            slow.append(item)
    ev = {"baseline": source, "tolerance": tolerance, "matched_by": "hostname" if now_names else "node rank",
          "compared": compared, "slower": slow, "not_in_baseline": absent}
    note = (f"; {len(absent)} measured link{'s' if len(absent) != 1 else ''} not in the baseline, not compared"
            if absent else "")
    if slow:
        words = [f"{s['a']} -> {s['b']}: {format_gbps(s['gbps'])} vs baseline {format_gbps(s['baseline_gbps'])} "
                 f"({(1 - s['ratio']) * 100:.0f}% slower)" for s in sorted(slow, key=lambda s: s["ratio"])]
        return failed(CHECK_ID, f"{len(slow)} link{'s' if len(slow) > 1 else ''} slower than the baseline by more "
                      f"than {tolerance * 100:.0f}%: " + words[0] + (f" (+{len(words) - 1} more)" if len(words) > 1
                                                                      else "") + note,
                      detail="\n".join(words),
                      fix="Something changed on these links since the baseline: check the cable/optic and port "
                          "counters of the named nodes (ethtool -S, ibstat, perfquery), their MTU and the transport "
                          "NCCL chose; compare versions with `ncclcheck preflight --baseline`.",
                      evidence=ev)
    if not compared:
        return warned(CHECK_ID, f"no measured link matches a link of the baseline {source}{note}", evidence=ev)
    return passed(CHECK_ID, f"{len(compared)} links within {tolerance * 100:.0f}% of the baseline{note}",
                  evidence=ev)


__all__ = ["CHECK_ID", "load_links_baseline", "compare_links"]
