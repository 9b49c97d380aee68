"""A pipeline-parallel gloo job under torchrun on loopback (4 stages) that hangs in its sends and receives, watched
live (issue 46): gloo's flight recorder records no send or recv, so watch names the waiting send from the stage's own
frame (live/calls.py) and the stage that never posted the recv; `diagnose` on watch's --dump says the same. The dumps
of one such run are kept in tests/live/fixtures/pipeline-<scenario> (test_watch.py-style, read in the default suite).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, cli_env, free_port, kill_job, run_cli

WORKER = os.path.join(os.path.dirname(__file__), "fixtures", "pipe_worker.py")
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
NPROC = 4
TIMEOUT = 10
# scenario -> (the root cause's kind, its ranks, words its text must hold)
EXPECT = {
    "skip": ("p2p_unmatched", [2], ["rank 1 (host ", "waits in send (1024 float32) to rank 2", "rank 2 never posted "
                                    "the recv from rank 1 and waits in all_reduce #6 of default_pg"]),
    "cycle": ("p2p_cycle", [0, 1, 2, 3], ["a cycle of point-to-point waits: rank 0 waits in send (1024 float32) to "
                                          "rank 1 -> rank 1 waits in send", "to rank 0: each waits for the next"]),
}


def _check(doc: dict, scenario: str) -> None:
    kind, ranks, words = EXPECT[scenario]
    root = next(c for c in doc["postmortem"]["causes"] if c["cause"])
    assert (root["kind"], root["ranks"]) == (kind, ranks), doc["postmortem"]["causes"]
    for w in words:
        assert w in root["text"], root["text"]


@pytest.mark.slow
# CI: the skipped recv live; the cycle from its kept dumps (test_the_kept_dumps_of_a_pipeline_hang_name_it) and live in
# scripts/long_tests.py (each live case is a 4-rank torchrun job of ~15 s)
@pytest.mark.parametrize("scenario", [pytest.param(s, marks=pytest.mark.long) if s == "cycle" else s
                                      for s in sorted(EXPECT)])
def test_watch_names_the_send_that_waits_and_the_stage_that_never_received(tmp_path, scenario, validate_report):
    port, ready = free_port(), tmp_path / "ready"
    ready.mkdir()
    env = cli_env({"TORCH_FR_BUFFER_SIZE": "2000", "HANG_S": "90"})
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node",
                            str(NPROC), "--master-addr", "127.0.0.1", "--master-port", str(port), WORKER, scenario,
                            str(ready)], env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        end = time.monotonic() + 120
        while len(os.listdir(ready)) < NPROC and time.monotonic() < end and job.poll() is None:
            time.sleep(0.2)
        assert len(os.listdir(ready)) == NPROC, job.stdout.read().decode()[-2000:] if job.poll() is not None else ""
        time.sleep(2)  # the stages reach their sends and receives
        dump = tmp_path / "dump"
        p = run_cli("watch", "--master-addr", "127.0.0.1", "--master-port", str(port), "--timeout", str(TIMEOUT),
                    "--json", "-", "--dump", str(dump), timeout=3 * TIMEOUT + 60)
        doc = validate_report(p.stdout)
        assert job.poll() is None, "the job must still run when watch answers"
        assert p.returncode == 1, p.stdout[-3000:]
        _check(doc, scenario)
        later = run_cli("diagnose", str(dump), "--json", "-", timeout=60)
        assert json.loads(later.stdout)["postmortem"]["verdict"] == doc["postmortem"]["verdict"]
        keep = os.environ.get("NCCLCHECK_KEEP_PIPELINE")  # refresh the kept fixtures: NCCLCHECK_KEEP_PIPELINE=1
        if keep:
            out = os.path.join(FIXTURES, f"pipeline-{scenario}")
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(dump, out)
    finally:
        kill_job(job)


@pytest.mark.parametrize("scenario", sorted(EXPECT))
def test_the_kept_dumps_of_a_pipeline_hang_name_it(scenario):
    """What watch --dump wrote while a real 4-stage gloo pipeline hung (the slow test above, kept)."""
    p = run_cli("diagnose", os.path.join(FIXTURES, f"pipeline-{scenario}"), "--json", "-", timeout=60)
    assert p.returncode == 1
    _check(json.loads(p.stdout), scenario)
