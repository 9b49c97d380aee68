"""`ncclcheck watch` on a real NCCL job whose GPU is stuck in a kernel before a collective (issue 33): named live as
"called, never started on its GPU" while the job still runs. One GPU: a 1-rank NCCL world under torchrun, armed with
ncclcheck.arm (which sets TORCH_NCCL_ENABLE_TIMING=1, so the flight recorder tells scheduled from started). Skips
without a CUDA GPU; docs/gpu.md records its run on a lent H100. GPU_CAPTURE_OUT=DIR keeps watch's report and dump."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, cli_env, free_port, kill_job, run_cli
from tests.live.test_live_job import _alive

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with torch CUDA")]

WORKER = os.path.join(REPO, "tests", "postmortem", "fixtures", "gpu", "gpu_worker.py")
TIMEOUT = 10


def test_watch_names_the_rank_whose_gpu_never_started_the_collective(tmp_path):
    port, armed = free_port(), tmp_path / "armed"
    armed.mkdir()
    # the watchdog's bound is far past the test's, so the job is alive and stuck when watch looks
    env = cli_env({"CAPTURE_DIR": str(armed), "CAPTURE_PG_TIMEOUT_S": "600"})
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "1",
                            "--master-addr", "127.0.0.1", "--master-port", str(port), WORKER, "watched"],
                           env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        end = time.monotonic() + 120
        while not (armed / "READY.0").exists() and time.monotonic() < end and job.poll() is None:
            time.sleep(0.2)
        assert (armed / "READY.0").exists(), job.stdout.read().decode()[-3000:] if job.poll() is not None else ""
        time.sleep(2)  # the all_reduce is enqueued behind the sleeping kernel
        t0 = time.monotonic()
        p = run_cli("watch", "--master-addr", "127.0.0.1", "--master-port", str(port), "--timeout", str(TIMEOUT),
                    "--json", "-", "--dump", str(tmp_path / "dump"), timeout=3 * TIMEOUT + 60)
        took = time.monotonic() - t0
        keep = os.environ.get("GPU_CAPTURE_OUT")
        if keep:
            os.makedirs(keep, exist_ok=True)
            with open(os.path.join(keep, "watch.json"), "w") as f:
                f.write(p.stdout)
            with open(os.path.join(keep, "watch.stderr"), "w") as f:
                f.write(p.stderr)
            shutil.copytree(tmp_path / "dump", os.path.join(keep, "dump"), dirs_exist_ok=True)
        doc = json.loads(p.stdout)
        pid = int((armed / "READY.0").read_text())
        assert job.poll() is None and _alive(pid), "the job must still run when watch answers"
        assert p.returncode == 1, p.stderr
        root = next(c for c in doc["checks"] if c["id"] == "postmortem.root_cause")
        assert root["status"] == "fail" and root["evidence"]["ranks"] == [0], root
        assert "called all_reduce #6" in root["summary"] and "its GPU never started it" in root["summary"], root
        assert took < TIMEOUT + 10, f"watch answered after {took:.1f} s"
    finally:
        kill_job(job)
