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
from . import local
from .hwaction import HwExpect

GPUS, IFACE, IB = "health.gpus", "health.nccl_interface", "health.ib_ports"


@dataclass(frozen=True)
class Expect:
    """What this node should have; None: not checked."""

    gpus: Optional[int] = None
    gpus_from: str = "--gpus"  # where the expected count came from (a flag, or the node's Gres in Slurm)
    ifname: Optional[str] = None  # NCCL_SOCKET_IFNAME syntax
    mtu: Optional[int] = None
    min_speed_mbps: Optional[int] = None
    ib_rate_gbps: Optional[float] = None


def health_checks(facts: dict, expect: Expect, hw: Optional[HwExpect] = None) -> list:
    """Every health check on one node's facts (collect_health_facts), in fix-first order: the node's own
    expectations, then the registry's rows for health in its order: preflight's node-local checks that say something
    on one node alone (no master, no resolver, no other node) and the hardware's (GPUs, GPUDirect RDMA, affinity,
    counters)."""
    from .registry import HEALTH, LOCAL, run_checks

    own: list[CheckResult] = [check_gpus(facts, expect), check_nccl_interface(facts, expect)]
    own += check_ib_ports(facts, expect)
    out = [dataclasses.replace(c, node=0) for c in own]  # one node: node 0, as preflight's local checks say
    inp = local.LocalInput.of(facts, multi_node=True, hw=hw or HwExpect(processes="allowed"))
    return out + run_checks(LOCAL, inp, command=HEALTH)


def _unavailable(group) -> Optional[str]:
    if not isinstance(group, (dict, list)):
        return "not collected"
    return str(group["unavailable"]) if isinstance(group, dict) and "unavailable" in group else None


def _unusable(facts: dict) -> tuple:
    """(GPUs counted but not usable, GPUs on the PCI bus the driver does not list): [(bus id or "GPU i", why)] each,
    from gpu_health (a GPU in ERR!, one that requires a reset, one lost; one that failed at probe)."""
    from .gpu import PASSED_THROUGH, kernel_codes, not_listed_why, unusable_state

    gh = facts.get("gpu_health")
    if not isinstance(gh, dict) or "unavailable" in gh:
        return [], []
    broken = []
    for g in gh.get("gpus") or []:
        state = unusable_state(g) if isinstance(g, dict) else None
        if state:
            broken.append((g.get("bus_id") or f"GPU {g.get('index')}", state, True))
    for u in gh.get("unreachable") or []:
        if isinstance(u, dict):
            init = "; RmInitAdapter failed" if "init_failed" in kernel_codes(gh, u.get("bus_id")) else ""
            broken.append((u.get("bus_id") or f"GPU {u.get('index')}", f"no handle: {u.get('state')}{init}", False))
    # the driver bound and the kernel log's lines say which: failed at probe, failed to initialise, fell off the bus
    absent = [(a.get("bus_id"), not_listed_why(gh, a.get("bus_id"), a.get("driver"))[0])
              for a in gh.get("absent") or [] if isinstance(a, dict) and a.get("driver") not in PASSED_THROUGH]
    return broken, absent


def _unread(facts: dict) -> list:
    """The GPUs no nvidia-smi answer reached (gpu_health's `unread`, facts/smiread.py)."""
    from .gpu import unread_of

    gh = facts.get("gpu_health")
    return unread_of(gh) if isinstance(gh, dict) and "unavailable" not in gh else []


def _node_gpus(facts: dict) -> Optional[int]:
    """The GPUs the driver lists on the node (gpu_health, from NVML or nvidia-smi -q: all of them, whatever
    CUDA_VISIBLE_DEVICES says), None where it was not read."""
    gh = facts.get("gpu_health")
    if not isinstance(gh, dict) or "unavailable" in gh or gh.get("source") not in ("nvml", "nvidia-smi"):
        return None
    return len(gh.get("gpus") or [])


def check_gpus(facts: dict, expect: Expect) -> CheckResult:
    """health.gpus: the usable GPUs against --gpus or the node's Gres (fewer fails, naming each missing GPU by bus id:
    on the PCI bus but not listed by the driver, or listed but lost or in need of a reset)."""
    gpu = facts.get("gpu") or {}
    want = expect.gpus
    if want is None:
        return skipped(GPUS, "no expected GPU count (--gpus, or a gpu Gres on the Slurm node)")
    why = _unavailable(gpu)
    listed = gpu.get("count") if not why else None
    broken, absent = _unusable(facts)
    ev = {"expected": want, "expected_from": expect.gpus_from, "visible": listed, "source": gpu.get("source"),
          "reason": why or gpu.get("reason"), "not_usable": [{"gpu": b, "why": w} for b, w, _l in broken],
          "not_listed": [{"bus_id": b, "why": w} for b, w in absent]}
    node = _node_gpus(facts)
    if node is not None and gpu.get("visible_devices") is not None:
        # CUDA_VISIBLE_DEVICES names this process's GPUs (a Prolog's: the job's share of the node), the expectation
        # the node's (its Gres): the node's are the driver's list, which ignores it
        listed = ev["visible"] = node
        ev["visible_devices"] = gpu.get("visible_devices")
        ev["source"] = f"{facts['gpu_health']['source']} (the node's GPUs, CUDA_VISIBLE_DEVICES not applied)"
    if not isinstance(listed, int):
        return failed(GPUS, f"GPUs could not be counted ({why}); {want} expected", evidence=ev,
                      fix="Check the driver: `nvidia-smi` on the node, `journalctl -k | grep NVRM`.")
    # A GPU the driver lists but cannot use (lost, requires reset) is not one a job can use; a GPU without a handle
    # is not in the driver's list already
    listed_broken = [(b, w) for b, w, listed_gpu in broken if listed_gpu]
    have = max(0, listed - len(listed_broken))
    named = [f"{b} ({w})" for b, w, _l in broken] + [f"{b} ({w})" for b, w in absent]
    unread = _unread(facts)
    if unread:
        ev["not_measured"] = unread
    if have < want <= have + len(unread) and not named:
        # the GPUs short are ones no answer reached (a cut nvidia-smi -q): unmeasured, not missing
        from .gpu import unread_summary

        return warned(GPUS, f"{have} of {want} GPUs measured (expected from {expect.gpus_from}); not measured: "
                            f"{unread_summary(unread)}", evidence=ev,
                      fix="gpu.readable names why each was not measured; run `nvidia-smi -q -i <bus id>` for it.")
    if have < want:
        gone = f": {', '.join(named)}" if named else ""
        what = f"{have} of {want} GPUs usable ({listed} visible)" if listed_broken else f"{have} of {want} GPUs visible"
        return failed(GPUS, f"{what} (expected from {expect.gpus_from}){gone}", evidence=ev,
                      detail=f"The driver lists {listed}; {gpu.get('reason') or ''}".strip(),
                      fix=("A GPU on the PCI bus that the driver does not list failed at probe (no driver bound), "
                           "failed to initialise (bound; RmInitAdapter failed) or fell off the bus: "
                           "`journalctl -k | grep NVRM` shows why; "
                           if absent else "") +
                          "a lost GPU (Xid 79) or one that requires a reset: gpu.readable and gpu.xid name it; "
                          "reset, reboot or replace it, then resume the node.")
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


# The port's physical state (sysfs phys_state, ibstat's "Physical state") says why it is not ACTIVE
PHYS_MEANING = {"polling": "no cable, or no partner port at the other end", "disabled": "disabled on this side",
                "sleep": "asleep (the driver has not brought it up)",
                "linkerrorrecovery": "recovering from link errors",
                "portconfigurationtraining": "training with its partner", "phytest": "in a physical-layer test"}


def _phys(port: dict) -> str:
    raw = str(port.get("phys_state") or "")
    name = raw.split(":", 1)[-1].strip()
    key = name.lower().replace(" ", "")
    if not name or key == "linkup":
        return ""
    return f" (physical state {name}: {PHYS_MEANING[key]})" if key in PHYS_MEANING else f" (physical state {name})"


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
    down = [f"{d}:{p} {x.get('state') or '?'}{_phys(x)}" for d, p, x in ports if (d, p) not in active]
    slow = [f"{d}:{p} {x.get('rate_gbps')} Gb/s" for d, p, x in ports
            if (d, p) in active and want and not (isinstance(x.get("rate_gbps"), (int, float))
                                                  and x["rate_gbps"] >= want)]
    no_v2 = rules.roce_without_v2_ipv4_gid(rules.active_ib_ports(rdma))
    # NCCL would use these ports with a GID that does not route (nccl/rules.py); health judges a node for jobs that
    # span nodes
    gid = [local.roce_without_v2_gid(IB, no_v2, None, ev, multi_node=True)] if no_v2 else []
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
