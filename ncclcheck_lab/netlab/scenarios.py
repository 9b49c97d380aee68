"""Scenario switches of the lab: parsing them into a lab's state, and reconciling a running lab onto that state.

Every part (hosts files, eth1, docker0, the nftables table, tc shaping, MTU) is rebuilt from the state each time,
so applying the same switches twice changes nothing and `healthy` is simply the empty state.
"""

from __future__ import annotations

import dataclasses
import time

from .core import (
    DOCKER_ADDR,
    LOOPBACK_HOSTNAME_ADDR,
    NETNS_ETC,
    NFT_TABLE,
    LabState,
    NetlabError,
    Scenarios,
    add_nic,
    has_link,
    make_bridge,
    rate_bits,
    sh,
    write_atomic,
)

# ------------------------------------------------------------------------------------------------------- scenarios

SCENARIO_USAGE = {
    "healthy": "healthy",
    "docker-decoy": "docker-decoy",
    "second-nic": "second-nic",
    "dead-nic": "dead-nic [HOST...]",
    "blocked-port": "blocked-port HOST PORT [drop|reject]",
    "slow-link": "slow-link HOST RATE [both|egress|ingress]",
    "slow-pair": "slow-pair HOST PEER RATE",
    "mtu": "mtu HOST MTU",
    "hostname-loopback": "hostname-loopback HOST",
    "hostname-loopback-first": "hostname-loopback-first HOST",
    "inbound-drop": "inbound-drop HOST [ALLOWED_PORT...]",
    "dropped-link": "dropped-link HOST PEER",
}


def apply_scenario(sc: Scenarios, tokens: list[str], state: LabState) -> None:
    """Fold one scenario switch (CLI tokens, e.g. ['blocked-port', 'h1', '29500']) into sc; validates it."""
    if not tokens:
        raise NetlabError("empty scenario")
    kind, args = tokens[0], [str(a) for a in tokens[1:]]
    usage = SCENARIO_USAGE.get(kind)
    if usage is None:
        raise NetlabError(f"unknown scenario {kind!r}; known: {', '.join(SCENARIO_USAGE)}")
    # Argument counts come from the usage line: words after the name, [optional] ones, and a trailing "...".
    lo, hi = usage.count(" ") - usage.count("["), usage.count(" ")
    if not lo <= len(args) <= (10**6 if "..." in usage else hi):
        raise NetlabError(f"usage: {usage}")

    def host(h: str) -> str:
        return state.hosts[state.index(h) - 1]

    def number(v: str, what: str, lo_: int, hi_: int) -> int:
        if not v.isdigit() or not lo_ <= int(v) <= hi_:
            raise NetlabError(f"{kind}: bad {what} {v!r} (want {lo_}..{hi_})")
        return int(v)

    if kind == "healthy":
        for f in dataclasses.fields(Scenarios):
            setattr(sc, f.name, getattr(Scenarios(), f.name))
    elif kind == "docker-decoy":
        sc.docker_decoy = True
    elif kind == "second-nic":
        sc.second_nic = True
    elif kind == "dead-nic":
        sc.second_nic = True
        sc.dead_nic = sorted({*sc.dead_nic, *(host(h) for h in (args or state.hosts))}, key=state.index)
    elif kind == "blocked-port":
        mode = args[2] if len(args) > 2 else "drop"
        if mode not in ("drop", "reject"):
            raise NetlabError(f"usage: {usage}")
        entry = {"host": host(args[0]), "port": number(args[1], "port", 1, 65535), "mode": mode}
        sc.blocked = [b for b in sc.blocked if (b["host"], b["port"]) != (entry["host"], entry["port"])] + [entry]
    elif kind == "slow-link":
        direction = args[2] if len(args) > 2 else "both"
        if direction not in ("both", "egress", "ingress"):
            raise NetlabError(f"usage: {usage}")
        rate_bits(args[1])
        sc.slow_link[host(args[0])] = {"rate": args[1].lower(), "direction": direction}
    elif kind == "slow-pair":
        a, b = host(args[0]), host(args[1])
        if a == b:
            raise NetlabError("slow-pair: HOST and PEER must differ")
        rate_bits(args[2])
        sc.slow_pair = [p for p in sc.slow_pair if (p["host"], p["peer"]) != (a, b)]
        sc.slow_pair.append({"host": a, "peer": b, "rate": args[2].lower()})
    elif kind == "mtu":
        sc.mtu[host(args[0])] = number(args[1], "MTU", 68, 65535)
    elif kind == "hostname-loopback":
        sc.hostname_loopback = sorted({*sc.hostname_loopback, host(args[0])}, key=state.index)
    elif kind == "hostname-loopback-first":
        sc.hostname_loopback_first = sorted({*sc.hostname_loopback_first, host(args[0])}, key=state.index)
    elif kind == "inbound-drop":
        h = host(args[0])
        sc.inbound_drop = sorted({*sc.inbound_drop, h}, key=state.index)
        allowed = sorted({*sc.inbound_allow.get(h, []), *(number(a, "port", 1, 65535) for a in args[1:])})
        if allowed:
            sc.inbound_allow[h] = allowed
    elif kind == "dropped-link":
        a, b = sorted((host(args[0]), host(args[1])), key=state.index)
        if a == b:
            raise NetlabError("dropped-link: HOST and PEER must differ")
        if [a, b] not in sc.dropped_link:
            sc.dropped_link = sorted([*sc.dropped_link, [a, b]], key=lambda p: (state.index(p[0]), state.index(p[1])))


def reconcile(state: LabState) -> None:
    """Make the running lab match state.scenarios (each part is rebuilt from the config, so it is idempotent)."""
    sc = state.scenarios
    for host in state.hosts:
        _write_etc(state, host)
    _reconcile_eth1(state)
    for host in state.hosts:
        ns = state.ns(host)
        _reconcile_docker(ns, sc.docker_decoy)
        sh(["ip", "-n", ns, "link", "set", "eth0", "mtu", str(sc.mtu.get(host, 1500))])
        _load_nft(state, host)
        _shape(state, host)
    if sc.docker_decoy:
        _wait_running(state, "docker0")
    if sc.second_nic:
        _wait_running(state, "eth1")


def _write_etc(state: LabState, host: str) -> None:
    etc = NETNS_ETC / state.ns(host)
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    if host in state.scenarios.hostname_loopback:
        lines.append(f"{LOOPBACK_HOSTNAME_ADDR}\t{host}")  # stock Ubuntu: own name on loopback
    elif host in state.scenarios.hostname_loopback_first:
        lines.append(f"{LOOPBACK_HOSTNAME_ADDR}\t{host}")  # before the real line below: getaddrinfo returns it first
    lines += [f"{state.ip(h)}\t{h}" for h in state.hosts
              if not (h == host and host in state.scenarios.hostname_loopback)]
    write_atomic(etc / "hosts", "\n".join(lines) + "\n")
    write_atomic(etc / "hostname", host + "\n")
    # No nameserver can be reached from a lab host: its own loopback (where nothing answers) fails DNS look-ups
    # fast instead of waiting for a timeout, and never reaches the machine's resolver.
    write_atomic(etc / "resolv.conf", "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    # Only these two sources: the machine's nsswitch.conf may also name mdns or systemd-resolved, whose daemons sit
    # behind unix sockets outside the namespace and would take a lab host's look-ups out of it.
    write_atomic(etc / "nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                                        "networks: files\nprotocols: files\nservices: files\n")


def _reconcile_eth1(state: LabState) -> None:
    have = has_link(state.sw, state.bridge("eth1"))
    if state.scenarios.second_nic and not have:
        make_bridge(state, "eth1")
        for host in state.hosts:
            add_nic(state, host, "eth1", state.ip(host, "eth1"))
    elif not state.scenarios.second_nic and have:
        for host in state.hosts:
            sh(["ip", "-n", state.sw, "link", "del", state.port(host, "eth1")], check=False)
        sh(["ip", "-n", state.sw, "link", "del", state.bridge("eth1")], check=False)


def _reconcile_docker(ns: str, want: bool) -> None:
    have = sh(["ip", "-n", ns, "link", "show", "docker0"], check=False).returncode == 0
    if want and not have:
        # A bridge with no port never gets carrier (not RUNNING); a veth pair gives it one, as a container would.
        # Both ends stay inside this host, so docker0 connects it to nothing else.
        sh(["ip", "-n", ns, "link", "add", "docker0", "type", "bridge"])
        sh(["ip", "-n", ns, "link", "add", "vethdkr0", "type", "veth", "peer", "name", "vethdkr0c"])
        sh(["ip", "-n", ns, "link", "set", "vethdkr0", "master", "docker0", "up"])
        sh(["ip", "-n", ns, "link", "set", "vethdkr0c", "up"])
        sh(["ip", "-n", ns, "addr", "add", DOCKER_ADDR, "dev", "docker0"])
        sh(["ip", "-n", ns, "link", "set", "docker0", "up"])
    elif not want and have:
        sh(["ip", "-n", ns, "link", "del", "vethdkr0"], check=False)
        sh(["ip", "-n", ns, "link", "del", "docker0"])


def _wait_running(state: LabState, ifname: str, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    for host in state.hosts:
        while True:
            out = sh(["ip", "-n", state.ns(host), "-o", "link", "show", ifname], check=False).stdout
            if "LOWER_UP" in out and "NO-CARRIER" not in out and "state UP" in out:
                break
            if time.monotonic() > end:
                raise NetlabError(f"{ifname} on {host} not RUNNING after {timeout}s: {out.strip()}")
            time.sleep(0.05)


def nft_ruleset(state: LabState, host: str) -> str:
    """The host's whole `inet netlab` table, replaced atomically on every change."""
    sc = state.scenarios
    inp, out = [], []
    if host in sc.dead_nic:
        inp.append('iifname "eth1" drop')
        out.append('oifname "eth1" drop')
    for b in sc.blocked:
        if b["host"] == host:
            verdict = "reject with tcp reset" if b["mode"] == "reject" else "drop"
            inp.append(f'iifname != "lo" tcp dport {b["port"]} {verdict}')
    if host in sc.inbound_drop:  # a host firewall: new inbound connections dropped, its own outbound ones work
        allow = sc.inbound_allow.get(host)
        # ports still let in: the management ports a cluster's firewall keeps open (slurmd's, for a Slurm job)
        keep = f"tcp dport != {{ {', '.join(map(str, allow))} }} " if allow else ""
        inp.append(f'iifname != "lo" meta l4proto tcp {keep}ct state new drop')
    for a, b in sc.dropped_link:  # a dead path between two hosts: both ends drop every packet to and from the other
        if host in (a, b):
            other = state.ip(b if host == a else a)
            inp.append(f"ip saddr {other} drop")
            out.append(f"ip daddr {other} drop")
    body = "\n".join(f"    {r}" for r in inp)
    obody = "\n".join(f"    {r}" for r in out)
    return (f"table inet {NFT_TABLE} {{}}\ndelete table inet {NFT_TABLE}\n"
            f"table inet {NFT_TABLE} {{\n"
            f"  chain input {{\n    type filter hook input priority 0; policy accept;\n{body}\n  }}\n"
            f"  chain output {{\n    type filter hook output priority 0; policy accept;\n{obody}\n  }}\n}}\n")


def _load_nft(state: LabState, host: str) -> None:
    sh(["ip", "netns", "exec", state.ns(host), "nft", "-f", "-"], input=nft_ruleset(state, host))


TBF_BURST_MIN = 64 * 1024  # a shaped link's burst at least: a whole GSO segment passes at once


def _tbf(rate: str) -> list[str]:
    bps = rate_bits(rate)
    # burst must cover one timer tick at this rate; TBF_BURST_MIN also lets a whole GSO segment through at once.
    burst = max(TBF_BURST_MIN, int(bps / 8 / 250))
    return ["tbf", "rate", rate, "burst", str(burst), "latency", "50ms"]


def _htb_class(tc: list[str], parent: str, classid: str, rate: str) -> list[str]:
    bps = rate_bits(rate)
    burst = max(TBF_BURST_MIN, int(bps / 8 / 250))
    quantum = min(200_000, max(1514, int(bps / 8 / 10)))
    return [*tc, "class", "add", "dev", "eth0", "parent", parent, "classid", classid,
            "htb", "rate", rate, "ceil", rate, "burst", str(burst), "cburst", str(burst), "quantum", str(quantum)]


def shaping_commands(state: LabState, host: str) -> list[list[str]]:
    """tc commands that shape host (after its root qdiscs are cleared): tbf for a slow link, htb+u32 for pairs."""
    sc = state.scenarios
    ns = state.ns(host)
    tc = ["tc", "-n", ns]
    link = sc.slow_link.get(host)
    pairs = [p for p in sc.slow_pair if p["host"] == host]
    cmds: list[list[str]] = []
    if link and link["direction"] == "both":
        # Host-bound traffic leaves the bridge through the root-side veth: shaping its egress limits host ingress.
        cmds.append(["tc", "-n", state.sw, "qdisc", "add", "dev", state.port(host, "eth0"), "root",
                     *_tbf(link["rate"])])
    if link and link["direction"] == "ingress":
        # What the host receives, limited on the host itself as Linux does it (the Kubernetes bandwidth plugin,
        # wondershaper): eth0's ingress redirected to an ifb device whose egress is a tbf. The host's tc shows it.
        cmds += [["ip", "-n", ns, "link", "add", "ifb0", "type", "ifb"], ["ip", "-n", ns, "link", "set", "ifb0", "up"],
                 [*tc, "qdisc", "add", "dev", "ifb0", "root", *_tbf(link["rate"])],
                 [*tc, "qdisc", "add", "dev", "eth0", "handle", "ffff:", "ingress"],
                 [*tc, "filter", "add", "dev", "eth0", "parent", "ffff:", "protocol", "all", "u32", "match", "u32", "0",
                  "0", "action", "mirred", "egress", "redirect", "dev", "ifb0"]]
        link = None if not pairs else link
    if link and not pairs:
        cmds.append([*tc, "qdisc", "add", "dev", "eth0", "root", *_tbf(link["rate"])])
    elif pairs:
        # Unclassified traffic: htb `default 0` sends it unshaped, or to the link-rate class 1:10 on a slow link.
        cmds.append([*tc, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb",
                     "default", "10" if link else "0"])
        parent = "1:"
        if link:
            cmds.append(_htb_class(tc, "1:", "1:1", link["rate"]))
            cmds.append(_htb_class(tc, "1:1", "1:10", link["rate"]))
            parent = "1:1"
        for j, p in enumerate(pairs):
            rate = p["rate"]
            if link and rate_bits(link["rate"]) < rate_bits(rate):
                rate = link["rate"]
            classid = f"1:{20 + j}"
            cmds.append(_htb_class(tc, parent, classid, rate))
            cmds.append([*tc, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                         "match", "ip", "dst", f"{state.ip(p['peer'])}/32", "flowid", classid])
    return cmds


def _shape(state: LabState, host: str) -> None:
    sh(["tc", "-n", state.ns(host), "qdisc", "del", "dev", "eth0", "root"], check=False)
    sh(["tc", "-n", state.ns(host), "qdisc", "del", "dev", "eth0", "ingress"], check=False)
    sh(["ip", "-n", state.ns(host), "link", "del", "ifb0"], check=False)
    sh(["tc", "-n", state.sw, "qdisc", "del", "dev", state.port(host, "eth0"), "root"], check=False)
    for cmd in shaping_commands(state, host):
        sh(cmd)


