"""`health --dry-run` runs nothing outside the node (issue 34): scontrol is never called, not even `show node` (it
looks its controller up in DNS and reaches it over the network), and the report says what would be drained and
with which reason."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_cli


@pytest.fixture
def fake_path(tmp_path):
    """A PATH whose scontrol records every call (and answers like a controller that cannot be reached)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "scontrol.calls"
    script = bin_dir / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho "slurm_load_node error: Unable to contact slurm '
                      'controller" >&2\nexit 1\n')
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}, calls


@pytest.mark.parametrize("flags", [["--dry-run"], ["--drain", "--dry-run"]])
def test_dry_run_calls_no_scontrol_and_says_what_it_would_drain(flags, fake_path, tmp_path):
    env, calls = fake_path
    # --gpus 8 on a node without 8 GPUs: a failing node, which a real run would drain.
    p = run_cli("health", *flags, "--gpus", "8", "--node", "h9", "--json", str(tmp_path / "h.json"), env=env)
    assert not calls.exists(), f"scontrol was run by a dry run: {calls.read_text()}"
    doc = json.loads((tmp_path / "h.json").read_text())
    drain = next(c for c in doc["checks"] if c["id"] == "slurm.drain")
    assert drain["status"] == "pass", drain
    assert drain["summary"].startswith("would drain h9: ") and "State=DRAIN" in drain["summary"]
    assert "Reason=ncclcheck: health.gpus: " in drain["summary"]
    assert doc["slurm"]["dry_run"] is True and doc["slurm"]["state_error"] is None
    assert doc["slurm"]["actions"][0]["action"] == "drain" and doc["slurm"]["actions"][0]["reason"].startswith(
        "ncclcheck: health.gpus: ")
    assert "would drain h9" in p.stdout + p.stderr


def test_dry_run_of_a_healthy_node_says_it_drains_nothing(fake_path, tmp_path):
    env, calls = fake_path
    run_cli("health", "--dry-run", "--node", "h9", "--json", str(tmp_path / "h.json"), env=env)
    assert not calls.exists(), f"scontrol was run by a dry run: {calls.read_text()}"
    doc = json.loads((tmp_path / "h.json").read_text())
    drain = next(c for c in doc["checks"] if c["id"] == "slurm.drain")
    assert drain["status"] == "pass" and drain["summary"].startswith("would not drain h9: healthy"), drain
    assert doc["slurm"]["actions"][0]["action"] == "none"
