"""The recommended environment as a file people `source` (sh or bash) before launching training.

Layout: a header, then every cluster-wide setting as `export NAME=value` under a comment with its reason, then, when
some settings differ per node, a `case` on the node rank. The node rank is taken from the first of these that is set:
NCCLCHECK_NODE_RANK (ours), NODE_RANK (Lightning and many launch scripts), GROUP_RANK (set by torchrun for its
workers), SLURM_NODEID (srun), JOB_COMPLETION_INDEX (Kubernetes indexed Job), PET_NODE_RANK (Kubeflow PyTorchJob).
When none is set the short hostname is matched against the hostnames the report saw, so a plain ssh shell works too.
A node the file does not know gets a warning on stderr and keeps the cluster-wide values only.

This module is the one writer of `export` lines: the file, the copyable block of HTML and Markdown and the terminal's
block (render/console.py) all take them from export_line(), and a value that cannot be one (not_written()) is named,
never written. The file is for `source`/`.`/`eval` (every shell reads its `#` comments as comments); the terminal's
block has no comments, because an interactive zsh reads a pasted `# ...` as a command unless the user set
interactive_comments (an apostrophe in a reason left the paste waiting at `quote>`).
"""

from __future__ import annotations

import shlex
from typing import Optional

from ..envnames import assignment, env_name_allowed
from ..model import Recommendation, Report, clean_text
from .common import one_line

RANK_VARIABLES = ("NCCLCHECK_NODE_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_NODEID", "JOB_COMPLETION_INDEX",
                  "PET_NODE_RANK")


MAX_VALUE_CHARS = 4096  # a value read from a peer or a file longer than this is not written: no NCCL setting is near it


def _comment(text: str) -> str:
    """One comment line, whatever the text: one_line() leaves no newline that would end the comment early."""
    return "# " + one_line(text) if text else "#"


def not_written(name: object, value: object) -> Optional[str]:
    """Why `export NAME=value` is not written, as a clause ("NCCL_X's value holds a control character ..."), or
    None when it may be. Names and values come from other machines' reports and from files."""
    if not env_name_allowed(name):
        # Names come from other machines' reports: only the allow-listed families may be set (nccl/rules.py).
        return f"{one_line(repr(name))} is not a variable ncclcheck may recommend"
    text = str(value)
    if len(text) > MAX_VALUE_CHARS:  # 300,000 characters left the shell that sourced it unable to start programs
        return (f"{name}'s value is {len(text)} characters (the bound is {MAX_VALUE_CHARS}): not a value "
                "ncclcheck recommends")
    if clean_text(text) != text or "\n" in text or "\t" in text:
        # Quoted, a newline still splits the line a person copies, and a pasted tab completes file names.
        return f"{name}'s value holds a control character (a newline, a tab, an escape): no NCCL setting has one"
    return None


def export_line(name: str, value: str) -> str:
    """`export NAME=value`, the value quoted the shell's way (envnames.assignment); only for a pair not_written()
    passed."""
    return f"export {assignment(name, value)}"


def _export_lines(rec: Recommendation, indent: str = "") -> list[str]:
    why = not_written(rec.name, rec.value)
    if why is not None:
        return [f"{indent}# skipped: {why}"]
    return [f"{indent}{_comment(rec.reason)}", f"{indent}{export_line(rec.name, rec.value)}"]


def _rank_expr() -> str:
    expr = ""
    for var in reversed(RANK_VARIABLES):
        expr = f"${{{var}:-{expr}}}"
    return f'"{expr}"'


def render_exports(report: Report) -> str:
    """Only the cluster-wide `export` lines with their reasons (the copyable block in HTML and Markdown)."""
    lines: list[str] = []
    for rec in report.recommendations:
        if rec.node is None:
            lines += _export_lines(rec)
    return "\n".join(lines) + ("\n" if lines else "")


def render_envfile(report: Report) -> str:
    """A sourceable sh/bash file with every recommendation of the report."""
    out = [
        "# ncclcheck recommended environment: source this file before launching training.",
        f"# From `ncclcheck {one_line(report.command)}` {one_line(report.version)}, started "
        f"{one_line(report.started) or '?'}.",
    ]
    if not report.recommendations:
        out.append("# No settings recommended: the defaults suit this cluster.")
        return "\n".join(out) + "\n"
    common = render_exports(report)
    if common:
        out += ["", common.rstrip("\n")]
    per_node: dict[int, list[Recommendation]] = {}
    for rec in report.recommendations:
        if rec.node is not None:
            per_node.setdefault(rec.node, []).append(rec)
    if per_node:
        out += [
            "",
            "# Settings that differ per node, chosen by the node rank from the first of",
            "# " + ", ".join(RANK_VARIABLES) + " that is set, or else by hostname.",
            f"_ncclcheck_node={_rank_expr()}",
        ]
        hosts = [(n.node_rank, one_line(n.hostname)) for n in report.nodes
                 if n.node_rank in per_node and one_line(n.hostname)]
        if hosts:
            out += ['if [ -z "$_ncclcheck_node" ]; then',
                    '  case "$(hostname -s 2>/dev/null || hostname)" in']
            for rank, host in sorted(hosts):
                names = [host] + ([host.split(".", 1)[0]] if "." in host else [])
                pattern = "|".join(shlex.quote(h) for h in names)
                out.append(f"    {pattern}) _ncclcheck_node={int(rank)} ;;")
            out += ["  esac", "fi"]
        out.append('case "$_ncclcheck_node" in')
        for rank in sorted(per_node):
            out.append(f"  {int(rank)})")
            for rec in per_node[rank]:
                out += _export_lines(rec, indent="    ")
            out.append("    ;;")
        out += [
            "  *)",
            '    echo "ncclcheck env: unknown node rank (set NCCLCHECK_NODE_RANK): per-node settings not applied" >&2',
            "    ;;",
            "esac",
            "unset _ncclcheck_node",
        ]
    return "\n".join(out) + "\n"
