"""The one place ncclcheck acts on Slurm: `scontrol show node` and `scontrol update` (drain, resume).

Running scontrol is an action, not a fact, so it lives with the commands that act (health and sweep) rather than
in facts/, and only here: one module to audit for what ncclcheck may do to a cluster. It runs as root from
HealthCheckProgram and Prolog, so scontrol always gets an argument list (never a shell), every call is bounded
(Budget.scontrol_s) and never retried, and its failures (missing binary, an error, a controller that does
not answer) come back as one-line ScontrolErrors for the report. With dry_run nothing is run: the commands are
recorded, shell-quoted, for the user to read or paste.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from typing import Callable, Optional

from ..rendezvous.budget import FIXED
from .drain import NodeState

_SUFFIX = re.compile(r"\s*\[[^\[\]]*@[^\[\]]*\]\s*$")  # ' [root@2026-11-23T00:11:12]' that Slurm appends


class ScontrolError(Exception):
    """scontrol could not do what was asked; the message is one line."""


def parse_show_node(text: str) -> NodeState:
    """`scontrol show node NAME` output -> NodeState. A Reason= line holds the rest of its line (reasons have
    spaces); every other line is space-separated key=value pairs."""
    fields: dict[str, str] = {}
    reason = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Reason="):
            reason = _SUFFIX.sub("", s[len("Reason="):]).strip() or None
            continue
        for tok in s.split():
            key, sep, value = tok.partition("=")
            if sep and key not in fields:
                fields[key] = value
    if "NodeName" not in fields or "State" not in fields:
        raise ScontrolError("scontrol show node: no NodeName/State in its output")
    gres = fields.get("Gres")
    return NodeState(name=fields["NodeName"], state=fields["State"], reason=reason,
                     gres=None if gres in (None, "(null)") else gres)


def parse_show_nodes(text: str) -> dict:
    """`scontrol show node` (every node: records separated by blank lines) -> {name: NodeState}."""
    out: dict = {}
    for record in re.split(r"\n\s*\n", text):
        if record.strip():
            st = parse_show_node(record)
            out[st.name] = st
    return out


def gres_gpus(gres: Optional[str]) -> Optional[int]:
    """GPUs in a node's Gres ('gpu:8', 'gpu:h100:4(S:0-1),gpu:a100:4', 'nic:2'); None without a gpu gres."""
    total, seen = 0, False
    for item in (gres or "").split(","):
        parts = item.split("(", 1)[0].split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total, seen = total + int(parts[-1]), True
    return total if seen else None


Runner = Callable[..., "subprocess.CompletedProcess"]
# One node's name as Slurm spells it: scontrol reads `NodeName=gpu[01-99]` or `NodeName=a,b` as a hostlist, so a
# hostname recorded from another node (a sweep's pairs, a join record) could widen a drain to the whole partition.
_ONE_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


def one_node(name: str) -> str:
    """name when it names one node; ScontrolError otherwise (a hostlist expression, a list, spaces, '=', ALL)."""
    if not isinstance(name, str) or not _ONE_NODE.fullmatch(name) or name.upper() == "ALL":
        raise ScontrolError(f"{str(name)[:80]!r} is not one node's name (scontrol would read a hostlist expression "
                            "or a list as several nodes): not passed to scontrol")
    return name


class Scontrol:
    """scontrol, bounded. `commands` records every argv asked for (run or, with dry_run, only shown)."""

    def __init__(self, binary: Optional[str] = None, dry_run: bool = False, bound_s: Optional[float] = None,
                 run: Optional[Runner] = None):
        self.binary = shutil.which("scontrol") if binary is None else (binary or None)  # "": none
        self.dry_run = dry_run
        self.bound_s = FIXED.scontrol_s if bound_s is None else bound_s
        self.run = run or subprocess.run
        self.commands: list[str] = []

    def _call(self, args: list[str], change: bool) -> str:
        argv = [self.binary or "scontrol", *args]
        if change:
            self.commands.append(shlex.join(argv))
            if self.dry_run:
                return ""
        if not self.binary:
            raise ScontrolError("scontrol not found on PATH (is this a Slurm node? HealthCheckProgram's PATH is "
                                "slurmd's)")
        try:
            p = self.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                         timeout=self.bound_s, shell=False)
        except subprocess.TimeoutExpired:
            raise ScontrolError(f"`{shlex.join(argv)}` did not answer within {self.bound_s:g} s (is slurmctld "
                                "up and reachable?)") from None
        except OSError as e:
            raise ScontrolError(f"cannot run {argv[0]}: {e.strerror or e}") from None
        if p.returncode != 0:
            first = next((ln.strip() for ln in (p.stderr or p.stdout or "").splitlines() if ln.strip()), "")
            raise ScontrolError(f"`{shlex.join(argv)}` exited {p.returncode}: {first[:200] or 'no message'}")
        return p.stdout or ""

    def show_node(self, node: str) -> NodeState:
        return parse_show_node(self._call(["show", "node", node], change=False))

    def show_nodes(self) -> dict:
        """Every node's state in one call (a sweep acts on many nodes: one bounded call, not one per node)."""
        return parse_show_nodes(self._call(["show", "node"], change=False))

    def drain(self, node: str, reason: str) -> None:
        self._call(["update", f"NodeName={one_node(node)}", "State=DRAIN", f"Reason={reason}"], change=True)

    def resume(self, node: str) -> None:
        self._call(["update", f"NodeName={one_node(node)}", "State=RESUME"], change=True)

    def apply(self, action) -> None:
        """Carry out a drain.Action (none: nothing)."""
        if action.kind == "drain":
            self.drain(action.node, action.reason)
        elif action.kind == "resume":
            self.resume(action.node)
