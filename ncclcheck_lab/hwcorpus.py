"""Fake nodes from real answers (tests/data/hwnodes): each node's own nvidia-smi texts, kernel log, PCI functions and
ibstat, replayed through both of health's GPU sources, and judged as `ncclcheck health` judges a node.

    node = load("tests/data/hwnodes/h100-ndv5-r580-probe-failed")
    verdict = judge(tmp_root, node, source="nvidia-smi")   # or "nvml"
    score(node, verdict)                                   # the expert's findings named, the false alarms

The nvidia-smi source replays the node's texts as they were posted (`nvidia-smi -q`, `nvlink -s`, `nvlink -e`).
The NVML source is the answer set NVML gives on that node, written from the same texts by NVML's own conventions
(nvidia-smi prints `N/A` where NVML returned NVML_ERROR_NOT_SUPPORTED, `[Unknown Error]` where it returned
NVML_ERROR_UNKNOWN, `[GPU requires reset]` for NVML_ERROR_RESET_REQUIRED; a GPU without a handle is
NVML_ERROR_GPU_IS_LOST from nvmlDeviceGetHandleByIndex; a GPU that failed at probe is not counted), served by
fakehw.FakeNvml. The sysfs tree (PCI functions with their driver, links, IB ports), /proc and /dev/kmsg are the
same for both.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Optional

from . import fakehw

GPU_CLASSES = ("0x0300", "0x0302")
GEN_SPEED = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe",
             6: "64.0 GT/s PCIe"}
FABRIC_CODES = {"not_started": 1, "in_progress": 2, "completed": 3}
NVML_CODES = {"requires reset": 16, "GPU is lost": 15, "unknown error": 999}
PHYS = {"sleep": 1, "polling": 2, "disabled": 3, "portconfigurationtraining": 4, "linkup": 5,
        "linkerrorrecovery": 6, "phytest": 7}
STATE = {"down": 1, "initializing": 2, "init": 2, "armed": 3, "active": 4}
_DMESG = re.compile(r"^\s*\[\s*(\d+(?:\.\d+)?)\]\s?(.*)$")
HERE = Path(__file__).resolve().parents[1]
CORPUS = HERE / "tests" / "data" / "hwnodes"


def nodes(base: Optional[Path] = None) -> list:
    """Every node folder of the corpus, by name."""
    base = Path(base or CORPUS)
    return sorted(p for p in base.iterdir() if (p / "expect.json").exists() and (p / "nvidia-smi-q.txt").exists())


def load(path: Path) -> dict:
    path = Path(path)

    def text(name: str) -> Optional[str]:
        p = path / name
        return p.read_text(errors="replace") if p.exists() else None

    pci = []
    for line in (text("pci.txt") or "").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            pci.append((parts[0].lower(), parts[1].lower()))
    kmsg = []
    for line in (text("kmsg.txt") or "").splitlines():
        m = _DMESG.match(line)
        if m:
            kmsg.append((float(m.group(1)), m.group(2)))
        elif line.strip():
            kmsg.append((None, line.strip()))
    return {"name": path.name, "q": text("nvidia-smi-q.txt") or "", "nvlink_s": text("nvlink-s.txt"),
            "nvlink_e": text("nvlink-e.txt"), "pci": pci, "kmsg": kmsg, "ibstat": text("ibstat.txt"),
            "expect": json.loads(text("expect.json") or "{}")}


def _bus(s: Optional[str]) -> Optional[str]:
    from ncclcheck.facts.nvml import normal_bus_id

    return normal_bus_id(s)


def gpu_functions(node: dict) -> list:
    return [b for b, c in node["pci"] if c.startswith(GPU_CLASSES)]


# ---------------------------------------------------------------------------------------------------- sysfs tree
def write_tree(root: Path, node: dict) -> dict:
    """The node's sysfs, procfs and devfs under root; the environment that points ncclcheck at them."""
    from ncclcheck.facts import smiq

    root = Path(root)
    parsed = smiq.parse(node["q"])
    listed = {g["bus_id"]: g for g in parsed["gpus"]} | {u["bus_id"]: u for u in parsed["unreachable"]}
    for k, (bdf, cls) in enumerate(node["pci"]):
        bus = _bus(bdf) or bdf
        d = fakehw.pci_function(root, [bus], bus_root=f"pci{bus.split(':')[0]}:{k:02x}", numa_node=0, cls=cls)
        g = listed.get(bus)
        if cls.startswith(GPU_CLASSES):
            pcie = (g or {}).get("pcie_nvml") or {}
            if pcie.get("gen") in GEN_SPEED and pcie.get("max_gen") in GEN_SPEED:
                (d / "current_link_speed").write_text(GEN_SPEED[pcie["gen"]] + "\n")
                (d / "max_link_speed").write_text(GEN_SPEED[pcie["max_gen"]] + "\n")
            if isinstance(pcie.get("width"), int) and isinstance(pcie.get("max_width"), int):
                (d / "current_link_width").write_text(f"{pcie['width']}\n")
                (d / "max_link_width").write_text(f"{pcie['max_width']}\n")
            if g is not None:  # the nvidia driver holds what nvidia-smi lists; one that failed at probe has none
                drv = root / "sys/bus/pci/drivers/nvidia"
                fakehw._link(root, f"sys/bus/pci/drivers/nvidia/{bus}", os.path.relpath(d, drv))
                fakehw._link(root, os.path.relpath(d / "driver", root), os.path.relpath(drv, d))
    _ib_from_ibstat(root, node.get("ibstat") or "")
    driver = parsed.get("driver") or "0"
    fakehw._write(root, "proc/driver/nvidia/version",
                  f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver}  Release Build\n")
    last = max([t for t, _m in node["kmsg"] if t is not None] or [0.0])
    fakehw._write(root, "proc/uptime", f"{last + 600:.2f} 1000.00\n")
    fakehw._write(root, "proc/sys/kernel/dmesg_restrict", "0\n")
    fakehw._write(root, "proc/modules", "nvidia 11579392 1 nvidia_uvm, Live 0x0\n")
    lines = [fakehw.kmsg_line(0, 0.0, "Linux version 6.8.0 (buildd@lcy02) #1 SMP")]
    for k, (t, msg) in enumerate(node["kmsg"]):
        lines.append(fakehw.kmsg_line(k + 1, t if t is not None else last, msg))
    fakehw._write(root, "dev/kmsg", "".join(lines))
    return fakehw.env_for(root)


def _ib_from_ibstat(root: Path, text: str) -> None:
    """Each `CA 'dev'` / `Port N:` block of ibstat as /sys/class/infiniband/<dev>/ports/<N>."""
    dev, port, attrs = None, None, {}

    def flush() -> None:
        if dev is None or port is None:
            return
        state = attrs.get("state", "Down")
        phys = attrs.get("physical state", "Polling")
        rate = attrs.get("rate", "0")
        layer = attrs.get("link layer", "InfiniBand")
        # ibstat prints no GID: a RoCE port gets the table a configured one has (v1 and v2, link-local and IPv4)
        gids = {0: ("fe80:0000:0000:0000:0000:00ff:fe00:0001", "IB/RoCE v1", "eth0"),
                1: ("fe80:0000:0000:0000:0000:00ff:fe00:0001", "RoCE v2", "eth0"),
                2: ("0000:0000:0000:0000:0000:ffff:c612:0001", "IB/RoCE v1", "eth0"),
                3: ("0000:0000:0000:0000:0000:ffff:c612:0001", "RoCE v2", "eth0")} if layer == "Ethernet" else None
        fakehw.ib_hca(root, dev, numa_node=0)
        fakehw.ib_port(root, dev, port, state=f"{STATE.get(state.lower(), 1)}: {state.upper()}",
                       phys_state=f"{PHYS.get(phys.lower().replace(' ', ''), 0)}: {phys}",
                       rate=f"{rate} Gb/sec", link_layer=layer, gids=gids)
        fakehw.ib_counters(root, dev, port, **fakehw.ZERO_COUNTERS)

    for line in text.splitlines():
        m = re.match(r"^CA '([^']+)'", line.strip())
        if m:
            flush()
            dev, port, attrs = m.group(1), None, {}
            continue
        m = re.match(r"^Port (\d+):", line.strip())
        if m:
            flush()
            port, attrs = int(m.group(1)), {}
            continue
        k, sep, v = line.strip().partition(":")
        if sep and port is not None:
            attrs[k.strip().lower()] = v.strip()
    flush()


# ------------------------------------------------------------------------------------------------- the sources
def smi_runner(node: dict):
    """nvidia-smi on this node: the posted texts; the device list facts/gpu.py asks, from `-q`."""
    from ncclcheck.facts import smiq
    from ncclcheck.facts.util import CommandFailed

    parsed = smiq.parse(node["q"])

    def run(argv, _timeout_s):
        args = " ".join(argv[1:])
        if args == "-q":
            if parsed["unreachable"]:  # nvidia-smi exits non-zero for a GPU it cannot reach, after the others
                raise CommandFailed("nvidia-smi exited 15", node["q"], 15)
            return node["q"]
        if args == "nvlink -s":
            if node["nvlink_s"] is None:
                raise RuntimeError("nvidia-smi nvlink -s was not captured on this node")
            return node["nvlink_s"]
        if args == "nvlink -e":
            if node["nvlink_e"] is None:
                raise RuntimeError("nvidia-smi nvlink -e was not captured on this node")
            return node["nvlink_e"]
        if args.startswith("topo"):
            return ""
        if args.startswith("--query-gpu=index,name"):
            return "".join(f"{g['index']}, {g['name']}, 81559, {g['uuid']}, {g['bus_id']}\n" for g in parsed["gpus"])
        raise RuntimeError(f"nvidia-smi {args}: not captured on this node")

    return run


def _nvml_value(g: dict, key: str, value: Any) -> Any:
    """A fact as FakeNvml serves it: an NVML error where the read failed, NOT_SUPPORTED where it was not there."""
    err = (g.get("errors") or {}).get(key)
    if err in NVML_CODES:
        return {"nvml_error": NVML_CODES[err]}
    return fakehw.NS if value is None else value


# NVML_GPU_FABRIC_HEALTH_SUMMARY_* by the fact's word; a printed summary NVML has no code for is not an answer it gives
SUMMARY_CODES = {"healthy": 1, "unhealthy": 2, "limited_capacity": 3}


def _nvml_fabric(fab: dict) -> dict:
    """The fabric's answer as nvmlDeviceGetGpuFabricInfoV gives it: state, status, clique, cluster and the health
    mask and summary of the printed Health block (none printed: a driver that answers the legacy call only)."""
    h = fab.get("health")
    out = {"state": FABRIC_CODES.get(fab["state"], 0), "status": 0 if fab.get("status") == "success" else 1,
           "clique_id": fab.get("clique_id") or 0, "cluster_uuid": fab.get("cluster_uuid") or fakehw.ZERO_UUID,
           "api": 1}
    if isinstance(h, dict):
        items = {k: h.get(k) for k in fakehw.HEALTHY_ITEMS}
        out.update(health_mask=fakehw.health_mask(**items), health_summary=SUMMARY_CODES.get(h.get("summary"), 0),
                   api=3)
    return out


def nvml_spec(node: dict) -> dict:
    """The node as NVML answers it (fakehw's spec), written from its nvidia-smi texts by NVML's conventions."""
    from ncclcheck.facts import smilink, smiq

    parsed = smiq.parse(node["q"])
    status = {g.get("uuid"): g for g in (smilink.parse_status(node["nvlink_s"]) if node["nvlink_s"] else [])}
    gpus = []
    for g in parsed["gpus"]:
        states = set((g.get("errors") or {}).values())
        whole = next((s for s in ("requires reset", "unknown error") if s in states
                      and sum(1 for v in g["errors"].values() if v == s) >= 5), None)
        rr, rp, ecc, fab = g["remapped_rows"], g["retired_pages"], g["ecc_uncorrected_volatile"], g["fabric"]
        st = status.get(g.get("uuid")) or {}
        from ncclcheck.checks.gpu import expected_links

        links = st.get("links") or []
        if st.get("state") == "all_inactive":
            count, down = expected_links(g.get("name")) or fakehw.NS, list(range(expected_links(g.get("name")) or 0))
        elif links:
            count, down = len(links), [x["link"] for x in links if not x.get("up")]
        else:
            count, down = fakehw.NS, []
        speeds = [x.get("speed_mbytes_per_s") for x in links if x.get("speed_mbytes_per_s")]
        gpus.append({
            "index": g["index"], "bus_id": g["bus_id"], "uuid": g.get("uuid") or fakehw.NS,
            "name": g.get("name") or fakehw.NS, "vbios": _nvml_value(g, "vbios", g.get("vbios")),
            "persistence": _nvml_value(g, "persistence", g.get("persistence")),
            "mig": _nvml_value(g, "mig", None if g.get("mig") is None else [int(g["mig"]["current"]),
                                                                            int(g["mig"]["pending"])]),
            "ecc_mode": _nvml_value(g, "ecc_mode", g.get("ecc_mode")),
            "ecc_volatile": _nvml_value(g, "ecc_volatile_dram", None if ecc.get("total") is None else
                                        {k: (v if v is not None else fakehw.NS) for k, v in ecc.items()}),
            "remapped_rows": _nvml_value(g, "remapped_rows", None if rr is None else
                                         [rr["correctable"] or 0, rr["uncorrectable"] or 0, rr["pending"],
                                          rr["failure"]]),
            "retired_pages": _nvml_value(g, "retired_pages", rp),
            "recovery_action": _nvml_value(g, "recovery_action", g.get("recovery_action")),
            "clocks": _nvml_value(g, "clock_event_reasons", g.get("clock_event_reasons")),
            "utilization": _nvml_value(g, "utilization", g.get("utilization_gpu")),
            "memory_used": _nvml_value(g, "memory", g.get("memory_used_bytes")),
            "processes": _nvml_value(g, "processes", None if g.get("processes") is None else
                                     [{"pid": p["pid"], "used": p.get("used_bytes")} for p in g["processes"]]),
            "pcie": {**{k: _nvml_value(g, "pcie", v) for k, v in g["pcie_nvml"].items()}, "replay": [0, 0],
                     "aer": [0, 0, 0], "sysfs_speed": "", "sysfs_max_speed": ""},
            "fabric": _nvml_value(g, "fabric", None if fab is None else _nvml_fabric(fab)),
            "nvlink": {"count": count, "down": down, "speed": speeds[0] if speeds else fakehw.H100_LINK_MBPS,
                       "errors": {}},
            **({"state": whole} if whole else {}),
        })
    for u in parsed["unreachable"]:  # no handle: nvmlDeviceGetHandleByIndex fails with the error nvidia-smi printed
        gpus.append({**fakehw.gpu_spec(u.get("index") or 0, u["bus_id"]),
                     "handle_error": NVML_CODES.get(u.get("state"), 999)})
    gpus.sort(key=lambda x: x["bus_id"] or "")
    listed = {g["bus_id"] for g in gpus}
    for b in gpu_functions(node):  # on the bus, never counted: failed at probe
        if _bus(b) not in listed:
            gpus.append({**fakehw.gpu_spec(len(gpus), _bus(b)), "probe_failed": True})
    return {"gpus": gpus, "nvswitches": [], "ib_ports": []}


# -------------------------------------------------------------------------------------------------------- judge
PROCESSES_PAST_THE_CAP = 2000  # a GPU's processes listed: 8 GPUs print 5.7 MiB of -q (fakehw's 6 lines each)


def many_processes(spec: dict, gpus, n: int = PROCESSES_PAST_THE_CAP) -> dict:
    """The node with n compute processes listed on each of `gpus` (GPUs time-sliced between many pods): its
    `nvidia-smi -q` passes the cap on one answer."""
    for i in gpus:
        spec["gpus"][i]["processes"] = [{"pid": 100000 + i * n + k, "used": 64 << 20} for k in range(n)]
    return spec


def capped(run):
    """nvidia-smi's answers cut at their cap as facts/util.run_cmd cuts them (an Output whose `cut` says so)."""
    from ncclcheck.facts import smi
    from ncclcheck.facts.util import Output

    def ask(argv, timeout_s):
        text = run(argv, timeout_s)
        limit = smi.limit_of(argv)
        if len(text) <= limit:
            return text
        out = Output(text[:limit])
        out.cut = len(text) - limit
        return out

    return ask


def staged_nodes() -> list:
    """Nodes of fakehw's HGX H100 (its `nvidia-smi -q` in driver 580's layout, tests/data/nvml), healthy and with
    one staged fault each: the classes the posted corpus holds few of, each with the finding it must give."""
    def gpu(i: int) -> str:
        return fakehw.node_spec()["gpus"][i]["bus_id"]

    def f(check: str, i: Optional[int], action: str) -> dict:
        return {"check": check, "gpu_index": i, "bus_id": gpu(i) if i is not None else None, "action": action}

    x79 = fakehw.node_spec()
    x79["kernel_log"].append((3600.0, fakehw.xid_line(gpu(0), 79, "GPU has fallen off the bus.")))
    # bound by the nvidia driver (its probe passed), then "RmInitAdapter failed!" (osinit.c, the line of
    # NVIDIA/nvtrust#124), not counted: failed initialisation, not "failed at probe" (issue 76)
    rminit = fakehw.faulty(fakehw.node_spec(), gpu=6, probe_failed=True, bound=True)
    rminit["kernel_log"] += [(38.2, "NVRM: RmInitAdapter: osInitNvMapping failed, bailing out of RmInitAdapter"),
                             (38.3, f"NVRM: GPU {gpu(6)}: RmInitAdapter failed! (0x22:0x3f:744)")]
    plan = [
        ("healthy", fakehw.node_spec(), []),
        ("row-remap-pending", fakehw.faulty(fakehw.node_spec(), gpu=3, remapped_rows=[0, 0, True, False]),
         [f("gpu.memory", 3, "reset the GPU")]),
        ("row-remap-failure", fakehw.faulty(fakehw.node_spec(), gpu=2, remapped_rows=[0, 3, False, True]),
         [f("gpu.memory", 2, "isolate the node")]),
        ("ecc-uncorrected", fakehw.faulty(fakehw.node_spec(), gpu=1, ecc_volatile={"total": 2, "sram": 0, "dram": 2}),
         [f("gpu.memory", 1, "reset the GPU")]),
        ("recovery-reboot", fakehw.faulty(fakehw.node_spec(), gpu=1, recovery_action=2),
         [f("gpu.memory", 1, "reboot")]),
        ("nvlink-down", fakehw.faulty(fakehw.node_spec(), gpu=5, nvlink={**fakehw.gpu_spec(5, "x")["nvlink"],
                                                                          "down": [4, 9]}),
         [f("gpu.nvlink", 5, "reboot")]),
        ("pcie-x8", fakehw.faulty(fakehw.node_spec(), gpu=3, pcie={**fakehw.gpu_spec(3, "x")["pcie"], "width": 8}),
         [f("gpu.pcie", 3, "isolate the node")]),
        ("hw-thermal", fakehw.faulty(fakehw.node_spec(), gpu=4, clocks=0x41), [f("gpu.clocks", 4, "isolate the node")]),
        ("fabric-not-started", fakehw.faulty(fakehw.node_spec(), gpu=6, fabric={"state": 1, "status": 0}),
         [f("gpu.fabric", 6, "reboot")]),
        ("mig-pending", fakehw.faulty(fakehw.node_spec(), gpu=0, mig=[0, 1]), [f("gpu.mig", 0, "reset the GPU")]),
        ("requires-reset", fakehw.faulty(fakehw.node_spec(), gpu=2, state="requires reset"),
         [f("gpu.readable", 2, "reset the GPU"), f("health.gpus", None, "reboot")]),
        ("unknown-error", fakehw.faulty(fakehw.node_spec(), gpu=6, state="unknown error"),
         [f("gpu.readable", 6, "reset the GPU"), f("health.gpus", None, "reboot")]),
        ("gpu-lost", fakehw.faulty(fakehw.node_spec(), gpu=5, lost=True),
         [f("gpu.readable", 5, "reboot"), f("health.gpus", None, "reboot")]),
        ("probe-failed", fakehw.faulty(fakehw.node_spec(), gpu=7, probe_failed=True),
         [f("gpu.readable", 7, "reboot"), f("health.gpus", None, "reboot")]),
        ("xid79", x79, [f("gpu.xid", 0, "reboot")]),
        ("rminit-failed", rminit,
         [f("gpu.readable", 6, "reboot"), f("gpu.xid", 6, "reboot"), f("health.gpus", None, "reboot")]),
        ("persistence-off", fakehw.faulty(fakehw.node_spec(), gpu=2, persistence=False),
         [f("gpu.persistence", 2, "monitor")]),
        # nvidia-smi -q past its cap (facts/smi.py Q_OUTPUT_BYTES): the GPUs after the cut read one by one
        ("q-cut-many-processes", many_processes(fakehw.node_spec(), range(8)), []),
        ("q-cut-probe-failed", fakehw.faulty(many_processes(fakehw.node_spec(), range(7)), gpu=7, probe_failed=True),
         [f("gpu.readable", 7, "reboot"), f("health.gpus", None, "reboot")]),
    ]
    out = []
    for name, spec, expect in plan:
        for e in expect:  # a GPU of the staged node is named by its bus id (an index shifts when one is not listed)
            if e["check"] == "health.gpus":
                e["bus_id"] = None
        out.append({"name": f"staged-h100-hgx-r580-{name}", "spec": spec,
                    "expect": {"healthy": not expect, "findings": expect}})
    return out + gb200_staged()


GB200_TRAY_ADDRS = [f"198.18.7.{i}" for i in range(1, 19)]  # an NVL72 rack's 18 compute trays, as IMEX lists them
GB200_CLUSTER = "1a7e4d52-5013-4c1b-9e8f-5acb7d444ec0"  # a cluster UUID in the layout R580 prints (b200 captures)


def gb200_tray(gpus: int = 4) -> dict:
    """A GB200 NVL72 compute tray as fakehw stages it: 4 GPUs, no NVSwitch on its PCI bus (the switches are in the
    rack's switch trays), each GPU trained into clique 32766 of one cluster, fabric health Healthy."""
    spec = fakehw.node_spec(gpus=gpus, nvswitches=0, ib_ports=gpus, hostname="gb200-tray-1")
    for g in spec["gpus"]:
        g["name"] = "NVIDIA GB200"
        g["fabric"] = fakehw.healthy_fabric(32766, GB200_CLUSTER)
    # its IMEX as a job across the rack's 18 trays needs it: channel0, the daemon's domain UP
    spec["imex"] = {"channels": ["channel0"], "major": True, "ctl": fakehw.imex_domain(GB200_TRAY_ADDRS)}
    return spec


def gb200_fabric(gpu: int, **health) -> dict:
    """The tray with one GPU's fabric Completed / Success and its health as given (facts/fabrichealth.py's items,
    `summary` NVML's code, `api` the newest fabric struct its driver knows)."""
    return fakehw.faulty(gb200_tray(), gpu=gpu, fabric=fakehw.healthy_fabric(32766, GB200_CLUSTER, **health))


def gb200_staged() -> list:
    """GB200 trays whose fabric is trained (Completed, Success) and whose health says otherwise (issue 76): through
    NVML's versioned fabric call and `nvidia-smi -q`'s Fabric / Health block each."""
    def f(i: int, action: str) -> dict:
        return {"check": "gpu.fabric", "gpu_index": i, "bus_id": gb200_tray()["gpus"][i]["bus_id"], "action": action}

    plan = [("healthy", gb200_tray(), []),
            ("fabric-unhealthy-route", gb200_fabric(2, summary=2, route_unhealthy=True), [f(2, "reboot")]),
            ("fabric-unhealthy-config", gb200_fabric(1, summary=2, incorrect_configuration="insufficient NVLinks"),
             [f(1, "isolate the node")]),
            ("fabric-limited-capacity", gb200_fabric(3, summary=3, bandwidth="degraded"), [f(3, "monitor")]),
            ("fabric-mask-only-route-unhealthy", gb200_fabric(0, summary=0, api=2, route_unhealthy=True),
             [f(0, "reboot")]),
            ("fabric-legacy-call-healthy", gb200_fabric(0, api=1), [])]
    return [{"name": f"staged-gb200-tray-r580-{name}", "spec": spec,
             "expect": {"healthy": not expect or all(e["action"] == "monitor" for e in expect), "findings": expect}}
            for name, spec, expect in plan]


def judge(root: Path, node: dict, source: str) -> dict:
    """{"facts": {...}, "results": [CheckResult as JSON]}: the node's hardware checks and health's own GPU and IB
    checks, with the GPUs read through `source` ("nvml" or "nvidia-smi"). A posted node (load) replays its texts; a
    staged one (staged_nodes) is fakehw's."""
    from ncclcheck.checks import gpu as hwc
    from ncclcheck.checks import health as hc
    from ncclcheck.checks.local import LocalInput
    from ncclcheck.facts import gpuhealth, nvml, rdma

    spec = node.get("spec")
    if spec is not None:
        fakehw.write_tree(Path(root), spec)
        env = fakehw.env_for(Path(root))
        run = capped(lambda argv, _t: fakehw.smi_answer(spec, argv))
        nv_answers, expected = spec, len(spec["gpus"])
    else:
        env = write_tree(Path(root), node)
        run, nv_answers, expected = smi_runner(node), nvml_spec(node), len(gpu_functions(node))
    keys = ("NCCLCHECK_SYSFS_ROOT", "NCCLCHECK_PROCFS_ROOT", "NCCLCHECK_DEVFS_ROOT")
    saved = {k: os.environ.get(k) for k in keys}
    saved_import = nvml.import_nvml
    os.environ.update({k: env[k] for k in keys})
    try:
        which = (lambda n: "/usr/bin/" + n if n == "nvidia-smi" else None)  # noqa: E731
        if source == "nvml":
            gh = gpuhealth.collect(nvml=fakehw.FakeNvml(nv_answers), run=run, which=lambda n: None)
        else:
            nvml.import_nvml = _no_binding
            gh = gpuhealth.collect(run=run, which=which)
        facts = {"gpu_health": gh, "gpu": {"count": len(gh["gpus"]), "source": gh["source"], "devices": []},
                 "rdma": rdma.collect(), "env": {"vars": {}, "redacted": []}}
    finally:
        nvml.import_nvml = saved_import
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    inp = LocalInput.of(facts, multi_node=True, hw=hwc.HwExpect(processes="allowed"))  # health's defaults
    checks = [hwc.check_nouveau, hwc.check_readable, hwc.check_xid, hwc.check_memory, hwc.check_pcie,
              hwc.check_nvlink, hwc.check_fabric, hwc.check_mig, hwc.check_clocks, hwc.check_persistence,
              hwc.check_processes, hwc.check_vbios]
    results = [c(inp) for c in checks]
    results.append(hc.check_gpus(facts, hc.Expect(gpus=expected or None, gpus_from="the GPUs on the PCI bus")))
    if node.get("ibstat"):
        results += hc.check_ib_ports(facts, hc.Expect())
    return {"facts": facts, "results": [r.to_json() for r in results]}


def _no_binding():
    raise ImportError("No module named 'pynvml'")


def _names(c: dict, f: dict) -> bool:
    """Whether a check result names the expected GPU (by bus id, else index) or, node-wide, anything."""
    want_bus, want_idx = _bus(f.get("bus_id")), f.get("gpu_index")
    finds = (c.get("evidence") or {}).get("findings") or []
    if want_bus is None and want_idx is None:
        return True
    for x in finds:
        if (want_bus and _bus(x.get("bus_id")) == want_bus) or (want_bus is None and x.get("index") == want_idx):
            return True
    return bool(want_bus and want_bus in (c.get("summary") or ""))


def score(node: dict, verdict: dict) -> dict:
    """{"named": K, "expected": N, "missed": [...], "false_alarms": [...]}: each expected finding named by its check
    (failed or warned) with its GPU and action; any other check that failed or warned is a false alarm."""
    results = verdict["results"]
    expected = node["expect"].get("findings") or []
    named, missed = 0, []
    for f in expected:
        hit = [c for c in results if c["id"] == f["check"] and c["status"] in ("fail", "warn") and _names(c, f)]
        acts = {x.get("action") for c in hit for x in (c.get("evidence") or {}).get("findings") or []} | {
            (c.get("evidence") or {}).get("action") for c in hit}
        # health's own checks (the GPU count, the IB ports) carry no action word: failing is their drain
        if hit and (f["action"] in acts or f["check"].startswith("health.")):
            named += 1
        else:
            missed.append(f"{f['check']} {f.get('bus_id') or f.get('gpu_index')} {f['action']}")
    want = {f["check"] for f in expected}
    false = [f"{c['id']}: {c['summary'][:160]}" for c in results
             if c["status"] in ("fail", "warn") and c["id"] not in want]
    return {"named": named, "expected": len(expected), "missed": missed, "false_alarms": false}


def outcome(verdict: dict) -> dict:
    """{check id: (status, action)}: what two sources must agree on."""
    return {c["id"]: (c["status"], (c.get("evidence") or {}).get("action")) for c in verdict["results"]}


__all__ = ["CORPUS", "gb200_fabric", "gb200_staged", "gb200_tray", "judge", "load", "nodes", "nvml_spec", "outcome",
           "score", "smi_runner", "staged_nodes", "write_tree"]
