"""tests/conftest.py's cli_env() gives the processes a test starts a world without GPUs, on a GPU machine too: a
machine is staged whose nvidia-smi lists one H200 (as the lent H200 did, where 2-rank jobs of the suite failed
gpu.count "--nproc-per-node 2 but only 1 GPU(s) visible"); `ncclcheck env` started through cli_env counts none, and
started with the machine's own environment counts it."""

from __future__ import annotations

import json
import os

from tests.conftest import cli_env, run_cli

H200 = "0, NVIDIA H200, 143771, GPU-562f2067-a3e2-cf48-c4dc-25a07ae496dc, 00000000:00:06.0"


def staged_path(tmp_path) -> str:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncase \"$*\" in *query-gpu*) echo '{H200}' ;; *) echo 'GPU0 X' ;; esac\n")
    smi.chmod(0o755)
    return f"{bindir}{os.pathsep}{os.environ['PATH']}"


def gpu_facts(env: dict) -> dict:
    p = run_cli("env", "--json", "-", env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)["nodes"][0]["facts"]["gpu"]


def test_a_test_started_process_sees_no_gpu_of_the_machine(tmp_path):
    path = staged_path(tmp_path)
    assert cli_env({"PATH": path})["CUDA_VISIBLE_DEVICES"] == ""
    g = gpu_facts({"PATH": path})
    assert (g["count"], g["devices"], g["visible_devices"]) == (0, [], ""), g
    seen = gpu_facts({"PATH": path, "CUDA_VISIBLE_DEVICES": "0"})  # the machine's world: its H200 is counted
    assert seen["count"] == 1 and seen["devices"][0]["name"] == "NVIDIA H200", seen
