"""What an operator does about each Xid (a GPU driver's error code in the kernel log) and SXid (an NVSwitch's): the
immediate action of NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors, "Resolution Bucket (Immediate
Action)", Ampere and later), put in the action vocabulary of hwaction.py, checked against the AWS suite's table
(HARDWARE-ANCHORS.md row 3). Pure data and one function.

Catalogue bucket -> action: IGNORE -> monitor; RESTART_APP -> restart the job; RESET_GPU and the XID_48 / NVLINK
workflows (whose first step is a reset) -> reset the GPU; RESTART_BM / RESTART_VM -> reboot; CHECK_MECHANICALS
(power cabling) -> isolate the node.
"""

from __future__ import annotations

from typing import Optional

from .hwaction import ISOLATE, MONITOR, REBOOT, RESET_GPU, RESTART_JOB

XID: dict = {
    8: (RESTART_JOB, "GPU stopped processing (a channel timed out)"),
    13: (RESTART_JOB, "graphics engine exception (usually the application's own fault)"),
    31: (RESTART_JOB, "GPU memory page fault (usually the application's illegal address)"),
    32: (RESTART_JOB, "invalid or corrupted push buffer stream"),
    38: (RESET_GPU, "driver firmware error"),
    43: (MONITOR, "GPU stopped processing a faulting application (the GPU itself is fine)"),
    45: (MONITOR, "preemptive cleanup after an earlier error"),
    48: (RESET_GPU, "double-bit ECC error"),
    54: (ISOLATE, "auxiliary power is not connected to the GPU"),
    61: (RESET_GPU, "internal micro-controller breakpoint"),
    62: (RESET_GPU, "internal micro-controller halt"),
    63: (MONITOR, "row remapping / page retirement recorded (applied at the next GPU reset)"),
    64: (RESET_GPU, "row remapping / page retirement failed"),
    68: (RESTART_JOB, "video decoder exception"),
    69: (RESTART_JOB, "graphics engine class error"),
    74: (RESET_GPU, "NVLink error"),
    79: (REBOOT, "GPU has fallen off the bus"),
    92: (MONITOR, "high single-bit ECC error rate"),
    94: (RESTART_JOB, "contained ECC error (the application that touched the memory must restart)"),
    95: (RESET_GPU, "uncontained ECC error"),
    109: (RESTART_JOB, "context switch timeout"),
    110: (RESET_GPU, "security fault"),
    119: (RESET_GPU, "GSP RPC timeout"),
    120: (RESET_GPU, "GSP error"),
    121: (MONITOR, "C2C link corrected error"),
    140: (RESET_GPU, "unrecovered ECC error"),
    143: (RESET_GPU, "GPU initialisation failure"),
    144: (RESET_GPU, "NVLink SAW error"),
    145: (RESET_GPU, "NVLink RLW error"),
    146: (RESET_GPU, "NVLink TLW error"),
    147: (RESET_GPU, "NVLink TREX error"),
    148: (RESET_GPU, "NVLink NVLPW control error"),
    149: (RESET_GPU, "NVLink NETIR error"),
    150: (RESET_GPU, "NVLink MSE error"),
}
RECOVERY_XID = 154  # "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)": read its text
# An application-class Xid this often in the window is no longer one application's bug (AWS escalates 13/31 at 5)
REPEATED_APP_XIDS, REPEATED_AT = (13, 31), 5


def recovery_action(text: str) -> Optional[str]:
    """The action an Xid 154 line (or nvidia-smi's "GPU Recovery Action") announces; None for "None"."""
    low = (text or "").lower().rpartition(" to ")[2] if " to " in (text or "").lower() else (text or "").lower()
    if "reboot" in low:
        return REBOOT
    if "drain" in low and "reset" not in low:
        return ISOLATE
    if "reset" in low:
        return RESET_GPU
    return None


def xid_action(code: int, count: int = 1, text: str = "") -> tuple:
    """(action, what) for an Xid code seen `count` times; a code the table lacks is "monitor", said as unknown."""
    if code == RECOVERY_XID:
        act = recovery_action(text)
        return (act or MONITOR), "GPU recovery action changed" + ("" if act else " (to none)")
    act, what = XID.get(code, (MONITOR, "not in ncclcheck's table: see NVIDIA's Xid catalogue"))
    if code in REPEATED_APP_XIDS and count >= REPEATED_AT:
        return RESET_GPU, f"{what}, {count} times: no longer one application's fault"
    return act, what


def sxid_action(fatal: bool) -> tuple:
    """An NVSwitch's SXid: a fatal one leaves the fabric unusable until the node's NVSwitches are reset (a reboot on
    HGX systems); a non-fatal one was corrected."""
    return (REBOOT, "fatal NVSwitch error") if fatal else (MONITOR, "non-fatal NVSwitch error (corrected)")


__all__ = ["RECOVERY_XID", "XID", "recovery_action", "sxid_action", "xid_action"]
