"""What NVML and sysfs say of this machine's GPUs, raw, beside what ncclcheck's facts read of them (README.md beside
it). Run on a GPU machine from the repository root:

    PYTHONPATH=$PWD python3 tests/data/nvml/nvml_probe.py            # idle
    PYTHONPATH=$PWD python3 tests/data/nvml/nvml_probe.py --load 8   # while a bf16 matmul loop runs on every GPU
    PYTHONPATH=$PWD python3 tests/data/nvml/nvml_probe.py --smi      # nvidia-smi's answers (the fallback's input)

Every NVML question the hardware checks ask (docs/hardware.md) is asked raw, and its answer or its error kept: row
remaps, ECC, retired pages, the recovery action, clock-event reasons, utilisation, PCIe generation and width and the
replay counter, persistence, MIG, VBIOS, fabric info, compute processes, NVLink state and error counters."""

import ctypes
import glob
import json
import os
import sys
import threading
import time

from ncclcheck.facts import gpuhealth
from ncclcheck.facts import links as facts_links

PCIE = ("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration"), ("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth"), \
    ("pcie_max_gen", "nvmlDeviceGetMaxPcieLinkGeneration"), ("pcie_max_width", "nvmlDeviceGetMaxPcieLinkWidth"), \
    ("pcie_gpu_max_gen", "nvmlDeviceGetGpuMaxPcieLinkGeneration"), ("pcie_replay", "nvmlDeviceGetPcieReplayCounter")
STATE = (("persistence", "nvmlDeviceGetPersistenceMode"), ("mig", "nvmlDeviceGetMigMode"),
         ("vbios", "nvmlDeviceGetVbiosVersion"), ("uuid", "nvmlDeviceGetUUID"), ("ecc_mode", "nvmlDeviceGetEccMode"),
         ("remapped_rows", "nvmlDeviceGetRemappedRows"),
         ("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus"),
         ("clocks_event_reasons", "nvmlDeviceGetCurrentClocksEventReasons"),
         ("clocks_throttle_reasons", "nvmlDeviceGetCurrentClocksThrottleReasons"))
SYSFS = ("class", "current_link_speed", "current_link_width", "max_link_speed", "max_link_width",
         "aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal")


def said(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def ask(g: dict, key: str, fn, *args) -> None:
    try:
        v = fn(*args)
        g[key] = list(v) if isinstance(v, tuple) else v
    except Exception as e:  # noqa: BLE001 - what NVML answered is the record
        g[key] = said(e)


def gpu(nv, i: int) -> dict:
    h = nv.nvmlDeviceGetHandleByIndex(i)
    g = {"name": nv.nvmlDeviceGetName(h), "bus": nv.nvmlDeviceGetPciInfo(h).busId}
    for key, call in PCIE + STATE:
        if hasattr(nv, call):
            ask(g, key, getattr(nv, call), h)
    ask(g, "ecc_uncorrected_volatile_total", nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
        nv.NVML_VOLATILE_ECC)
    for where in ("SRAM", "DRAM"):
        loc = getattr(nv, f"NVML_MEMORY_LOCATION_{where}", None)
        if loc is not None:
            ask(g, f"ecc_uncorrected_volatile_{where.lower()}", nv.nvmlDeviceGetMemoryErrorCounter, h,
                nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC, loc)
    for cause in (0, 1):
        ask(g, f"retired_pages_cause_{cause}", lambda c: len(nv.nvmlDeviceGetRetiredPages(h, c)), cause)
    ask(g, "utilization", lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu)
    ask(g, "memory_used", lambda: nv.nvmlDeviceGetMemoryInfo(h).used)
    ask(g, "processes", lambda: [(p.pid, p.usedGpuMemory) for p in nv.nvmlDeviceGetComputeRunningProcesses(h)])
    if hasattr(nv, "c_nvmlGpuFabricInfo_t"):
        def fabric():
            info = nv.c_nvmlGpuFabricInfo_t()
            nv.nvmlDeviceGetGpuFabricInfo(h, ctypes.byref(info))
            return {"state": info.state, "status": info.status}
        ask(g, "fabric", fabric)
    fid = getattr(nv, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
    if fid is not None:
        ask(g, "recovery_action", lambda: (lambda v: {"ret": v.nvmlReturn, "value": v.value.uiVal})(
            nv.nvmlDeviceGetFieldValues(h, [fid])[0]))
    try:
        v = nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_NVLINK_LINK_COUNT])[0]
        g["nvlink_link_count"] = {"ret": v.nvmlReturn, "value": v.value.uiVal}
    except Exception as e:  # noqa: BLE001
        g["nvlink_link_count"] = said(e)
    g["nvlink_links"] = []
    for link in range(18):
        try:
            item = {"link": link, "state": nv.nvmlDeviceGetNvLinkState(h, link),
                    "version": nv.nvmlDeviceGetNvLinkVersion(h, link)}
            for name in ("REPLAY", "RECOVERY", "CRC_FLIT", "CRC_DATA"):
                c = getattr(nv, f"NVML_NVLINK_ERROR_DL_{name}", None)
                if c is not None:
                    ask(item, name.lower(), nv.nvmlDeviceGetNvLinkErrorCounter, h, link, c)
            g["nvlink_links"].append(item)
        except Exception as e:  # noqa: BLE001 - the first refusal is the answer for every link
            g["nvlink_links"].append({"link": link, "error": said(e)})
            break
    return g


def load_gpus(seconds: float) -> tuple:
    """A bf16 matmul loop on every GPU for `seconds` (clock reasons and PCIe generation under load): the event set
    once the loops run, and the threads (joined before exit: a CUDA thread alive at exit aborts the process)."""
    import torch

    started = threading.Event()

    def work(i: int) -> None:
        dev = torch.device("cuda", i)
        a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        host = torch.empty(256 << 20, dtype=torch.uint8, pin_memory=True)
        buf = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
        end = time.monotonic() + seconds
        started.set()
        while time.monotonic() < end:
            for _ in range(8):
                a = (a @ a).clamp_(-1, 1)
            buf.copy_(host, non_blocking=True)  # keep the PCIe link busy too
            torch.cuda.synchronize(dev)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(torch.cuda.device_count())]
    for t in threads:
        t.start()
    return started, threads


def smi() -> dict:
    """nvidia-smi's raw answers to what the facts' fallback asks (facts/gpuhealth.py: -q, nvlink -s and -e;
    facts/gpu.py: the device list and topo -m)."""
    from ncclcheck.facts.util import run_cmd

    queries = [["nvidia-smi", "-q"], ["nvidia-smi", "nvlink", "-s"], ["nvidia-smi", "nvlink", "-e"],
               ["nvidia-smi", "topo", "-m"],
               ["nvidia-smi", "--query-gpu=index,name,memory.total,uuid,pci.bus_id", "--format=csv,noheader,nounits"]]
    out = {}
    for argv in queries:
        try:
            out[" ".join(argv[1:])] = run_cmd(argv, 20)
        except RuntimeError as e:
            out[" ".join(argv[1:])] = f"ERROR {e}"
    return out


def main() -> None:
    out: dict = {"argv": sys.argv[1:]}
    if "--smi" in sys.argv:
        print(json.dumps(smi(), indent=1))
        return
    threads: list = []
    if "--load" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--load") + 1])
        started, threads = load_gpus(seconds)
        started.wait(60)
        time.sleep(min(3.0, seconds / 2))  # let utilisation's sample period see the load
    try:
        import pynvml as nv

        nv.nvmlInit()
        out["nvml"] = [gpu(nv, i) for i in range(nv.nvmlDeviceGetCount())]
    except Exception as e:  # noqa: BLE001
        out["nvml"] = said(e)
    out["sysfs"] = {}
    for d in glob.glob("/sys/bus/pci/devices/*"):
        try:
            if open(os.path.join(d, "vendor")).read().strip() == "0x10de":
                out["sysfs"][os.path.basename(d)] = {a: open(os.path.join(d, a)).read().strip() for a in SYSFS
                                                     if os.path.exists(os.path.join(d, a))}
        except OSError:
            pass
    out["ncclcheck"] = {"nvlink": facts_links.read_nvlink(), "pcie": facts_links.read_pcie_gpus(),
                        "gpu_health": gpuhealth.collect()}
    print(json.dumps(out, indent=1, default=str))
    for t in threads:
        t.join(seconds + 60)


if __name__ == "__main__":
    main()
