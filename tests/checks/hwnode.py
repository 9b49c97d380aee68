"""A node's gpu_health facts read from a fake tree (ncclcheck_lab/fakehw.py) through the real collectors, for the
hardware check tests: stage a fault in the spec, read, judge."""

from __future__ import annotations

from ncclcheck.checks import gpu as hw
from ncclcheck.checks.local import LocalInput
from ncclcheck.facts import gpuhealth
from ncclcheck_lab import fakehw


def read(tmp_path, monkeypatch, spec, smi=False, pause=None, **kw) -> dict:
    """The gpu_health group of the node `spec` describes: NVML through the fake binding (or, with smi, nvidia-smi's
    answers and no binding), the kernel log from the fake /dev/kmsg."""
    root = tmp_path / "node"
    fakehw.write_tree(root, spec)
    env = fakehw.env_for(root, {})
    for k in ("NCCLCHECK_SYSFS_ROOT", "NCCLCHECK_PROCFS_ROOT", "NCCLCHECK_DEVFS_ROOT"):
        monkeypatch.setenv(k, env[k])
    run = lambda argv, t: fakehw.smi_answer(spec, argv)  # noqa: E731
    if smi:
        monkeypatch.setattr(gpuhealth.nv_, "import_nvml", _no_pynvml)
        return gpuhealth.collect(run=run, which=lambda n: "/usr/bin/" + n if n == "nvidia-smi" else None,
                                 interval_s=0, pause=pause or (lambda s: None), **kw)
    return gpuhealth.collect(nvml=fakehw.FakeNvml(spec), run=run, which=lambda n: None, interval_s=0,
                             pause=pause or (lambda s: None), **kw)


def _no_pynvml():
    raise ImportError("No module named 'pynvml'")


def judge(check, gh: dict, **hw_kw):
    """One check's result(s) on these facts, as a list."""
    inp = LocalInput.of({"gpu_health": gh, "env": {"vars": {}, "redacted": []}}, hw=hw.HwExpect(**hw_kw))
    res = check(inp)
    return res if isinstance(res, list) else [res]


def one(check, gh: dict, **hw_kw):
    [r] = judge(check, gh, **hw_kw)
    return r


def findings(result) -> list:
    return result.evidence.get("findings") or []
