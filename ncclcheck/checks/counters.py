"""ib.counters: the fabric's error counters judged on what changed, never on their lifetime value (a link that
flapped last month keeps its link_downed until the driver reloads; Azure/azurehpc#648 drained nodes for ever on
lifetime counts). Two windows: inside one run (facts/counters.py reads every counter when the run starts and again
when it has read everything else: a link flapping or erroring right now), and, with --baseline, since a saved run of
the same host and boot (hours or days: Azure NHC's "5 flaps in 24 h").

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
from typing import Optional

from ..model import CheckResult, NodeInfo, failed, passed, skipped, warned
from ..units import format_duration
from . import actions
from .local import LocalInput

CID = "ib.counters"
LINK_DOWN = ("link_downed",)
PHYSICAL = ("symbol_error", "link_error_recovery", "port_rcv_errors", "port_rcv_remote_physical_errors",
            "local_link_integrity_errors", "excessive_buffer_overrun_errors")
DISCARDS = ("port_xmit_discards",)
HW_JUDGED = ("local_ack_timeout_err", "packet_seq_err", "implied_nak_seq_err", "out_of_buffer", "rnr_nak_retry_err")
FLAPS_FAIL = 5  # flaps in a baseline window that fail (Azure NHC: >= 5 lost-carrier events in 24 h)
SHOWN = 6
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
    """([{"where", "counter", "from", "to", "delta"}] of every counter that rose between two reads, [where/counter
    that went down: reset by a driver reload in between]). Only counters present in both reads are compared."""
    moved, reset = [], []

    def one(where: str, a: dict, b: dict) -> None:
        for name, v1 in b.items():
            v0 = a.get(name)
            if not isinstance(v0, int) or not isinstance(v1, int) or isinstance(v0, bool) or isinstance(v1, bool):
                continue
            if v1 < v0:
                reset.append(f"{where} {name}")
            elif v1 > v0:
                moved.append({"where": where, "counter": name, "from": v0, "to": v1, "delta": v1 - v0})

    first, last = _obj(first), _obj(last)  # a saved report's or another node's: any shape
    for port, b in sorted(_obj(last.get("ports")).items()):
        a, b = _obj(_obj(first.get("ports")).get(port)), _obj(b)
        one(port, _obj(a.get("counters")), _obj(b.get("counters")))
        one(port, _obj(a.get("hw_counters")), _obj(b.get("hw_counters")))
    for nd, b in sorted(_obj(last.get("netdevs")).items()):
        a, b = _obj(_obj(first.get("netdevs")).get(nd)), _obj(b)
        one(nd, a, {k: v for k, v in b.items() if k in ("carrier_changes", "carrier_down_count")})
    return moved, reset


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


def _said(m: dict) -> str:
    return f"{m['where']} {m['counter']} +{m['delta']:,}"


def judge(first: dict, last: dict, window_s: float, how: str, node: Optional[int], long_window: bool) -> CheckResult:
    """One node's verdict on the counters that moved between two reads `window_s` apart (`how`: "in 0.5 s" /
    "since the baseline ...")."""
    moved, reset = deltas(first, last)
    watched = len(_obj(_obj(last).get("ports"))), len(_obj(_obj(last).get("netdevs")))
    judged = [m for m in moved if _kind(m["counter"]) != "shown"]
    ev = {"window_s": round(window_s, 3), "window": how, "ports": watched[0], "netdevs": watched[1],
          "deltas": moved, "reset": reset}
    flaps = _flaps(judged)
    errors = [m for m in judged if _kind(m["counter"]) == "error"]
    if flaps:
        worst = max(flaps.values())
        fail = not long_window or worst >= FLAPS_FAIL
        action = actions.ISOLATE if fail else actions.MONITOR
        ev[actions.KEY] = action
        links = [m for m in judged if _kind(m["counter"]) == "link"]
        text = "; ".join(_said(m) for m in (links + errors)[:SHOWN])
        what = (f"link went down and up {how}" if not long_window else
                f"{worst} flap(s) on one link {how}" + (f" (>= {FLAPS_FAIL} fail)" if fail else ""))
        return (failed if fail else warned)(
            CID, f"{text}: {what}; {actions.said(action)}", node=node, evidence=ev, fix=FIX_LINK,
            detail="A link that drops takes every NCCL connection over it down with it (the job fails with "
                   "\"Got completion with error 12\" or hangs), and one that keeps dropping does it again after a "
                   "restart.")
    if errors:
        ev[actions.KEY] = actions.MONITOR
        text = "; ".join(_said(m) for m in errors[:SHOWN]) + (f"; +{len(errors) - SHOWN} more"
                                                               if len(errors) > SHOWN else "")
        return warned(CID, f"{text} {how}; {actions.said(actions.MONITOR)}", node=node, evidence=ev, fix=FIX_ERRORS,
                      detail="Error counters that climb on an idle or lightly used port mean a marginal physical "
                             "link; under NCCL they become retransmissions (slow collectives) and, past the retry "
                             "limit, failed connections.")
    note = f" ({len(reset)} counter(s) reset in between: driver reloaded)" if reset else ""
    return passed(CID, f"no error counter moved on {watched[0]} RDMA port(s) and {watched[1]} netdev(s) {how}"
                       f"{note}", node=node, evidence=ev)


def check_counters(inp: LocalInput) -> CheckResult:
    """ib.counters: RDMA port error counters and netdev carrier changes, judged on their change inside this run."""
    node = inp.node_rank
    c = inp.facts.get("counters")
    if not isinstance(c, dict) or "unavailable" in c:
        return skipped(CID, f"counters unavailable: {(c or {}).get('unavailable', 'not collected')}", node=node)
    last = c.get("last") or {}
    if not (last.get("ports") or last.get("netdevs")):
        return skipped(CID, "no RDMA port and no physical netdev to watch", node=node)
    first, window = c.get("first"), c.get("interval_s")
    if not isinstance(first, dict) or not isinstance(window, (int, float)) or window <= 0:
        return skipped(CID, "the counters were read once: no window to judge a change in", node=node)
    return judge(first, last, float(window), f"in {format_duration(window)}", node, long_window=False)


def _same_host(node: NodeInfo, base: Sequence[NodeInfo]) -> Optional[NodeInfo]:
    return next((b for b in base if b.hostname == node.hostname), None)


def baseline_checks(nodes: Sequence[NodeInfo], base: Sequence[NodeInfo], source: str = "baseline") -> list:
    """ib.counters against --baseline: for every node with facts, its counters now against the saved run of the same
    host and boot (counters of another host or boot say nothing about this one)."""
    out: list = []
    for node in nodes:
        now = (node.facts or {}).get("counters")
        if not isinstance(now, dict) or not isinstance(now.get("last"), dict):
            continue
        ref = _same_host(node, base)
        then = (ref.facts or {}).get("counters") if ref is not None else None
        if ref is None or not isinstance(then, dict) or not isinstance(then.get("last"), dict):
            out.append(skipped(CID, f"{source} has no counters of {node.hostname}: nothing to compare with",
                               node=node.node_rank))
            continue
        if not then.get("boot_id") or then.get("boot_id") != now.get("boot_id"):
            out.append(skipped(CID, f"{node.hostname} rebooted since {source} (boot id {then.get('boot_id')} -> "
                                    f"{now.get('boot_id')}): its counters started again", node=node.node_rank))
            continue
        a, b = then["last"], now["last"]
        span = (b.get("at") or 0) - (a.get("at") or 0)
        if not isinstance(span, (int, float)) or span <= 0:
            out.append(skipped(CID, f"{source} was not saved before this run: no window", node=node.node_rank))
            continue
        out.append(judge(a, b, float(span), f"since {source} ({format_duration(span)} ago)", node.node_rank,
                         long_window=True))
    return out
