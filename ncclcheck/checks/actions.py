"""What an operator does about a hardware finding: one word from a small vocabulary, as DCGM's and the cloud suites'
results carry one (AWS's MONITOR / RESET / REBOOT / ISOLATE, NVIDIA's Xid catalogue). A hardware finding names it in
its summary ("action: ...") and in its evidence ("action"), so a script can route it (drain on "isolate the node",
page nobody on "monitor")."""

from __future__ import annotations

MONITOR = "monitor"  # nothing to do now; look again (a counter that moved once, a drift to fix at maintenance)
RESTART_JOB = "restart the job"  # the node is fine; the job's settings or state are not
RESET_GPU = "reset the GPU"
REBOOT = "reboot"
ISOLATE = "isolate the node"  # drain it until repaired: it would slow or break every job placed on it
ACTIONS = (MONITOR, RESTART_JOB, RESET_GPU, REBOOT, ISOLATE)
KEY = "action"  # the evidence key


def said(action: str) -> str:
    """The words a summary ends with."""
    assert action in ACTIONS, action
    return f"action: {action}"
