"""scripts/bench_live.py run small (8 responders in one process): its own correctness fields, never its timings.
The hung job: culprit_named=1/1 (the rank that never entered the collective is the root cause), exit=1 (watch's own
exit code), every rank answered; the slow case with a rank that never answers (--slow --silent 1): named=1/1 (the
late rank and nobody else) and named_healthy=0 on the healthy run, the silent rank said not judged in both (the
healthy run a warning), the 7 others answered. In each, bytes were fetched, sim_errors=0 and the script's exit 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.slow  # a spawned responder process, torch's TCPStore, watch's two looks 2 s apart


def _run(*args: str) -> list:
    p = subprocess.run([sys.executable, "scripts/bench_live.py", "--ranks", "8", "--procs", "1", "--timeout", "20",
                        *args], capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return [dict(kv.split("=", 1) for kv in ln.split() if "=" in kv) for ln in p.stdout.strip().splitlines()
            if ln.startswith("ranks=")]


def _whole(row: dict, answered: str = "8/8") -> None:
    assert row["sim_errors"] == "0" and row["answered"] == answered and int(row["bytes_per_rank"]) > 0, row
    assert 0 < float(row["watch_cpu_s_per_1k_ranks"]), row  # watch's own work, printed beside the wall figures
    assert float(row["slowest_answer_s"]) > 0 and "fetch:" in row["phases_s"], row


def test_a_hung_job_of_eight_ranks_names_the_rank_that_never_entered(tmp_path):
    import pstats

    (row,) = _run("--profile", str(tmp_path / "watch.prof"))
    assert row["ranks"] == "8" and row["culprit_named"] == "1/1" and row["exit"] == "1", row
    _whole(row)
    # --profile: watch's own calls, as a profile of its CPU
    funcs = {f"{path}:{name}" for path, _, name in pstats.Stats(str(tmp_path / "watch.prof")).stats}
    assert any(f.endswith("live/watch.py:watch") for f in funcs), sorted(funcs)[:20]
    # ... and its threads' (the phase sampling runs on one of watch's pool threads)
    assert any(f.endswith("live/straggle.py:sample_phases") for f in funcs), sorted(f for f in funcs if "live/" in f)


def test_the_slow_case_with_a_silent_rank_names_the_late_rank_and_says_the_silent_one_unjudged():
    p = subprocess.run([sys.executable, "scripts/bench_live.py", "--ranks", "8", "--procs", "1", "--timeout", "5",
                        "--slow", "--silent", "1"], capture_output=True, text=True, cwd=REPO, env=cli_env(),
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    slow, healthy = [dict(kv.split("=", 1) for kv in ln.split() if "=" in kv) for ln in p.stdout.splitlines()
                     if ln.startswith("ranks=")]
    assert slow["case"] == "slow" and slow["named"] == "1/1" and slow["live_slow"] == "fail", slow
    assert slow["silent"] == "1" and slow["said_unjudged"] == "1/1", slow
    assert healthy["case"] == "healthy" and healthy["named_healthy"] == "0", healthy
    assert healthy["said_unjudged"] == "1/1" and healthy["live_slow"] == "warn", healthy  # a rank not read: never
    # "nothing slow"
    _whole(slow, "7/8")
    _whole(healthy, "7/8")
