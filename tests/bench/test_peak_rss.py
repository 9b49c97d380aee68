"""ncclcheck_lab.peak_rss: a command's own peak RSS, not the high-water mark of the large process that started it."""

from __future__ import annotations

import os
import subprocess
import sys

from ncclcheck_lab import peak_rss

SMALL = [sys.executable, "-c", "x = b'y' * (32 << 20)"]  # a command that touches 32 MiB


def test_a_small_command_started_by_a_large_process_reads_small(tmp_path):
    big = b"z" * (400 << 20)  # this process's RSS, as a pytest worker grows late in the suite
    p = subprocess.Popen(SMALL)
    _, _, usage = os.wait4(p.pid, 0)
    direct = usage.ru_maxrss * 1024
    done, peak = peak_rss.run(SMALL, str(tmp_path / "rss"), timeout=60)
    del big
    assert direct >= 400 << 20  # what the kernel reports for a child started directly: the parent's mark
    assert done.returncode == 0 and peak is not None
    assert 32 << 20 <= peak < 150 << 20, peak  # the command's 32 MiB and an interpreter, nothing of ours


def test_exit_codes_and_signals_pass_through(tmp_path):
    done, _ = peak_rss.run([sys.executable, "-c", "raise SystemExit(3)"], str(tmp_path / "a"), timeout=60)
    assert done.returncode == 3
    done, _ = peak_rss.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                           str(tmp_path / "b"), timeout=60)
    assert done.returncode == -9
