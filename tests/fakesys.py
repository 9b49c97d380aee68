"""Fake sysfs/procfs trees for tests: build a node's hardware on disk, point ncclcheck's facts layer at it.

API (everything writes under a tmp directory and never needs root):

    fs = FakeSys(tmp_path, monkeypatch)      # creates <tmp>/sys and <tmp>/proc, sets NCCLCHECK_SYSFS_ROOT/PROCFS_ROOT
                                             # (and NCCLCHECK_DEVFS_ROOT=<tmp>/dev: fs.write("dev/kmsg", ...)); the
                                             # machine's NVML and nvidia-smi are hidden (hide_machine_gpus)
    fs.write("sys/class/net/eth0/mtu", "9000\\n")  # any file, str or bytes, relative to tmp_path; returns its Path
    fs.net(name, kind="physical", *, up=True, running=None, speed=None, mtu=1500, addrs=(), driver=None,
           numa_node=0, mac=None)            # one /sys/class/net/<name> shaped like a real interface of that kind:
                                             # physical | ipoib | loopback | bridge | docker | veth | virtual | vpn
    fs.addrs() / fs.stats()                  # psutil.net_if_addrs()/net_if_stats()-shaped dicts for what fs.net()
                                             # built, in creation order (= getifaddrs order): pass them to
                                             # net.read_interfaces(addrs=fs.addrs(), stats=fs.stats())
    fs.ib_device(dev, *, fw_ver="28.39.1002", node_guid=..., numa_node=0, netdevs=())
    fs.ib_port(dev, port=1, *, state="4: ACTIVE", phys_state="5: LinkUp", rate="400 Gb/sec (4X NDR)",
               link_layer="InfiniBand", gids={index: (gid, type, ndev)}, empty_gid_slots=4)
    fs.ib_device(..., board_id=, hca_type=, pci=[bdf chain], root="pci0000:00")
                                             # pci: the HCA's device link leads into sys/devices/<root>/<chain>
    fs.ib_counters(dev, port, hw=False, **{counter: value})   # ports/N/counters (hw: hw_counters)
    fs.carrier(name, changes, up=None, down=None)             # /sys/class/net/<name>/carrier_changes (+ up/down)
    fs.pci_device(chain, root=, numa_node=, vendor=, cls=) / fs.gpu_at(chain, root=, numa_node=)
                                             # a PCI function at the end of a bridge chain, with the kernel's
                                             # sys/bus/pci/devices/<bdf> link; gpu_at: an NVIDIA 3D controller
    fs.peermem("nvidia_peermem" | "nv_mem" | "nv_mem_nc") / fs.nvidia_module("open" | "proprietary")
    fs.kernel(release) / fs.mlx5_core_version(version)
    fs.mounts(lines) / fs.shm(size_bytes)    # <proc>/mounts, the latter with a tmpfs /dev/shm "size=<n>k" line
    fs.port_range(lo, hi) / fs.meminfo(total_bytes)

    psutil_addrs({"eth0": ["198.18.0.1/24", "fe80::1/64"]})   # standalone psutil-shaped address dict

Scenarios, named after the failure they pin (each takes a FakeSys, builds the tree and returns it):
    ib_port_down(fs)          mlx5_0 port 1 ACTIVE/LinkUp 400 Gb/sec IB (netdev ib0); mlx5_1 port 1 DOWN/Disabled (ib1)
    roce_gid_index_3(fs)      mlx5_0 port 1 Ethernet, netdev ens1f0: GIDs 0/1 v1/v2 link-local, 2 v1 IPv4-mapped,
                              3 v2 IPv4-mapped (the one NCCL < 2.21 needs), zero slots after
    no_rdma(fs)               no /sys/class/infiniband at all
    docker0_decoy(fs, docker_running=False)
                              eth0 physical running 100000 Mb/s 198.18.0.1/24; docker0 bridge, up, no carrier (or
                              running with docker_running=True) 172.17.0.1/16; vethabc123 host-side veth; lo
    container_shm_64mib(fs)   /dev/shm tmpfs size=65536k (67108864 bytes), as Docker gives a container by default
    gpu_node(fs, peermem=, flavor=, fw_ver=, kernel=, board_id=, hca_type=, ofed=, boot_id=)
                              4 GPUs and 4 ACTIVE 400G IB HCAs on two sockets, one GPU and one HCA under each of
                              four PCIe switches (GPU i's nearest NIC mlx5_i, PIX), counters 0, GPUDirect RDMA
                              (ncclcheck_lab/fakehw.py's node_spec builds the HGX shape: two GPUs and two HCAs per
                              switch, with NVML and nvidia-smi behind them; both write through fakehw's pieces)

Example:

    def test_docker0_is_not_running(tmp_path, monkeypatch):
        fs = docker0_decoy(FakeSys(tmp_path, monkeypatch))
        ifs = {i["name"]: i for i in net.read_interfaces(addrs=fs.addrs(), stats=fs.stats())}
        assert (ifs["docker0"]["kind"], ifs["docker0"]["up"], ifs["docker0"]["running"]) == ("docker", True, False)
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
from collections import namedtuple
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

from ncclcheck_lab import fakehw

# Same field names as psutil's namedtuples, so collectors cannot tell the difference.
snicaddr = namedtuple("snicaddr", "family address netmask broadcast ptp")
snicstats = namedtuple("snicstats", "isup duplex speed mtu flags")

AF_LINK = 17  # psutil.AF_LINK on Linux (AF_PACKET)
IFF_UP, IFF_BROADCAST, IFF_LOOPBACK, IFF_MULTICAST = 0x1, 0x2, 0x8, 0x1000


def psutil_addrs(spec: dict) -> dict:
    """{"eth0": ["198.18.0.1/24", "fe80::1/64"]} -> {"eth0": [snicaddr, ...]} like psutil.net_if_addrs()."""
    out = {}
    for name, cidrs in spec.items():
        entries = []
        for cidr in cidrs:
            iface = ipaddress.ip_interface(cidr)
            fam = socket.AF_INET6 if iface.version == 6 else socket.AF_INET
            entries.append(snicaddr(fam, str(iface.ip), str(iface.netmask), None, None))
        out[name] = entries
    return out


# The machine's own nvidia-smi, found before any test changes PATH: no fake node may read it.
_MACHINE_SMI = tuple(p for p in [shutil.which("nvidia-smi")] if p)


def hide_machine_gpus(monkeypatch) -> None:
    """A fake node's GPUs are its own or none, never the machine's (a GPU machine running the tests): NVML's binding
    does not import (a test that fakes NVML passes its FakeNvml, or patches import_nvml after this), and
    shutil.which finds no nvidia-smi of the machine's (a fake one a test puts on PATH is found)."""
    from ncclcheck.facts import nvml as nv_

    def no_binding():
        raise ImportError("No module named 'pynvml' (a fake node: the machine's NVML is not read)")

    monkeypatch.setattr(nv_, "import_nvml", no_binding)
    if not _MACHINE_SMI:
        return
    machine, real = {os.path.realpath(p) for p in _MACHINE_SMI}, shutil.which

    def which(cmd, mode=os.F_OK | os.X_OK, path=None):
        found = real(cmd, mode, path)
        return None if found and os.path.realpath(found) in machine else found

    monkeypatch.setattr(shutil, "which", which)


class FakeSys:
    def __init__(self, root: Union[str, Path], monkeypatch=None):
        self.root = Path(root)
        self.sysfs = self.root / "sys"
        self.procfs = self.root / "proc"
        self.sysfs.mkdir(parents=True, exist_ok=True)
        self.procfs.mkdir(parents=True, exist_ok=True)
        self._ifaces: dict = {}  # name -> (cidrs, snicstats), in creation order
        self._next_ifindex = 1
        if monkeypatch is not None:
            monkeypatch.setenv("NCCLCHECK_SYSFS_ROOT", str(self.sysfs))
            monkeypatch.setenv("NCCLCHECK_PROCFS_ROOT", str(self.procfs))
            monkeypatch.setenv("NCCLCHECK_DEVFS_ROOT", str(self.root / "dev"))  # /dev/kmsg: none unless written
            hide_machine_gpus(monkeypatch)  # its GPUs are those written here (gpu_at), never the machine's

    # -- generic --------------------------------------------------------------------------------------------
    def write(self, rel: str, content: Union[str, bytes]) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        return p

    def _symlink(self, rel: str, target: str) -> None:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_symlink() or p.exists():
            p.unlink()
        os.symlink(target, p)

    # -- /sys/class/net -------------------------------------------------------------------------------------
    def net(self, name: str, kind: str = "physical", *, up: bool = True, running: Optional[bool] = None,
            speed: Optional[int] = None, mtu: int = 1500, addrs=(), driver: Optional[str] = None,
            numa_node: Optional[int] = 0, mac: Optional[str] = None) -> Path:
        """An interface as the kernel shows it. running defaults to up; a not-running up interface gets operstate
        "down" and no carrier (docker0 with no containers). The flags file never has IFF_RUNNING: the kernel's
        doesn't either."""
        running = up if running is None else running
        base = f"sys/class/net/{name}"
        ifindex = self._next_ifindex
        self._next_ifindex += 1
        iflink = ifindex
        if_type, flags = 1, IFF_BROADCAST | IFF_MULTICAST
        operstate = "up" if running else "down"
        if kind == "loopback":
            if_type, flags, operstate, numa_node = 772, IFF_LOOPBACK, "unknown" if running else "down", None
            mac = mac or "00:00:00:00:00:00"
        elif kind == "ipoib":
            if_type = 32
            driver = driver or "mlx5_core"
        if up:
            flags |= IFF_UP
        has_device = kind in ("physical", "ipoib")
        if has_device:
            driver = driver or ("mlx5_core" if kind == "ipoib" else "ice")
            self.write(f"{base}/device/vendor", "0x15b3\n")
            self._symlink(f"{base}/device/driver", f"../../../../bus/pci/drivers/{driver}")
            if numa_node is not None:
                self.write(f"{base}/device/numa_node", f"{numa_node}\n")
        if kind in ("bridge", "docker"):
            (self.root / base / "bridge").mkdir(parents=True, exist_ok=True)
        if kind == "veth":
            iflink = ifindex + 100  # the peer's ifindex, in another namespace
        if kind == "vpn":
            self.write(f"{base}/tun_flags", "0x1001\n")
        self.write(f"{base}/type", f"{if_type}\n")
        self.write(f"{base}/flags", f"{flags:#x}\n")
        self.write(f"{base}/operstate", f"{operstate}\n")
        self.write(f"{base}/mtu", f"{mtu}\n")
        self.write(f"{base}/ifindex", f"{ifindex}\n")
        self.write(f"{base}/iflink", f"{iflink}\n")
        self.write(f"{base}/address", (mac or f"02:00:00:00:00:{ifindex:02x}") + "\n")
        # carrier and speed read EINVAL on a down interface (here: empty files, which read as None too)
        self.write(f"{base}/carrier", "1\n" if running else "")
        self.write(f"{base}/speed", f"{speed}\n" if (running and speed is not None) else ("-1\n" if running else ""))
        psflags = ["up"] if up else []
        psflags += ["loopback"] if kind == "loopback" else ["broadcast"]
        psflags += ["running"] if (up and running) else []
        psflags += [] if kind == "loopback" else ["multicast"]
        self._ifaces[name] = (list(addrs), snicstats(up, 0, speed or 0, mtu, ",".join(psflags)))
        return self.root / base

    def addrs(self) -> dict:
        out = psutil_addrs({n: cidrs for n, (cidrs, _s) in self._ifaces.items()})
        for entries in out.values():  # psutil lists the link-layer address too; collectors must skip it
            entries.insert(0, snicaddr(AF_LINK, "02:00:00:00:00:00", None, "ff:ff:ff:ff:ff:ff", None))
        return out

    def stats(self) -> dict:
        return {n: s for n, (_c, s) in self._ifaces.items()}

    # -- /sys/class/infiniband, the PCI tree, GPUDirect RDMA's modules: written by ncclcheck_lab/fakehw.py ----------
    def ib_device(self, dev: str, *, fw_ver: str = "28.39.1002", node_guid: str = "a088:c203:0012:3456",
                  numa_node: Optional[int] = 0, netdevs=(), board_id: Optional[str] = None,
                  hca_type: Optional[str] = None, pci: Optional[Sequence[str]] = None,
                  root: str = "pci0000:00") -> Path:
        """pci: the HCA's chain of PCI bus ids from the root port down (the HCA last); its `device` link then leads
        into sys/devices/<root>/... as the kernel's does, and numa_node sits on every element of the chain."""
        return fakehw.ib_hca(self.root, dev, fw_ver=fw_ver, node_guid=node_guid, numa_node=numa_node, netdevs=netdevs,
                             board_id=board_id, hca_type=hca_type, pci=pci, bus_root=root)

    def ib_counters(self, dev: str, port: int = 1, hw: bool = False, **values: int) -> Path:
        """ports/<port>/counters/<name> (hw: hw_counters/<name>) = value, one file per keyword."""
        return fakehw.ib_counters(self.root, dev, port, hw, **values)

    def carrier(self, name: str, changes: int, up: Optional[int] = None, down: Optional[int] = None) -> Path:
        """/sys/class/net/<name>/carrier_changes (+ carrier_up_count / carrier_down_count) of an existing netdev."""
        base = f"sys/class/net/{name}"
        self.write(f"{base}/carrier_changes", f"{changes}\n")
        if up is not None:
            self.write(f"{base}/carrier_up_count", f"{up}\n")
        if down is not None:
            self.write(f"{base}/carrier_down_count", f"{down}\n")
        return self.root / base

    def pci_device(self, chain: Sequence[str], *, root: str = "pci0000:00", numa_node: Optional[int] = 0,
                   vendor: str = "0x10de", cls: str = "0x030200") -> Path:
        """A PCI function at the end of `chain` (bus ids from the root port down) as real directories under
        sys/devices/<root>/..., each bridge with its numa_node, and the kernel's sys/bus/pci/devices/<bdf> link."""
        return fakehw.pci_function(self.root, chain, bus_root=root, numa_node=numa_node, vendor=vendor, cls=cls)

    def gpu_at(self, chain: Sequence[str], *, root: str = "pci0000:00", numa_node: Optional[int] = 0) -> Path:
        """An NVIDIA GPU (3D controller) at the end of chain, with its PCIe link at Gen5 x16."""
        d = self.pci_device(chain, root=root, numa_node=numa_node)
        for k, v in (("current_link_speed", "32.0 GT/s PCIe"), ("max_link_speed", "32.0 GT/s PCIe"),
                     ("current_link_width", "16"), ("max_link_width", "16")):
            (d / k).write_text(v + "\n")
        return d

    def peermem(self, which: str = "nvidia_peermem", version: str = "580.95.05") -> Path:
        """One of the three files NCCL's ncclIbGdrSupport looks for (fakehw.peermem)."""
        return fakehw.peermem(self.root, which, version)

    def nvidia_module(self, flavor: str = "open", version: str = "580.95.05") -> Path:
        """/sys/module/nvidia: the open flavor taints "OE" (out of tree, unsigned), the proprietary one "POE"."""
        return fakehw.nvidia_module(self.root, flavor, version)

    def kernel(self, release: str) -> Path:
        return fakehw.kernel(self.root, release)

    def mlx5_core_version(self, version: str) -> Path:
        return fakehw.mlx5_core_version(self.root, version)

    def ib_port(self, dev: str, port: int = 1, *, state: str = "4: ACTIVE", phys_state: str = "5: LinkUp",
                rate: str = "400 Gb/sec (4X NDR)", link_layer: str = "InfiniBand", gids=None,
                empty_gid_slots: int = 4) -> Path:
        """gids: {index: (gid, type, ndev-or-None)}; empty_gid_slots all-zero slots follow them, as on real ports
        (their type/ndev files read EINVAL: empty here)."""
        return fakehw.ib_port(self.root, dev, port, state=state, phys_state=phys_state, rate=rate,
                              link_layer=link_layer, gids=gids, empty_gid_slots=empty_gid_slots)

    # -- procfs ---------------------------------------------------------------------------------------------
    def mounts(self, lines) -> Path:
        return self.write("proc/mounts", "".join(line.rstrip("\n") + "\n" for line in lines))

    def shm(self, size_bytes: int) -> Path:
        return self.mounts([
            "overlay / overlay rw,relatime,lowerdir=/l,upperdir=/u,workdir=/w 0 0",
            "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0",
            f"shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size={size_bytes // 1024}k 0 0",
        ])

    def port_range(self, lo: int = 32768, hi: int = 60999) -> Path:
        return self.write("proc/sys/net/ipv4/ip_local_port_range", f"{lo}\t{hi}\n")

    def meminfo(self, total_bytes: int) -> Path:
        return self.write("proc/meminfo", f"MemTotal:       {total_bytes // 1024} kB\nMemFree:        1024 kB\n")


# -- scenarios ----------------------------------------------------------------------------------------------
def ib_port_down(fs: FakeSys) -> FakeSys:
    fs.ib_device("mlx5_0", netdevs=["ib0"])
    fs.ib_port("mlx5_0", 1)
    fs.ib_device("mlx5_1", node_guid="a088:c203:0012:3457", numa_node=1, netdevs=["ib1"])
    fs.ib_port("mlx5_1", 1, state="1: DOWN", phys_state="3: Disabled", rate="10 Gb/sec (4X SDR)",
               gids={0: ("fe80:0000:0000:0000:a088:c203:0012:3457", "IB/RoCE v1", None)})
    return fs


ROCE_GIDS = {
    0: ("fe80:0000:0000:0000:0e42:a1ff:fe12:3456", "IB/RoCE v1", "ens1f0"),
    1: ("fe80:0000:0000:0000:0e42:a1ff:fe12:3456", "RoCE v2", "ens1f0"),
    2: ("0000:0000:0000:0000:0000:ffff:c612:0001", "IB/RoCE v1", "ens1f0"),
    3: ("0000:0000:0000:0000:0000:ffff:c612:0001", "RoCE v2", "ens1f0"),
}


def roce_gid_index_3(fs: FakeSys) -> FakeSys:
    fs.ib_device("mlx5_0", netdevs=["ens1f0"])
    fs.ib_port("mlx5_0", 1, rate="100 Gb/sec (4X EDR)", link_layer="Ethernet", gids=ROCE_GIDS)
    return fs


def no_rdma(fs: FakeSys) -> FakeSys:
    return fs


def docker0_decoy(fs: FakeSys, docker_running: bool = False) -> FakeSys:
    fs.net("lo", "loopback", mtu=65536, addrs=["127.0.0.1/8", "::1/128"])
    fs.net("eth0", "physical", speed=100000, mtu=9000, driver="mlx5_core", addrs=["198.18.0.1/24", "fe80::1/64"])
    fs.net("docker0", "docker", running=docker_running, addrs=["172.17.0.1/16"])
    fs.net("vethabc123", "veth", addrs=["fe80::2/64"])
    return fs


def container_shm_64mib(fs: FakeSys) -> FakeSys:
    fs.shm(64 << 20)
    return fs


# -- links: bonds, stacked devices, GPUs on the PCI bus (facts/links.py) ---------------------------------------------
def bond(fs: FakeSys, name: str, slaves: dict, mode: str = "802.3ad 4", active: Optional[str] = None) -> Path:
    """A bond over existing physical slaves ({name: speed Mb/s}); its own speed is the sum of the slaves', as the
    kernel reports it (bond_update_speed_duplex)."""
    for s, speed in slaves.items():
        fs.net(s, speed=speed)
        fs.write(f"sys/class/net/{s}/bonding_slave/state", "active\n")
    base = fs.net(name, "virtual", speed=sum(slaves.values()))
    fs.write(f"sys/class/net/{name}/bonding/slaves", " ".join(slaves) + "\n")
    fs.write(f"sys/class/net/{name}/bonding/mode", f"{mode}\n")
    fs.write(f"sys/class/net/{name}/bonding/active_slave", f"{active}\n" if active else "")
    return base


def vlan(fs: FakeSys, name: str, lower: str, speed: int) -> Path:
    """A VLAN on `lower`: no device link, a lower_<dev> link, the lower device's speed."""
    base = fs.net(name, "virtual", speed=speed)
    fs._symlink(f"sys/class/net/{name}/lower_{lower}", f"../{lower}")
    return base


def gpu_pci(fs: FakeSys, bdf: str, speed: str = "16.0 GT/s PCIe", width: int = 16, max_speed: Optional[str] = None,
            max_width: Optional[int] = None, cls: str = "0x030200") -> Path:
    """An NVIDIA GPU under /sys/bus/pci/devices: current_link_speed in either kernel format ("16.0 GT/s PCIe" since
    4.16ish, "16 GT/s" / "8 GT/s" before), current_link_width, and the maxima."""
    base = f"sys/bus/pci/devices/{bdf}"
    fs.write(f"{base}/vendor", "0x10de\n")
    fs.write(f"{base}/class", f"{cls}\n")
    fs.write(f"{base}/current_link_speed", f"{speed}\n")
    fs.write(f"{base}/current_link_width", f"{width}\n")
    fs.write(f"{base}/max_link_speed", f"{max_speed or speed}\n")
    fs.write(f"{base}/max_link_width", f"{max_width or width}\n")
    return fs.root / base


# -- a GPU node's fabric: GPUs and HCAs on the PCI tree, GPUDirect RDMA, counters ---------------------------------
# Two sockets, two PCIe switches each; under every switch one GPU and one HCA (a rail-aligned node, like a DGX or an
# ND H100 v5 in miniature): GPU i's nearest NIC is mlx5_i (PIX), the other NIC of its socket is PHB, the far socket's
# SYS. GPU_NODE_GPUS[i] = (root, chain); GPU_NODE_HCAS[i] = (name, root, chain).
GPU_NODE_GPUS = (
    ("pci0000:00", ("0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0")),
    ("pci0000:00", ("0000:00:02.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0")),
    ("pci0000:80", ("0000:80:01.0", "0000:81:00.0", "0000:82:00.0", "0000:83:00.0")),
    ("pci0000:80", ("0000:80:02.0", "0000:85:00.0", "0000:86:00.0", "0000:87:00.0")),
)
GPU_NODE_HCAS = (
    ("mlx5_0", "pci0000:00", ("0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:04:00.0")),
    ("mlx5_1", "pci0000:00", ("0000:00:02.0", "0000:05:00.0", "0000:06:01.0", "0000:08:00.0")),
    ("mlx5_2", "pci0000:80", ("0000:80:01.0", "0000:81:00.0", "0000:82:01.0", "0000:84:00.0")),
    ("mlx5_3", "pci0000:80", ("0000:80:02.0", "0000:85:00.0", "0000:86:01.0", "0000:88:00.0")),
)
ZERO_COUNTERS, ZERO_HW_COUNTERS = fakehw.ZERO_COUNTERS, fakehw.ZERO_HW_COUNTERS


def gpu_node(fs: FakeSys, *, peermem: Optional[str] = "nvidia_peermem", flavor: str = "open",
             fw_ver: str = "28.39.1002", kernel: Optional[str] = "6.8.0-1064-azure", board_id: str = "MT_0000000838",
             hca_type: str = "MT4129", ofed: Optional[str] = "24.10-1.1.4",
             boot_id: str = "5f0c2b1e-3d4a-4c8e-9a7b-1e2d3c4b5a69", netdevs: bool = True) -> FakeSys:
    """4 GPUs and 4 ACTIVE 400G InfiniBand HCAs (ib0-ib3) on two sockets (the layout above), every error counter 0,
    GPUDirect RDMA through `peermem` (None: no peer-memory file) with the NVIDIA module of `flavor`. netdevs=False
    leaves sys/class/net alone (a lab host links it to its namespace's own)."""
    for root, chain in GPU_NODE_GPUS:
        fs.gpu_at(chain, root=root, numa_node=0 if root == "pci0000:00" else 1)
    for i, (name, root, chain) in enumerate(GPU_NODE_HCAS):
        fs.ib_device(name, fw_ver=fw_ver, node_guid=f"a088:c203:0012:345{i}", numa_node=0 if i < 2 else 1,
                     netdevs=[f"ib{i}"], board_id=board_id, hca_type=hca_type, pci=chain, root=root)
        fs.ib_port(name, 1, gids={0: (f"fe80:0000:0000:0000:a088:c203:0012:345{i}", "IB/RoCE v1", None)})
        fs.ib_counters(name, 1, **ZERO_COUNTERS)
        fs.ib_counters(name, 1, hw=True, **ZERO_HW_COUNTERS)
        if netdevs:
            fs.net(f"ib{i}", "ipoib", speed=400000, mtu=4092, addrs=[f"198.19.{i}.1/24"], numa_node=0 if i < 2 else 1)
            fs.carrier(f"ib{i}", 2, up=1, down=1)
    if peermem:
        fs.peermem(peermem)
    fs.nvidia_module(flavor)
    if kernel:
        fs.kernel(kernel)
    if ofed:
        fs.mlx5_core_version(ofed)
    fs.write("proc/sys/kernel/random/boot_id", f"{boot_id}\n")
    return fs
