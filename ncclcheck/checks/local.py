"""Node-local checks: functions of one node's facts (docs/facts.md) that return CheckResults with a concrete fix.

Each check's docstring is its description (rendered in docs and --help). A group of facts that could not be read
makes its check `skip` with the reason, never a crash and never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..hostranges import rank_ranges
from ..model import CheckResult, Status, failed, passed, skipped, warned
from ..nccl import rules
from ..units import format_bytes
from . import actions

SHM_MIN_BYTES = 1 << 30  # NCCL's SHM transport and DataLoader workers; Docker's default of 64 MiB breaks both
DEBUG_SWITCHES = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_ALGO", "NCCL_PROTO", "NCCL_NET_GDR_LEVEL",
                  "NCCL_P2P_LEVEL", "NCCL_CUMEM_ENABLE", "NCCL_LAUNCH_MODE")
LEGACY_RENAMES = {"NCCL_ASYNC_ERROR_HANDLING": "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                  "NCCL_BLOCKING_WAIT": "TORCH_NCCL_BLOCKING_WAIT",
                  "NCCL_DESYNC_DEBUG": "TORCH_NCCL_DESYNC_DEBUG"}


@dataclass(frozen=True)
class LocalInput:
    """What node-local checks see: this node's facts plus the run's shape."""

    facts: dict
    node_rank: int = 0
    multi_node: bool = False
    nproc_per_node: Optional[int] = None
    backend: str = "auto"
    master: Optional[dict] = None  # master probe result (preflight/probe.py), None when not probed
    env: dict = field(default_factory=dict)  # facts["env"]["vars"], for convenience
    nofile: Optional[dict] = None  # agent.limits.ensure_nofile's outcome for a multi-node run, None otherwise
    # Every node of the world shares this node's network stack (nccl.reachability.host_groups, proven by the mesh
    # probe): loopback and any local interface connect them, as on one node. Known only after the mesh phase, so
    # the checks that depend on it are run again then (ONE_HOST_RECHECKED).
    one_host: bool = False

    @classmethod
    def of(cls, facts: dict, **kw) -> LocalInput:
        env = (facts.get("env") or {}).get("vars") or {}
        return cls(facts=facts, env=env, **kw)


def _unavailable(group) -> Optional[str]:
    if group is None:
        return "not collected"
    if isinstance(group, dict) and "unavailable" in group:
        return str(group["unavailable"])
    return None


def _interfaces(inp: LocalInput) -> list:
    ifs = inp.facts.get("interfaces")
    return ifs if isinstance(ifs, list) else []


def _by_name(inp: LocalInput) -> dict:
    return {i["name"]: i for i in _interfaces(inp)}


def check_master_reachable(inp: LocalInput) -> CheckResult:
    """rendezvous.master_reachable: bounded TCP connect to MASTER_ADDR:MASTER_PORT (node 0: the port is bindable)."""
    cid, node = "rendezvous.master_reachable", inp.node_rank
    m = inp.master
    if m is None:
        return skipped(cid, "no master address to test (standalone run on loopback)", node=node)
    where = f"{m.get('addr')}:{m.get('port')}"
    ev = dict(m)
    if m.get("mode") == "bind" and m.get("ok") and m.get("local") is None:
        return failed(cid, f"MASTER_ADDR {m.get('addr')} does not resolve on node {node}, which hosts the "
                      "rendezvous", node=node, evidence=ev,
                      fix="Set MASTER_ADDR (--master-addr) to node 0's address, as the other nodes can reach it, "
                          "or fix the name in DNS / /etc/hosts on every node.")
    if m.get("mode") == "bind" and m.get("ok") and m.get("local") is False:
        return warned(cid, f"{where}: port is free, but MASTER_ADDR {m.get('addr')} is not an address of this "
                      f"host (node {node} hosts the rendezvous)", node=node, evidence=ev,
                      detail="Fine behind a service address (Kubernetes); otherwise the other nodes connect to "
                             "another machine and never join.",
                      fix="Set MASTER_ADDR to an address of node 0 on the network the nodes share.")
    if m.get("ok"):
        how = "port is free to bind" if m.get("mode") == "bind" else "accepts TCP connections"
        return passed(cid, f"{where} {how}", node=node, evidence=ev)
    err = m.get("error") or "unknown error"
    if m.get("mode") == "bind":
        return failed(cid, f"cannot bind {where}: {err}", node=node, evidence=ev,
                      detail="Node 0 hosts the rendezvous store on MASTER_PORT; something else holds it or the "
                             "address is not local.",
                      fix=f"Free the port (ss -ltnp 'sport = :{m.get('port')}'), pick another MASTER_PORT, or set "
                          "MASTER_ADDR to an address of node 0.")
    kind = m.get("kind") or "error"
    fixes = {
        "refused": "Nothing listens there yet: start node 0 first, check MASTER_PORT matches on every node, "
                   "and that node 0's firewall accepts the port.",
        "timeout": "Packets are dropped: open the port in the firewall / security group between the nodes, "
                   "and check MASTER_ADDR is node 0's address on the network the nodes share.",
        "unresolvable": "MASTER_ADDR does not resolve on this node: use an IP address or fix /etc/hosts / DNS.",
        "no_route": "No route to MASTER_ADDR from this node: check the address and the interface's subnet.",
    }
    return failed(cid, f"cannot reach master {where}: {err}", node=node, evidence=ev,
                  fix=fixes.get(kind, "Check MASTER_ADDR/MASTER_PORT and the firewall between the nodes."))


def check_hostname_resolves(inp: LocalInput) -> CheckResult:
    """host.hostname_resolves: the hostname and FQDN resolve, and not to loopback on a multi-node run."""
    cid, node = "host.hostname_resolves", inp.node_rank
    host = inp.facts.get("host") or {}
    why = _unavailable(host)
    if why:
        return skipped(cid, f"host facts unavailable: {why}", node=node)
    name = host.get("hostname") or "?"
    addrs = host.get("resolves_to") or []
    ev = {k: host.get(k) for k in ("hostname", "fqdn", "resolves_to", "fqdn_resolves_to", "resolve_error")}
    if not addrs:
        res = failed if inp.multi_node and not inp.one_host else warned
        return res(cid, f"hostname {name!r} does not resolve", node=node, evidence=ev,
                   detail=str(host.get("resolve_error") or ""),
                   fix=f"Add '{name}' with this node's routable address to /etc/hosts or DNS; Gloo and the c10d "
                       "rendezvous look peers up by name.")
    if host.get("loopback"):
        gloo_set = bool(inp.env.get("GLOO_SOCKET_IFNAME"))
        text = f"hostname {name!r} resolves to loopback ({', '.join(addrs)})"
        if not inp.multi_node or inp.one_host:
            return passed(cid, text + _ONE_NODE[inp.one_host], node=node, evidence=ev)
        res = warned if gloo_set else failed
        return res(cid, text, node=node, evidence=ev,
                   detail="Gloo binds to the address the hostname resolves to and falls back to loopback "
                          "(\"Unable to resolve hostname to a (local) address\"); peers then cannot connect.",
                   fix=f"Map '{name}' to this node's routable address in /etc/hosts (stock Ubuntu maps it to "
                       "127.0.1.1), and set GLOO_SOCKET_IFNAME to the interface the nodes share.")
    if _is_loopback(addrs[0]):
        return _first_loopback(inp, name, addrs, ev)
    return passed(cid, f"{name} -> {', '.join(addrs)}", node=node, evidence=ev)


_ONE_NODE = {False: " (fine on one node)", True: " (fine: every node of this run is on this host)"}


def _is_loopback(addr: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(str(addr).split("%")[0]).is_loopback
    except ValueError:
        return False


def _first_loopback(inp: LocalInput, name: str, addrs: list, ev: dict) -> CheckResult:
    """The hostname resolves first to loopback, then to a real address: Gloo binds the first one (getaddrinfo's
    order), so its peers cannot connect, although the name does resolve to the right address too."""
    cid, node = "host.hostname_resolves", inp.node_rank
    lines = [ln for ln in (inp.facts.get("host") or {}).get("hosts_lines") or [] if ln.split()[0] == addrs[0]]
    ev = dict(ev, first=addrs[0], hosts_lines=lines)
    real = [a for a in addrs if not _is_loopback(a)]
    text = (f"node {node}: hostname {name!r} resolves first to loopback {addrs[0]} (then {', '.join(real)}); "
            "Gloo binds the first address")
    where = f"the /etc/hosts line '{lines[0]}'" if lines else f"the /etc/hosts line mapping {name!r} to {addrs[0]}"
    fix = (f"On node {node}, remove or comment out {where} (stock Ubuntu adds it), so that {name!r} resolves to "
           f"{real[0] if real else 'its routable address'} first; or set GLOO_SOCKET_IFNAME to the shared interface.")
    if not inp.multi_node or inp.one_host:
        return passed(cid, text + _ONE_NODE[inp.one_host], node=node, evidence=ev)
    res = warned if inp.env.get("GLOO_SOCKET_IFNAME") else failed
    return res(cid, text, node=node, evidence=ev, fix=fix,
               detail="Gloo looks its own hostname up and binds the first address getaddrinfo returns; peers then "
                      "try to connect to loopback and the job hangs or fails with 'Connection refused'.")


def check_shm(inp: LocalInput) -> CheckResult:
    """host.shm: /dev/shm is large enough for NCCL's SHM transport (containers default to 64 MiB)."""
    cid, node = "host.shm", inp.node_rank
    host = inp.facts.get("host") or {}
    shm = host.get("shm")
    why = _unavailable(host) or _unavailable(shm)
    if why:
        return skipped(cid, f"/dev/shm size unknown: {why}", node=node)
    total = shm.get("total_bytes")
    if not isinstance(total, int):
        return skipped(cid, "/dev/shm size unknown", node=node, evidence=shm)
    gpus = _gpu_count(inp) or 0
    ev = dict(shm, gpus=gpus)
    if total >= SHM_MIN_BYTES:
        return passed(cid, f"/dev/shm is {format_bytes(total)}", node=node, evidence=ev)
    res = failed if gpus > 1 else warned
    return res(cid, f"/dev/shm is only {format_bytes(total)}", node=node, evidence=ev,
               detail="NCCL's SHM transport between local GPUs fails with \"failed to extend /dev/shm/nccl-\" "
                      "and DataLoader workers crash when /dev/shm is small (Docker's default is 64 MiB).",
               fix="Run the container with --ipc=host or --shm-size=8g (Kubernetes: mount an emptyDir with "
                   "medium: Memory at /dev/shm).")


def check_memlock(inp: LocalInput) -> CheckResult:
    """host.memlock: the memlock limit is unlimited where RDMA is used (ibv_reg_mr needs it)."""
    cid, node = "host.memlock", inp.node_rank
    host = inp.facts.get("host") or {}
    why = _unavailable(host)
    ml = host.get("memlock")
    if why or not isinstance(ml, dict):
        return skipped(cid, f"memlock limit unknown: {why or 'not collected'}", node=node)
    soft = ml.get("soft")
    active = rules.active_ib_ports(_rdma(inp))
    ev = {"soft": soft, "hard": ml.get("hard"), "active_rdma_ports": len(active)}
    if soft is None:
        return passed(cid, "memlock is unlimited", node=node, evidence=ev)
    text = f"memlock limit is {format_bytes(soft)}"
    if not active:
        return passed(cid, text + " (no active RDMA ports, so not needed)", node=node, evidence=ev)
    return failed(cid, text + f" with {len(active)} active RDMA port(s)", node=node, evidence=ev,
                  detail="RDMA memory registration fails with \"Call to ibv_reg_mr failed\" under a memlock limit.",
                  fix="Set `ulimit -l unlimited` (limits.conf memlock unlimited; Docker --ulimit memlock=-1; "
                      "Slurm: PropagateResourceLimits or srun --propagate=MEMLOCK).")


def check_nofile(inp: LocalInput) -> CheckResult:
    """host.nofile: the open-file limit covers the world (node 0 holds one store connection per node)."""
    cid, node = "host.nofile", inp.node_rank
    nf = inp.nofile
    if not isinstance(nf, dict):
        return skipped(cid, "one node: nothing to count (the open-file limit matters on node 0 of a multi-node run, "
                            "which holds a connection per node)", node=node)
    need, soft, hard, before = nf.get("needed"), nf.get("soft"), nf.get("hard"), nf.get("soft_before")
    # 8,192 copies of this in one report: only what a reader needs (issue 27: JSON bytes per node)
    ev = {k: nf.get(k) for k in ("needed", "soft", "hard")}
    if nf.get("raised"):
        ev["soft_before"] = before
    if nf.get("error"):
        ev["error"] = nf["error"]
    # What the count is made of, in a reader's words: a new user read "the 258 descriptors this node probes its mesh
    # peers needs" and could not tell what was counted or whether it was fine.
    role = (f"ncclcheck's own files plus one connection per node: this node hosts the rendezvous of "
            f"{nf.get('nnodes'):,} nodes" if nf.get("hosts_store") and isinstance(nf.get("nnodes"), int) else
            "ncclcheck's own files and its probes of the other nodes")
    if soft is None or (isinstance(need, int) and soft >= need):
        said = "unlimited" if soft is None else f"{soft:,}"
        raised = f" (ncclcheck raised it from {before:,})" if nf.get("raised") and isinstance(before, int) else ""
        return passed(cid, f"open-file limit (ulimit -n) {said}{raised} is enough: this node needs {need:,} open "
                           f"files ({role})", node=node, evidence=ev)
    hard_s = "unlimited" if hard is None else f"{hard:,}"
    why = f" ({nf['error']})" if nf.get("error") else ""
    return failed(cid, f"open-file limit (ulimit -n) {soft:,} (hard {hard_s}) is too low: this node needs {need:,} "
                  f"open files ({role}){why}", node=node, evidence=ev,
                  detail="Node 0 stops accepting nodes once it runs out of descriptors: the nodes past the limit "
                         "fail to join, and torch.distributed's own TCPStore has the same limit.",
                  fix=f"Raise the limit to at least {need:,} where the job starts: `ulimit -n {need}` (and the hard "
                      f"limit: nofile in /etc/security/limits.conf), systemd LimitNOFILE={need}, Docker --ulimit "
                      f"nofile={need}:{need}; under Slurm, PropagateResourceLimits (or srun --propagate=NOFILE) "
                      "carries the submitting shell's limit.")


def check_interfaces(inp: LocalInput) -> CheckResult:
    """net.interfaces: up/running interfaces with addresses, MTU, speed and kind; what NCCL would pick unset."""
    cid, node = "net.interfaces", inp.node_rank
    raw = inp.facts.get("interfaces")
    why = _unavailable(raw) if not isinstance(raw, list) else None
    if why:
        return skipped(cid, f"interfaces unavailable: {why}", node=node)
    ifs = _interfaces(inp)
    nccl_version = (inp.facts.get("versions") or {}).get("nccl")
    order = rules.nccl_default_order(ifs, nccl_version)
    usable = [i["name"] for i in ifs if i.get("running") and rules.has_ipv4(i)
              and i.get("kind") not in rules.NEVER_FOR_MULTI_NODE]
    # What the check concluded, not the interfaces again: they are this node's facts (facts.interfaces, in the
    # report beside this result), and a copy here was 513 B of every node's 4.8 KB in a 4,096-node report.
    ev = {"nccl_default_order": order, "usable": usable}
    apart = inp.multi_node and not inp.one_host  # nodes on other hosts must reach this one over a network
    if not usable:
        res = failed if apart else passed
        return res(cid, "no running non-loopback interface with an IPv4 address"
                   + (" (fine: every node of this run is on this host)" if inp.one_host else ""), node=node,
                   evidence=ev,
                   fix="Bring up the cluster network interface (ip link set <if> up) and give it an address."
                   if apart else "")
    # NCCL before 2.28.3 counts any interface with an address, link or not: it may bootstrap on a dead one.
    v = rules.version_tuple(nccl_version)
    old_first = None
    if v is None or v < (2, 28, 3):
        old_order = rules.nccl_default_order(ifs, "2.28.2")
        old_first = old_order[0] if old_order and not _by_name(inp)[old_order[0]].get("running") else None
    route = inp.facts.get("route") or {}
    master_if = route.get("interface") if isinstance(route, dict) else None
    unset = not inp.env.get("NCCL_SOCKET_IFNAME")
    first = order[0] if order else None
    summary = f"{len(usable)} usable: {', '.join(usable)}"
    if unset and apart and first and master_if and first != master_if \
            and _by_name(inp).get(master_if, {}).get("kind") in rules.NEVER_FOR_MULTI_NODE:
        # Not "use lo": net.socket_ifname fails loopback for nodes on several hosts. Nodes all on this host are
        # recognised after the mesh probe (one_host) and this check is judged again then.
        return warned(cid, f"the master is reached via {master_if}, which only this host can reach", node=node,
                      evidence=ev,
                      detail="MASTER_ADDR is an address of this host's loopback (or another local-only interface): "
                             "nodes on other hosts cannot reach it. Nodes that all run on this host are fine, and "
                             "the report says so once the mesh probe proved it.",
                      fix=f"Set MASTER_ADDR to node 0's address on the network the nodes share (here {first}).")
    if unset and apart and first and master_if and first != master_if:
        kind = _by_name(inp).get(first, {}).get("kind")
        return warned(cid, f"NCCL would bootstrap on {first} ({kind}) but the master is reached via {master_if}",
                      node=node, evidence=ev,
                      detail="With NCCL_SOCKET_IFNAME unset NCCL takes the first match of its own order "
                             f"({', '.join(order)}); peers then try to connect to {first}'s address.",
                      fix=rules.exports([("NCCL_SOCKET_IFNAME", rules.exact_ifname(master_if)),
                                         ("GLOO_SOCKET_IFNAME", master_if)]))
    if unset and apart and first and _by_name(inp).get(first, {}).get("kind") in rules.NEVER_FOR_MULTI_NODE:
        return warned(cid, f"NCCL would bootstrap on {first}, a {_by_name(inp)[first].get('kind')} interface",
                      node=node, evidence=ev,
                      fix="Pin NCCL_SOCKET_IFNAME to the interface the nodes share (see recommendations).")
    if unset and old_first:
        return warned(cid, summary + f"; NCCL < 2.28.3 would bootstrap on {old_first}, which has no link",
                      node=node, evidence=ev,
                      detail="Before 2.28.3 NCCL selects interfaces that have an address whether or not they run.",
                      fix="Bring the link up or remove its address, or pin NCCL_SOCKET_IFNAME (see recommendations).")
    return passed(cid, summary, node=node, evidence=ev)


def check_socket_ifname(inp: LocalInput) -> list:
    """net.socket_ifname: NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME as set match real, running interfaces."""
    cid, node = "net.socket_ifname", inp.node_rank
    raw = inp.facts.get("interfaces")
    if not isinstance(raw, list):
        return [skipped(cid, f"interfaces unavailable: {_unavailable(raw)}", node=node)]
    ifs = _interfaces(inp)
    byname = _by_name(inp)
    nccl_value = inp.env.get("NCCL_SOCKET_IFNAME")
    gloo_value = inp.env.get("GLOO_SOCKET_IFNAME")
    nccl_set = rules.assignment("NCCL_SOCKET_IFNAME", nccl_value)  # as the user wrote it, rendered once
    gloo_set = rules.assignment("GLOO_SOCKET_IFNAME", gloo_value)
    if not nccl_value and not gloo_value:
        return [passed(cid, "NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME not set (see recommendations)", node=node)]
    problems: list = []
    notes: list = []
    ev: dict = {"NCCL_SOCKET_IFNAME": nccl_value, "GLOO_SOCKET_IFNAME": gloo_value}
    if nccl_value:
        spec = rules.parse_spec(nccl_value)
        hits = rules.socket_ifname_matches(spec, ifs) if spec and spec.names else []
        live = [i for i in hits if i.get("running") and rules.has_usable_address(i)]
        ev["nccl_matches"] = [i["name"] for i in hits]
        if not spec or not spec.names:
            problems.append((f"NCCL_SOCKET_IFNAME={nccl_value!r} names no interface",
                             "Set it to an interface name such as =eth0."))
        elif not hits:
            problems.append((f"{nccl_set} matches no interface on this node "
                             f"(present: {', '.join(byname)})",
                             "NCCL fails with \"Bootstrap : no socket interface found\": fix the name "
                             "(see recommendations)."))
        elif not live:
            problems.append((f"{nccl_set} matches only {', '.join(ev['nccl_matches'])}, "
                             "none running with an address", "Bring that interface up or name another one."))
        else:
            bad = [i["name"] for i in live if i.get("kind") in rules.NEVER_FOR_MULTI_NODE]
            if inp.multi_node and not inp.one_host and bad:
                problems.append((f"{nccl_set} selects {', '.join(bad)} "
                                 "(loopback/docker/bridge/veth) on a multi-node run",
                                 "Name the interface the nodes share, exact form (=eth0)."))
            if not spec.exact and not spec.exclude:
                extra = sorted({c for n in spec.names for c in rules.prefix_collisions(n, ifs)})
                if extra:
                    notes.append((f"{nccl_set} is a prefix and also matches "
                                  f"{', '.join(extra)}", f"Use the exact form ={','.join(spec.names)}."))
    if gloo_value:
        names = rules.gloo_names(gloo_value)
        missing = [n for n in names if n not in byname]
        dead = [n for n in names if n in byname and not (byname[n].get("running") and rules.has_ipv4(byname[n]))]
        ev["gloo_names"] = names
        if missing:
            problems.append((f"{gloo_set}: no interface named {', '.join(missing)}",
                             "Gloo takes exact names (no prefixes, no '='): name an existing interface."))
        if dead:
            problems.append((f"{gloo_set}: {', '.join(dead)} not running with an IPv4 "
                             "address", "Name a running interface with an address."))
        # Gloo binds and advertises exactly this interface's address: a docker/bridge/loopback one is the same
        # address on every host (172.17.0.1), so the other nodes connect to themselves and the job hangs or fails.
        never = [n for n in names if n in byname and byname[n].get("kind") in rules.NEVER_FOR_MULTI_NODE]
        if inp.multi_node and not inp.one_host and never:
            problems.append((f"{gloo_set} selects {', '.join(never)} "
                             "(loopback/docker/bridge/veth) on a multi-node run",
                             "Name the interface the nodes share (GLOO_SOCKET_IFNAME=eth0: exact names)."))
        if nccl_value and not missing:
            spec = rules.parse_spec(nccl_value)
            if spec and not spec.exclude and not any(spec.matches(n) for n in names):
                notes.append((f"{gloo_set} and {nccl_set} name different "
                              "interfaces", "Use the same interface for both unless that is deliberate."))
    if problems:
        return [failed(cid, s, node=node, evidence=ev, fix=f) for s, f in problems]
    if notes:
        return [warned(cid, s, node=node, evidence=ev, fix=f) for s, f in notes]
    said = ", ".join(rules.assignment(k, v) for k, v in ev.items() if k.isupper() and v)
    return [passed(cid, f"set and valid: {said}", node=node, evidence=ev)]


def _rdma(inp: LocalInput) -> dict:
    r = inp.facts.get("rdma")
    return r if isinstance(r, dict) and "unavailable" not in r else {}


def check_ib_devices(inp: LocalInput) -> list:
    """ib.devices: RDMA devices and ports (state, rate, link layer, RoCE v2 GID index) and NCCL_IB_* as set."""
    cid, node = "ib.devices", inp.node_rank
    rdma = inp.facts.get("rdma")
    why = _unavailable(rdma)
    if why:
        return [skipped(cid, f"RDMA facts unavailable: {why}", node=node)]
    ports = rules.all_ib_ports(rdma)
    if not ports:
        return [skipped(cid, "no RDMA devices: NCCL will use TCP sockets", node=node, evidence={"devices": []})]
    active = rules.active_ib_ports(rdma)
    ev = {"ports": [{"device": d, "port": p, "state": x.get("state"), "phys_state": x.get("phys_state"),
                     "rate": x.get("rate"), "link_layer": x.get("link_layer"),
                     "roce_v2_gid_index": x.get("roce_v2_gid_index")} for d, p, x in ports]}
    results: list = []
    down = [f"{d}:{p} ({x.get('state')}/{x.get('phys_state')})" for d, p, x in ports if (d, p, x) not in active]
    hca = inp.env.get("NCCL_IB_HCA")
    nccl_version = (inp.facts.get("versions") or {}).get("nccl")
    if inp.env.get("NCCL_IB_DISABLE") == "1" and active:
        results.append(warned(cid, f"NCCL_IB_DISABLE=1 with {len(active)} active RDMA port(s)", node=node,
                              evidence=ev, fix="Unset NCCL_IB_DISABLE to use RDMA, unless sockets are deliberate."))
    if not active:
        results.append(warned(cid, f"{len(ports)} RDMA port(s), none ACTIVE: {', '.join(down)}", node=node,
                              evidence=ev,
                              detail="NCCL logs \"NET/IB : No device found.\" and silently falls back to TCP "
                                     "sockets: training runs, slowly.",
                              fix="Repair the port (cable, subnet manager: `sminfo`, switch port); to fail loudly "
                                  "instead of falling back, run with NCCL_NET=IB."))
    else:
        spec = rules.parse_spec(hca)
        if spec is not None:
            chosen = [(d, p) for d, p, _ in active if spec.matches(d, p)]
            if not chosen:
                results.append(failed(cid, f"NCCL_IB_HCA={hca} matches no ACTIVE port", node=node, evidence=ev,
                                      fix=f"Set {rules.assignment('NCCL_IB_HCA', rules.hca_value(active))} "
                                          "(active ports only)."))
        if down:
            results.append(warned(cid, f"{len(active)} active, not active: {', '.join(down)}", node=node,
                                  evidence=ev, detail="NCCL silently skips ports that are not ACTIVE.",
                                  fix="Repair the down ports or exclude them with an exact NCCL_IB_HCA."))
        roce = [(d, p, x) for d, p, x in active if (x.get("link_layer") or "").lower() == "ethernet"]
        gid = inp.env.get("NCCL_IB_GID_INDEX")
        if roce and not rules.dynamic_gid_index(nccl_version) and gid is None:
            idx = {x.get("roce_v2_gid_index") for _, _, x in roce}
            want = next(iter(idx)) if len(idx) == 1 else None
            if want not in (None, 0):
                results.append(warned(cid, f"RoCE with NCCL {nccl_version or '(version unknown)'}: GID index 0 is "
                                           f"not RoCE v2 (v2 at index {want})", node=node, evidence=ev,
                                      detail="NCCL < 2.21 defaults to GID index 0; errors like \"Got completion "
                                             "with error 12\" follow.",
                                      fix=f"export NCCL_IB_GID_INDEX={want}"))
        family = (inp.env.get("NCCL_IB_ADDR_FAMILY") or "AF_INET").strip().upper()
        used = [(d, p, x) for d, p, x in roce if spec is None or spec.matches(d, p)]
        no_v2 = rules.roce_without_v2_ipv4_gid(used) if gid is None and family == "AF_INET" else []
        if no_v2:
            named = ", ".join(f"{d}:{p}" + (f" ({', '.join(x.get('netdevs') or [])})" if x.get("netdevs") else "")
                              for d, p, x in no_v2)
            results.append((failed if inp.multi_node else warned)(
                cid, f"ACTIVE RoCE port(s) with no RoCE v2 IPv4 GID: {named}; {actions.said(actions.ISOLATE)}",
                node=node, evidence={**ev, actions.KEY: actions.ISOLATE}, detail=rules.ROCE_NO_V2_DETAIL,
                fix=rules.roce_no_v2_fix(no_v2)))
        if any((x.get("link_layer") or "").lower() in ("unspecified", "") for _, _, x in active):
            results.append(warned(cid, "RDMA port with unspecified link layer (EFA?)", node=node, evidence=ev,
                                  fix="EFA needs the aws-ofi-nccl plugin (NCCL_NET_PLUGIN) and FI_PROVIDER=efa."))
    if not results:
        results.append(passed(cid, f"{len(active)} active RDMA port(s): "
                                   + ", ".join(f"{d}:{p} {x.get('rate') or ''}".strip() for d, p, x in active),
                              node=node, evidence=ev))
    return results


def _gpu_count(inp: LocalInput) -> Optional[int]:
    g = inp.facts.get("gpu")
    if isinstance(g, dict) and "unavailable" not in g:
        return g.get("count")
    return None


def check_gpu_count(inp: LocalInput) -> CheckResult:
    """gpu.count: visible GPUs against --nproc-per-node / LOCAL_WORLD_SIZE and the backend."""
    cid, node = "gpu.count", inp.node_rank
    g = inp.facts.get("gpu")
    why = _unavailable(g)
    if why:
        return skipped(cid, f"GPU facts unavailable: {why}", node=node)
    n = g.get("count") or 0
    want = inp.nproc_per_node
    ev = {"count": n, "nproc_per_node": want, "visible_devices": g.get("visible_devices"),
          "names": [d.get("name") for d in g.get("devices") or []]}
    if n == 0:
        if inp.backend == "nccl":
            return failed(cid, "--backend nccl but no GPU is visible", node=node, evidence=ev,
                          detail=str(g.get("reason") or ""),
                          fix="Check the driver (nvidia-smi), CUDA_VISIBLE_DEVICES and that torch is a CUDA build.")
        return skipped(cid, f"no GPUs visible ({g.get('reason') or 'CPU node'}): CPU ranks over gloo",
                       node=node, evidence=ev)
    names = sorted(set(ev["names"]))
    text = f"{n} GPU(s): {', '.join(names)}" if names else f"{n} GPU(s)"
    if want is not None and want > n:
        return failed(cid, f"--nproc-per-node {want} but only {n} GPU(s) visible", node=node, evidence=ev,
                      fix="Lower --nproc-per-node to the GPU count, or fix CUDA_VISIBLE_DEVICES.")
    if want is not None and want < n:
        return warned(cid, text + f"; only {want} used (--nproc-per-node)", node=node, evidence=ev)
    return passed(cid, text, node=node, evidence=ev)


def check_env_nccl(inp: LocalInput) -> list:
    """env.nccl: NCCL_/TORCH_NCCL_/GLOO_ variables: debug-only switches left on, renamed and invalid settings."""
    cid, node = "env.nccl", inp.node_rank
    env_group = inp.facts.get("env")
    why = _unavailable(env_group)
    if why:
        return [skipped(cid, f"environment unavailable: {why}", node=node)]
    env = inp.env
    redacted = (env_group or {}).get("redacted") or []
    ev = {"vars": env, "redacted": redacted}
    out: list = []
    debug = [f"{k}={env[k]}" for k in DEBUG_SWITCHES if k in env]
    if debug:
        out.append(warned(cid, f"debug-only switches set: {', '.join(debug)}", node=node, evidence=ev,
                          detail="These disable transports or pin algorithms; left on in a job they cost "
                                 "bandwidth.",
                          fix=f"unset {' '.join(k.split('=')[0] for k in debug)}"))
    if (env.get("NCCL_DEBUG") or "").upper() in ("INFO", "TRACE") and not env.get("NCCL_DEBUG_FILE"):
        out.append(warned(cid, f"NCCL_DEBUG={env['NCCL_DEBUG']} without NCCL_DEBUG_FILE", node=node, evidence=ev,
                          fix="Use NCCL_DEBUG=WARN for jobs, or send INFO to NCCL_DEBUG_FILE=/tmp/nccl.%h.%p."))
    legacy = [k for k in LEGACY_RENAMES if k in env and LEGACY_RENAMES[k] not in env]
    if legacy:
        out.append(warned(cid, f"legacy names set: {', '.join(legacy)}", node=node, evidence=ev,
                          fix="Rename to " + ", ".join(LEGACY_RENAMES[k] for k in legacy) + "."))
    try:
        threads = int(env.get("NCCL_SOCKET_NTHREADS", "1"))
        socks = int(env.get("NCCL_NSOCKS_PERTHREAD", "1"))
        if threads * socks > 64:
            out.append(failed(cid, f"NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD = {threads * socks} > 64",
                              node=node, evidence=ev, fix="Keep the product at most 64 (4 x 4 for 100G)."))
    except ValueError:
        out.append(failed(cid, "NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD are not integers", node=node,
                          evidence=ev, fix="Set them to integers (e.g. 4 and 4) or unset them."))
    if not out:
        n = len(env)
        out.append(passed(cid, f"{n} relevant variable(s) set, none problematic" if n else "no NCCL/Gloo variables",
                          node=node, evidence=ev))
    return out


def check_paths_exist(inp: LocalInput) -> CheckResult:
    """paths.exist: every --path given exists and is readable on this node (a typo must not pass silently)."""
    cid, node = "paths.exist", inp.node_rank
    paths = inp.facts.get("paths")
    if not isinstance(paths, list) or not paths:
        return skipped(cid, "no --path given", node=node)
    bad = [p for p in paths if isinstance(p, dict) and (not p.get("exists") or not p.get("readable"))]
    ev = {"paths": paths}
    if bad:
        text = "; ".join(f"{p.get('path')}: {p.get('reason') or 'not readable'}" for p in bad)
        return warned(cid, text, node=node, evidence=ev,
                      fix="Check the --path spelling, or mount/copy it on this node with read permission for the "
                          "job's user.")
    return passed(cid, f"{len(paths)} path(s) exist and are readable", node=node, evidence=ev)


# The node-local checks whose verdict depends on whether other hosts must reach this node (LocalInput.one_host).
ONE_HOST_RECHECKED = {"host.hostname_resolves": check_hostname_resolves, "net.interfaces": check_interfaces,
                      "net.socket_ifname": check_socket_ifname}


def rejudge_one_host(results: list, facts: dict, node_rank: int) -> list:
    """`results` (node-local, node_rank's among others) with ONE_HOST_RECHECKED run again on `facts` as a node whose
    world is all on its host: each check's results take the place of the first old one with its id."""
    if not isinstance(facts, dict) or not facts:
        return list(results)
    inp = LocalInput.of(facts, node_rank=node_rank, multi_node=True, one_host=True)
    out: list = []
    done: set = set()
    for c in results:
        fn = ONE_HOST_RECHECKED.get(c.id)
        if fn is None or c.node != node_rank:
            out.append(c)
            continue
        if c.id not in done:
            done.add(c.id)
            fresh = fn(inp)
            out.extend(fresh if isinstance(fresh, list) else [fresh])
    return out


def judged_among_joined(results: list, facts: dict, node_rank: int, missing: Optional[list] = None) -> list:
    """`results` of a node whose world did not form. ONE_HOST_RECHECKED's verdicts depend on where the other nodes
    run, which only the mesh probe shows, and no probe ran: judged among the nodes that joined, a failure that
    passes when every node is on this host is not known to be one. It stays in the report as a warning that says
    when it fails, never as a failure: the node that never joined (rendezvous.world) is the cause, and a check
    whose verdict depends on who joined must not outrank it (issue 53: node 0 blamed /etc/hosts for a node given
    another --master-port). A failure that stands wherever the nodes run (a GLOO_SOCKET_IFNAME naming no
    interface) stays a failure. `missing`: the node ranks that never joined, when known."""
    if not isinstance(facts, dict) or not facts:
        return list(results)
    inp = LocalInput.of(facts, node_rank=node_rank, multi_node=True, one_host=True)
    why = (f"node rank(s) {rank_ranges(missing)} never joined" if missing else "the world did not form") + \
        ", so no mesh probe showed where the nodes run"
    still: dict = {}  # check id -> the summaries that fail even with every node on this host
    out: list = []
    for c in results:
        fn = ONE_HOST_RECHECKED.get(c.id)
        if fn is None or c.node != node_rank or c.status is not Status.FAIL:
            out.append(c)
            continue
        if c.id not in still:
            fresh = fn(inp)
            still[c.id] = {f.summary for f in (fresh if isinstance(fresh, list) else [fresh])
                           if f.status is Status.FAIL}
        if c.summary in still[c.id]:
            out.append(c)
            continue
        out.append(warned(c.id, f"{c.summary}: a problem once nodes on other hosts join (not judged: {why})",
                          node=c.node, detail=c.detail, fix=c.fix,
                          evidence=dict(c.evidence or {}, judged_without=rank_ranges(missing or []) or "world")))
    return out
