"""The words every hardware finding ends with: what an operator does about it, from a vocabulary of five, and how a
finding names its device, what was read and over which window.

The vocabulary is the one the anchors publish (HARDWARE-ANCHORS.md section 3): AWS's MONITOR / RESET / REBOOT /
ISOLATE with NVIDIA's Xid catalogue's "restart the application" beside them. Every hardware check (GPU memory, Xid,
NVLink, PCIe, clocks, fabric, firmware; the fabric side's RDMA counters, GPUDirect RDMA and affinity too) builds its
findings here, so a report, a Slurm drain reason and a Kubernetes label speak one language. Nothing here reads
hardware: findings are plain data built from facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..model import CheckResult, Status, failed, passed, warned

MONITOR, RESTART_JOB, RESET_GPU, REBOOT, ISOLATE = ("monitor", "restart the job", "reset the GPU", "reboot",
                                                     "isolate the node")
# Least to most drastic: a result's action is its worst finding's. Each says who acts and what they do.
ACTIONS = (MONITOR, RESTART_JOB, RESET_GPU, REBOOT, ISOLATE)
MEANING = {
    MONITOR: "nothing to do now; watch whether it grows",
    RESTART_JOB: "the job (application) must be restarted; the node is fine",
    RESET_GPU: "drain the node and reset that GPU (nvidia-smi -r with no process on it), then resume",
    REBOOT: "drain the node and reboot it, then resume",
    ISOLATE: "drain the node and keep it out until the hardware is repaired or replaced",
}
# The status an action gives a check: the node may keep running jobs (warn) or must not (fail).
STATUS = {MONITOR: Status.WARN, RESTART_JOB: Status.WARN, RESET_GPU: Status.FAIL, REBOOT: Status.FAIL,
          ISOLATE: Status.FAIL}


def rank(action: str) -> int:
    return ACTIONS.index(action)


def worst(actions) -> Optional[str]:
    """The most drastic of some actions; None for none."""
    acts = [a for a in actions if a]
    return max(acts, key=rank) if acts else None


@dataclass(frozen=True)
class Finding:
    """One thing wrong with one device: the device (a GPU's index, bus id and UUID, or a port, a switch), what was read
    (the NVML call, the sysfs file, the kernel log), the value, the window or delta it was judged over, the action."""

    device: str  # how the summary names it: "GPU 3 (0000:3b:00.0)"
    what: str  # the fault in a few words: "row remap pending"
    read: str  # the source: "nvmlDeviceGetRemappedRows", "/sys/bus/pci/devices/0000:3b:00.0/aer_dev_fatal"
    action: str
    value: Any = None
    window: str = ""  # "since boot", "over 0.5 s", "since the baseline (2 h ago)", "now" for a state
    ident: dict = field(default_factory=dict)  # {"index", "bus_id", "uuid"} or {"port"}...

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"{self.action!r} is not an action of the vocabulary ({', '.join(ACTIONS)})")

    def text(self) -> str:
        when = f", {self.window}" if self.window else ""
        return f"{self.device}: {self.what} ({self.read}{when}): {self.action}"

    def to_json(self) -> dict:
        return {"device": self.device, **self.ident, "what": self.what, "read": self.read, "value": self.value,
                "window": self.window, "action": self.action}


def gpu_name(g: dict) -> str:
    """'GPU 3 (0000:3b:00.0, GPU-8a1f...)': index, bus id and UUID as far as they are known."""
    parts = [p for p in (g.get("bus_id"), _short_uuid(g.get("uuid"))) if p]
    idx = g.get("index")
    head = f"GPU {idx}" if idx is not None else "GPU"
    return f"{head} ({', '.join(parts)})" if parts else head


def gpu_ident(g: dict) -> dict:
    return {"index": g.get("index"), "bus_id": g.get("bus_id"), "uuid": g.get("uuid")}


def _short_uuid(u: Any) -> Optional[str]:
    if not isinstance(u, str) or not u:
        return None
    return u if len(u) <= 16 else u[:12] + "…"


@dataclass(frozen=True)
class HwExpect:
    """What this run expects of the node's GPUs: MIG mode (None: either), how a process already holding GPU memory
    is judged (`processes`: "leftover" in a Slurm Prolog, where any process is one; "warn" before a job; "allowed"
    in a periodic health check, where jobs run), and the saved run's `counters` group of this host, for the window
    since --baseline."""

    mig: Optional[bool] = False
    processes: str = "warn"
    baseline: Optional[dict] = None
    baseline_source: str = ""


SHOWN = 4  # findings spelled out in a summary; the detail and the evidence hold all of them


def result(cid: str, findings: list, node: Optional[int], ok: str, evidence: Optional[dict] = None,
           fix: str = "", detail: str = "", also: str = "") -> CheckResult:
    """One check's result from its findings: pass (saying `ok`) when there are none; otherwise the status of the
    worst action, every finding in the detail and the evidence, and the action's meaning in the fix. `also`: what
    was read and judged harmless beside the findings, said after them (an operator checks it by hand otherwise)."""
    ev = dict(evidence or {})
    if not findings:
        return passed(cid, ok, node=node, evidence=ev)
    act = worst(f.action for f in findings)
    ordered = sorted(findings, key=lambda f: -rank(f.action))
    ev["findings"] = [f.to_json() for f in ordered]
    ev["action"] = act
    more = f"; +{len(ordered) - SHOWN} more" if len(ordered) > SHOWN else ""
    summary = "; ".join(f.text() for f in ordered[:SHOWN]) + more + (f"; also {also}" if also else "")
    lines = "\n".join(f.text() for f in ordered) + (f"\nAlso {also}" if also else "")
    make = failed if STATUS[act] is Status.FAIL else warned
    return make(cid, summary, node=node, evidence=ev, detail=(detail + "\n" if detail else "") + lines,
                fix=f"Action: {act}: {MEANING[act]}." + (f" {fix}" if fix else ""))


__all__ = ["ACTIONS", "ISOLATE", "MEANING", "MONITOR", "REBOOT", "RESET_GPU", "RESTART_JOB", "Finding", "HwExpect",
           "gpu_ident",
           "gpu_name", "rank", "result", "worst"]
