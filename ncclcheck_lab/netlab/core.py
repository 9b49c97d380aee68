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
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

RUN_ROOT = Path(os.environ.get("NETLAB_RUN_DIR", "/run/netlab"))
NETNS_ETC = Path("/etc/netns")
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
    # stock Ubuntu /etc/hosts: the own name on 127.0.1.1 first, then on its real address
    hostname_loopback_first: list[str] = dataclasses.field(default_factory=list)
    inbound_drop: list[str] = dataclasses.field(default_factory=list)  # hosts dropping every new inbound TCP conn
    dropped_link: list[list[str]] = dataclasses.field(default_factory=list)  # [host, peer]: nothing passes between
    # host -> TCP ports its inbound-drop firewall still lets in (a cluster's management ports: slurmd's)
    inbound_allow: dict[str, list[int]] = dataclasses.field(default_factory=dict)


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
        # Labs made by another checkout of this tool (a newer or older netlab) share the machine's registry: keep
        # the fields this version knows, so listing or reaping them never crashes on a field added elsewhere.
        known = {f.name for f in dataclasses.fields(Scenarios)}
        raw["scenarios"] = Scenarios(**{k: v for k, v in raw.get("scenarios", {}).items() if k in known})
        return cls(**{k: v for k, v in raw.items() if k in {f.name for f in dataclasses.fields(cls)}})


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


# ---------------------------------------------------------------------------------------------- neighbour table

# The kernel's IPv4 neighbour (ARP) table is ONE table for every network namespace, with machine-wide limits: past
# gc_thresh3 entries (1,024 by default) a new neighbour is refused ("neighbour: arp_cache: neighbor table overflow!"
# in dmesg) and the packet that needed it is dropped without a word. A real host has a table of its own; lab hosts
# share one, so 64 hosts probing 14 peers each (about 1,800 entries) lost 277 of 896 SYNs in a lab with nothing else
# running (issue 27). Labs raise the limits to what every registered lab may need, never lower them.
NEIGH_SYSCTL = Path("/proc/sys/net/ipv4/neigh/default")
NEIGH_BASE = 1024  # room kept for the machine's own neighbours and anything else outside the labs


def neighbour_need(sizes: Sequence[int]) -> int:
    """Entries the labs of these host counts can hold at once (every host resolving every other), plus room."""
    return NEIGH_BASE + sum(n * (n - 1) for n in sizes)


def fit_neighbour_table(need: int) -> None:
    """Raise gc_thresh2/gc_thresh3 so `need` entries fit (thresh2 is where the kernel starts evicting entries older
    than 5 s, thresh3 the hard limit); NetlabError when they are too low and cannot be written."""
    try:
        cur2, cur3 = (int((NEIGH_SYSCTL / f"gc_thresh{i}").read_text()) for i in (2, 3))
    except (OSError, ValueError):
        return  # no such knob (not Linux IPv4?): nothing to fit
    if cur3 >= 2 * need and cur2 >= need:
        return
    try:
        (NEIGH_SYSCTL / "gc_thresh3").write_text(str(max(cur3, 2 * need)))
        (NEIGH_SYSCTL / "gc_thresh2").write_text(str(max(cur2, need)))
    except OSError as e:
        if cur3 < need:
            raise NetlabError(f"the labs need room for {need} ARP entries but net.ipv4.neigh.default.gc_thresh3 is "
                              f"{cur3} and cannot be raised ({e}): sysctl -w net.ipv4.neigh.default.gc_thresh3="
                              f"{2 * need} net.ipv4.neigh.default.gc_thresh2={need}") from None


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


def list_netns() -> list[str]:
    out = sh(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def has_link(ns: str, link: str) -> bool:
    return sh(["ip", "-n", ns, "link", "show", link], check=False).returncode == 0


def make_bridge(state: LabState, nic: str) -> None:
    ip, name = ["ip", "-n", state.sw], state.bridge(nic)
    if not has_link(state.sw, name):
        sh([*ip, "link", "add", name, "type", "bridge"])
    sh([*ip, "link", "set", name, "addrgenmode", "none"])  # the switch holds no address, not even link-local
    # The per-bridge switch can only add br_netfilter calls, never remove those the namespace's sysctl asks for
    # (the kernel ORs them), hence the sysctl in _create; this keeps a bridge quiet if that sysctl is turned on.
    sh([*ip, "link", "set", name, "type", "bridge", "nf_call_iptables", "0", "nf_call_ip6tables", "0",
        "nf_call_arptables", "0"])
    sh([*ip, "link", "set", name, "up"])


def add_nic(state: LabState, host: str, nic: str, addr: str) -> None:
    ns, port, ip = state.ns(host), state.port(host, nic), ["ip", "-n", state.sw]
    sh([*ip, "link", "add", port, "type", "veth", "peer", "name", nic, "netns", ns])
    sh([*ip, "link", "set", port, "addrgenmode", "none"])
    sh([*ip, "link", "set", port, "master", state.bridge(nic), "up"])
    sh(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", nic])
    sh(["ip", "-n", ns, "link", "set", nic, "up"])
