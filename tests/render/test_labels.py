"""report --format labels: kubectl commands whose labels and taints are valid Kubernetes syntax, taint only the
nodes that fail, clear labels of checks that pass, skip names from other machines that are not node names, and run
as a script (against a recording kubectl)."""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess

import pytest

from ncclcheck.model import NodeInfo, Report, failed, passed, warned
from ncclcheck.render.labels import label_name, render_labels
from tests.conftest import REPO, run_cli

from .conftest import load_example

_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                  r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _commands(text: str) -> list[list[str]]:
    return [shlex.split(ln.split(" 2>/dev/null")[0]) for ln in text.splitlines() if ln and not ln.startswith("#")]


def _labels(cmd: list[str]) -> dict:
    out = {}
    for a in cmd[5:]:
        if a.endswith("-"):
            out[a[:-1]] = None
        else:
            k, _, v = a.partition("=")
            out[k] = v
    return out


def test_every_label_is_valid_kubernetes_syntax(example):
    name, report = example
    for cmd in _commands(render_labels(report)):
        assert cmd[:2] in (["kubectl", "label"], ["kubectl", "taint"])
        if cmd[1] == "label":
            for k, v in _labels(cmd).items():
                assert _KEY.match(k) and len(k.split("/")[-1]) <= 63, k
                assert v is None or _VALUE.match(v), v


def test_failing_nodes_are_tainted_and_the_pool_label_carries_the_run():
    report = load_example("preflight-fail-3node")
    cmds = _commands(render_labels(report))
    labels = {c[3]: _labels(c) for c in cmds if c[1] == "label"}
    assert set(labels) == {n.hostname for n in report.nodes}
    for lb in labels.values():
        assert lb["ncclcheck.io/preflight"] == "fail" and lb["ncclcheck.io/pool"] == "fail"
        assert lb["check.ncclcheck.io/net.socket_ifname"] == "fail"
        assert lb["check.ncclcheck.io/host.shm"] is None  # passed: a stale label from an earlier run is removed
        assert "check.ncclcheck.io/rendezvous.world" not in lb  # about node 2, which never joined: not these nodes
    taints = [c for c in cmds if c[1] == "taint"]
    assert all(c[-1] == "ncclcheck.io/preflight=fail:NoSchedule" for c in taints) and len(taints) == len(labels)


def test_a_passing_pool_is_untainted():
    report = load_example("preflight-pass-2node")
    text = render_labels(report)
    assert "=fail:NoSchedule" not in text
    assert text.count("ncclcheck.io/preflight:NoSchedule- 2>/dev/null || true") == len(report.nodes)


def test_cross_node_checks_count_for_the_nodes_they_name():
    rep = Report(command="preflight", version="0", started="now",
                 nodes=[NodeInfo(0, "n0"), NodeInfo(1, "n1")],
                 checks=[passed("host.shm", "ok", node=0), passed("host.shm", "ok", node=1),
                         warned("net.interfaces", "docker0 same address", evidence={"nodes": [1]}),
                         failed("bench.min_busbw[all_reduce]", "slow", node=1)])
    labels = {c[3]: _labels(c) for c in _commands(render_labels(rep)) if c[1] == "label"}
    assert labels["n0"]["ncclcheck.io/preflight"] == "pass" and "check.ncclcheck.io/net.interfaces" not in labels["n0"]
    assert labels["n1"]["check.ncclcheck.io/net.interfaces"] == "warn"
    assert labels["n1"]["check.ncclcheck.io/bench.min_busbw.all_reduce"] == "fail"
    assert label_name("x" * 80) is None


def test_hostile_hostnames_are_skipped_not_run():
    rep = Report(command="preflight", version="0", started="now",
                 nodes=[NodeInfo(0, "a;reboot"), NodeInfo(1, "$(id)"), NodeInfo(2, "good-node.example")])
    text = render_labels(rep)
    assert "reboot" not in "".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    assert len([c for c in _commands(text) if c[1] == "label"]) == 1


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_the_script_runs_against_kubectl(tmp_path):
    """The documented pipeline: report --format labels > FILE; sh FILE (here with a kubectl that records its args)."""
    log = tmp_path / "calls"
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {log}\necho >> {log}\n')
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
    p = run_cli("report", f"{REPO}/tests/render/examples/preflight-fail-3node.json", "--format", "labels")
    assert p.returncode == 1  # the saved run failed; the labels are still printed
    script = tmp_path / "labels.sh"
    script.write_text(p.stdout)
    env = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(["sh", str(script)], check=True, env=env, timeout=30)
    calls = log.read_text().splitlines()
    assert calls[0].startswith("label|node|cpu-b01|--overwrite|ncclcheck.io/preflight=fail|")
    assert "taint|node|cpu-b01|--overwrite|ncclcheck.io/preflight=fail:NoSchedule|" in calls
