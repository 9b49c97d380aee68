"""A fake node reads its own GPUs or none, never the GPUs of the machine the tests run on. On a lent H200 the fakes
read the real card: a fake node's pci.affinity found the H200 (listed by the machine's nvidia-smi) where its PCI tree
has none, and bench_hwnodes' node read through nvidia-smi loaded the machine's pynvml and judged the H200. Here the
machine is staged: an nvidia-smi and a pynvml of its own, first on PATH and on the path."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys

from ncclcheck.facts import collect_health_facts, gpu
from ncclcheck.health.run import run_health
from ncclcheck.health.scontrol import Scontrol
from ncclcheck_lab import fakehw
from tests import fakesys
from tests.health.test_health_fabric import _run

MACHINE_BUS = "00000000:00:06.0"


def machine(tmp_path) -> tuple:
    """(bin, site) of a staged GPU machine: an nvidia-smi listing one H200, a pynvml that says it was imported, and
    another tool beside nvidia-smi."""
    bindir, site = tmp_path / "machine" / "bin", tmp_path / "machine" / "site"
    bindir.mkdir(parents=True)
    site.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '0, NVIDIA H200, 143771, GPU-machine, {MACHINE_BUS}'\n")
    tool = bindir / "machine-tool"
    tool.write_text("#!/bin/sh\necho tool\n")
    for p in (smi, tool):
        p.chmod(0o755)
    (site / "pynvml.py").write_text("MACHINE = True\n")
    return bindir, site


def test_an_in_process_fake_node_finds_neither_the_machines_nvidia_smi_nor_its_nvml(tmp_path, monkeypatch):
    bindir, _site = machine(tmp_path)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(fakesys, "_MACHINE_SMI", (*fakesys._MACHINE_SMI, str(bindir / "nvidia-smi")))
    assert [d["pci_bus_id"] for d in gpu.collect()["devices"]] == [MACHINE_BUS]  # the staged machine, unfaked
    fs = fakesys.gpu_node(fakesys.FakeSys(tmp_path / "node", monkeypatch))
    assert gpu.collect()["devices"] == []  # the fake's GPUs are on its PCI tree, none of the machine's
    rep = run_health(_run(node="gpu7"), "0", collect=functools.partial(collect_health_facts, counter_window_s=0.0),
                     scontrol=Scontrol(binary=""))
    got = {c.id: c.status.value for c in rep.checks}
    assert got["pci.affinity"] == "pass", got  # each fake GPU's nearest NIC, on the fake's own tree
    assert shutil.which("machine-tool") and fs.root.exists()  # the machine's other tools are found


CHILD = """
import json, shutil
try:
    import pynvml
    nvml = "machine" if getattr(pynvml, "MACHINE", False) else "fake"
except ImportError:
    nvml = None
print(json.dumps({"smi": shutil.which("nvidia-smi"), "nvml": nvml, "tool": bool(shutil.which("machine-tool"))}))
"""


def child(tmp_path, name: str, spec: dict, **kw) -> dict:
    bindir, site = machine(tmp_path / name)
    base = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    root = tmp_path / name / "node"
    env = fakehw.install(root, spec, base=base, **kw)
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    return {**json.loads(p.stdout), "root": str(root)}


def test_a_child_on_a_fake_node_reads_the_fakes_drivers_or_none_of_the_machines(tmp_path):
    none = child(tmp_path, "empty", fakehw.node_spec(gpus=0, nvswitches=0, ib_ports=0))
    assert (none["smi"], none["nvml"], none["tool"]) == (None, None, True)  # no GPU here: no driver, no binding
    smi_only = child(tmp_path, "smi", fakehw.node_spec(gpus=2, nvswitches=0, ib_ports=0), with_pynvml=False)
    assert smi_only["smi"] == os.path.join(smi_only["root"], "bin", "nvidia-smi") and smi_only["nvml"] is None
    both = child(tmp_path, "both", fakehw.node_spec(gpus=2, nvswitches=0, ib_ports=0))
    assert both["smi"] == os.path.join(both["root"], "bin", "nvidia-smi") and both["nvml"] == "fake"
