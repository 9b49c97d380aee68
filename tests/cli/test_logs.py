"""One log per run in a predictable directory, written only when there is something to log, the last 20 kept."""

from __future__ import annotations

import os

import pytest

from ncclcheck.cli import LOG_KEEP, log_dir
from tests.conftest import REPO, run_cli


def test_log_dir_is_predictable():
    assert log_dir({"NCCLCHECK_LOG_DIR": "/a/b"}) == "/a/b"
    assert log_dir({"XDG_STATE_HOME": "/state"}) == "/state/ncclcheck"
    assert log_dir({}) == os.path.join(os.path.expanduser("~"), ".local", "state", "ncclcheck")


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_a_clean_run_leaves_no_log_and_old_logs_are_pruned(tmp_path):
    for i in range(LOG_KEEP + 5):
        f = tmp_path / f"ncclcheck-20250101-0000{i:02d}-{i}.log"
        f.write_text("old\n")
        os.utime(f, (1_700_000_000 + i, 1_700_000_000 + i))
    example = os.path.join(REPO, "tests", "render", "examples", "preflight-pass-2node.json")
    p = run_cli("report", example, "--quiet", env={"NCCLCHECK_LOG_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    logs = sorted(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    assert len(logs) <= LOG_KEEP and all((tmp_path / n).read_text() == "old\n" for n in logs)
    assert "ncclcheck-20250101-000000-0.log" not in logs  # the oldest went first
    assert str(tmp_path) not in p.stdout + p.stderr  # no path printed: the log holds nothing to look at


@pytest.mark.slow
def test_pruning_spares_the_logs_of_runs_still_going(tmp_path):
    # 16 lab hosts on one machine start ncclcheck at once: more than LOG_KEEP runs in flight in one directory.
    import subprocess
    import sys
    import time

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        now = time.time()
        for i in range(LOG_KEEP + 5):
            pid = live.pid if i == 0 else 2_000_000_000 + i  # the oldest is in flight; the others' pids are gone
            f = tmp_path / f"ncclcheck-20250101-0000{i:02d}-{pid}.log"
            f.write_text("old\n")
            (tmp_path / f"ncclcheck-20250101-0000{i:02d}-{pid}.d").mkdir()
            os.utime(f, (now - 100 + i, now - 100 + i))
        example = os.path.join(REPO, "tests", "render", "examples", "preflight-pass-2node.json")
        p = run_cli("report", example, "--quiet", env={"NCCLCHECK_LOG_DIR": str(tmp_path)})
        assert p.returncode == 0, p.stderr
        names = os.listdir(tmp_path)
        assert f"ncclcheck-20250101-000000-{live.pid}.log" in names  # in flight: kept, with its side directory
        assert f"ncclcheck-20250101-000000-{live.pid}.d" in names
        assert "ncclcheck-20250101-000001-2000000001.log" not in names  # the oldest finished run went
    finally:
        live.kill()
        live.wait()
