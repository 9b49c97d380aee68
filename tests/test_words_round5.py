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
