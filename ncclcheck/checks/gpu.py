"""The GPU hardware checks of `health` and `preflight`: functions of one node's `gpu_health` facts
(facts/gpuhealth.py) that name each faulty GPU (index, bus id, UUID), what was read, over which window, and the
action (hwaction.py). Thresholds are the anchors' (HARDWARE-ANCHORS.md, DCGM's DcgmGPUHardwareLimits.h), said where
they are used. A GPU that could not be read is never healthy: a check with nothing read is a skip with its reason.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

from ..facts import nvml as nv_
from ..facts.gpuhealth import READS, read_of
from ..model import CheckResult, skipped, warned
from . import hwaction as hw
from . import xid as xids
from .hwaction import ISOLATE, MONITOR, REBOOT, RESET_GPU, Finding, HwExpect
from .local import LocalInput

MEMORY, XID, NVLINK, PCIE, CLOCKS = "gpu.memory", "gpu.xid", "gpu.nvlink", "gpu.pcie", "gpu.clocks"
PERSISTENCE, MIG, PROCESSES, FABRIC, NOUVEAU = ("gpu.persistence", "gpu.mig", "gpu.processes", "gpu.fabric",
                                                "gpu.nouveau")
VBIOS = "gpu.vbios_consistent"

# DCGM's limits (common/DcgmGPUHardwareLimits.h): uncorrectable remapped rows, retired pages (sbe + dbe), NVLink
# replay/recovery errors (any), NVLink CRC errors per second; pcie plugin: replays and AER errors over its test.
DCGM_MAX_UNCORRECTABLE_ROW_REMAPS = 512
DCGM_MAX_RETIRED_PAGES = 63
DCGM_MAX_NVLINK_CRC_PER_S = 100
DCGM_MAX_PCIE_REPLAYS = 80
DCGM_MAX_AER = 480
# A GPU busier than this (percent of the last sample period with a kernel running) is under load: its PCIe link
# must run at its maximum generation; below it the GPU may lower the generation to save power.
LOAD_UTILIZATION_PCT = 50
# NVLink links an SXM board has (a name pattern -> links): a model not here is judged on the link count NVML reports
NVLINK_LINKS = ((r"\bB200\b|\bGB200\b|\bB300\b|\bGB300\b", 18), (r"\bH200\b(?!.*NVL)", 18),
                (r"\bH100\b.*(SXM|HBM3)", 18), (r"\bH800\b.*(SXM|HBM3)", 8), (r"\bA100\b.*SXM", 12),
                (r"\bA800\b.*SXM", 8), (r"\bV100\b.*SXM2", 6), (r"\bV100\b.*SXM3", 6))


def hw_expect(hwc: Any, facts: dict, golden: Optional[list], golden_path: Optional[str],
              processes: Optional[str] = None) -> HwExpect:
    """What the GPU hardware checks expect on this node: the MIG mode, how a process on a GPU is judged (a leftover
    in a Prolog; in a periodic health check jobs run), and the saved run of this host's counters (for the counters'
    window since --baseline: checks/counters.py's baseline_window, the same as ib.counters')."""
    from ..model import NodeInfo
    from .counters import same_host

    base = None
    if golden:
        ref = same_host(NodeInfo(0, (facts.get("host") or {}).get("hostname") or "?", facts), golden)
        base = ref.facts.get("counters") if ref is not None and isinstance(ref.facts.get("counters"), dict) else None
    return HwExpect(mig=hwc.mig, processes=processes or ("leftover" if hwc.prolog else "allowed"), baseline=base,
                    baseline_source=f"--baseline {golden_path}" if golden_path else "")


# ------------------------------------------------------------------------------------------------- helpers
def _group(inp: LocalInput, cid: str) -> tuple:
    """(the gpu_health group, None) or (None, a skip result saying why there is nothing to judge)."""
    gh = inp.facts.get("gpu_health")
    if gh is None:
        return None, skipped(cid, "GPU health not collected", node=inp.node_rank)
    if isinstance(gh, dict) and "unavailable" in gh:
        return None, skipped(cid, f"GPU health unavailable: {gh['unavailable']}", node=inp.node_rank)
    if not gh.get("gpus") and not gh.get("pcie"):
        why = gh.get("reason") or "none found"
        return None, skipped(cid, why if why.startswith("no NVIDIA GPU") else f"no NVIDIA GPU ({why})",
                             node=inp.node_rank)
    return gh, None


def _gpus(gh: dict) -> list:
    return [g for g in gh.get("gpus") or [] if isinstance(g, dict)]


def _by_bus(gh: dict) -> dict:
    return {g["bus_id"]: g for g in _gpus(gh) if g.get("bus_id")}


def _gpu_of(gh: dict, bus: Optional[str]) -> dict:
    """The GPU at a bus id as the facts know it (index, UUID), or just its bus id."""
    return _by_bus(gh).get(bus or "") or {"bus_id": bus}


def _finding(g: dict, what: str, read: str, action: str, value: Any = None, window: str = "now",
             device: str = "") -> Finding:
    """`read` is a key of facts/gpuhealth.py's READS (named by the source this GPU was read from) or a path."""
    return Finding(device or hw.gpu_name(g), what, read_of(g, read) if read in READS else read, action, value, window,
                   hw.gpu_ident(g))


def _unread(cid: str, inp: LocalInput, gh: dict, what: str) -> CheckResult:
    src = gh.get("source") or "no NVML and no nvidia-smi"
    return skipped(cid, f"{what} could not be read on any GPU ({src}{'; ' + gh['reason'] if gh.get('reason') else ''})",
                   node=inp.node_rank)


def _readings(inp: LocalInput, cid: str, has: Callable[[dict], bool], what: str) -> tuple:
    """(the GPUs whose reading `has` accepts, None), or (None, a skip saying why there is nothing to judge: no GPU
    health, or `what` read on no GPU)."""
    gh, skip = _group(inp, cid)
    if skip:
        return None, skip
    known = [g for g in _gpus(gh) if has(g)]
    return (known, None) if known else (None, _unread(cid, inp, gh, what))


def _with_unread(ok: str, unread: list) -> str:
    return ok + (f"; not readable on {', '.join(unread)}" if unread else "")


# ------------------------------------------------------------------------------------------------ gpu.memory
RECOVERY_ACTIONS = {1: (RESET_GPU, "GPU reset required"), 2: (REBOOT, "node reboot required"),
                    3: (ISOLATE, "drain P2P required"), 4: (RESET_GPU, "drain P2P and GPU reset required"),
                    5: (REBOOT, "IMEX domain recovery required"), 6: (RESET_GPU, "PCIe bus reset required"),
                    7: (REBOOT, "system reboot required")}


def _memory_findings(g: dict) -> tuple:
    """(findings, whether anything was read) for one GPU's memory health."""
    out: list = []
    read = False
    rr = g.get("remapped_rows")
    if isinstance(rr, dict):
        read = True
        if rr.get("failure"):
            out.append(_finding(g, "row remapping failed (no spare row left)", "remapped_rows",
                                ISOLATE, rr))
        elif rr.get("pending"):
            out.append(_finding(g, "row remap pending (applied at the next GPU reset)", "remapped_rows",
                                RESET_GPU, rr))
        if isinstance(rr.get("uncorrectable"), int) and rr["uncorrectable"] >= DCGM_MAX_UNCORRECTABLE_ROW_REMAPS:
            out.append(_finding(g, f"{rr['uncorrectable']} rows remapped for uncorrectable errors (DCGM's limit "
                                   f"{DCGM_MAX_UNCORRECTABLE_ROW_REMAPS})", "remapped_rows", ISOLATE, rr,
                                "lifetime of the GPU"))
    ecc = g.get("ecc_uncorrected_volatile") or {}
    if isinstance(ecc.get("total"), int):
        read = True
        if ecc["total"] > 0:
            split = ", ".join(f"{k.upper()} {ecc[k]}" for k in ("sram", "dram") if isinstance(ecc.get(k), int))
            out.append(_finding(g, f"{ecc['total']} uncorrected ECC error(s)" + (f" ({split})" if split else ""),
                                "ecc_volatile", RESET_GPU, ecc,
                                "since the driver loaded"))
    rp = g.get("retired_pages")
    if isinstance(rp, dict):
        read = True
        total = sum(v for v in (rp.get("sbe"), rp.get("dbe")) if isinstance(v, int))
        if rp.get("pending"):
            out.append(_finding(g, "page retirement pending (applied at the next GPU reset)",
                                "retired_pages_pending", RESET_GPU, rp))
        if total >= DCGM_MAX_RETIRED_PAGES:
            out.append(_finding(g, f"{total} pages retired (DCGM's limit {DCGM_MAX_RETIRED_PAGES})",
                                "retired_pages", ISOLATE, rp, "lifetime of the GPU"))
    ra = g.get("recovery_action")
    if isinstance(ra, int):
        read = True
        if ra in RECOVERY_ACTIONS:
            act, what = RECOVERY_ACTIONS[ra]
            out.append(_finding(g, f"the driver's recovery action: {what}", "recovery_action", act, ra))
    return out, read


def check_memory(inp: LocalInput) -> CheckResult:
    """gpu.memory: row remap pending or failed, uncorrectable remapped rows >= 512 (DCGM), volatile uncorrected ECC
    errors, retired pages on pre-Ampere GPUs (pending, or >= 63 as DCGM), and NVML's recovery action."""
    gh, skip = _group(inp, MEMORY)
    if skip:
        return skip
    findings, unread, readn = [], [], 0
    for g in _gpus(gh):
        f, read = _memory_findings(g)
        findings += f
        readn += read
        if not read:
            unread.append(hw.gpu_name(g))
    if not readn:
        return _unread(MEMORY, inp, gh, "row remapping, ECC and retired pages")
    # ECC off is a GeForce card's default (and a setting, not a fault): said, never a finding
    ecc_off = [hw.gpu_name(g) for g in _gpus(gh) if g.get("ecc_mode") is False]
    ev = {"ecc_off": ecc_off, "gpus": [{**hw.gpu_ident(g), "remapped_rows": g.get("remapped_rows"),
                    "ecc_uncorrected_volatile": g.get("ecc_uncorrected_volatile"),
                    "retired_pages": g.get("retired_pages"), "recovery_action": g.get("recovery_action")}
                   for g in _gpus(gh)], "not_read": unread}
    return hw.result(MEMORY, findings, inp.node_rank, _with_unread(
        f"{readn} GPU(s): no row remap pending or failed, no uncorrected ECC error since the driver loaded", unread)
        + (f"; ECC off (memory errors go uncounted) on {', '.join(ecc_off[:4])}" if ecc_off else ""),
        ev, fix="`nvidia-smi -q -d ROW_REMAPPER,ECC,PAGE_RETIREMENT` on the node shows the counts.")


# -------------------------------------------------------------------------------------------------- gpu.xid
def _window(kl: dict) -> str:
    w = kl.get("window") or {}
    hours = w.get("hours")
    start = kl.get("covers_from_s") or 0.0
    if hours is not None:
        text = f"in the last {hours:g} h"
        if start > (w.get("from_s") or 0.0):
            text += f" (the log holds only the last {((w.get('uptime_s') or start) - start) / 3600:.1f} h)"
        return text
    if start > 0:
        return f"since {start:.0f} s after boot (the oldest message the log still holds)"
    return "since boot"


def _xid_causes(ev: dict, xid_by_bus: dict) -> list:
    """[(code, action, what)] of an Xid 45's causes: the Xids the driver names ("caused by previous Xid N"), judged as
    that GPU's own event of the code where the window holds one; else (older drivers name none) the GPU's other
    Xids in the window."""
    own = xid_by_bus.get(ev.get("bus_id")) or {}
    named = [int(c) for c in ev.get("caused_by") or [] if isinstance(c, int)]
    codes = named or [c for c in own if c != xids.PREEMPTIVE_CLEANUP]
    out = []
    for code in codes:
        e = own.get(code) or {}
        act, what = xids.xid_action(code, int(e.get("count") or 1), e.get("last_text") or e.get("text") or "",
                                    e.get("severity"))
        out.append((code, act, what))
    return out


def _said_by_another_line(ev: dict, others: list) -> bool:
    """Whether another of the driver's lines already says this one's fault (checks/xid.py NVRM_SAME_AS_LINE): the
    same GPU's line that says why, or, for a line naming no GPU, a line naming one."""
    names = xids.NVRM_SAME_AS_LINE.get(str(ev.get("code")), ())
    bus = ev.get("bus_id")
    return any(o is not ev and o.get("kind") == "NVRM" and o.get("code") in names and o.get("bus_id")
               and (bus is None or (o.get("bus_id") == bus and o.get("code") != ev.get("code"))) for o in others)


def in_fabric(gh: dict) -> bool:
    """Whether the node's GPUs are joined by an NVSwitch fabric (switches on the bus, or a GPU that reports a fabric
    state: a VM sees the state but not the switches)."""
    return bool(gh.get("nvswitches")) or any(
        isinstance(g.get("fabric"), dict) and g["fabric"].get("state") in ("completed", "in_progress", "not_started")
        for g in _gpus(gh))


def nvlink_action(gh: dict) -> str:
    """What a link fault of one GPU calls for: a reset of that GPU retrains its links where the GPUs are wired to
    each other (a DGX-1's cube mesh, a bridge); in an NVSwitch fabric the fabric manager trains the links of every
    GPU and switch together, and a GPU that lost links there comes back with the node (the Xid catalogue's NVLink
    workflow ends in a reboot; operators' threads settle on one)."""
    return REBOOT if in_fabric(gh) else RESET_GPU


NVLINK_XIDS = (74, 144, 145, 146, 147, 148, 149, 150)


def _xid_stated(ev: dict, value: dict) -> str:
    """' (RLW_RXPIPE Nonfatal, NVLink link 13)': what an Xid's lines state of themselves, in the driver's words (the
    severity per line where they differ), kept in the finding's value too; '' where they state nothing."""
    if not ev.get("severity"):
        return ""
    by = ev.get("by_severity") if isinstance(ev.get("by_severity"), dict) else {}
    links = [x for x in ev.get("links") or [] if isinstance(x, int)]
    value.update({"severity": ev["severity"], "unit": ev.get("unit"), "links": links,
                  "line": ev.get("severity_text") or value.get("line")})
    worst_first = sorted(by.items(), key=lambda wn: xids.stated_severity(wn[0]) != "fatal")
    words = ", ".join(f"{w} x{n}" for w, n in worst_first) if len(by) > 1 else \
        " ".join(str(w) for w in (ev.get("unit"), ev["severity"]) if w)
    where = f", NVLink link{'s' if len(links) > 1 else ''} {', '.join(map(str, links))}" if links else ""
    return f" ({words}{where})"


def _event_finding(ev: dict, gh: dict, xid_by_bus: dict, others: list, source: str, window: str) -> tuple:
    """(the Finding of one kernel-log event, whether it is only listed): an Xid by the catalogue (an Xid 45 by its
    cause), an SXid by the severity its lines state, one of the driver's other fault lines by checks/xid.py's NVRM
    table. Listed, never a finding: an Xid the catalogue ignores, and a driver line repeating an Xid or a line already
    judged."""
    kind, code = ev.get("kind"), ev.get("code")
    count, text = int(ev.get("count") or 1), ev.get("last_text") or ev.get("text") or ""
    value = {"code": code, "count": count, "first_s": ev.get("first_s"), "last_s": ev.get("last_s"), "line": text}
    quiet = False
    if kind == "SXid":
        sev = ev.get("severity") or ("fatal" if ev.get("fatal") else None)  # "fatal": a saved report's older spelling
        act, what = xids.sxid_action(sev, int(code or 0))
        value["severity"] = sev or "not stated"
        device, ident = f"NVSwitch {ev.get('bus_id')}", {"switch": ev.get("bus_id")}
        label = f"SXid {code} x{count}"
    else:
        g = _gpu_of(gh, ev.get("bus_id")) if ev.get("bus_id") else {}
        device = hw.gpu_name(g) if g else "the node (the line names no GPU)"
        ident = hw.gpu_ident(g) if g else {}
        if kind == "NVRM":
            act, what = xids.nvrm_action(str(code))
            if ev.get("devices"):
                what = f"{ev['devices']} GPU(s): {what}"
            same = xids.NVRM_SAME_AS_XID.get(str(code))
            buses = [ev.get("bus_id")] if ev.get("bus_id") else list(xid_by_bus)
            if same is not None and any(same in (xid_by_bus.get(b) or {}) for b in buses):
                quiet, what = True, f"{what} (the same fault as the Xid {same} judged)"
            elif _said_by_another_line(ev, others):
                quiet, what = True, f"{what} (the same fault as the line naming the GPU)"
            label = f"NVRM line x{count}"
        elif code == xids.PREEMPTIVE_CLEANUP:
            causes = _xid_causes(ev, xid_by_bus)
            act, what = xids.xid45_action(causes)
            if act == RESET_GPU and any(c[0] in NVLINK_XIDS for c in causes):
                act = nvlink_action(gh)
            value["caused_by"] = [c[0] for c in causes]
            quiet = act == MONITOR and all(c in xids.XID for c in value["caused_by"])
            label = f"Xid {code} x{count}"
        else:
            act, what = xids.xid_action(int(code or 0), count, text, ev.get("severity"))
            if code in NVLINK_XIDS and act == RESET_GPU:
                act = nvlink_action(gh)
            nonfatal = xids.stated_severity(ev.get("severity")) == "nonfatal"
            # the catalogue, or the line's own "Nonfatal", says to ignore it: it must not drain a node
            quiet = act == MONITOR and (code in xids.XID or nonfatal)
            label = f"Xid {code} x{count}{_xid_stated(ev, value)}"
    return Finding(device, f"{label}: {what}", source, act, value, window, ident), quiet


def check_xid(inp: LocalInput) -> CheckResult:
    """gpu.xid: the kernel log's GPU faults within a window (since boot, or --xid-window HOURS): Xid and SXid lines,
    each code mapped to an action from NVIDIA's Xid catalogue (an Xid 45 takes its cause's), and the driver's other
    fault lines (a GPU fallen off the bus at probe, a failed probe or initialisation, "reset required", "GPU lost"),
    each to its GPU by bus id where the line names one. A log that cannot be read is a skip that says why, never
    "no Xid"."""
    gh, skip = _group(inp, XID)
    if skip:
        return skip
    kl = gh.get("kernel_log") or {}
    if not kl.get("readable"):
        return skipped(XID, f"the kernel log could not be read: {kl.get('reason') or 'not collected'}",
                       node=inp.node_rank, evidence={"kernel_log": kl},
                       fix="Run as root (Slurm's HealthCheckProgram and Prolog do), or give the user the "
                           "systemd-journal group; `sysctl kernel.dmesg_restrict` says whether dmesg is restricted.")
    window = _window(kl)
    events = [e for e in kl.get("events") or [] if isinstance(e, dict)]
    xid_by_bus: dict = {}
    for e in events:
        if e.get("kind") == "Xid" and isinstance(e.get("code"), int):
            xid_by_bus.setdefault(e.get("bus_id"), {})[e["code"]] = e
    findings, quiet = [], []
    for ev in events:
        f, listed = _event_finding(ev, gh, xid_by_bus, events, f"{kl.get('source')}", window)
        (quiet if listed else findings).append(f)
    ev_ = {"source": kl.get("source"), "window": window, "reason": kl.get("reason"), "events": kl.get("events"),
           "ignored": [f.to_json() for f in quiet]}
    ok = f"no Xid, SXid or NVRM fault line in the kernel log {window} ({kl.get('source')})"
    if quiet:
        ok = (f"only Xids NVIDIA's catalogue says to ignore {window}: "
              + "; ".join(f"{f.device}: {f.what}" for f in quiet[:hw.SHOWN]))
    # beside a fault, the lines judged harmless are still said (two Xid 43s of a VM's GPU are what an operator greps
    # for next): a driver line that repeats a judged fault is not
    ignored = [f for f in quiet if f.action == MONITOR]
    also = ("in the log, lines NVIDIA's catalogue (or the line itself) says to ignore: "
            + "; ".join(f"{f.device}: {f.what}" for f in ignored[:hw.SHOWN])
            + (f"; +{len(ignored) - hw.SHOWN} more" if len(ignored) > hw.SHOWN else "")) if ignored else ""
    return hw.result(XID, findings, inp.node_rank, ok, ev_, also=also,
                     fix="The lines are in `journalctl -k` / `dmesg -T | grep -E 'NVRM|SXid|nvidia'`; NVIDIA's Xid "
                         "catalogue (docs.nvidia.com/deploy/xid-errors) has each Xid code.")


# ----------------------------------------------------------------------------------------------- gpu.nvlink
def expected_links(name: Optional[str]) -> Optional[int]:
    """The NVLink links a GPU model has (NVLINK_LINKS), None for a model not in the table."""
    for pattern, n in NVLINK_LINKS:
        if name and re.search(pattern, name):
            return n
    return None


def _counter_windows(inp: LocalInput) -> list:
    """[(deltas {bus: {counter: n}}, seconds, window text, over_baseline)]: the run's counter window and, with
    --baseline, the one since the saved run of this host and boot (checks/counters.py: the windows every counter of
    the node is judged in); none where the counters were not read twice."""
    from ..facts.counters import deltas
    from .counters import baseline_window, run_window

    c = inp.facts.get("counters")
    out = []
    w, _why = run_window(c)
    if w is not None:
        out.append(w)
    if inp.hw and inp.hw.baseline is not None:
        w, _why = baseline_window(c, inp.hw.baseline, "this host", inp.hw.baseline_source or "the baseline")
        if w is not None:
            out.append(w)
    return [(deltas(w.first.get("gpus"), w.last.get("gpus")), w.seconds, w.text, w.long) for w in out]


def check_nvlink(inp: LocalInput) -> CheckResult:
    """gpu.nvlink: links up against what the GPU model has (H100/H200/B200 SXM 18, A100 SXM 12; a model not in the
    table against the link count NVML reports), and the links' CRC, replay and recovery error counters as deltas
    (two reads a moment apart, or since --baseline): replay or recovery >= 1 and CRC >= 100/s are DCGM's limits."""
    gh, skip = _group(inp, NVLINK)
    if skip:
        return skip
    nv = gh.get("nvlink") or {}
    if "unavailable" in nv:
        return skipped(NVLINK, f"NVLink not readable: {nv['unavailable']}", node=inp.node_rank)
    lgpus = [g for g in nv.get("gpus") or [] if isinstance(g, dict)]
    with_links = [g for g in lgpus if isinstance(g.get("link_count"), int) and g["link_count"] > 0]
    findings = []
    # nvidia-smi says "all links are inActive" and lists none: a fault where the model has NVLink (an SXM board),
    # nothing on a PCIe card without a bridge
    for lg in lgpus:
        want = expected_links(lg.get("name"))
        if lg.get("state") == "all_inactive" and want:
            findings.append(_finding(_gpu_of(gh, lg.get("bus_id")) if lg.get("bus_id") else lg,
                                     f"0 of {want} NVLink links up (every link inactive)", "nvlink_state",
                                     nvlink_action(gh),
                                     {"up": 0, "expected": want}))
    if not with_links and not findings:
        return skipped(NVLINK, "no NVLink on this node's GPUs (the driver reports no link): nothing to judge",
                       node=inp.node_rank, evidence={"gpus": lgpus})
    for lg in with_links:
        g = _gpu_of(gh, lg.get("bus_id"))
        want = expected_links(lg.get("name")) or lg["link_count"]
        up = int(lg.get("up") or 0)
        if up < want:
            findings.append(_finding(g, f"{up} of {want} NVLink links up (down: {', '.join(map(str, lg.get('down')))}"
                                        + ("" if expected_links(lg.get("name")) else ", the count NVML reports") + ")",
                                     "nvlink_state", nvlink_action(gh), {"up": up, "expected": want,
                                                                              "down": lg.get("down")}))
    links = (inp.facts.get("counters") or {}).get("gpu_links") or {}
    windows = _counter_windows(inp)
    for deltas, secs, window, over_base in windows:
        for bus, d in deltas.items():
            g = _gpu_of(gh, bus)
            crc = sum(v for k, v in d.items() if k in ("nvlink.crc_flit", "nvlink.crc_data") and v > 0)
            bad = {k[len("nvlink."):]: v for k, v in d.items() if k in ("nvlink.replay", "nvlink.recovery") and v > 0}
            where = "" if over_base else _links_named(links.get(bus) or {})
            if bad:
                findings.append(_finding(g, ", ".join(f"{k} errors +{v}" for k, v in bad.items()) + where,
                                         "nvlink_errors", nvlink_action(gh), bad, window))
            if crc:
                rate = crc / secs if secs else None
                act = nvlink_action(gh) if rate is not None and rate >= DCGM_MAX_NVLINK_CRC_PER_S else MONITOR
                findings.append(_finding(g, f"CRC errors +{crc}" + (f" ({rate:.3g}/s)" if rate else "") + where,
                                         "nvlink_errors", act, crc, window))
    ok = f"{len(with_links)} GPU(s) with every NVLink link up, " + (
        f"no link error {windows[0][2]}" if windows else "link errors not read twice (no counter window)")
    return hw.result(NVLINK, findings, inp.node_rank, ok, {"gpus": lgpus},
                     fix="`nvidia-smi nvlink -s` and `nvidia-smi nvlink -e` on the node; a link that stays down after "
                         "a GPU reset is a board, cable or NVSwitch tray to replace.")


def _links_named(per: dict) -> str:
    moved = sorted({int(link) for kinds in per.values() for link in kinds})
    return f" on link{'s' if len(moved) > 1 else ''} {', '.join(map(str, moved))}" if moved else ""


# ------------------------------------------------------------------------------------------------- gpu.pcie
def check_pcie(inp: LocalInput) -> CheckResult:
    """gpu.pcie: a GPU's link width below its maximum is a fault; its generation below the maximum only under load
    (GPUs lower it at idle to save power), with the bus id and the upstream port; replay and AER counters as deltas
    (any non-fatal or fatal AER error; correctable and replays from the short interval, or DCGM's 480 and 80 since the
    baseline)."""
    gh, skip = _group(inp, PCIE)
    if skip:
        return skip
    by_bus = _by_bus(gh)
    links = {p["bus_id"]: p for p in gh.get("pcie") or [] if isinstance(p, dict) and p.get("bus_id")}
    findings, idle_low, judged = [], [], 0
    for bus in list(dict.fromkeys(list(links) + list(by_bus))):
        g = by_bus.get(bus) or {"bus_id": bus}
        p = links.get(bus)
        up = f" behind {p['upstream']}" if p and p.get("upstream") else ""
        if p and isinstance(p.get("width"), int) and isinstance(p.get("max_width"), int):
            cur, top, gen, maxgen, read = p["width"], p["max_width"], p.get("gts"), p.get("max_gts"), \
                f"/sys/bus/pci/devices/{bus}/current_link_*"
            unit = " GT/s"
        else:
            n = g.get("pcie_nvml") or {}
            cur, top, gen, maxgen, read = n.get("width"), n.get("max_width"), n.get("gen"), n.get("max_gen"), \
                "pcie"
            unit = ""
            if not isinstance(cur, int) or not isinstance(top, int):
                continue
            gen, maxgen = (f"Gen{gen}" if gen else None), (f"Gen{maxgen}" if maxgen else None)
        judged += 1
        dev = hw.gpu_name(g) + up
        if cur < top:
            findings.append(_finding(g, f"PCIe link x{cur} of x{top}", read, ISOLATE, {"width": cur, "max": top},
                                     device=dev))
        if gen is not None and maxgen is not None and _lower(gen, maxgen):
            util = g.get("utilization_gpu")
            if isinstance(util, int) and util >= LOAD_UTILIZATION_PCT:
                findings.append(_finding(g, f"PCIe {gen}{unit} of {maxgen}{unit} under load ({util}% busy)", read,
                                         ISOLATE, {"gen": gen, "max": maxgen, "utilization": util}, device=dev))
            else:
                idle_low.append(f"{hw.gpu_name(g)} {gen}{unit} of {maxgen}{unit}")
    findings += _pcie_counter_findings(inp, gh)
    counted = bool(_counter_windows(inp))
    if not judged and not findings:
        return _unread(PCIE, inp, gh, "the PCIe link")
    ok = f"{judged} GPU(s) at their maximum PCIe width" + (
        f"; generation not judged at idle: {', '.join(idle_low)}" if idle_low else ", and generation") + (
        "" if counted else "; replay and AER counters not read twice (no counter window)")
    return hw.result(PCIE, findings, inp.node_rank, ok, {"links": list(links.values()), "idle_below_max": idle_low},
                     fix="Reseat the GPU or its riser, check the slot and the switch port named; `lspci -vv -s BUS` "
                         "shows LnkSta against LnkCap.")


def _lower(gen: Any, maxgen: Any) -> bool:
    if isinstance(gen, str):
        return gen != maxgen and gen < maxgen
    return isinstance(gen, (int, float)) and isinstance(maxgen, (int, float)) and gen < maxgen


PCIE_COUNTERS = (("pcie.aer_fatal", "AER fatal errors", REBOOT, 1),
                 ("pcie.aer_nonfatal", "AER non-fatal errors", RESET_GPU, 1),
                 ("pcie.aer_correctable", "AER correctable errors", MONITOR, DCGM_MAX_AER),
                 ("pcie.replay", "PCIe replays", MONITOR, DCGM_MAX_PCIE_REPLAYS))


def _pcie_counter_findings(inp: LocalInput, gh: dict) -> list:
    out = []
    for deltas, _secs, window, over_base in _counter_windows(inp):
        for bus, d in deltas.items():
            g = _gpu_of(gh, bus)
            for key, what, act, base_limit in PCIE_COUNTERS:
                v = d.get(key)
                if isinstance(v, int) and v > 0 and (not over_base or v >= base_limit):
                    src = "pcie_replay" if key == "pcie.replay" else \
                        f"/sys/bus/pci/devices/{bus}/aer_dev_{key.rsplit('_', 1)[1]}"
                    out.append(_finding(g, f"{what} +{v}", src, act, v, window))
    return out


# ----------------------------------------------------------------------------------------------- gpu.clocks
CLOCK_FAULTS = ((0x8, "hardware slowdown"), (0x40, "hardware thermal slowdown"), (0x80, "power brake slowdown"),
                (0x20, "software thermal slowdown"))
SW_POWER_CAP = 0x4


def check_clocks(inp: LocalInput) -> CheckResult:
    """gpu.clocks: the clock-event reasons: hardware slowdown, hardware or software thermal slowdown and the power
    brake hold a GPU's clocks down (a fault); the power cap is a note; idle is not a fault."""
    gh, skip = _group(inp, CLOCKS)
    if skip:
        return skip
    findings, capped, read = [], [], 0
    for g in _gpus(gh):
        mask = g.get("clock_event_reasons")
        if not isinstance(mask, int):
            continue
        read += 1
        for bit, what in CLOCK_FAULTS:
            if mask & bit:
                findings.append(_finding(g, f"clocks held down: {what}", "clock_event_reasons",
                                         ISOLATE, f"{mask:#x}"))
        if mask & SW_POWER_CAP:
            capped.append(hw.gpu_name(g))
    if not read:
        return _unread(CLOCKS, inp, gh, "the clock-event reasons")
    ok = f"{read} GPU(s): no slowdown" + (f"; at the power cap (a note): {', '.join(capped)}" if capped else "")
    return hw.result(CLOCKS, findings, inp.node_rank, ok, {"reasons": {
        str(g.get("index")): g.get("clock_event_reasons") for g in _gpus(gh)}, "power_capped": capped},
        fix="`nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER` on the node; check cooling (fans, inlet temperature) "
            "and the power supplies.")


# ------------------------------------------------------------------------------------------ persistence, MIG
def check_persistence(inp: LocalInput) -> CheckResult:
    """gpu.persistence: persistence mode (off: the driver tears the GPU down between jobs, and each start pays for
    its initialisation; DCGM warns). Read only: ncclcheck never turns it on."""
    known, skip = _readings(inp, PERSISTENCE, lambda g: isinstance(g.get("persistence"), bool), "persistence mode")
    if skip:
        return skip
    findings = [_finding(g, "persistence mode off", "persistence", MONITOR, False)
                for g in known if not g["persistence"]]
    return hw.result(PERSISTENCE, findings, inp.node_rank, f"persistence mode on for {len(known)} GPU(s)",
                     fix="Run nvidia-persistenced (systemctl enable --now nvidia-persistenced) on the node.")


def check_mig(inp: LocalInput) -> CheckResult:
    """gpu.mig: MIG mode against what is expected (--mig; off by default: NCCL does not run collectives across MIG
    instances), and a MIG change left pending (it takes effect at the next GPU reset)."""
    gh, skip = _group(inp, MIG)
    if skip:
        return skip
    want = inp.hw.mig if inp.hw else False
    known = [g for g in _gpus(gh) if isinstance(g.get("mig"), dict)]
    if not known:
        return skipped(MIG, "no GPU here reports a MIG mode (not MIG-capable, or not readable)", node=inp.node_rank)
    findings = []
    for g in known:
        cur, pend = bool(g["mig"].get("current")), bool(g["mig"].get("pending"))
        if want is not None and cur != want:
            findings.append(_finding(g, f"MIG {'on' if cur else 'off'}, expected {'on' if want else 'off'}",
                                     "mig", RESET_GPU, g["mig"]))
        elif cur != pend:
            findings.append(_finding(g, f"MIG change pending ({'on' if pend else 'off'} at the next reset)",
                                     "mig", RESET_GPU, g["mig"]))
    said = "either" if want is None else ("on" if want else "off")
    return hw.result(MIG, findings, inp.node_rank, f"MIG {said} as expected on {len(known)} GPU(s)",
                     fix="`nvidia-smi -i N -mig 0|1` then a GPU reset, by the operator (ncclcheck changes nothing); or "
                         "pass --mig on|off|any to say what this node should have.")


# ------------------------------------------------------------------------------------------- gpu.processes
def check_processes(inp: LocalInput) -> CheckResult:
    """gpu.processes: compute processes already holding GPU memory (not this job's own ranks). In a Slurm Prolog any
    is a leftover of an earlier job (fail); before a job (preflight) it shares the GPU (warn); in a periodic health
    check jobs run, so they are listed only."""
    known, skip = _readings(inp, PROCESSES, lambda g: isinstance(g.get("processes"), list), "the compute processes")
    if skip:
        return skip
    mode = inp.hw.processes if inp.hw else "warn"
    found = [(g, p) for g in known for p in g["processes"] if not p.get("own")]
    listed = [f"{hw.gpu_name(g)}: pid {p.get('pid')} {p.get('name') or '?'} "
              f"{_gib(p.get('used_bytes'))}" for g, p in found]
    ev = {"processes": [{**hw.gpu_ident(g), **p} for g, p in found], "mode": mode}
    if mode == "allowed" or not found:
        ok = (f"{len(found)} compute process(es) running (a health check while jobs run): " + "; ".join(listed[:4])
              if found else f"no compute process on {len(known)} GPU(s)")
        return hw.result(PROCESSES, [], inp.node_rank, ok, ev)
    act = RESET_GPU if mode == "leftover" else MONITOR
    what = "leftover process (in a Prolog any process is one)" if mode == "leftover" else "process already using it"
    findings = [_finding(g, f"{what}: pid {p.get('pid')} {p.get('name') or '?'} holds {_gib(p.get('used_bytes'))}",
                         "processes", act, p) for g, p in found]
    return hw.result(PROCESSES, findings, inp.node_rank, "", ev,
                     fix="Stop the process (kill PID; `nvidia-smi --query-compute-apps=pid,process_name,used_memory "
                         "--format=csv`), or wait for it; a GPU reset needs no process on it.")


def _gib(n: Any) -> str:
    return f"{n / (1 << 30):.1f} GiB" if isinstance(n, int) else "memory (amount not reported)"


# ------------------------------------------------------------------------------------------------ gpu.fabric
# The fabric health items a GPU's driver flags (facts/fabrichealth.py), in the words an operator reads them in
# `nvidia-smi -q`'s Fabric / Health block; each with the action it calls for when the items decide alone (a driver
# that reports the mask but no summary: NVML's v2 struct, nvidia-smi R555-R560). A configuration the fabric manager
# rejects (wrong system GUID, chassis serial number, location, GPU firmware, too few NVLinks) is not fixed by a
# reboot: the node waits for a person. A route the fabric calls unhealthy comes back with the tray's retraining. A
# recovery in progress, or bandwidth degraded, leaves the fabric working: the node keeps running jobs.
_FABRIC_ITEMS = (("route_unhealthy", True, "Route Unhealthy", REBOOT),
                 ("bandwidth", "degraded", "Bandwidth Degraded", MONITOR),
                 ("route_recovery_in_progress", True, "Route Recovery in progress", MONITOR),
                 ("access_timeout_recovery", True, "Access Timeout Recovery", MONITOR),
                 ("partition_assigned", False, "Partition Assigned False", None))


def fabric_health(h: Optional[dict]) -> Optional[tuple]:
    """(what, action) for a GPU whose fabric is trained but whose driver says its health is not Healthy, else None.
    The summary is the driver's verdict and sets the level (Unhealthy fails, Limited Capacity warns); the items say
    why. Without a summary the items decide. Nothing reported is nothing judged: the state and status are."""
    if not isinstance(h, dict):
        return None
    summary = h.get("summary")
    bad_config = h.get("incorrect_configuration") not in (None, "none")
    flagged = [(label, act) for key, value, label, act in _FABRIC_ITEMS if h.get(key) == value]
    flagged += [(f"Incorrect Configuration {h['incorrect_configuration']}", ISOLATE)] if bad_config else []
    flagged += [(f"{key} {h[key]}", MONITOR) for key, *_x in _FABRIC_ITEMS if str(h.get(key)).startswith("unknown")]
    items = ", ".join(label for label, _a in flagged)
    if summary == "healthy":
        return None
    if summary == "unhealthy":
        act = ISOLATE if bad_config else REBOOT
        return (f"fabric health Unhealthy ({items or 'no health item says which'}), though trained (Completed, "
                "Success)", act)
    if summary == "limited_capacity":
        return (f"fabric health Limited Capacity ({items or 'no health item says which'}): the fabric works, below "
                "its full capacity", MONITOR)
    if summary is not None:
        return f"fabric health summary {summary!r}, a value this tool does not know ({items or 'no item flagged'})", \
            MONITOR
    acts = [a for _l, a in flagged if a is not None]
    return None if not acts else (f"fabric health: {items} (the driver reports no summary)", hw.worst(acts))


def check_fabric(inp: LocalInput) -> CheckResult:
    """gpu.fabric: every GPU that reports a fabric state (Hopper and later in an NVSwitch or multi-node NVLink
    system, whether or not the switches are visible: a VM sees its GPUs' state, not the switches) trained into the
    fabric by the fabric manager: COMPLETED with success. NOT_STARTED, IN_PROGRESS or an error fail: until training
    completes every CUDA call fails with cudaErrorSystemNotReady (802). A GPU that reports none (pre-Hopper, a PCIe
    card: nvidia-smi prints N/A) is not judged here: its NVLink is (gpu.nvlink)."""
    gh, skip = _group(inp, FABRIC)
    if skip:
        return skip
    switches = gh.get("nvswitches") or []
    known = [g for g in _gpus(gh) if isinstance(g.get("fabric"), dict)
             and g["fabric"].get("state") not in (None, "not_supported", "n/a")]
    if not known:
        why = (f"{len(switches)} NVSwitch(es), but no GPU reports a fabric state (pre-Hopper GPUs do not: their "
               "NVLink is judged in gpu.nvlink)") if switches else \
            "no GPU reports a fabric state (not in an NVSwitch fabric, or pre-Hopper): nothing to judge"
        return skipped(FABRIC, why, node=inp.node_rank, evidence={"nvswitches": switches})
    findings = []
    for g in known:
        st, status = g["fabric"].get("state"), g["fabric"].get("status")
        if st == "completed" and status in ("success", None):
            said = fabric_health(g["fabric"].get("health"))
            if said is not None:
                findings.append(_finding(g, said[0], "fabric_health", said[1], g["fabric"]))
            continue
        if st == "in_progress":
            what = "fabric training still in progress: CUDA calls fail (802, system not ready) until it completes"
        elif st == "completed":
            what = f"fabric training completed with an error ({status})"
        elif st == "not_started":
            what = "not trained into the NVLink fabric (state Not Started): the fabric manager has not run for it"
        else:
            what = f"fabric state {st}"
        findings.append(_finding(g, what, "fabric", REBOOT, g["fabric"]))
    where = f" of {len(switches)} NVSwitch(es)" if switches else ""
    healthy = sum(1 for g in known if (g["fabric"].get("health") or {}).get("summary") == "healthy")
    cliques = sorted({(g["fabric"].get("clique_id"), g["fabric"].get("cluster_uuid")) for g in known
                      if g["fabric"].get("clique_id") is not None}, key=str)
    ok = (f"{len(known)} GPU(s) trained into the fabric{where}" + (f", fabric health Healthy on {healthy}" if healthy
                                                                   else "")
          + (f"; clique {cliques[0][0]} of cluster {cliques[0][1]}" if len(cliques) == 1 else
             f"; {len(cliques)} cliques" if cliques else ""))
    return hw.result(FABRIC, findings, inp.node_rank, ok, {"nvswitches": switches, "cliques": [
                         {"clique_id": c, "cluster_uuid": u} for c, u in cliques]},
                     fix="`systemctl status nvidia-fabricmanager` and its log (/var/log/fabricmanager.log) on the node "
                         "(on a VM: the host's or the provider's); the GPUs join the fabric only after it runs, with "
                         "the driver's exact version. A state that stays In Progress needs a reboot. A fabric health "
                         "other than Healthy is the fabric manager's own word: `nvidia-smi -q` prints each item under "
                         "Fabric / Health; on a multi-node NVLink rack (GB200/GB300 NVL72) its log says which tray, "
                         "link or partition.")


# ---------------------------------------------------------------------------------------------- gpu.readable
READABLE = "gpu.readable"
# An error on at least this share of a GPU's reads says the GPU, not one field, is broken (nvidia-smi's ERR!)
UNKNOWN_ERROR_SHARE = 0.5
_STATE_FINDINGS = {nv_.RESET_REQUIRED: ("the driver says this GPU requires a reset", RESET_GPU),
                   nv_.GPU_LOST: ("the GPU is lost (it left the bus)", REBOOT),
                   nv_.UNKNOWN_ERROR: ("the GPU answers Unknown Error (nvidia-smi: ERR!)", RESET_GPU)}
# Drivers a GPU may be bound to that are not a fault of this node: a VM's (the host passes it through)
PASSED_THROUGH = ("vfio-pci", "pci-stub")


# The reads a verdict is made of: Unknown Error on one of them leaves the GPU's health unknown (nvidia-smi's ERR!)
HEALTH_READS = ("ecc_mode", "ecc_volatile", "ecc_volatile_sram", "ecc_volatile_dram", "remapped_rows",
                "retired_pages", "retired_pages_pending", "recovery_action", "clock_event_reasons", "utilization",
                "memory", "processes", "pcie", "fabric")


# The kernel-log events that say a GPU left the bus: Xid 79, and the driver's own lines (facts/kernlog.py NVRM_LINES)
FELL_OFF = (79, "fallen_off_bus", "fallen_off_bus_at_probe")


def _fell_off(gh: dict, bus: Optional[str]) -> bool:
    """Whether the kernel log says this GPU fell off the bus (Xid 79, or the driver's own words)."""
    for e in (gh.get("kernel_log") or {}).get("events") or []:
        if isinstance(e, dict) and e.get("bus_id") == bus and e.get("code") in FELL_OFF:
            return True
    return False


def kernel_codes(gh: dict, bus: Optional[str]) -> set:
    """The codes of the kernel log's events naming this GPU (Xid numbers, facts/kernlog.py NVRM_LINES names)."""
    return {e.get("code") for e in (gh.get("kernel_log") or {}).get("events") or []
            if isinstance(e, dict) and bus and e.get("bus_id") == bus}


def not_listed_why(gh: dict, bus: Optional[str], driver: Optional[str]) -> tuple:
    """(in a few words, in a sentence) why a GPU on the PCI bus is not listed by the driver, from the driver bound to
    it (sysfs) and the kernel log's lines: the nvidia driver bound means its probe passed, so a GPU that then failed
    RmInitAdapter failed to initialise, not at probe (NVIDIA's driver prints "RmInitAdapter failed!" when it opens
    the GPU, osinit.c); no driver bound is a failed probe."""
    codes = kernel_codes(gh, bus)
    events = (gh.get("kernel_log") or {}).get("events") or []
    if _fell_off(gh, bus):
        return "fell off the bus", "it fell off the bus (the kernel log says so)"
    init = "init_failed" in codes or (driver == "nvidia" and any(
        isinstance(e, dict) and e.get("code") == "init_failed" and not e.get("bus_id") for e in events))
    if init:
        named = "" if "init_failed" in codes else ", on a line that names no GPU"
        return ("failed to initialise: RmInitAdapter failed",
                f"the driver bound it (its probe passed) and could not initialise it (the kernel log: RmInitAdapter "
                f"failed{named})")
    if "probe_failed" in codes or not driver:
        return "failed at probe", ("it failed at probe (the kernel log says so)" if "probe_failed" in codes else
                                   "no driver bound: it failed at probe (the kernel log's NVRM lines say why)")
    if driver == "nvidia":
        return ("bound to nvidia, not initialised",
                "the driver bound it (its probe passed) but does not list it: it failed to initialise or fell off "
                "the bus (the kernel log's NVRM lines say which)")
    return f"bound to {driver}", "it failed at probe or fell off the bus (the kernel log's NVRM lines say which)"


def unusable_state(g: dict) -> Optional[str]:
    """Why a GPU the driver lists is not one a job can use (its reads say it is lost, requires a reset, or answer
    Unknown Error where its health is read: nvidia-smi's ERR!), or None."""
    errs = g.get("errors") if isinstance(g.get("errors"), dict) else {}
    states = {v for v in errs.values() if v in nv_.FAULT_STATES}
    for st in (nv_.GPU_LOST, nv_.RESET_REQUIRED):
        if st in states:
            return st
    if any(v == nv_.UNKNOWN_ERROR and k in HEALTH_READS for k, v in errs.items()):
        return "ERR! (Unknown Error where its health is read)"
    return None


def _readable_findings(gh: dict) -> tuple:
    """(findings, GPUs passed through to a VM) for the GPUs the driver cannot read."""
    findings = []
    for g in _gpus(gh):
        errs = g.get("errors") if isinstance(g.get("errors"), dict) else {}
        states = {v for v in errs.values() if v in nv_.FAULT_STATES}
        if not states:
            continue
        bad = sorted(k for k, v in errs.items() if v in nv_.FAULT_STATES)
        if nv_.GPU_LOST in states:
            what, act = "the GPU is lost (it left the bus)", REBOOT
        elif nv_.RESET_REQUIRED in states:
            what, act = "the driver says this GPU requires a reset", RESET_GPU
        elif set(bad) & set(HEALTH_READS):
            what, act = "the GPU answers Unknown Error (nvidia-smi: ERR!) where its health is read", RESET_GPU
        else:
            what, act = "some reads answer Unknown Error", MONITOR
        findings.append(_finding(g, f"{what} ({', '.join(bad[:5])}{', ...' if len(bad) > 5 else ''})", "handle",
                                 act, {"errors": errs}))
    for u in gh.get("unreachable") or []:
        if isinstance(u, dict):  # counted, no handle: nothing short of a reboot gives one back
            init = ": it failed to initialise (the kernel log: RmInitAdapter failed)" if "init_failed" in kernel_codes(
                gh, u.get("bus_id")) else ""
            findings.append(_finding(u, f"the driver counts it but gives no handle ({u.get('state')}){init}",
                                     "handle", REBOOT, u))
    vm = []
    for a in gh.get("absent") or []:
        if not isinstance(a, dict):
            continue
        drv, bus = a.get("driver"), a.get("bus_id")
        if drv in PASSED_THROUGH or drv == "nouveau":  # a VM's GPU; nouveau is gpu.nouveau's finding
            vm.append(f"{bus} ({drv})")
            continue
        how = not_listed_why(gh, bus, drv)[1]
        findings.append(Finding(f"GPU at {bus}", f"on the PCI bus but not listed by the driver "
                                f"({'no driver bound' if not drv else 'bound to ' + drv}): {how}",
                                f"/sys/bus/pci/devices/{bus}", REBOOT, a, "now",
                                {"index": None, "bus_id": bus, "uuid": None}))
    return findings, vm


def check_readable(inp: LocalInput) -> CheckResult:
    """gpu.readable: every NVIDIA GPU on the PCI bus is listed by the driver and answers its reads: a GPU that failed
    at probe (on the bus, not listed), one the driver counts but gives no handle for (GPU is lost), one whose reads say
    it requires a reset, one that answers Unknown Error (nvidia-smi's ERR!) to most reads. Each is named by bus id."""
    gh, skip = _group(inp, READABLE)
    if skip:
        return skip
    findings, vm = _readable_findings(gh)
    n = len(_gpus(gh))
    unread = unread_of(gh)
    ev = {"unreachable": gh.get("unreachable"), "absent": gh.get("absent"), "passed_through": vm, "unread": unread}
    ok = f"{n} GPU(s) listed by the driver and readable" + (f"; passed through to a VM: {', '.join(vm)}" if vm else "")
    if unread and not findings:  # what no answer reached is unmeasured: never a fault, never healthy
        said = "not measured: " + unread_summary(unread)
        if not n:
            return skipped(READABLE, f"no GPU measured; {said}", node=inp.node_rank, evidence=ev)
        return warned(READABLE, f"{ok}; {said}", node=inp.node_rank, evidence=ev, fix=UNREAD_FIX)
    return hw.result(READABLE, findings, inp.node_rank, ok, ev,
                     detail=f"Not measured: {unread_summary(unread, len(unread))}" if unread else "",
                     fix="The kernel log names why (`journalctl -k | grep NVRM`: RmInitAdapter failed, probe routine "
                         "failed, fallen off the bus, Xid); a reset (`nvidia-smi -r -i N` with no process on it) "
                         "clears a GPU that requires one; a GPU that failed at probe or to initialise, or is lost, "
                         "needs a reboot, and its replacement when it recurs.")


UNREAD_FIX = ("Run `nvidia-smi -q -i <bus id>` on the node for each GPU named; an answer of many MiB is the Processes "
              "section (`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv` lists them).")


def unread_of(gh: dict) -> list:
    """The GPUs of a gpu_health group that no answer reached (facts/smiread.py): unmeasured, not missing."""
    return [u for u in gh.get("unread") or [] if isinstance(u, dict)]


def unread_words(u: dict) -> str:
    """'GPU 2 (0000:38:00.0): `nvidia-smi -q -i 0000:38:00.0` passed its 4 MiB cap': one GPU no answer reached."""
    read, cause = u.get("read") or "nvidia-smi -q", u.get("cause")
    if cause == "cut":
        cap = u.get("limit_bytes")
        why = f"`{read}` passed its {cap >> 20} MiB cap" if isinstance(cap, int) else f"`{read}` was cut"
    elif cause == "unanswered":
        why = f"`{read}` did not answer" + (f" ({u['error']})" if u.get("error") else "")
    else:
        why = f"`{read}` failed" + (f": {u['error']}" if u.get("error") else "")
    return f"{hw.gpu_name(u)}: {why}"


def unread_summary(unread: list, shown: int = hw.SHOWN) -> str:
    more = f"; +{len(unread) - shown} more" if len(unread) > shown else ""
    return "; ".join(unread_words(u) for u in unread[:shown]) + more


def check_nouveau(inp: LocalInput) -> CheckResult:
    """gpu.nouveau: the open-source nouveau driver loaded (DCGM's denylist): it claims NVIDIA GPUs the NVIDIA driver
    then cannot drive."""
    gh, skip = _group(inp, NOUVEAU)
    if skip:
        return skip
    if gh.get("nouveau") is None:
        return skipped(NOUVEAU, "loaded modules not readable", node=inp.node_rank)
    findings = [Finding("this node", "the nouveau driver is loaded", "/sys/module/nouveau, /proc/modules", REBOOT,
                        True, "now")] if gh["nouveau"] else []
    return hw.result(NOUVEAU, findings, inp.node_rank, "nouveau is not loaded",
                     fix="Blacklist nouveau (modprobe.d: `blacklist nouveau`, `options nouveau modeset=0`), rebuild "
                         "the initramfs and reboot.")


# ------------------------------------------------------------------------------------------------- VBIOS
def check_vbios(inp: LocalInput) -> CheckResult:
    """gpu.vbios_consistent (node): every GPU of one model on this node runs the same VBIOS (as Azure's NHC requires);
    across nodes, the cross-node check names the odd node."""
    known, skip = _readings(inp, VBIOS, lambda g: bool(g.get("vbios")), "the VBIOS version")
    if skip:
        return skip
    findings = []
    for name in sorted({g.get("name") or "?" for g in known}):
        same = [g for g in known if (g.get("name") or "?") == name]
        counts: dict = {}
        for g in same:
            counts.setdefault(g["vbios"], []).append(g)
        if len(counts) > 1:
            majority = max(counts, key=lambda v: (len(counts[v]), -min(x.get("index") or 0 for x in counts[v])))
            for v, gs in counts.items():
                if v != majority:
                    findings += [_finding(g, f"VBIOS {v}, the node's other {name} run {majority}",
                                          "vbios", MONITOR, v) for g in gs]
    versions = sorted({g["vbios"] for g in known})
    return hw.result(VBIOS, findings, inp.node_rank, f"VBIOS {', '.join(versions)} on {len(known)} GPU(s)",
                     {"vbios": {str(g.get("index")): g.get("vbios") for g in known}},
                     fix="Flash the GPUs to one VBIOS at the next maintenance (the vendor's firmware bundle).")


# ---------------------------------------------------------------------------------------------- gpu.host_copy
HOST_COPY = "gpu.host_copy"
# Pinned host<->device copies reach about 0.8 of a PCIe link's payload rate (H100, Gen5 x16: ~53 of 63 GB/s). Azure's
# floor, 48 GB/s on a Gen5 x16 link (conf/nd96isr_h100_v5.conf), is 0.76 of it: below HOST_COPY_WARN the copy path is
# slower than a healthy node's (a shared root complex, an IOMMU in translated mode, a NUMA-remote buffer), below
# HOST_COPY_FAIL the link is as good as down-trained.
HOST_COPY_WARN, HOST_COPY_FAIL = 0.7, 0.5
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def pcie_bound_gbps(gh: dict, bus: Optional[str]) -> tuple:
    """(GB/s one way, how it was read) of a GPU's PCIe link as it trained: sysfs, else NVML's generation and width."""
    from ..nccl.bounds import pcie_gbps

    for p in gh.get("pcie") or []:
        if p.get("bus_id") == bus and isinstance(p.get("gts"), (int, float)) and isinstance(p.get("width"), int):
            return pcie_gbps(p["gts"], p["width"]), f"PCIe {p['gts']:g} GT/s x{p['width']}"
    n = (_by_bus(gh).get(bus or "") or {}).get("pcie_nvml") or {}
    if n.get("gen") in GEN_GTS and isinstance(n.get("width"), int):
        return pcie_gbps(GEN_GTS[n["gen"]], n["width"]), f"PCIe Gen{n['gen']} x{n['width']}"
    return None, "the PCIe link was not read"


def check_host_copy(measured: list, facts: dict, node: int, skip: Optional[str] = None) -> CheckResult:
    """gpu.host_copy: pinned host-to-device and device-to-host copy bandwidth per GPU (torch, CUDA events) against the
    PCIe bound of the link it trained at: below 0.7 of it warns, below 0.5 fails (Azure's 48 GB/s floor on Gen5 x16
    is 0.76)."""
    if skip:
        return skipped(HOST_COPY, skip, node=node)
    gh = facts.get("gpu_health") if isinstance(facts.get("gpu_health"), dict) else {}
    findings, rows = [], []
    for m in measured:
        g = _by_bus(gh).get(m.get("bus_id") or "") or {"index": m.get("index"), "bus_id": m.get("bus_id")}
        bound, how = pcie_bound_gbps(gh, m.get("bus_id"))
        row = {**hw.gpu_ident(g), "bound_gbps": bound, "bound_from": how}
        for key, what in (("h2d_gbps", "host to device"), ("d2h_gbps", "device to host")):
            v = m.get(key)
            row[key] = v
            if not isinstance(v, (int, float)) or not bound:
                continue
            frac = v / bound
            row[f"{key[:3]}_fraction"] = round(frac, 3)
            if frac < HOST_COPY_WARN:
                act = ISOLATE if frac < HOST_COPY_FAIL else MONITOR
                findings.append(_finding(g, f"{what} {v:.1f} GB/s, {frac:.2f} of its {how} ({bound:.1f} GB/s)",
                                         "torch pinned copy, CUDA events", act, round(v, 3),
                                         f"{m.get('bytes', 0) >> 20} MiB x {m.get('iters')}"))
        rows.append(row)
    if not rows:
        return skipped(HOST_COPY, "no GPU measured", node=node)
    unbound = [r for r in rows if not r["bound_gbps"]]
    ok = "; ".join(f"GPU {r.get('index')}: {r['h2d_gbps']:.1f}/{r['d2h_gbps']:.1f} GB/s H2D/D2H"
                   + (f" of {r['bound_gbps']:.1f}" if r["bound_gbps"] else " (no PCIe bound: not judged)")
                   for r in rows[:hw.SHOWN] if isinstance(r.get("h2d_gbps"), (int, float))
                   and isinstance(r.get("d2h_gbps"), (int, float)))
    if len(unbound) == len(rows) and not findings:
        return skipped(HOST_COPY, f"measured, but no PCIe link read to judge it against: {ok}", node=node,
                       evidence={"gpus": rows})
    return hw.result(HOST_COPY, findings, node, ok or "measured", {"gpus": rows},
                     fix="Compare with a healthy node; check the GPU's PCIe link (gpu.pcie), the IOMMU mode and that "
                         "the buffer's NUMA node is the GPU's.")


def vbios_of(facts: dict) -> Optional[dict]:
    """{GPU model: VBIOS} of one node's facts when every GPU of a model agrees (else the first's), None unread."""
    gh = facts.get("gpu_health") if isinstance(facts, dict) else None
    if not isinstance(gh, dict):
        return None
    out: dict = {}
    for g in _gpus(gh):
        if g.get("vbios"):
            out.setdefault(g.get("name") or "?", g["vbios"])
    return out or None


__all__ = ["CLOCKS", "FABRIC", "HOST_COPY", "MEMORY", "MIG", "NOUVEAU", "NVLINK", "PCIE", "PERSISTENCE", "PROCESSES",
           "READABLE", "VBIOS", "XID", "HwExpect", "check_clocks", "check_fabric", "check_host_copy", "check_memory",
           "check_mig", "check_nouveau", "check_nvlink", "check_pcie", "check_persistence", "check_processes",
           "check_readable", "check_vbios", "check_xid", "expected_links", "hw_expect", "kernel_codes",
           "not_listed_why", "pcie_bound_gbps", "unread_of", "unread_summary",
           "unread_words", "vbios_of"]
