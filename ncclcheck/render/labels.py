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
from .common import one_line

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


def render_labels(report: Report) -> str:
    """A shell script of kubectl label/taint commands, one node after another."""
    q = shlex.quote
    out = [f"# ncclcheck {one_line(report.version)}: {one_line(report.command)} run started "
           f"{one_line(report.started)}, status {report.status.value}; apply with: sh THIS_FILE (needs kubectl "
           "with patch rights on nodes)"]
    if not report.nodes:
        out.append("# no nodes in this report: nothing to label")
    for node in report.nodes:
        host = str(node.hostname).lower()
        if not _NODE.match(host) or len(host) > 253:
            out.append(f"# node {int(node.node_rank)}: hostname {one_line(repr(host))} is not a Kubernetes node "
                       "name; skipped")
            continue
        worst, per_check = _node_status(report, node.node_rank)
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
