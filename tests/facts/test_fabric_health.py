"""A GPU's whole fabric reading (issue 76): state, status, clique, cluster and the fabric health, through NVML's
versioned call (nvmlDeviceGetGpuFabricInfoV: v3 with the summary, v2 with the mask, the legacy call before it) and
`nvidia-smi -q`'s Fabric / Health block, read into one fact whichever source answered."""

from __future__ import annotations

import ctypes

import pytest

from ncclcheck.facts import fabrichealth, smiq
from ncclcheck_lab import fakehw, hwcorpus


def fabric_of(tmp_path, spec, source, i=0):
    v = hwcorpus.judge(tmp_path / source, {"name": "t", "spec": spec, "expect": {}}, source)
    g = v["facts"]["gpu_health"]["gpus"][i]
    return g["fabric"], g


def test_the_fakes_structs_are_the_bindings():
    """The fake NVML fills the structs nvidia-ml-py hands the driver: same fields, same sizes, same version words."""
    pynvml = pytest.importorskip("pynvml")
    if not hasattr(pynvml, "c_nvmlGpuFabricInfo_v3_t"):
        pytest.skip("nvidia-ml-py older than the v3 fabric struct")
    for name in ("c_nvmlGpuFabricInfo_t", "c_nvmlGpuFabricInfo_v2_t", "c_nvmlGpuFabricInfo_v3_t"):
        real, fake = getattr(pynvml, name), getattr(fakehw.FakeNvml, name)
        assert [f[0] for f in real._fields_] == [f[0] for f in fake._fields_], name
        assert ctypes.sizeof(real) == ctypes.sizeof(fake), name
    assert pynvml.c_nvmlGpuFabricInfo_v3_t().version == fakehw.FakeNvml.c_nvmlGpuFabricInfo_v3_t().version
    assert pynvml.c_nvmlGpuFabricInfoV_t().version == fakehw.FakeNvml.c_nvmlGpuFabricInfoV_t().version


def test_the_mask_reads_as_nvml_defines_its_fields():
    pynvml = pytest.importorskip("pynvml")
    if not hasattr(pynvml, "NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY"):
        pytest.skip("nvidia-ml-py older than the fabric health mask")
    p = pynvml
    mask = (p.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE << p.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY
            | p.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE << p.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW
            | p.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCORRECT_CHASSIS_SN
            << p.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION)
    h = fabrichealth.from_nvml(mask, p.NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY)
    assert h == {"summary": "unhealthy", "bandwidth": "full", "route_recovery_in_progress": None,
                 "route_unhealthy": True, "access_timeout_recovery": None,
                 "incorrect_configuration": "incorrect chassis serial number", "partition_assigned": None}
    assert fabrichealth.from_nvml(0, 0) is None  # nothing reported: no health fact, never "healthy"
    for key, shift, width, _values, _label in fabrichealth.ITEMS:  # the table's shifts and widths are nvml.h's
        name = {"bandwidth": "DEGRADED_BW"}.get(key, key.upper().replace("_IN_PROGRESS", ""))
        assert getattr(p, f"NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_{name}") == shift
        assert getattr(p, f"NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_{name}") == width


def test_a_posted_b200s_fabric_block_reads_whole():
    """b200-hgx-r580-healthy: `nvidia-smi -q` of R580 as posted, CliqueId, ClusterUUID and the Health block."""
    q = (hwcorpus.CORPUS / "b200-hgx-r580-healthy" / "nvidia-smi-q.txt").read_text()
    fab = smiq.parse(q)["gpus"][0]["fabric"]
    assert fab == {"state": "completed", "status": "success", "clique_id": 32766,
                   "cluster_uuid": "1a7e4d52-16a3-4c1b-9e8f-4e1b97a221a1",
                   "health": {"summary": "healthy", "bandwidth": "full", "route_recovery_in_progress": False,
                              "route_unhealthy": False, "access_timeout_recovery": False,
                              "incorrect_configuration": "none", "partition_assigned": None}}


def test_an_r570_tray_whose_health_is_all_na_has_no_health_fact():
    """The GB200 tray of Azure/azhpc-images#506: Completed with Insufficient Resources, every Health line N/A."""
    q = (hwcorpus.CORPUS / "gb200-nvl72-r570-fabric-insufficient-resources" / "nvidia-smi-q.txt").read_text()
    fab = smiq.parse(q)["gpus"][0]["fabric"]
    assert fab["health"] is None and fab["status"] == "error: Insufficient Resources" and fab["clique_id"] == 0


@pytest.mark.parametrize("health", [
    {"summary": 2, "route_unhealthy": True},
    {"summary": 2, "incorrect_configuration": "insufficient NVLinks"},
    {"summary": 3, "bandwidth": "degraded"},
    {"summary": 1},
    {"summary": 0, "api": 2, "access_timeout_recovery": True},  # a driver that knows the v2 struct only
], ids=["unhealthy-route", "unhealthy-config", "limited", "healthy", "mask-only"])
def test_both_sources_read_the_same_fabric(tmp_path, health):
    spec = hwcorpus.gb200_fabric(2, **health)
    nv, g = fabric_of(tmp_path, spec, "nvml", 2)
    smi, _ = fabric_of(tmp_path, spec, "nvidia-smi", 2)
    assert nv == smi, (nv, smi)
    assert nv["clique_id"] == 32766 and nv["cluster_uuid"] == hwcorpus.GB200_CLUSTER
    assert nv["health"]["summary"] == {0: None, 1: "healthy", 2: "unhealthy", 3: "limited_capacity"}[health["summary"]]
    assert "fabric" not in g.get("errors", {}) and "fabric" not in g["unsupported"]


def test_a_driver_without_the_versioned_call_is_asked_the_legacy_way(tmp_path):
    """NVML_ERROR_FUNCTION_NOT_FOUND from nvmlDeviceGetGpuFabricInfoV: state, status and clique from the legacy
    call, and no health fact (not a healthy one)."""
    fab, g = fabric_of(tmp_path, hwcorpus.gb200_fabric(0, api=1), "nvml")
    assert fab == {"state": "completed", "status": "success", "clique_id": 32766,
                   "cluster_uuid": hwcorpus.GB200_CLUSTER, "health": None}


def test_a_v3_struct_the_driver_does_not_know_is_asked_again_as_v2(tmp_path):
    nv = fakehw.FakeNvml(hwcorpus.gb200_fabric(0, summary=0, api=2, route_unhealthy=True))
    info = nv.c_nvmlGpuFabricInfo_v3_t()
    with pytest.raises(fakehw.NVMLError) as e:
        nv.nvmlDeviceGetGpuFabricInfoV(0, ctypes.byref(info))
    assert e.value.value == 25  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH: what gpuhealth retries on
    fab, _g = fabric_of(tmp_path, hwcorpus.gb200_fabric(0, summary=0, api=2, route_unhealthy=True), "nvml")
    assert fab["health"]["route_unhealthy"] is True and fab["health"]["summary"] is None


def test_a_fabric_call_that_fails_is_kept_as_its_error_never_as_no_fabric(tmp_path):
    spec = hwcorpus.gb200_fabric(1, summary=2)
    spec["gpus"][1]["fabric"] = {"nvml_error": 999}  # NVML_ERROR_UNKNOWN from the versioned call
    fab, g = fabric_of(tmp_path, spec, "nvml", 1)
    assert fab is None and g["errors"]["fabric"] == "unknown error" and "fabric" not in g["unsupported"]
