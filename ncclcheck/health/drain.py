"""What to do to a Slurm node after a verdict, decided purely: the drain reason ncclcheck writes and the prefix rule
that keeps ncclcheck, NHC and admins out of each other's way (docs/slurm.md).

The rule, as NHC applies it to its own prefix: drain a failing node only when it is not already drained or down
(whatever the reason, or with none); re-word a drain only when the reason is ncclcheck's; after a clean run resume
only a node drained with ncclcheck's prefix. Never touch anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

PREFIX = "ncclcheck:"
REASON_MAX_BYTES = 255  # slurmctld stores at most this much of a reason
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]+")


def reason(check_id: str, detail: str) -> str:
    """'ncclcheck: <check id>: <detail>' as one line of printable ASCII, at most REASON_MAX_BYTES bytes.

    The detail comes from node facts (interface names, environment values) that may hold anything: control
    characters and non-ASCII become '?', runs of blanks one space, double quotes single ones (scontrol strips a
    leading and a trailing '"' from Reason=), and a long text is cut with '...'."""
    text = f"{PREFIX} {check_id}: {detail}"
    text = _UNPRINTABLE.sub("?", text.replace("\t", " ").replace("\n", " ").replace("\r", " "))
    text = " ".join(text.replace('"', "'").split())
    if len(text) > REASON_MAX_BYTES:
        text = text[:REASON_MAX_BYTES - 3].rstrip() + "..."
    return text


def ours(node_reason: Optional[str]) -> bool:
    return bool(node_reason) and node_reason.startswith(PREFIX)


@dataclass(frozen=True)
class NodeState:
    """A node as `scontrol show node` describes it."""

    name: str
    state: str  # as shown: IDLE+DRAIN, DOWN*+NOT_RESPONDING, ALLOCATED, ...
    reason: Optional[str] = None  # without Slurm's ' [user@time]' suffix
    gres: Optional[str] = None
    flags: tuple = field(default=(), compare=False)

    @property
    def base(self) -> str:
        return (self.state.split("+", 1)[0] or "").rstrip("*~#!%$@^-").upper()

    @property
    def drained(self) -> bool:
        """DRAIN set (shown as DRAINED, DRAINING or +DRAIN), or FAIL (drain for a failure)."""
        flags = {f.rstrip("*~#!%$@^-").upper() for f in self.state.split("+")}
        return bool(flags & {"DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING"})

    @property
    def down(self) -> bool:
        return self.base == "DOWN"


@dataclass(frozen=True)
class Action:
    """What ncclcheck will do to one node: drain | resume | none, with why (shown whatever the action)."""

    kind: str
    node: str
    why: str
    reason: Optional[str] = None  # the drain reason

    def to_json(self) -> dict:
        return {"action": self.kind, "node": self.node, "why": self.why, "reason": self.reason}


def plan(node: str, state: Optional[NodeState], failure: Optional[str]) -> Action:
    """The action for `node` given its state and the drain reason of its failure (None: the node is healthy)."""
    if state is None:
        return Action("none", node, "node state unknown: nothing done")
    if failure is not None:
        if (state.drained or state.down) and not ours(state.reason):
            who = f"reason {state.reason!r}" if state.reason else "no reason"
            return Action("none", node, f"already {state.state} with {who}: left as it is (not ncclcheck's)")
        if state.down:
            return Action("none", node, f"already {state.state}: left as it is")
        if state.drained and state.reason == failure:
            return Action("none", node, "already drained by ncclcheck for this reason")
        return Action("drain", node, "re-worded ncclcheck's own drain" if state.drained else "failed its checks",
                      failure)
    if state.drained and not state.down and ours(state.reason):
        return Action("resume", node, f"healthy again; was drained by ncclcheck ({state.reason})")
    if state.drained or state.down:
        who = f"reason {state.reason!r}" if state.reason else "no reason"
        return Action("none", node, f"healthy, but {state.state} with {who}: not ncclcheck's to resume")
    return Action("none", node, "healthy")


def plan_unasked(node: str, failure: Optional[str]) -> Action:
    """The action of a dry run, which asks Slurm nothing (runs nothing outside the node): a failing node would be
    drained with this reason unless Slurm shows it drained or down for someone else; a healthy one resumed only if
    Slurm shows ncclcheck's own drain."""
    if failure is not None:
        return Action("drain", node, "failed its checks; left as it is if Slurm shows it drained or down by "
                      "someone else (Slurm not asked: --dry-run)", failure)
    return Action("none", node, f"healthy; resumed only if Slurm shows it drained with a '{PREFIX}' reason (Slurm "
                  "not asked: --dry-run)")
