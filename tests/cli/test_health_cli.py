"""`ncclcheck health` through the CLI with a fake scontrol on PATH (tests/fake_scontrol.py): what it drains and
resumes by the prefix rule, the exact argv scontrol gets, --dry-run, scontrol failing, and no torch on the path.

The node's facts are this machine's: the NCCL interface is `lo` (present everywhere, MTU 65536), so `--mtu 65536`
is a healthy node and `--mtu 1500` a wrong MTU, whatever machine runs the tests."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env, run_cli
from tests.slurm_fake import FakeSlurm

HEALTHY = ["--ifname", "=lo", "--mtu", "65536"]
WRONG_MTU = ["--ifname", "=lo", "--mtu", "1500"]
OURS = "ncclcheck: health.nccl_interface: lo MTU 65536, expected 1500"


@pytest.fixture
def fake_slurm(tmp_path):
    return FakeSlurm(tmp_path)


def health(fake, *args, node="gpu07"):
    return run_cli("health", *args, env=fake.env(SLURMD_NODENAME=node, COLUMNS="300"), timeout=60)


def test_healthy_node_is_not_drained(fake_slurm):
    fake_slurm.nodes(gpu07=("IDLE", None))
    p = health(fake_slurm, *HEALTHY, "--drain")
    assert p.returncode == 0, p.stdout + p.stderr
    assert fake_slurm.updates() == [] and fake_slurm.calls() == [["show", "node", "gpu07"]]
    assert "gpu07 | Healthy" in p.stdout


def test_wrong_mtu_drains_the_node_named_by_slurmd_nodename_with_ncclchecks_reason(fake_slurm, validate_report):
    fake_slurm.nodes(gpu07=("IDLE", None))
    p = health(fake_slurm, *WRONG_MTU, "--drain", "--json", "-")
    assert p.returncode == 1, p.stderr
    assert fake_slurm.updates() == [["update", "NodeName=gpu07", "State=DRAIN", f"Reason={OURS}"]]
    assert fake_slurm.node("gpu07") == {"State": "IDLE+DRAIN", "Reason": OURS, "Gres": None}
    doc = validate_report(p.stdout)
    assert doc["command"] == "health" and doc["slurm"]["actions"][0]["action"] == "drain"


@pytest.mark.parametrize("state, reason", [("IDLE+DRAIN", "admin: bad DIMM, ticket 4711"), ("IDLE+DRAIN", None),
                                           ("DOWN*", "Not responding"),
                                           ("IDLE+DRAIN", "NHC: check_hw_ib: No IB port is ACTIVE")])
def test_a_node_drained_or_down_for_another_reason_is_untouched_failing_or_healthy(fake_slurm, state, reason):
    for args, code in ((WRONG_MTU, 1), (HEALTHY, 0)):
        fake_slurm.nodes(gpu07=(state, reason))
        p = health(fake_slurm, *args, "--drain", "--json", "-")
        assert p.returncode == code, p.stdout + p.stderr
        assert fake_slurm.updates() == [] and fake_slurm.node("gpu07")["Reason"] == reason
        act = next(c for c in json.loads(p.stdout)["checks"] if c["id"] == "slurm.drain")
        assert act["status"] == "pass" and ("not ncclcheck's" in act["summary"] or "left as it is" in
                                            act["summary"]), act


def test_a_node_drained_by_ncclcheck_and_healthy_again_is_resumed(fake_slurm):
    fake_slurm.nodes(gpu07=("IDLE+DRAIN", OURS))
    p = health(fake_slurm, *HEALTHY, "--drain")
    assert p.returncode == 0, p.stdout + p.stderr
    assert fake_slurm.updates() == [["update", "NodeName=gpu07", "State=RESUME"]]
    assert fake_slurm.node("gpu07")["State"] == "IDLE"


def test_dry_run_prints_the_command_and_changes_nothing(fake_slurm):
    fake_slurm.nodes(gpu07=("IDLE", None))
    p = health(fake_slurm, *WRONG_MTU, "--dry-run")
    assert p.returncode == 1 and fake_slurm.updates() == []
    assert "would run (--dry-run):" in p.stdout and "update NodeName=gpu07 State=DRAIN" in p.stdout, p.stdout
    assert fake_slurm.node("gpu07")["State"] == "IDLE"


def test_expected_gpus_come_from_the_nodes_gres(fake_slurm):
    fake_slurm.nodes(gpu07=("IDLE", None, "gpu:h100:8(S:0-1)"))
    p = health(fake_slurm, *HEALTHY, "--drain", "--json", "-")
    doc = json.loads(p.stdout)
    gpus = next(c for c in doc["checks"] if c["id"] == "health.gpus")
    assert gpus["status"] == "fail" and gpus["evidence"]["expected"] == 8, gpus  # cli_env: a world with no GPU
    assert fake_slurm.updates()[0][-1].startswith("Reason=ncclcheck: health.gpus: 0 of 8 GPUs visible")


@pytest.mark.parametrize("mode, words", [("down", "Unable to contact slurm controller"),
                                         ("deny", "Invalid user id")])
def test_scontrol_failures_are_reported_in_one_line(fake_slurm, mode, words):
    fake_slurm.nodes(gpu07=("IDLE", None))
    fake_slurm.mode = mode
    p = health(fake_slurm, *WRONG_MTU, "--drain")
    assert p.returncode == 1 and words in p.stdout, p.stdout
    assert "Traceback" not in p.stdout + p.stderr


def test_missing_scontrol_fails_a_failing_node_and_warns_a_healthy_one(tmp_path):
    env = {"PATH": str(tmp_path), "SLURMD_NODENAME": "gpu07"}
    p = subprocess.run([sys.executable, "-m", "ncclcheck", "health", *HEALTHY, "--drain", "--json", "-"],
                       capture_output=True, text=True, env=cli_env(env), cwd=REPO, timeout=60)
    doc = json.loads(p.stdout)
    act = next(c for c in doc["checks"] if c["id"] == "slurm.drain")
    assert act["status"] == "warn" and "scontrol not found on PATH" in act["summary"] and p.returncode == 0


def test_usage_errors_exit_2():
    for args in (["--timeout", "50"], ["--mtu", "x"], ["--gpus", "-1"], ["--baseline", "/nonexistent.json"]):
        p = run_cli("health", *args)
        assert p.returncode == 2 and p.stderr.startswith("ncclcheck: error:") and "Traceback" not in p.stderr, args


def test_health_never_imports_torch(tmp_path):
    """`python -X importtime`: the CLI points fd 2 at the run's log once it starts, so the import lines are read
    from stderr and the log directory together; and sys.modules at exit says the same."""
    code = ("import sys; from ncclcheck.cli import main; rc = main(sys.argv[1:]); "
            "print('torch-loaded' if 'torch' in sys.modules else 'no-torch'); sys.exit(rc)")
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", code, "health", *HEALTHY], capture_output=True,
                       text=True, env=cli_env({"NCCLCHECK_LOG_DIR": str(tmp_path)}), cwd=REPO, timeout=60)
    assert p.returncode == 0 and p.stdout.strip().endswith("no-torch"), p.stdout + p.stderr
    text = p.stderr + "".join(f.read_text(errors="replace") for f in tmp_path.rglob("*") if f.is_file())
    imported = [line.rsplit("|", 1)[-1].strip() for line in text.splitlines() if line.startswith("import time")]
    assert "ncclcheck.health.run" in imported, imported[-20:]
    assert not [m for m in imported if m.split(".")[0] == "torch"]


def test_drift_from_a_golden_run_warns_and_drains_only_with_strict(fake_slurm, tmp_path):
    golden = tmp_path / "golden.json"
    p = run_cli("env", "--json", str(golden))
    assert p.returncode == 0, p.stderr
    fake_slurm.nodes(gpu07=("IDLE", None))
    p = health(fake_slurm, *HEALTHY, "--baseline", str(golden), "--drain", "--json", "-")
    drift = next(c for c in json.loads(p.stdout)["checks"] if c["id"] == "baseline.drift")
    assert p.returncode == 0 and drift["status"] == "pass", drift  # the same node, read without torch
    doc = json.loads(golden.read_text())
    doc["nodes"][0]["facts"]["versions"]["torch"] = "1.0.0"
    golden.write_text(json.dumps(doc))
    p = health(fake_slurm, *HEALTHY, "--baseline", str(golden), "--drain")
    assert p.returncode == 0 and fake_slurm.updates() == []  # a warning: no drain
    p = health(fake_slurm, *HEALTHY, "--baseline", str(golden), "--drain", "--strict")
    assert p.returncode == 1
    assert fake_slurm.updates()[0][-1].startswith("Reason=ncclcheck: baseline.drift: 1 difference from the "
                                                  "baseline: torch version 1.0.0 -> "), fake_slurm.updates()


def test_a_prolog_with_the_jobs_cuda_visible_devices_counts_the_nodes_gpus(tmp_path, fake_slurm):
    """Through the CLI, as Slurm runs a Prolog: an 8-GPU node (a fake one: its own nvidia-smi and NVML) whose Gres
    says 8, running a job given GPUs 0 and 1 (CUDA_VISIBLE_DEVICES=0,1 in the Prolog's environment). The node's GPUs
    are the driver's list: healthy, not "2 of 8 GPUs visible", and not drained."""
    import os

    from ncclcheck_lab import fakehw

    env = fakehw.install(tmp_path / "node", fakehw.node_spec(ib_ports=0))
    fake_slurm.nodes(gpu07=("IDLE", None, "gpu:h100:8(S:0-1)"))
    e = {**env, **fake_slurm.env(SLURMD_NODENAME="gpu07", SLURM_SCRIPT_CONTEXT="prolog_slurmd",
                                 CUDA_VISIBLE_DEVICES="0,1", COLUMNS="200")}
    e["PATH"] = fake_slurm.env()["PATH"].split(os.pathsep)[0] + os.pathsep + env["PATH"]
    p = run_cli("health", "--drain", "--json", "-", env=e, timeout=120)
    doc = json.loads(p.stdout)
    gpus = next(c for c in doc["checks"] if c["id"] == "health.gpus")
    assert gpus["status"] == "pass" and gpus["evidence"]["visible"] == 8, gpus
    assert gpus["evidence"]["visible_devices"] == "0,1"
    assert not any(u[-1].startswith("Reason=ncclcheck: health.gpus") for u in fake_slurm.updates()), \
        fake_slurm.updates()
