"""A node's gpu_health facts and its counter window read from a fake tree (ncclcheck_lab/fakehw.py) through the real
collectors, for the hardware check tests: stage a fault in the spec, read, judge."""

from __future__ import annotations

from ncclcheck.checks import gpu as hw
from ncclcheck.checks.local import LocalInput
from ncclcheck.facts import counters, gpuhealth
from ncclcheck_lab import fakehw


def _tree(tmp_path, monkeypatch, spec) -> None:
    root = tmp_path / "node"
    fakehw.write_tree(root, spec)
    env = fakehw.env_for(root, {})
    for k in ("NCCLCHECK_SYSFS_ROOT", "NCCLCHECK_PROCFS_ROOT", "NCCLCHECK_DEVFS_ROOT"):
        monkeypatch.setenv(k, env[k])


def read(tmp_path, monkeypatch, spec, smi=False, **kw) -> dict:
    """The gpu_health group of the node `spec` describes: NVML through the fake binding (or, with smi, nvidia-smi's
    answers and no binding), the kernel log from the fake /dev/kmsg."""
    _tree(tmp_path, monkeypatch, spec)
    run = lambda argv, t: fakehw.smi_answer(spec, argv)  # noqa: E731
    if smi:
        monkeypatch.setattr(gpuhealth.nv_, "import_nvml", _no_pynvml)
        return gpuhealth.collect(run=run, which=lambda n: "/usr/bin/" + n if n == "nvidia-smi" else None, **kw)
    return gpuhealth.collect(nvml=fakehw.FakeNvml(spec), run=run, which=lambda n: None, **kw)


def read_counters(tmp_path, monkeypatch, spec, between=None, interval_s=None, smi=False) -> dict:
    """The node's `counters` group (facts/counters.py: every counter read, `between()` run, read again) with NVML's
    counters from the fake binding (with smi: nvidia-smi's `nvlink -e`, no binding); `interval_s` stands in for the
    window's length (the test waits none)."""
    _tree(tmp_path, monkeypatch, spec)
    if smi:
        monkeypatch.setattr(counters.nv_, "import_nvml", _no_pynvml)
        fakehw.SMI_READS.clear()
        first = counters.snapshot(run=lambda argv, t: fakehw.smi_answer(spec, argv))
    else:
        first = counters.snapshot(nvml=fakehw.FakeNvml(spec))
    if between:
        between()
    c = counters.window(first, 0.0)
    if interval_s is not None:
        c["interval_s"] = interval_s
    return c


def _no_pynvml():
    raise ImportError("No module named 'pynvml'")


def judge(check, gh: dict, counters: dict = None, **hw_kw):
    """One check's result(s) on these facts (gpu_health and, where given, the counter window), as a list."""
    facts = {"gpu_health": gh, "env": {"vars": {}, "redacted": []}}
    if counters is not None:
        facts["counters"] = counters
    inp = LocalInput.of(facts, hw=hw.HwExpect(**hw_kw))
    res = check(inp)
    return res if isinstance(res, list) else [res]


def one(check, gh: dict, counters: dict = None, **hw_kw):
    [r] = judge(check, gh, counters, **hw_kw)
    return r


def findings(result) -> list:
    return result.evidence.get("findings") or []
