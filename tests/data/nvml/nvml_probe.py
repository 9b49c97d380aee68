"""What NVML and sysfs say of this machine's GPUs' links, raw, beside what ncclcheck's facts read of them (README.md
beside it). Run on a GPU machine from the repository root: `PYTHONPATH=$PWD python3 tests/data/nvml/nvml_probe.py`."""

import glob
import json
import os

from ncclcheck.facts import links as facts_links

PCIE = ("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration"), ("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth"), \
    ("pcie_max_gen", "nvmlDeviceGetMaxPcieLinkGeneration"), ("pcie_max_width", "nvmlDeviceGetMaxPcieLinkWidth")
SYSFS = ("class", "current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


def said(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def gpu(nv, i: int) -> dict:
    h = nv.nvmlDeviceGetHandleByIndex(i)
    g = {"name": nv.nvmlDeviceGetName(h), "bus": nv.nvmlDeviceGetPciInfo(h).busId}
    for key, call in PCIE:
        try:
            g[key] = getattr(nv, call)(h)
        except Exception as e:  # noqa: BLE001 - what NVML answered is the record
            g[key] = said(e)
    try:
        v = nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_NVLINK_LINK_COUNT])[0]
        g["nvlink_link_count"] = {"ret": v.nvmlReturn, "value": v.value.uiVal}
    except Exception as e:  # noqa: BLE001
        g["nvlink_link_count"] = said(e)
    g["nvlink_links"] = []
    for link in range(18):
        try:
            g["nvlink_links"].append({"link": link, "state": nv.nvmlDeviceGetNvLinkState(h, link),
                                      "version": nv.nvmlDeviceGetNvLinkVersion(h, link)})
        except Exception as e:  # noqa: BLE001 - the first refusal is the answer for every link
            g["nvlink_links"].append({"link": link, "error": said(e)})
            break
    return g


def main() -> None:
    out: dict = {}
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
    out["ncclcheck"] = {"nvlink": facts_links.read_nvlink(), "pcie": facts_links.read_pcie_gpus()}
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
