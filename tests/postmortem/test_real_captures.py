"""Real NCCL failures captured on an H100 (fixtures/nccl-h100, copied as they are with their README's table): each
folder, read by `ncclcheck diagnose` as a user would, exits 1 and its root cause says what the table says. These are
real bytes (torch 2.11 + NCCL 2.28.9 + CUDA 13): main named torch's wrapper line ("invalid usage (run with
NCCL_DEBUG=WARN for details)") for three of them and torchrun's SIGTERM for the fourth: never the cause."""

from __future__ import annotations

import json
import os
import re

import pytest

from ncclcheck.postmortem.diagnose import diagnose
from tests.conftest import run_cli

H100 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nccl-h100")


def root_of(folder: str) -> tuple:
    """(exit code, the root cause check, its console 'root cause:' paragraph) of `diagnose FOLDER --json -`."""
    p = run_cli("diagnose", os.path.join(H100, folder), "--json", "-")
    doc = json.loads(p.stdout)
    root = next(c for c in doc["checks"] if c["id"] == "postmortem.root_cause")
    return p.returncode, root, doc


def console_root(folder: str) -> str:
    p = run_cli("diagnose", os.path.join(H100, folder))
    return " ".join(p.stdout[p.stdout.index("root cause:"):].split())


def test_the_fixtures_are_the_captures_with_their_table():
    with open(os.path.join(H100, "README.md")) as f:
        table = f.read()
    for folder in ("dupgpu", "badif", "ibforced", "stuck"):
        assert f"| {folder} |" in table and os.path.isdir(os.path.join(H100, folder))


def test_dupgpu_names_the_one_gpu_both_ranks_and_the_local_rank_fix():
    rc, root, doc = root_of("dupgpu")
    assert rc == 1 and root["status"] == "fail"
    assert root["evidence"]["kind"] == "duplicate_gpu" and root["evidence"]["ranks"] == [0, 1]
    assert "same GPU" in root["summary"] and "CUDA device 60" in root["summary"]
    assert "LOCAL_RANK" in root["fix"] and "set_device" in root["fix"]
    assert "invalid usage" not in root["summary"]
    # torch's wrapper is listed, as the report of what NCCL said, never as a cause
    wrapped = [c for c in doc["postmortem"]["causes"] if c["kind"] in ("exception", "nccl_error")]
    assert wrapped and not any(c["cause"] for c in wrapped)
    assert re.search(r"same gpu|duplicate gpu", console_root("dupgpu"), re.I)


@pytest.mark.parametrize("folder", ["dupgpu", "badif", "ibforced"])
def test_no_failing_row_quotes_torchs_wrapper(folder):
    """The wrapper is a consequence: counted in the row that refers to the root cause, its words in the detail only
    (a failing row that quoted it read as a second cause: the accuracy corpus's false_cause)."""
    _, _, doc = root_of(folder)
    failing = [c for c in doc["checks"] if c["status"] == "fail"]
    assert failing and not any("invalid usage" in c["summary"] for c in failing), [c["summary"] for c in failing]


def test_badif_names_the_interface_setting_and_how_to_see_the_ones_that_exist():
    rc, root, doc = root_of("badif")
    assert rc == 1 and root["evidence"]["kind"] == "no_socket_interface" and root["evidence"]["ranks"] == [0]
    assert "NCCL_SOCKET_IFNAME=eth9" in root["summary"] and "no interface on vm" in root["summary"]
    # nothing in this folder lists vm's interfaces: on vm itself (this machine may be one) they are this machine's,
    # anywhere else the verdict says how to list them there
    from ncclcheck.facts import hostname

    if hostname() == "vm":
        assert "the interfaces vm has:" in root["summary"] and "(from this machine" in root["summary"]
    else:
        assert "`ip -br addr` on vm" in root["summary"]
    assert "NCCL_SOCKET_IFNAME" in root["fix"]
    assert "invalid usage" not in root["summary"]
    assert doc["world"]["launcher"] == "torchrun"
    assert re.search(r"socket interface|socket_ifname", console_root("badif"), re.I)


def test_badif_lists_the_interfaces_when_diagnose_runs_on_that_host(monkeypatch):
    """On the host the log names, this machine's interfaces (read through facts/) are the ones that exist; on any
    other host they are not vm's, and the verdict says how to list vm's."""
    from ncclcheck.postmortem import diagnose as dg

    monkeypatch.setattr(dg, "_this_host", lambda: {"host": "vm", "interfaces": ["lo", "eth0", "docker0"]})
    root = diagnose([os.path.join(H100, "badif")]).checks[0]
    assert "the interfaces vm has: lo, eth0, docker0 (from this machine" in root.summary
    assert "one of eth0, docker0" in root.fix
    monkeypatch.setattr(dg, "_this_host", lambda: {"host": "gpu7", "interfaces": ["lo", "eth0"]})
    root = diagnose([os.path.join(H100, "badif")]).checks[0]
    assert "eth0" not in root.summary and "run `ip -br addr` on vm to see them" in root.summary


def test_badif_lists_the_interfaces_a_preflight_report_among_the_inputs_saw(tmp_path):
    """A preflight report of that host among the inputs: its facts list the interfaces."""
    import shutil

    shutil.copytree(os.path.join(H100, "badif"), tmp_path / "job")
    report = {"schema": "ncclcheck.report/1", "command": "preflight", "world": {"world_size": 1, "nnodes": 1},
              "nodes": [{"node_rank": 0, "hostname": "vm", "facts": {"interfaces": [
                  {"name": "lo", "up": True}, {"name": "ens5", "up": True}]}}], "checks": []}
    (tmp_path / "job" / "preflight.json").write_text(json.dumps(report))
    root = diagnose([str(tmp_path / "job")]).checks[0]
    assert root.evidence["kind"] == "no_socket_interface"
    assert "the interfaces vm has: lo, ens5 (from the preflight report)" in root.summary and "ens5" in root.fix


def test_ibforced_says_ib_was_forced_and_no_net_plugin_loaded():
    rc, root, _ = root_of("ibforced")
    assert rc == 1 and root["evidence"]["kind"] == "net_plugin" and root["evidence"]["ranks"] == [0]
    assert "Failed to initialize any NET plugin" in root["summary"]
    assert "tried only IB (NET/IB : No device found)" in root["summary"] and "NCCL_NET=IB" in root["summary"]
    assert "unset NCCL_NET" in root["fix"]
    assert "invalid usage" not in root["summary"]
    assert re.search(r"net plugin|infiniband|nccl_net", console_root("ibforced"), re.I)


def test_stuck_names_rank_0s_all_reduce_6_its_own_gpu_never_ran_and_the_sigterm_is_a_consequence():
    rc, root, doc = root_of("stuck")
    assert rc == 1 and root["evidence"]["kind"] == "not_started" and root["evidence"]["ranks"] == [0]
    assert "all_reduce #6" in root["summary"] and "GPU never ran it" in root["summary"]
    assert "GPU" in root["fix"] and "network" in root["fix"]
    assert "SignalException" not in root["summary"] and "signal" not in root["summary"]
    stop = [c for c in doc["postmortem"]["causes"] if c["kind"] in ("launcher_stopped", "stopped_from_outside")]
    assert stop and not stop[0]["cause"]  # torchrun's SIGTERM 150 s later: the consequence
    assert doc["world"]["launcher"] == "torchrun"  # its output has no failure table (the agent itself was stopped)
    assert re.search(r"all_reduce.*#?6", console_root("stuck"), re.I)


@pytest.mark.parametrize("folder", ["dupgpu", "badif", "ibforced"])
def test_the_nccl_debug_file_alone_names_the_same_cause(folder, tmp_path):
    """NCCL's WARN is read from NCCL_DEBUG_FILE as from the launcher's output: without launcher.log the cause is the
    same class (its rank unknown or from NCCL's own init line)."""
    import shutil

    for name in os.listdir(os.path.join(H100, folder)):
        if name.startswith("nccl."):
            shutil.copy(os.path.join(H100, folder, name), tmp_path / name)
    kind = {"dupgpu": "duplicate_gpu", "badif": "no_socket_interface", "ibforced": "net_plugin"}[folder]
    rep = diagnose([str(tmp_path)])
    assert rep.exit_code == 1 and rep.checks[0].evidence["kind"] == kind, rep.checks[0].summary
