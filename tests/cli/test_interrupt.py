"""Ctrl-C to the whole process group during a bench: partial JSON written, exit 130, no traceback from any rank."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.slow


def _ranks_started(pid: int) -> bool:
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    return sum(1 for k in kids if "spawn" in " ".join(k.cmdline())) >= 2


def _sigint_as_on_a_terminal() -> None:
    # A shell without job control starts background commands (CI may be one) with SIGINT ignored, and an ignored
    # SIGINT is inherited: give the child the disposition it has when a user runs it and presses Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted_run(tmp_path, args: list, out, ready=_ranks_started) -> dict:
    """Start `ncclcheck ARGS --json OUT`, send SIGINT to its process group once `ready(pid)` (default: its ranks
    run), and check what a user must see: exit 130, no traceback from any rank, and a partial report that is not
    PASS."""
    p = subprocess.Popen([sys.executable, "-m", "ncclcheck", *args, "--json", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                         env=cli_env({"NCCLCHECK_LOG_DIR": str(tmp_path)}), start_new_session=True,
                         preexec_fn=_sigint_as_on_a_terminal)
    try:
        end = time.monotonic() + 90
        while not ready(p.pid) and time.monotonic() < end and p.poll() is None:
            time.sleep(0.2)
        assert p.poll() is None, p.communicate()
        time.sleep(1.0)  # the ranks are importing torch or sweeping; either way the agent owns the signal
        os.killpg(p.pid, signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    doc = json.loads(out.read_text())
    assert doc["partial"] is True and doc["status"] != "pass", doc["status"]
    return doc


def test_ctrl_c_writes_partial_json_and_exits_130(tmp_path):
    # Enough work that the sweep is still running when the signal arrives.
    doc = _interrupted_run(tmp_path, ["bench", "--sizes", "1K-64M", "--iters", "400", "--ops", "all_reduce,all_gather"],
                           tmp_path / "run.json")
    cov = [c for c in doc["checks"] if c["id"] == "bench.coverage"][0]
    assert cov["evidence"]["not_measured"], cov
    assert all("interrupted" in m["reason"] for m in cov["evidence"]["not_measured"]), cov


def test_ctrl_c_during_links_writes_partial_json_and_exits_130(tmp_path):
    _interrupted_run(tmp_path, ["links", "--nproc-per-node", "3", "--size", "64M", "--iters", "200"],
                     tmp_path / "links.json")


def _listening(pid: int, port: int) -> bool:
    try:
        return any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
                   for c in psutil.Process(pid).net_connections())
    except psutil.NoSuchProcess:
        return False


def test_ctrl_c_while_preflight_waits_for_nodes_writes_partial_json_and_exits_130(tmp_path):
    # Node 0 of a 2-node world whose node 1 never comes: it hosts the store and waits for the join.
    import socket

    with socket.socket() as s:  # a free port on loopback
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    doc = _interrupted_run(tmp_path, ["preflight", "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
                                      "--master-port", str(port), "--timeout", "60"], tmp_path / "pf.json",
                           ready=lambda pid: _listening(pid, port))
    world = [c for c in doc["checks"] if c["id"] == "rendezvous.world"]
    assert world and "interrupted (Ctrl-C)" in world[0]["summary"]
    assert any(c["id"] == "net.interfaces" for c in doc["checks"])  # this node's own checks are kept
