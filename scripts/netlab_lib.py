"""The multi-host lab: network namespaces as hosts on one machine, so multi-node behaviour runs over real kernel TCP.

A lab NAME is: a "switch" namespace NAME-sw holding the bridge NAME-br0; hosts h1..hN, each a network namespace
NAME-hI with its own UTS namespace (hostname hI), loopback, eth0 (a veth whose peer NAME-hIe0 is a port of NAME-br0,
address 198.18.SLOT.I/24), its own nftables table `inet netlab` and its own /etc/netns/NAME-hI/hosts. Nothing of a
lab lives in the root namespace, so its traffic never meets the machine's firewall or routes. SLOT comes from a
flock'd registry so several labs coexist. Scenarios (docker decoy, dead NIC, blocked port, slow links, MTU, hostname
on loopback) are switches kept in the lab's state file and reconciled onto the running lab.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

RUN_ROOT = Path(os.environ.get("NETLAB_RUN_DIR", "/run/netlab"))
NETNS_ETC = Path("/etc/netns")
NETNS_RUN = Path("/run/netns")
DEFAULT_NAME = "lab"
# A lab name prefixes interface names (max 15 chars): NAME-h99e0 must fit, and no '-' inside so that the prefix
# "NAME-" never matches another lab's objects.
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
MAX_HOSTS = 99
SLOTS = range(1, 255)
NET0 = "198.18"  # eth0: 198.18.SLOT.I/24
NET1 = "198.19"  # eth1: 198.19.SLOT.I/24
DOCKER_ADDR = "172.17.0.1/16"
LOOPBACK_HOSTNAME_ADDR = "127.0.1.1"
NFT_TABLE = "netlab"
RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps)$")
RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
              "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}
REQUIRED_TOOLS = ("ip", "nft", "tc", "unshare", "nsenter", "mount", "umount")


class NetlabError(RuntimeError):
    """A lab operation failed; the message says which command and why."""


# ---------------------------------------------------------------------------------------------------------- helpers

def sh(argv: Sequence[str], *, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one command, capturing output; raise NetlabError with its stderr when check and it fails."""
    proc = subprocess.run(list(argv), input=input, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetlabError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def missing_requirements() -> list[str]:
    """Why this machine cannot run a lab (empty when it can)."""
    why = []
    if os.geteuid() != 0:
        why.append("not root")
    why += [f"{tool} not found" for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    return why


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise NetlabError(f"bad lab name {name!r}: 1-8 chars, [a-z][a-z0-9]* (it prefixes 15-char interface names)")
    return name


def rate_bits(rate: str) -> float:
    """tc rate string ('50mbit', '1gbit', '10mbps') -> bits per second."""
    m = RATE_RE.match(rate.lower())
    if not m:
        raise NetlabError(f"bad rate {rate!r}: use a tc rate such as 50mbit, 1gbit, 10mbps")
    return float(m.group(1)) * RATE_UNITS[m.group(2)]


@contextlib.contextmanager
def flocked(path: Path, *, blocking: bool = True, unlink: bool = False) -> Iterator[bool]:
    """Hold an exclusive flock on path; yields False (not taken) only when blocking=False and it is busy.

    unlink=True removes the lock file before releasing it; takers re-check that the file they locked is still the
    one at path, so removing it never lets two holders in at once.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fh = open(path, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            fh.close()
            yield False
            return
        try:
            same = os.fstat(fh.fileno()).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        fh.close()  # removed (or replaced) while we waited: lock the current file instead
    try:
        yield True
    finally:
        if unlink:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        fh.close()


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def pid_start_time(pid: int) -> str | None:
    """Kernel start time of pid (guards against pid reuse), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


# ------------------------------------------------------------------------------------------------------------ model

@dataclasses.dataclass
class Scenarios:
    """The scenario switches of one lab; `healthy` is all defaults."""

    docker_decoy: bool = False
    second_nic: bool = False  # eth1 on every host (working unless listed in dead_nic)
    dead_nic: list[str] = dataclasses.field(default_factory=list)  # hosts whose eth1 drops all traffic
    blocked: list[dict] = dataclasses.field(default_factory=list)  # {"host", "port", "mode": drop|reject}
    slow_link: dict[str, dict] = dataclasses.field(default_factory=dict)  # host -> {"rate", "direction"}
    slow_pair: list[dict] = dataclasses.field(default_factory=list)  # {"host", "peer", "rate"}
    mtu: dict[str, int] = dataclasses.field(default_factory=dict)
    hostname_loopback: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class LabState:
    """What a lab is made of; written before anything is created so `down` can undo a half-made lab."""

    name: str
    slot: int
    n: int
    owner_pid: int | None = None
    owner_start: str | None = None
    scenarios: Scenarios = dataclasses.field(default_factory=Scenarios)

    @property
    def hosts(self) -> list[str]:
        return [f"h{i}" for i in range(1, self.n + 1)]

    def ns(self, host: str) -> str:
        return f"{self.name}-{host}"

    def index(self, host: str) -> int:
        if host not in self.hosts:
            # Accept the namespace name too ("lab-h1").
            if host.startswith(f"{self.name}-") and host[len(self.name) + 1:] in self.hosts:
                return int(host[len(self.name) + 2:])
            raise NetlabError(f"no host {host!r} in lab {self.name} (hosts: {', '.join(self.hosts)})")
        return int(host[1:])

    def ip(self, host: str, nic: str = "eth0") -> str:
        net = {"eth0": NET0, "eth1": NET1}.get(nic)
        if net is None:
            raise NetlabError(f"no address plan for {nic!r} (eth0, eth1)")
        return f"{net}.{self.slot}.{self.index(host)}"

    @property
    def sw(self) -> str:
        """The switch namespace: the lab's bridges and the bridge-side veth ends."""
        return f"{self.name}-sw"

    def bridge(self, nic: str) -> str:
        return f"{self.name}-br{nic[-1]}"

    def port(self, host: str, nic: str) -> str:
        """Bridge-side veth of host's nic (a port of the lab's bridge, in the switch namespace)."""
        return f"{self.name}-h{self.index(host)}e{nic[-1]}"

    def uts(self, host: str) -> Path:
        return lab_dir(self.name) / f"uts-{host}"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LabState:
        raw = json.loads(text)
        raw["scenarios"] = Scenarios(**raw.get("scenarios", {}))
        return cls(**raw)


def lab_dir(name: str) -> Path:
    return RUN_ROOT / name


def state_path(name: str) -> Path:
    return lab_dir(name) / "state.json"


def lab_lock(name: str) -> Path:
    return RUN_ROOT / f".{name}.lock"


def load_state(name: str) -> LabState | None:
    try:
        return LabState.from_json(state_path(name).read_text())
    except FileNotFoundError:
        return None


def save_state(state: LabState) -> None:
    write_atomic(state_path(state.name), state.to_json())


def require_state(name: str) -> LabState:
    state = load_state(check_name(name))
    if state is None:
        raise NetlabError(f"lab {name!r} is not up (scripts/netlab up N --name {name})")
    return state


# --------------------------------------------------------------------------------------------------------- registry

REGISTRY = RUN_ROOT / "registry.json"
REGISTRY_LOCK = RUN_ROOT / ".registry.lock"


def _read_registry() -> dict[str, int]:
    try:
        return json.loads(REGISTRY.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def allocate_slot(name: str) -> int:
    """The lab's subnet slot: its existing one, else the lowest free one; stale entries are reclaimed."""
    with flocked(REGISTRY_LOCK):
        reg = _read_registry()
        if name in reg:
            return reg[name]
        for other in list(reg):
            # An entry whose lab has no state and whose lock is free belongs to a lab that is gone.
            if other != name and not state_path(other).exists():
                with flocked(lab_lock(other), blocking=False, unlink=True) as free:
                    if free and not state_path(other).exists():
                        del reg[other]
        used = set(reg.values())
        slot = next((s for s in SLOTS if s not in used), None)
        if slot is None:
            raise NetlabError(f"no free subnet slot ({len(used)} labs registered in {REGISTRY})")
        reg[name] = slot
        write_atomic(REGISTRY, json.dumps(reg, indent=2, sort_keys=True))
        return slot


def release_slot(name: str) -> None:
    with flocked(REGISTRY_LOCK):
        reg = _read_registry()
        if reg.pop(name, None) is not None:
            write_atomic(REGISTRY, json.dumps(reg, indent=2, sort_keys=True))


def registered_labs() -> dict[str, int]:
    with flocked(REGISTRY_LOCK):
        return _read_registry()


# ------------------------------------------------------------------------------------------------------------ up

def host_argv(state: LabState, host: str, argv: Sequence[str]) -> list[str]:
    """argv wrapped to run inside host: its UTS namespace (hostname), network namespace and /etc/netns files."""
    state.index(host)
    host = host if host in state.hosts else host[len(state.name) + 1:]
    return ["nsenter", f"--uts={state.uts(host)}", "ip", "netns", "exec", state.ns(host), *argv]


def up(name: str, n: int, scenarios: Sequence[Sequence[str]] = (), *, owner_pid: int | None = None) -> LabState:
    """Make (or re-make) lab name with n hosts and exactly the given scenarios applied; idempotent."""
    check_name(name)
    if not 1 <= n <= MAX_HOSTS:
        raise NetlabError(f"host count {n} out of range 1..{MAX_HOSTS}")
    if why := missing_requirements():
        raise NetlabError("cannot make a lab: " + ", ".join(why))
    with flocked(lab_lock(name)):
        state = load_state(name)
        if state is not None and not (state.n == n and _intact(state)):
            _down_locked(name)
            state = None
        if state is None:
            state = LabState(name=name, slot=allocate_slot(name), n=n, owner_pid=owner_pid,
                             owner_start=pid_start_time(owner_pid) if owner_pid else None)
            save_state(state)  # before creating anything: down must be able to find it all
            try:
                _create(state)
            except BaseException:
                _down_locked(name)
                raise
        state.scenarios = Scenarios()
        for tokens in scenarios:
            apply_scenario(state.scenarios, list(tokens), state)
        _reconcile(state)
        save_state(state)
        return state


def _intact(state: LabState) -> bool:
    namespaces = set(list_netns())
    return all(ns in namespaces for ns in [state.sw, *map(state.ns, state.hosts)]) and _has_link(state.sw,
                                                                                                  state.bridge("eth0"))


def _has_link(ns: str, link: str) -> bool:
    return sh(["ip", "-n", ns, "link", "show", link], check=False).returncode == 0


def list_netns() -> list[str]:
    out = sh(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _make_bridge(state: LabState, nic: str) -> None:
    ip, name = ["ip", "-n", state.sw], state.bridge(nic)
    if not _has_link(state.sw, name):
        sh([*ip, "link", "add", name, "type", "bridge"])
    sh([*ip, "link", "set", name, "addrgenmode", "none"])  # the switch holds no address, not even link-local
    # The per-bridge switch can only add br_netfilter calls, never remove those the namespace's sysctl asks for
    # (the kernel ORs them), hence the sysctl in _create; this keeps a bridge quiet if that sysctl is turned on.
    sh([*ip, "link", "set", name, "type", "bridge", "nf_call_iptables", "0", "nf_call_ip6tables", "0",
        "nf_call_arptables", "0"])
    sh([*ip, "link", "set", name, "up"])


def _add_nic(state: LabState, host: str, nic: str, addr: str) -> None:
    ns, port, ip = state.ns(host), state.port(host, nic), ["ip", "-n", state.sw]
    sh([*ip, "link", "add", port, "type", "veth", "peer", "name", nic, "netns", ns])
    sh([*ip, "link", "set", port, "addrgenmode", "none"])
    sh([*ip, "link", "set", port, "master", state.bridge(nic), "up"])
    sh(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", nic])
    sh(["ip", "-n", ns, "link", "set", nic, "up"])


def _create(state: LabState) -> None:
    # The bridge lives in its own namespace, not the root one: there the machine's br_netfilter setting
    # (bridge-nf-call-iptables=1 on Docker/Kubernetes hosts) would run lab traffic through the machine's firewall.
    sh(["ip", "netns", "add", state.sw])
    if Path("/proc/sys/net/bridge").is_dir():
        sh(["ip", "netns", "exec", state.sw, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=0",
            "net.bridge.bridge-nf-call-ip6tables=0", "net.bridge.bridge-nf-call-arptables=0"], check=False)
    _make_bridge(state, "eth0")
    lab_dir(state.name).mkdir(parents=True, exist_ok=True)
    for host in state.hosts:
        ns = state.ns(host)
        sh(["ip", "netns", "add", ns])
        sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        uts = state.uts(host)
        uts.touch()
        sh(["unshare", f"--uts={uts}", "hostname", host])
        _add_nic(state, host, "eth0", state.ip(host))


# ------------------------------------------------------------------------------------------------------------ down

def down(name: str) -> None:
    """Remove lab name entirely (state or not: everything prefixed NAME- goes); idempotent."""
    check_name(name)
    with flocked(lab_lock(name), unlink=True):
        _down_locked(name)


def _down_locked(name: str) -> None:
    prefix = f"{name}-"
    namespaces = [ns for ns in list_netns() if ns.startswith(prefix)]
    for ns in namespaces:
        # A process left inside keeps the namespace, and so its veths and the bridge ports, alive.
        for pid in sh(["ip", "netns", "pids", ns], check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
    # Deleting the namespaces deletes the veths and bridges in them; anything named like the lab in the root
    # namespace is a leftover (of a crash half-way through a veth move) and goes too.
    links = [p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(prefix)]
    for link in sorted(links, key=lambda x: "-br" in x):  # ports first, then bridges
        sh(["ip", "link", "del", link], check=False)
    for ns in namespaces:
        sh(["ip", "netns", "del", ns], check=False)
    if NETNS_ETC.is_dir():
        for d in NETNS_ETC.iterdir():
            if d.name.startswith(prefix):
                shutil.rmtree(d, ignore_errors=True)
    ldir = lab_dir(name)
    if ldir.is_dir():
        for f in ldir.glob("uts-*"):
            sh(["umount", str(f)], check=False)
        shutil.rmtree(ldir, ignore_errors=True)
    release_slot(name)


def leftovers(name: str) -> list[str]:
    """Everything of lab name still on the machine (empty after a clean down)."""
    prefix = f"{name}-"
    found = [f"netns {ns}" for ns in list_netns() if ns.startswith(prefix)]
    found += [f"link {p.name}" for p in Path("/sys/class/net").iterdir() if p.name.startswith(prefix)]
    if NETNS_ETC.is_dir():
        found += [f"dir {d}" for d in NETNS_ETC.iterdir() if d.name.startswith(prefix)]
    if lab_dir(name).exists():
        found.append(f"dir {lab_dir(name)}")
    found += [f"mount {m}" for m in _mounts() if m.startswith(f"{lab_dir(name)}/")]
    if lab_lock(name).exists():
        found.append(f"lock {lab_lock(name)}")
    if name in registered_labs():
        found.append(f"registry entry {name}")
    return found


def _mounts() -> list[str]:
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]


def reap_orphans() -> list[str]:
    """Tear down labs whose owning process (a test session) died without tearing them down."""
    reaped = []
    for name in registered_labs():
        state = load_state(name)
        if state is None or state.owner_pid is None:
            continue
        if pid_start_time(state.owner_pid) != state.owner_start:
            down(name)
            reaped.append(name)
    return reaped


# ------------------------------------------------------------------------------------------------------- scenarios

SCENARIO_USAGE = {
    "healthy": "healthy",
    "docker-decoy": "docker-decoy",
    "second-nic": "second-nic",
    "dead-nic": "dead-nic [HOST...]",
    "blocked-port": "blocked-port HOST PORT [drop|reject]",
    "slow-link": "slow-link HOST RATE [both|egress]",
    "slow-pair": "slow-pair HOST PEER RATE",
    "mtu": "mtu HOST MTU",
    "hostname-loopback": "hostname-loopback HOST",
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
        if direction not in ("both", "egress"):
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


def scenario(name: str, tokens: Sequence[str]) -> LabState:
    """Apply one scenario switch to running lab name (on top of what is already applied)."""
    with flocked(lab_lock(check_name(name))):
        state = require_state(name)
        apply_scenario(state.scenarios, [str(t) for t in tokens], state)
        _reconcile(state)
        save_state(state)
        return state


def _reconcile(state: LabState) -> None:
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
    lines += [f"{state.ip(h)}\t{h}" for h in state.hosts
              if not (h == host and host in state.scenarios.hostname_loopback)]
    write_atomic(etc / "hosts", "\n".join(lines) + "\n")
    write_atomic(etc / "hostname", host + "\n")
    # No nameserver can be reached from a lab host: fail DNS look-ups fast instead of waiting for a timeout.
    write_atomic(etc / "resolv.conf", "options timeout:1 attempts:1\n")


def _reconcile_eth1(state: LabState) -> None:
    have = _has_link(state.sw, state.bridge("eth1"))
    if state.scenarios.second_nic and not have:
        _make_bridge(state, "eth1")
        for host in state.hosts:
            _add_nic(state, host, "eth1", state.ip(host, "eth1"))
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
    body = "\n".join(f"    {r}" for r in inp)
    obody = "\n".join(f"    {r}" for r in out)
    return (f"table inet {NFT_TABLE} {{}}\ndelete table inet {NFT_TABLE}\n"
            f"table inet {NFT_TABLE} {{\n"
            f"  chain input {{\n    type filter hook input priority 0; policy accept;\n{body}\n  }}\n"
            f"  chain output {{\n    type filter hook output priority 0; policy accept;\n{obody}\n  }}\n}}\n")


def _load_nft(state: LabState, host: str) -> None:
    sh(["ip", "netns", "exec", state.ns(host), "nft", "-f", "-"], input=nft_ruleset(state, host))


def _tbf(rate: str) -> list[str]:
    bps = rate_bits(rate)
    # burst must cover one timer tick at this rate; 64 KiB also lets a whole GSO segment through at once.
    burst = max(64 * 1024, int(bps / 8 / 250))
    return ["tbf", "rate", rate, "burst", str(burst), "latency", "50ms"]


def _htb_class(tc: list[str], parent: str, classid: str, rate: str) -> list[str]:
    bps = rate_bits(rate)
    burst = max(64 * 1024, int(bps / 8 / 250))
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
    sh(["tc", "-n", state.sw, "qdisc", "del", "dev", state.port(host, "eth0"), "root"], check=False)
    for cmd in shaping_commands(state, host):
        sh(cmd)


# ----------------------------------------------------------------------------------------------------------- status

def status(name: str | None = None) -> dict:
    """Labs on this machine (or one lab): hosts, addresses, scenarios, and whether all its parts exist."""
    names = [name] if name else sorted(registered_labs())
    labs = {}
    for lab in names:
        state = load_state(lab)
        if state is None:
            labs[lab] = {"up": False}
            continue
        labs[lab] = {
            "up": True, "intact": _intact(state), "slot": state.slot, "owner_pid": state.owner_pid,
            "hosts": {h: {"netns": state.ns(h), "eth0": state.ip(h),
                          **({"eth1": state.ip(h, "eth1")} if state.scenarios.second_nic else {})}
                      for h in state.hosts},
            "scenarios": dataclasses.asdict(state.scenarios),
        }
    return labs
