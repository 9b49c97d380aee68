"""A GPU's fabric health as the driver states it (GB200/GB300 multi-node NVLink, and every NVSwitch fabric from R570):
NVML's health mask and summary (nvmlDeviceGetGpuFabricInfoV, struct version 3) and `nvidia-smi -q`'s Fabric / Health
lines, read into one fact so that a check cannot tell the sources apart.

The fact: {"summary": "healthy" | "unhealthy" | "limited_capacity" | another word as printed | None,
"bandwidth": "full" | "degraded" | None, "route_recovery_in_progress", "route_unhealthy", "access_timeout_recovery",
"partition_assigned": True | False | None, "incorrect_configuration": "none" | what is wrong | None}; None for an item
the driver does not report (NVML's *_NOT_SUPPORTED, nvidia-smi's N/A). A GPU whose every item is unreported has no
health fact (None): an older driver, a pre-Hopper or PCIe GPU, or a GPU not yet trained into its fabric.

Sources, written down where they are used:
- nvidia-ml-py 13.615 (pynvml.py): c_nvmlGpuFabricInfo_v3_t = version, clusterUuid[16], status, cliqueId, state,
  healthMask (uint32), healthSummary (uint8); v2 (c_nvmlGpuFabricInfoV_t) has no healthSummary; the legacy
  c_nvmlGpuFabricInfo_t has neither. The mask's fields and values: NVML_GPU_FABRIC_HEALTH_MASK_* below.
- `nvidia-smi -q` from R570 (tests/data/hwnodes: b200-hgx-r580-healthy, h200-hgx-r580-healthy, the GB200 R570 tray):
  under `Fabric`: `State`, `Status`, `CliqueId`, `ClusterUUID`, and a `Health` block of `Summary`, `Bandwidth`,
  `Route Recovery in progress`, `Route Unhealthy`, `Access Timeout Recovery`, `Incorrect Configuration`, `Partition
  Assigned`. Healthy values as printed: `Healthy`, `Full`, `False`, `None`; NVIDIA's NVML mock (k8s-test-infra,
  tests/data/hwnodes/FORMATS.md) names `Limited Capacity` (only the bandwidth degraded), `Degraded` and `True`; the
  summary's remaining value is NVML's UNHEALTHY (`Unhealthy`, issue 76). The printed words of each incorrect
  configuration were not seen: any value but `None` is one, kept as printed, and a summary word not known here is
  kept as printed too (checks/gpu.py judges it as what it is: not known).
"""

from __future__ import annotations

from typing import Any, Optional

# NVML_GPU_FABRIC_HEALTH_SUMMARY_* (0 NOT_SUPPORTED)
SUMMARY = {1: "healthy", 2: "unhealthy", 3: "limited_capacity"}
_TRUE_FALSE = {1: True, 2: False}  # every *_TRUE = 1 / *_FALSE = 2 / *_NOT_SUPPORTED = 0 of the mask
# NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_* (1 NONE), named by the constant's own words
INCORRECT_CONFIGURATION = {1: "none", 2: "incorrect system GUID", 3: "incorrect chassis serial number",
                           4: "no partition", 5: "insufficient NVLinks", 6: "incompatible GPU firmware",
                           7: "invalid location", 8: "GPU state invalid"}
# (fact, NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_*, _WIDTH_*, value by code, nvidia-smi's label under Fabric / Health)
ITEMS = (("bandwidth", 0, 0x3, {1: "degraded", 2: "full"}, "bandwidth"),
         ("route_recovery_in_progress", 2, 0x3, _TRUE_FALSE, "route recovery in progress"),
         ("route_unhealthy", 4, 0x3, _TRUE_FALSE, "route unhealthy"),
         ("access_timeout_recovery", 6, 0x3, _TRUE_FALSE, "access timeout recovery"),
         ("incorrect_configuration", 8, 0xF, INCORRECT_CONFIGURATION, "incorrect configuration"),
         ("partition_assigned", 12, 0x3, _TRUE_FALSE, "partition assigned"))
# The global fabric manager's connection (bits 14-15) is in the mask but nvidia-smi's Health block prints no line for
# it in any capture here: not read, so that both sources give the same fact.
UUID_LEN = 16  # NVML_GPU_FABRIC_UUID_LEN
MAX_WORD = 80


def from_nvml(mask: Optional[int], summary: Optional[int]) -> Optional[dict]:
    """The health fact from NVML's healthMask and healthSummary (None where the struct had no such field)."""
    out: dict[str, Any] = {"summary": SUMMARY.get(summary) if isinstance(summary, int) else None}
    for key, shift, width, values, _label in ITEMS:
        code = (mask >> shift) & width if isinstance(mask, int) else 0
        out[key] = values.get(code, f"unknown ({code})" if code else None)
    return out if any(v is not None for v in out.values()) else None


def _word(value: str) -> str:
    return value.strip()[:MAX_WORD].lower().replace(" ", "_")


def from_smi(printed: dict) -> Optional[dict]:
    """The health fact from nvidia-smi's lines: {"summary": value, "bandwidth": value, ...} by fact name, each the
    printed value or None where the line is absent or N/A."""
    out: dict[str, Any] = {"summary": None if printed.get("summary") is None else _word(printed["summary"])}
    for key, _shift, _width, values, _label in ITEMS:
        v = printed.get(key)
        if v is None:
            out[key] = None
        elif values is _TRUE_FALSE:
            low = v.strip().lower()
            out[key] = True if low == "true" else False if low == "false" else f"unknown ({v.strip()[:MAX_WORD]})"
        elif key == "incorrect_configuration":
            out[key] = "none" if v.strip().lower() == "none" else v.strip()[:MAX_WORD]
        else:
            out[key] = v.strip()[:MAX_WORD].lower()
    return out if any(v is not None for v in out.values()) else None


def uuid_text(raw: Any) -> Optional[str]:
    """NVML's clusterUuid (16 bytes) as nvidia-smi prints it (8-4-4-4-12 lower-case hex)."""
    try:
        b = bytes(raw)[:UUID_LEN]
    except (TypeError, ValueError):
        return None
    if len(b) != UUID_LEN:
        return None
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


__all__ = ["INCORRECT_CONFIGURATION", "ITEMS", "SUMMARY", "from_nvml", "from_smi", "uuid_text"]
