"""Issue 77, item 2: words made from what just happened, not from a template, each through the CLI: watch's fix for a
rank whose kind it could not tell, a node's pointer to a full report no node wrote, an interrupted bench, and
consequence rows that name only other ranks' lines."""

from __future__ import annotations

import json
import socket

import pytest

from tests.conftest import run_cli


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_watch_fix_for_an_untold_rank_says_why_this_look_could_not_tell_and_never_to_run_watch(monkeypatch, tmp_path):
    """A gloo job of one collective a step (DDP with one bucket), rank 5 computing half a step longer: watch names
    rank 5 and cannot tell compute from communication (its lateness falls after its work either way, and gloo records
    no collective's own time). Its fix says so and what would tell (NCCL with TORCH_NCCL_ENABLE_TIMING=1, py-spy on
    that rank), never "run `ncclcheck watch`", which is what just ran, nor a longer look, which would not help."""
    import torch.distributed as dist

    from ncclcheck_lab import livesim, slowsim

    # every step's collective the same one: the simulated job's two bucket sizes made one
    monkeypatch.setattr(slowsim, "_SIZES", ([[1024]], [[1024]]))
    port = _free_port()
    store = dist.TCPStore("127.0.0.1", port, None, True)
    job = slowsim.Job(world=6, per_host=2, step_us=40_000, colls=1, slow={5: (0, 0.5)}, jitter=0.02, steps=400)
    ranks = livesim.start(livesim.laid(job, 40), list(range(job.world)), port)
    try:
        assert all(r.registered.wait(30) for r in ranks)
        p = run_cli("watch", "--master-addr", "127.0.0.1", "--master-port", str(port), "--timeout", "10",
                    "--json", str(tmp_path / "w.json"), timeout=120)
    finally:
        for r in ranks:
            r.close()
        del store
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    doc = json.loads((tmp_path / "w.json").read_text())
    slow = next(c for c in doc["checks"] if c["id"] == "live.slow")
    f = slow["evidence"]["named"][0]
    assert (f["rank"], f["kind"], f["untold"], f["backend"]) == (5, "untold", "no pattern", "gloo"), f
    fix = slow["fix"]
    assert "`ncclcheck watch`" not in fix and "watch --follow" not in fix, fix
    assert "this look saw one collective a step" in fix and "gloo records no collective's own time" in fix, fix
    assert "NCCL with TORCH_NCCL_ENABLE_TIMING=1" in fix and "`py-spy dump --pid PID` on rank 5 (host h3)" in fix, fix
    console = " ".join(p.stdout.split())  # the console's fix line says the same, wrapped
    assert "fix: tell whether rank 5 (host h3) computes or communicates late: this look saw one collective" in console


@pytest.mark.parametrize("command", ["preflight", "bench"])
def test_a_node_that_never_reached_node_0_says_its_line_is_the_whole_report(command, tmp_path):
    """A wrong master address: nothing listens there, no node 0 ever ran, so node 1's line must not send the user to
    "global rank 0's console" nor say that node 0 writes the JSON asked for."""
    out = tmp_path / "pf.json"
    p = run_cli(command, "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port",
                str(_free_port()), "--timeout", "2", "--json", str(out), timeout=120)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    line = next(ln for ln in (p.stdout + p.stderr).splitlines() if f"ncclcheck {command}: node 1 (" in ln
                and "exit 1" in ln)
    assert "this line is the whole report: no word from node 0 reached this node" in line, line
    assert "rank 0's console" not in line and f"{out} not written: node 0 writes it" in line, line
    assert "root cause on node 1: [rendezvous.master_reachable]" in line, line
    assert not out.exists()


@pytest.mark.slow
def test_a_node_that_read_node_0s_verdict_points_at_node_0s_console(tmp_path):
    """Node 2 of 3 never starts: node 0 decides that the world did not form and prints why; node 1 read that verdict,
    so its line sends the user to node 0's console, where the full report is."""
    import subprocess
    import sys

    from tests.conftest import REPO, cli_env

    port = str(_free_port())
    world = ("--nnodes", "3", "--master-addr", "127.0.0.1", "--master-port", port, "--timeout", "8")
    node0 = subprocess.Popen([sys.executable, "-m", "ncclcheck", "preflight", *world, "--node-rank", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cli_env(), cwd=REPO)
    try:
        p = run_cli("preflight", *world, "--node-rank", "1", timeout=120)
    finally:
        shown, _ = node0.communicate(timeout=120)
    assert node0.returncode == 1 and "node rank(s) 2 never joined" in shown, shown[-3000:]
    line = next(ln for ln in (p.stdout + p.stderr).splitlines() if "ncclcheck preflight: node 1 (" in ln
                and "exit 1" in ln)
    assert "full report on global rank 0's console (node 0" in line and "whole report" not in line, line
