"""`ncclcheck report RUN.json --format labels`: the run as Kubernetes node labels and a taint, as kubectl commands.

Per node of the report (its hostname is taken as the Kubernetes node name, which holds with `hostNetwork: true`):
- `ncclcheck.io/preflight=pass|warn|fail`: the worst status among the checks about that node: its own, and the
  cross-node checks whose evidence names it (`evidence.nodes`);
- `ncclcheck.io/pool=pass|warn|fail`: the whole run's verdict, on every node (a node that never joined fails the
  run, but tainting the nodes that did join would drain healthy nodes);
- `check.ncclcheck.io/<check id>=warn|fail` for each check about the node that did not pass, and the label removed
  for each that passed or was skipped, so a fixed problem does not leave a stale label behind;
- taint `ncclcheck.io/preflight=fail:NoSchedule` on a failing node, removed from one that no longer fails.
Every word comes from another machine's report, so names that are not valid Kubernetes names are skipped with a
comment, and every argument is shell-quoted.
"""

from __future__ import annotations

import re
import shlex
from typing import Optional

from ..model import Report, Status
from .common import hostnames, one_line

DOMAIN = "ncclcheck.io"
STATUS_LABEL = f"{DOMAIN}/preflight"
POOL_LABEL = f"{DOMAIN}/pool"
CHECK_PREFIX = f"check.{DOMAIN}/"
TAINT = f"{DOMAIN}/preflight"
_NODE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def label_name(check_id: str) -> Optional[str]:
    """A check id as the name part of a label key (<= 63 characters of [A-Za-z0-9-_.]); None when impossible.
    Scoped ids like `bench.min_busbw[all_reduce]` keep their scope as `bench.min_busbw.all_reduce`."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", ".", check_id).strip("._-")
    return name if _LABEL_NAME.match(name) else None


def _node_status(report: Report, rank: int) -> tuple[Status, dict[str, Status]]:
    per_check: dict[str, Status] = {}
    for c in report.checks:
        named = (c.evidence or {}).get("nodes") if c.node is None else None
        if c.node == rank or (isinstance(named, list) and rank in named):
            name = label_name(c.id)
            if name is None:
                continue
            prev = per_check.get(name)
            per_check[name] = c.status if prev is None or c.status.rank > prev.rank else prev
    worst = Status.PASS
    for s in per_check.values():
        if s in (Status.WARN, Status.FAIL) and s.rank > worst.rank:
            worst = s
    return worst, per_check


def _merge(report: Report, ranks: list[int]) -> tuple[Status, dict[str, Status]]:
    """The labels of one Kubernetes node that several node ranks of the run share (one hostname): per check the
    worst status among them, and the worst overall, so a check that failed on one of them is not overwritten by a
    pass on the other."""
    worst, per_check = Status.PASS, {}
    for rank in ranks:
        w, checks = _node_status(report, rank)
        worst = w if w.rank > worst.rank else worst
        for name, st in checks.items():
            prev = per_check.get(name)
            per_check[name] = st if prev is None or st.rank > prev.rank else prev
    return worst, per_check


def render_labels(report: Report) -> str:
    """A shell script of kubectl label/taint commands, one Kubernetes node after another: node ranks that share a
    hostname are one Kubernetes node, labelled once (two label lines for one name: the second overwrote the first)."""
    q = shlex.quote
    out = [f"# ncclcheck {one_line(report.version)}: {one_line(report.command)} run started "
           f"{one_line(report.started)}, status {report.status.value}; apply with: sh THIS_FILE (needs kubectl "
           "with patch rights on nodes)"]
    nodes = sorted(hostnames(report).items())  # every node of the run: a links run's other nodes too
    if not nodes:
        out.append("# no nodes in this report: nothing to label")
    by_host: dict[str, list[int]] = {}
    for rank, name in nodes:
        host = str(name).lower()
        if not _NODE.match(host) or len(host) > 253:
            out.append(f"# node {int(rank)}: hostname {one_line(repr(host))} is not a Kubernetes node name; skipped")
            continue
        by_host.setdefault(host, []).append(int(rank))
    for host, ranks in by_host.items():
        if len(ranks) > 1:
            out.append(f"# node ranks {', '.join(map(str, ranks))} share hostname {host}: one Kubernetes node, "
                       "labelled with the worst of their results")
        worst, per_check = _merge(report, ranks)
        args = [f"{STATUS_LABEL}={worst.value}", f"{POOL_LABEL}={report.status.value}"]
        for name, status in sorted(per_check.items()):
            key = CHECK_PREFIX + name
            args.append(f"{key}={status.value}" if status in (Status.WARN, Status.FAIL) else f"{key}-")
        out.append(" ".join(["kubectl", "label", "node", q(host), "--overwrite", *map(q, args)]))
        if worst is Status.FAIL:
            out.append(" ".join(["kubectl", "taint", "node", q(host), "--overwrite", q(f"{TAINT}=fail:NoSchedule")]))
        else:  # removing a taint that is not there is an error for kubectl: not one for us
            out.append(" ".join(["kubectl", "taint", "node", q(host), q(f"{TAINT}:NoSchedule-")])
                       + " 2>/dev/null || true")
    return "\n".join(out) + "\n"


__all__ = ["render_labels", "label_name", "STATUS_LABEL", "POOL_LABEL", "CHECK_PREFIX", "TAINT"]
