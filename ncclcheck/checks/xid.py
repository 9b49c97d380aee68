"""What an operator does about each Xid (a GPU driver's error code in the kernel log), SXid (an NVSwitch's) and the
driver's other fault lines: the immediate action of NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors,
"Resolution Bucket (Immediate Action)", Ampere and later), put in the action vocabulary of hwaction.py, checked
against the AWS suite's table (HARDWARE-ANCHORS.md row 3). Pure data and a few functions.

Catalogue bucket -> action: IGNORE -> monitor; RESTART_APP -> restart the job; RESET_GPU and the XID_48 / NVLINK
workflows (whose first step is a reset) -> reset the GPU; RESTART_BM / RESTART_VM -> reboot; CHECK_MECHANICALS
(power cabling) -> isolate the node. WORKFLOW_XID_45: not solo, "follow the other Xid" (xid45_action); solo, the
application it stopped restarts, which a node check has nothing to act on (monitor, listed).
"""

from __future__ import annotations

from typing import Optional

from .hwaction import ISOLATE, MONITOR, REBOOT, RESET_GPU, RESTART_JOB, rank

XID: dict = {
    8: (RESTART_JOB, "GPU stopped processing (a channel timed out)"),
    13: (RESTART_JOB, "graphics engine exception (usually the application's own fault)"),
    31: (RESTART_JOB, "GPU memory page fault (usually the application's illegal address)"),
    32: (RESTART_JOB, "invalid or corrupted push buffer stream"),
    38: (RESET_GPU, "driver firmware error"),
    43: (MONITOR, "GPU stopped processing a faulting application (the GPU itself is fine)"),
    45: (MONITOR, "preemptive cleanup (no earlier error named)"),
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


# An Xid whose line states its severity (facts/kernlog.py XID_STATED_RE: Blackwell's NVLink5 Xids 144-150 print
# "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (...)") is judged by that word, as an SXid is. NVIDIA's Xid catalogue gives
# these Xids no single action (WORKFLOW_NVLINK5_ERR); its sheet "XID 144-150 Decode" gives one per unit and error
# status, with the row's severity (transcribed in leptonai/gpud, components/accelerator/nvidia/xid/
# catalog_generated.go): every Non-fatal row's immediate action is IGNORE, or XID_154_EVAL (the driver logs an Xid 154
# when the GPU's recovery action changes, judged as its own event), or IGNORE first with RESET_GPU only if it
# persists (RLW_RXPIPE's "Non-fatal*"); the Fatal and Link Fatal rows' is RESET_GPU, all but two. So a nonfatal line is
# watched, whatever the node (an NVSwitch fabric included), and a fatal one is at least a reset.
NONFATAL_WORDS = ("nonfatal", "non-fatal")


def stated_severity(word: Optional[str]) -> Optional[str]:
    """The driver's severity word for an Xid ("Nonfatal", "Non-fatal", "Fatal") as "nonfatal" / "fatal"; None else."""
    low = (word or "").strip().lower()
    return "nonfatal" if low in NONFATAL_WORDS else "fatal" if low == "fatal" else None


def xid_action(code: int, count: int = 1, text: str = "", severity: Optional[str] = None) -> tuple:
    """(action, what) for an Xid code seen `count` times, by the severity its lines state where they state one
    (`severity`: the driver's word); a code the table lacks is "monitor", said as unknown."""
    if code == RECOVERY_XID:
        act = recovery_action(text)
        return (act or MONITOR), "GPU recovery action changed" + ("" if act else " (to none)")
    act, what = XID.get(code, (MONITOR, "not in ncclcheck's table: see NVIDIA's Xid catalogue"))
    sev = stated_severity(severity)
    if sev == "nonfatal":
        return MONITOR, f"{what}; non-fatal as its line says (NVIDIA's Xid catalogue: ignore, or follow the Xid 154)"
    if sev == "fatal":
        return (act if rank(act) >= rank(RESET_GPU) else RESET_GPU), f"{what}; fatal as its line says"
    if code in REPEATED_APP_XIDS and count >= REPEATED_AT:
        return RESET_GPU, f"{what}, {count} times: no longer one application's fault"
    return act, what


PREEMPTIVE_CLEANUP = 45


def xid45_action(causes: list) -> tuple:
    """(action, what) of an Xid 45 (the driver stopping a GPU's channels after an earlier error) from its causes:
    [(code, action, what)] of the Xids the driver names as its cause ("caused by previous Xid N", driver 570.124.04
    and later) or, where it names none (older drivers), of the GPU's other Xids in the window. It takes the worst
    cause's action, never a quiet "monitor" hiding it; with no cause at all it is the catalogue's solo case."""
    if not causes:
        act, what = XID[PREEMPTIVE_CLEANUP]
        return act, what
    worst_code, act, what = max(causes, key=lambda c: rank(c[1]))
    return act, f"preemptive cleanup after Xid {worst_code} ({what})"


# The driver's fault lines beyond Xid (facts/kernlog.py NVRM_LINES matches them, citing the driver's format string):
# name -> (action, what). A GPU that fails at probe or initialisation is absent from NVML and nvidia-smi; a reboot
# retrains its link and reloads the driver, which clears a transient fault; the same GPU failing again after a
# reboot is a hardware or firmware fault: isolate the node (said in `what`, since one boot's log cannot tell the
# first failure from the tenth).
NVRM: dict = {
    "fallen_off_bus": (REBOOT, "GPU has fallen off the bus"),
    "fallen_off_bus_at_probe": (REBOOT, "GPU has fallen off the bus: it does not answer the driver's probe (no Xid "
                                        "is logged for it)"),
    "probe_failed": (REBOOT, "the driver's probe failed (the GPU is not initialised); the same GPU failing again "
                             "after a reboot: isolate the node"),
    "init_failed": (REBOOT, "the driver could not initialise the GPU (RmInitAdapter failed); the same GPU failing "
                            "again after a reboot: isolate the node"),
    "reset_required": (RESET_GPU, "the driver answers \"reset required\" (NV_ERR_RESET_REQUIRED)"),
    "gpu_lost": (REBOOT, "the driver lost a GPU from the bus (NV_ERR_GPU_IS_LOST)"),
    "gsp_rpc_errors": (RESET_GPU, "GSP RPC errors: the driver says the GPU likely needs a reset"),
}
# The Xid a line reports again: where the same GPU (or, for a line naming no GPU, any GPU) has that Xid in the
# window, the line is listed under it rather than counted as a second fault.
NVRM_SAME_AS_XID = {"fallen_off_bus": 79, "fallen_off_bus_at_probe": 79, "gpu_lost": 79}
# The lines a line reports again: a failed probe is listed under the line that says why for the same GPU, and the
# driver's count of failed probes (no bus id) under the lines that name the GPUs.
NVRM_SAME_AS_LINE = {"probe_failed": ("fallen_off_bus_at_probe", "probe_failed", "init_failed")}


def nvrm_action(name: str) -> tuple:
    """(action, what) of one of the driver's fault lines; a name the table lacks (a newer fact) is a warning."""
    return NVRM.get(name, (MONITOR, f"driver fault line {name!r} (not in ncclcheck's table)"))


# NVIDIA's Fabric Manager User Guide (DU-09883-001, appendix "NVSwitch SXid errors") lists SXids by severity; cross-
# read with leptonai/gpud's transcription (components/accelerator/nvidia/sxid/sxid.go). Used only where an event's
# own lines state no severity. Non-fatal: the switch corrected it or only one partition's traffic stalled. Fatal and
# "always fatal": the fabric (or its partition) needs the NVSwitches reset, which on a bare-metal HGX node is a reboot.
# Of the "other notable" ones, 10003 (unhandled interrupt) is fatal and 10004/10005 (thermal event start/end) are a
# cooling warning; 10001, 10002 and 20009 carry no severity there.
SXID_NONFATAL = frozenset({11004, 11012, 11021, 11022, 11023, 12021, 12023, 12028, 15008, 15011, 19049, 19055, 19057,
                           19059, 19062, 19065, 19068, 19071, 19084, 20001, 20012, 22013, 24001, 24002, 24003, 10004,
                           10005})
SXID_FATAL = frozenset({11001, 11009, 11013, 11018, 11019, 11020, 12001, 12002, 12022, 12024, 12025, 12026, 12027,
                        12030, 12031, 12032, 14017, 15001, 15006, 15009, 15010, 15012, 15013, 19047, 19048, 19054,
                        19056, 19058, 19060, 19061, 19063, 19064, 19066, 19067, 19069, 19070, 20034, 22012, 24004,
                        24005, 24006, 24007,
                        12020, 22003, 22011, 23001, 23002, 23003, 23004, 23005, 23006, 23007, 23008, 23009, 23010,
                        23011, 23012, 23013, 23014, 23015, 23016, 23017, 10003})


def sxid_action(severity: Optional[str], code: int = 0) -> tuple:
    """An NVSwitch's SXid, by the severity its own lines state ("fatal", "non-fatal", "correctable", None): a fatal
    one leaves the fabric unusable until the node's NVSwitches are reset (a reboot on HGX systems); a non-fatal or
    corrected one is watched. A severity no line states is NVIDIA's documented one for the code; a code NVIDIA lists
    under no severity is taken as fatal: a missed fatal SXid hangs every NVLink job on the node, a needless reboot
    costs one node a reboot."""
    if severity == "fatal":
        return REBOOT, "fatal NVSwitch error"
    if severity == "non-fatal":
        return MONITOR, "non-fatal NVSwitch error"
    if severity == "correctable":
        return MONITOR, "corrected NVSwitch error"
    if code in SXID_NONFATAL:
        return MONITOR, "NVSwitch error, severity not stated (NVIDIA's SXid list: non-fatal)"
    if code in SXID_FATAL:
        return REBOOT, "NVSwitch error, severity not stated (NVIDIA's SXid list: fatal)"
    return REBOOT, "NVSwitch error, severity not stated and not in NVIDIA's SXid list: taken as fatal"


__all__ = ["NVRM", "NVRM_SAME_AS_LINE", "NVRM_SAME_AS_XID", "PREEMPTIVE_CLEANUP", "RECOVERY_XID", "SXID_FATAL",
           "SXID_NONFATAL", "XID", "nvrm_action", "recovery_action", "stated_severity", "sxid_action", "xid45_action",
           "xid_action"]
