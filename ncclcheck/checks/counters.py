"""ib.counters: the fabric's error counters judged on what changed, never on their lifetime value (a link that
flapped last month keeps its link_downed until the driver reloads; Azure/azurehpc#648 drained nodes for ever on
lifetime counts). Two windows, the same for every counter of the node (checks/gpu.py judges the GPUs' in them too):
inside one run (facts/counters.py reads every counter when the run starts and again when it has read everything
else: a link flapping or erroring right now), and, with --baseline, since a saved run of the same host and boot
(hours or days: Azure NHC's "5 flaps in 24 h"). `run_window` and `baseline_window` are those two windows.

What moves and what it means:
- link_downed (IB/RoCE port) or carrier changes (the netdev): the link went down and came back. Inside one run that
  is a link flapping now: fail, isolate the node. Across a baseline: 5 or more flaps fail (Azure NHC's
  check_ib_link_flapping threshold, per 24 h), fewer are watched.
- symbol_error, link_error_recovery, port_rcv_errors, port_rcv_remote_physical_errors, local_link_integrity_errors,
  excessive_buffer_overrun_errors: the physical layer (cable, transceiver, switch port) corrupting or dropping.
- port_xmit_discards: packets dropped for want of credit (congestion or a stuck peer).
- mlx5 hw_counters local_ack_timeout_err, packet_seq_err, implied_nak_seq_err, out_of_buffer, rnr_nak_retry_err:
  retransmissions and drops NCCL meets as slow collectives or "completion with error 12".
All of these warn (monitor); out_of_sequence (normal with adaptive routing) and the CNP counters (congestion control
at work) are shown, not judged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from ..facts.counters import deltas as changed
from ..facts.counters import resets
from ..model import CheckResult, NodeInfo, skipped
from ..units import format_duration
from . import hwaction
from .hwaction import ISOLATE, MONITOR, Finding
from .local import LocalInput

CID = "ib.counters"
LINK_DOWN = ("link_downed",)
PHYSICAL = ("symbol_error", "link_error_recovery", "port_rcv_errors", "port_rcv_remote_physical_errors",
            "local_link_integrity_errors", "excessive_buffer_overrun_errors")
DISCARDS = ("port_xmit_discards",)
HW_JUDGED = ("local_ack_timeout_err", "packet_seq_err", "implied_nak_seq_err", "out_of_buffer", "rnr_nak_retry_err")
FLAPS_FAIL = 5  # flaps in a baseline window that fail (Azure NHC: >= 5 lost-carrier events in 24 h)
FIX_LINK = ("Reseat or replace the cable / transceiver of the port named and check its switch port (`ibstat`, "
            "`mlxlink -d <dev> -m`, the switch's port counters); resume the node once the counters stay still.")
FIX_ERRORS = ("Watch whether the counters keep climbing (run health again); a port that keeps counting symbol or "
              "receive errors has a marginal cable or transceiver: replace it at the next drain.")


def _obj(v) -> dict:
    return v if isinstance(v, dict) else {}


def _kind(counter: str) -> str:
    if counter in LINK_DOWN or counter.startswith("carrier"):
        return "link"
    if counter in PHYSICAL or counter in DISCARDS or counter in HW_JUDGED:
        return "error"
    return "shown"


def deltas(first: dict, last: dict) -> tuple[list, list]:
    """([{"where", "counter", "from", "to", "delta"}] of every fabric counter that rose between two reads,
    [where/counter that went down: reset by a driver reload in between]), by facts/counters.py's one rule. Only
    counters present in both reads are compared."""
    moved, reset = [], []

    def one(a: dict, b: dict) -> None:
        for where, d in sorted(changed(a, b).items()):
            moved.extend({"where": where, "counter": name, "from": b[where][name] - inc, "to": b[where][name],
                          "delta": inc} for name, inc in d.items())
        reset.extend(f"{where} {name}" for where, name in resets(a, b))

    first, last = _obj(first), _obj(last)  # a saved report's or another node's: any shape
    ports_a, ports_b = _obj(first.get("ports")), _obj(last.get("ports"))
    for sub in ("counters", "hw_counters"):
        one({p: _obj(_obj(v).get(sub)) for p, v in ports_a.items()}, {p: _obj(_obj(v).get(sub))
                                                                      for p, v in ports_b.items()})
    one(_obj(first.get("netdevs")), {nd: {k: v for k, v in _obj(b).items() if k in ("carrier_changes",
                                                                                     "carrier_down_count")}
                                     for nd, b in _obj(last.get("netdevs")).items()})
    return moved, reset


def _unmeasured(first: object, last: object) -> dict:
    """{port: {counter: what it read}} of the ports whose counters read as no number in either read."""
    out: dict = {}
    for read in (_obj(first), _obj(last)):
        for where, v in _obj(read.get("ports")).items():
            bad = _obj(_obj(v).get("unreadable"))
            if bad:
                out.setdefault(str(where), {}).update({str(k): str(x)[:24] for k, x in bad.items()})
    return out


def _flaps(moved: list) -> dict:
    """{where: flaps}: link_downed's delta, or a netdev's carrier downs (carrier_changes counts both edges)."""
    out: dict = {}
    downs = {m["where"] for m in moved if m["counter"] == "carrier_down_count"}
    for m in moved:
        c = m["counter"]
        if c in LINK_DOWN or c == "carrier_down_count" or (c == "carrier_changes" and m["where"] not in downs):
            n = m["delta"] if c != "carrier_changes" else math.ceil(m["delta"] / 2)
            out[m["where"]] = max(out.get(m["where"], 0), n)
    return out


def _read(m: dict) -> str:
    """The file a moved counter was read from."""
    if "/" not in m["where"]:
        return f"/sys/class/net/{m['where']}/{m['counter']}"
    dev, port = m["where"].split("/", 1)
    sub = "hw_counters" if m["counter"] in HW_JUDGED else "counters"
    return f"/sys/class/infiniband/{dev}/ports/{port}/{sub}/{m['counter']}"


def _finding(m: dict, what: str, action: str, how: str) -> Finding:
    ident = {"port": m["where"]} if "/" in m["where"] else {"netdev": m["where"]}
    return Finding(m["where"], f"{m['counter']} +{m['delta']:,}{what}", _read(m), action,
                   {k: m[k] for k in ("from", "to", "delta")}, how, ident)


def judge(first: dict, last: dict, window_s: float, how: str, node: Optional[int], long_window: bool) -> CheckResult:
    """One node's verdict on the counters that moved between two reads `window_s` apart (`how`: "in 0.5 s" /
    "since the baseline ..."): a link that flapped inside one run, or 5 times since a baseline, isolates the node;
    fewer flaps since a baseline, and any error counter that moved, are watched (monitor)."""
    moved, reset = deltas(first, last)
    watched = len(_obj(_obj(last).get("ports"))), len(_obj(_obj(last).get("netdevs")))
    judged = [m for m in moved if _kind(m["counter"]) != "shown"]
    ev = {"window_s": round(window_s, 3), "window": how, "ports": watched[0], "netdevs": watched[1],
          "deltas": moved, "reset": reset}
    flaps = _flaps(judged)
    findings = []
    for m in judged:
        if _kind(m["counter"]) == "link":
            n = flaps.get(m["where"], 0)
            fail = not long_window or n >= FLAPS_FAIL
            what = (": the link went down and up" if not long_window else
                    f": {n} flap(s)" + (f" (>= {FLAPS_FAIL} fail)" if fail else f" (< {FLAPS_FAIL}: watched)"))
            findings.append(_finding(m, what, ISOLATE if fail else MONITOR, how))
        else:
            findings.append(_finding(m, "", MONITOR, how))
    note = f" ({len(reset)} counter(s) reset in between: driver reloaded)" if reset else ""
    ok = f"no error counter moved on {watched[0]} RDMA port(s) and {watched[1]} netdev(s) {how}{note}"
    blind = _unmeasured(first, last)
    if blind:
        ev["unreadable"] = blind
        said = "; ".join(f"{w} ({', '.join(f'{k}: {v}' for k, v in list(b.items())[:3])})"
                         for w, b in list(blind.items())[:3]) + (f"; +{len(blind) - 3} more" if len(blind) > 3 else "")
        if not findings:  # nothing read as a number on them is not "nothing moved" (unmeasured is never healthy)
            return skipped(CID, f"{len(blind)} RDMA port(s) gave error counters that read as no number: {said}; "
                                "not judged", node=node, evidence=ev,
                           fix="Read the port's counters by hand (`cat /sys/class/infiniband/<dev>/ports/<n>/counters/"
                               "*`); an I/O error there is a port or firmware in trouble (`mlxlink`, `dmesg`).")
        ok = f"{ok}; {len(blind)} port(s) read as no number: {said}"
    if flaps:
        return hwaction.result(CID, findings, node, ok, ev, fix=FIX_LINK,
                               detail="A link that drops takes every NCCL connection over it down with it (the job "
                                      "fails with \"Got completion with error 12\" or hangs), and one that keeps "
                                      "dropping does it again after a restart.")
    return hwaction.result(CID, findings, node, ok, ev, fix=FIX_ERRORS,
                           detail="Error counters that climb on an idle or lightly used port mean a marginal physical "
                                  "link; under NCCL they become retransmissions (slow collectives) and, past the "
                                  "retry limit, failed connections.")


@dataclass(frozen=True)
class Window:
    """Two reads of the node's counters and what lies between them: `text` says it in a verdict ("in 0.5 s", "since
    --baseline g.json (2.0 h ago)"); `long`: a baseline's hours, not one run's moment."""

    first: dict
    last: dict
    seconds: float
    text: str
    long: bool


def run_window(c: object) -> tuple[Optional[Window], str]:
    """(this run's window, "") from its `counters` group, or (None, why there is none)."""
    if not isinstance(c, dict) or "unavailable" in c:
        return None, f"counters unavailable: {_obj(c).get('unavailable', 'not collected')}"
    first, last, secs = c.get("first"), c.get("last"), c.get("interval_s")
    if not isinstance(first, dict) or not isinstance(last, dict) or not isinstance(secs, (int, float)) or secs <= 0:
        return None, "the counters were read once: no window to judge a change in"
    return Window(first, last, float(secs), f"in {format_duration(secs)}", False), ""


def baseline_window(now: object, then: object, host: str, source: str) -> tuple[Optional[Window], str]:
    """(the window since a saved run's last read, "") when `then` (the baseline's counters group of the same host) is
    of this boot and older, else (None, why not): counters restart with a reboot or a driver reload."""
    if not isinstance(now, dict) or not isinstance(now.get("last"), dict):
        return None, "no counters read by this run"
    if not isinstance(then, dict) or not isinstance(then.get("last"), dict):
        return None, f"{source} has no counters of {host}: nothing to compare with"
    if not then.get("boot_id") or then.get("boot_id") != now.get("boot_id"):
        return None, (f"{host} rebooted since {source} (boot id {then.get('boot_id')} -> {now.get('boot_id')}): its "
                      "counters started again")
    a, b = then["last"], now["last"]
    span = (b.get("at") or 0) - (a.get("at") or 0)
    if not isinstance(span, (int, float)) or span <= 0:
        return None, f"{source} was not saved before this run: no window"
    return Window(a, b, float(span), f"since {source} ({format_duration(span)} ago)", True), ""


def check_counters(inp: LocalInput) -> CheckResult:
    """ib.counters: RDMA port error counters and netdev carrier changes, judged on their change inside this run."""
    node = inp.node_rank
    c = inp.facts.get("counters")
    last = _obj(_obj(c).get("last"))
    if isinstance(c, dict) and "unavailable" not in c and not (last.get("ports") or last.get("netdevs")):
        return skipped(CID, "no RDMA port and no physical netdev to watch", node=node)
    w, why = run_window(c)
    if w is None:
        return skipped(CID, why, node=node)
    return judge(w.first, w.last, w.seconds, w.text, node, long_window=False)


def same_host(node: NodeInfo, base: Sequence[NodeInfo]) -> Optional[NodeInfo]:
    """The saved run of this node's host (a counter of another host says nothing about this one)."""
    return next((b for b in base if b.hostname == node.hostname), None)


def baseline_checks(nodes: Sequence[NodeInfo], base: Sequence[NodeInfo], source: str = "baseline") -> list:
    """ib.counters against --baseline: for every node with facts, its counters now against the saved run of the same
    host and boot."""
    out: list = []
    for node in nodes:
        now = (node.facts or {}).get("counters")
        if not isinstance(now, dict) or not isinstance(now.get("last"), dict):
            continue
        ref = same_host(node, base)
        w, why = baseline_window(now, (ref.facts or {}).get("counters") if ref is not None else None, node.hostname,
                                 source)
        out.append(judge(w.first, w.last, w.seconds, w.text, node.node_rank, long_window=True) if w is not None
                   else skipped(CID, why, node=node.node_rank))
    return out
