"""`ncclcheck health`'s own checks: one node's facts against what the operator expects of it (GPU count, the NCCL
interface's state, MTU and speed, RDMA ports and their rate), plus the node-local checks of preflight that need no
other node. Pure: facts and expectations in, CheckResults out, in the order a node's problems should be fixed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from ..model import CheckResult, failed, passed, skipped, warned
from ..nccl import rules
from . import actions, affinity, counters, gdr, local

GPUS, IFACE, IB = "health.gpus", "health.nccl_interface", "health.ib_ports"
# preflight's node-local checks that say something on one node alone (no master, no resolver, no other node).
LOCAL_CHECKS = (local.check_socket_ifname, gdr.check_gdr, affinity.check_affinity, counters.check_counters,
                local.check_shm, local.check_memlock, local.check_env_nccl)


@dataclass(frozen=True)
class Expect:
    """What this node should have; None: not checked."""

    gpus: Optional[int] = None
    gpus_from: str = "--gpus"  # where the expected count came from (a flag, or the node's Gres in Slurm)
    ifname: Optional[str] = None  # NCCL_SOCKET_IFNAME syntax
    mtu: Optional[int] = None
    min_speed_mbps: Optional[int] = None
    ib_rate_gbps: Optional[float] = None


def health_checks(facts: dict, expect: Expect) -> list:
    """Every health check on one node's facts (collect_health_facts), in fix-first order."""
    own: list[CheckResult] = [check_gpus(facts, expect), check_nccl_interface(facts, expect)]
    own += check_ib_ports(facts, expect)
    out = [dataclasses.replace(c, node=0) for c in own]  # one node: node 0, as preflight's local checks say
    inp = local.LocalInput.of(facts, multi_node=True)
    for fn in LOCAL_CHECKS:
        res = fn(inp)
        out += res if isinstance(res, list) else [res]
    return out


def _unavailable(group) -> Optional[str]:
    if not isinstance(group, (dict, list)):
        return "not collected"
    return str(group["unavailable"]) if isinstance(group, dict) and "unavailable" in group else None


def check_gpus(facts: dict, expect: Expect) -> CheckResult:
    """health.gpus: the GPUs nvidia-smi sees against --gpus or the node's Gres (fewer fails: a GPU fell off the bus)."""
    gpu = facts.get("gpu") or {}
    want = expect.gpus
    if want is None:
        return skipped(GPUS, "no expected GPU count (--gpus, or a gpu Gres on the Slurm node)")
    why = _unavailable(gpu)
    have = gpu.get("count") if not why else None
    ev = {"expected": want, "expected_from": expect.gpus_from, "visible": have, "source": gpu.get("source"),
          "reason": why or gpu.get("reason")}
    if not isinstance(have, int):
        return failed(GPUS, f"GPUs could not be counted ({why}); {want} expected", evidence=ev,
                      fix="Check the driver: `nvidia-smi` on the node, `dmesg | grep -i -e nvrm -e xid`.")
    if have < want:
        return failed(GPUS, f"{have} of {want} GPUs visible (expected from {expect.gpus_from})", evidence=ev,
                      detail=f"nvidia-smi lists {have}; {gpu.get('reason') or ''}".strip(),
                      fix="A GPU that fell off the bus or an Xid error: `nvidia-smi -q`, `dmesg | grep -i xid`; "
                          "reset or replace it, then resume the node.")
    if have > want:
        return warned(GPUS, f"{have} GPUs visible, {want} expected (from {expect.gpus_from})", evidence=ev,
                      fix="Correct the expectation (--gpus, or Gres in slurm.conf / gres.conf).")
    return passed(GPUS, f"{have} GPUs visible, as expected", evidence=ev)


def _nccl_interfaces(ifs: list, expect: Expect, env: dict) -> tuple[list, str]:
    """(interfaces to judge, how they were chosen): --ifname, else NCCL_SOCKET_IFNAME, else NCCL's own first
    choice counting every interface with an address (so a link that went down is judged, not skipped)."""
    for value, origin in ((expect.ifname, "--ifname"), (env.get("NCCL_SOCKET_IFNAME"), "NCCL_SOCKET_IFNAME")):
        spec = rules.parse_spec(value)
        if spec is not None:
            return rules.socket_ifname_matches(spec, ifs), rules.assignment(origin, value)
    by_name = {i["name"]: i for i in ifs}
    order = [n for n in rules.nccl_default_order(ifs, "2.28.2")
             if by_name[n].get("kind") not in rules.NEVER_FOR_MULTI_NODE]
    return ([by_name[order[0]]] if order else []), "NCCL's default order"


def check_nccl_interface(facts: dict, expect: Expect) -> CheckResult:
    """health.nccl_interface: the interface NCCL would use is up and running, with an IPv4 address, the expected MTU
    and at least the expected speed."""
    ifs = facts.get("interfaces")
    why = _unavailable(ifs)
    if why or not isinstance(ifs, list):
        return failed(IFACE, f"interfaces could not be read: {why}", fix="Check /sys/class/net on the node.")
    env = (facts.get("env") or {}).get("vars") or {}
    chosen, how = _nccl_interfaces(ifs, expect, env)
    ev: dict = {"chosen_by": how, "expected_mtu": expect.mtu, "expected_min_speed_mbps": expect.min_speed_mbps,
                "interfaces": [{k: i.get(k) for k in ("name", "up", "running", "mtu", "speed_mbps")} for i in chosen]}
    if not chosen:
        return failed(IFACE, f"no interface matches {how}", evidence=ev,
                      fix="Name the cluster interface with --ifname (exact: =eth0), or bring it up.")
    problems = []
    for i in chosen:
        name = i["name"]
        if not (i.get("up") and i.get("running")):
            problems.append(f"{name} is down (operstate {i.get('operstate')})")
            continue
        if not rules.has_ipv4(i):
            problems.append(f"{name} has no IPv4 address")
        if expect.mtu is not None and i.get("mtu") != expect.mtu:
            problems.append(f"{name} MTU {i.get('mtu')}, expected {expect.mtu}")
        speed = i.get("speed_mbps")
        if expect.min_speed_mbps is not None and isinstance(speed, int) and speed < expect.min_speed_mbps:
            problems.append(f"{name} speed {speed} Mb/s, expected >= {expect.min_speed_mbps}")
        elif expect.min_speed_mbps is not None and not isinstance(speed, int):
            problems.append(f"{name} speed unknown, expected >= {expect.min_speed_mbps} Mb/s")
    names = ", ".join(i["name"] for i in chosen)
    if problems:
        return failed(IFACE, "; ".join(problems), evidence=ev,
                      detail=f"Chosen by {how}. NCCL and Gloo carry the job's traffic on it: down means the "
                             "job cannot form; a different MTU than its peers stalls large transfers.",
                      fix="`ip link set <if> up`, `ip link set <if> mtu <n>` (and the switch port), `ethtool <if>` "
                          "for the negotiated speed; then resume the node.")
    extra = "".join([f", MTU {expect.mtu}" if expect.mtu else "",
                     f", >= {expect.min_speed_mbps} Mb/s" if expect.min_speed_mbps else ""])
    return passed(IFACE, f"{names} up{extra} ({how})", evidence=ev)


def check_ib_ports(facts: dict, expect: Expect) -> list:
    """health.ib_ports: RDMA ports ACTIVE (none active: NCCL falls back to sockets without a word) at the expected
    rate (--ib-rate: every port)."""
    rdma = facts.get("rdma")
    why = _unavailable(rdma)
    want = expect.ib_rate_gbps
    if why:
        return [failed(IB, f"RDMA ports could not be read: {why}") if want else
                skipped(IB, f"RDMA facts unavailable: {why}")]
    ports = rules.all_ib_ports(rdma)
    ev = {"expected_rate_gbps": want, "ports": [{"device": d, "port": p, "state": x.get("state"),
                                                 "rate_gbps": x.get("rate_gbps")} for d, p, x in ports]}
    if not ports:
        if want:
            return [failed(IB, f"no RDMA port; expected ports at {want:g} Gb/s", evidence=ev,
                           fix="Check the HCA driver (`ls /sys/class/infiniband`, `dmesg | grep mlx`).")]
        return [skipped(IB, "no RDMA ports (NCCL uses TCP sockets)", evidence=ev)]
    active = {(d, p) for d, p, _ in rules.active_ib_ports(rdma)}
    down = [f"{d}:{p} {x.get('state') or '?'}" for d, p, x in ports if (d, p) not in active]
    slow = [f"{d}:{p} {x.get('rate_gbps')} Gb/s" for d, p, x in ports
            if (d, p) in active and want and not (isinstance(x.get("rate_gbps"), (int, float))
                                                  and x["rate_gbps"] >= want)]
    no_v2 = rules.roce_without_v2_ipv4_gid(rules.active_ib_ports(rdma))
    gid: list = []
    if no_v2:  # NCCL would use these ports with a GID that does not route (nccl/rules.py)
        named = ", ".join(f"{d}:{p}" + (f" ({', '.join(x.get('netdevs') or [])})" if x.get("netdevs") else "")
                          for d, p, x in no_v2)
        gid = [failed(IB, f"ACTIVE RoCE port(s) with no RoCE v2 IPv4 GID: {named}; {actions.said(actions.ISOLATE)}",
                      evidence={**ev, actions.KEY: actions.ISOLATE}, detail=rules.ROCE_NO_V2_DETAIL,
                      fix=rules.roce_no_v2_fix(no_v2))]
    fix = "Cable, transceiver, switch port and subnet manager (`sminfo`, `ibstat` on the node); then resume it."
    if not active or (want and (down or slow)):
        what = "; ".join(filter(None, [f"not ACTIVE: {', '.join(down)}" if down else "",
                                       f"below {want:g} Gb/s: {', '.join(slow)}" if slow else ""]))
        return [failed(IB, what, evidence=ev, fix=fix)] + gid
    if down:
        return [warned(IB, f"{len(active)} ACTIVE; not ACTIVE: {', '.join(down)}", evidence=ev, fix=fix)] + gid
    if gid:
        return gid
    rate = f" at >= {want:g} Gb/s" if want else ""
    return [passed(IB, f"{len(active)} RDMA port(s) ACTIVE{rate}", evidence=ev)]
