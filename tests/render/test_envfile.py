"""The env file is sourced by real shells: values arrive intact, per-node values follow the node rank, nothing runs."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest

from ncclcheck.model import NodeInfo, Recommendation, Report
from ncclcheck.render.envfile import render_envfile

from .conftest import load_example

SHELLS = [s for s in ("sh", "bash", "dash") if shutil.which(s)]


def _source(tmp_path, text: str, shell: str, names: list[str], env: dict) -> dict[str, str]:
    path = tmp_path / "env.sh"
    path.write_text(text)
    printer = "; ".join(f'printf "%s=%s\\0" {n} "${{{n}-<unset>}}"' for n in names)
    base = {k: v for k, v in os.environ.items()
            if k not in ("NODE_RANK", "GROUP_RANK", "SLURM_NODEID", "JOB_COMPLETION_INDEX", "PET_NODE_RANK")}
    out = subprocess.run([shell, "-c", f". {path}; {printer}"], capture_output=True, check=True, timeout=10,
                         env={**base, **env}, cwd=tmp_path)
    return dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if item)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("var", ["NCCLCHECK_NODE_RANK", "SLURM_NODEID", "JOB_COMPLETION_INDEX", "GROUP_RANK"])
def test_per_node_values_follow_the_node_rank(tmp_path, shell, var):
    text = render_envfile(load_example("preflight-pass-2node"))
    got = _source(tmp_path, text, shell, ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA"], {var: "1"})
    assert got["NCCL_SOCKET_IFNAME"] == "=enp65s0f0np0"
    assert got["GLOO_SOCKET_IFNAME"] == "enp65s0f0np0"
    assert got["NCCL_IB_HCA"].startswith("=mlx5_0:1,")


@pytest.mark.parametrize("shell", SHELLS)
def test_hostname_is_the_fallback(tmp_path, shell):
    me = socket.gethostname().split(".")[0]
    report = Report(command="preflight", version="0.1.0", started="t",
                    nodes=[NodeInfo(0, "somewhere-else"), NodeInfo(1, me)],
                    recommendations=[Recommendation("NCCL_SOCKET_IFNAME", "=eth0", "r", node=0),
                                     Recommendation("NCCL_SOCKET_IFNAME", "=eth1", "r", node=1)])
    got = _source(tmp_path, render_envfile(report), shell, ["NCCL_SOCKET_IFNAME", "_ncclcheck_node"], {})
    assert got == {"NCCL_SOCKET_IFNAME": "=eth1", "_ncclcheck_node": "<unset>"}


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
@pytest.mark.parametrize("shell", SHELLS)
def test_unknown_node_keeps_cluster_values_and_says_so(tmp_path, shell):
    text = render_envfile(load_example("preflight-pass-2node"))
    path = tmp_path / "env.sh"
    path.write_text(text)
    out = subprocess.run([shell, "-c", f'. {path}; echo "[$NCCL_SOCKET_IFNAME][$NCCL_IB_HCA]"'], capture_output=True,
                         text=True, timeout=10, env={"PATH": os.environ["PATH"], "NCCLCHECK_NODE_RANK": "7"})
    assert out.stdout.startswith("[][=mlx5_0:1")
    assert "unknown node rank" in out.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_values_are_data_not_code(tmp_path, shell, hostile_report):
    text = render_envfile(hostile_report)
    got = _source(tmp_path, text, shell, ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"], {"NCCLCHECK_NODE_RANK": "1"})
    assert got["NCCL_SOCKET_IFNAME"] == "$(touch /tmp/ncclcheck-pwned)'\"`"
    assert got["GLOO_SOCKET_IFNAME"] == "eth0; touch /tmp/ncclcheck-pwned"
    assert not os.path.exists("/tmp/ncclcheck-pwned")
    assert "# skipped: 'BAD NAME;touch /tmp/ncclcheck-pwned' is not a variable ncclcheck may recommend" in text
    # a reason with newlines stays inside its comment
    assert all(line.startswith(("#", "export ", "_ncclcheck", "if ", "fi", "case ", "esac", "unset ", " "))
               or line == "" for line in text.splitlines())


def test_no_recommendations():
    report = Report(command="preflight", version="0.1.0", started="t")
    assert "No settings recommended" in render_envfile(report)
    assert "export" not in render_envfile(report)
