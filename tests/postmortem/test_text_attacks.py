"""Text a rank prints can neither hide nor invent a cause (issue 75): each attack through the CLI on one job's log in
which rank 3's InfiniBand completion error is the real fault. Every line a rank prints is the user's: a copy of an
earlier report, a data sample, a hole logrotate left, invisible characters in a quoted line."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

WARN = ("[rank3]:node-b:4411:4502 [3] NCCL WARN NET/IB : Got completion from peer 198.18.0.2<43122> with status=12 "
        "opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:198.18.0.3 remoteGids::ffff:198.18.0.2 hca mlx5_0")


def _job(middle: list, steps: int = 40) -> str:
    lines = [f"[rank{r}]:node-{'ab'[r // 2]}:{4400 + r}:{4400 + r} [{r}] NCCL INFO NCCL version 2.21.5+cuda12.4"
             for r in range(4)]
    for s in range(steps):
        lines += [f"[rank{r}]:[2026-11-28 10:00:{s % 60:02d},123] step {s} | loss 2.{s:03d}" for r in range(4)]
        if s == steps // 2:
            lines += middle
    lines += [WARN, "[rank3]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
              "NCCLUtils.hpp:317, remote process exited or there was a network error, NCCL version 2.21.5"]
    return "\n".join(lines) + "\n"


def _diagnose(tmp_path, data: bytes) -> tuple:
    log = tmp_path / "job.log"
    log.write_bytes(data)
    out = tmp_path / "r.json"
    p = run_cli("diagnose", str(log), "--json", str(out))
    report = json.loads(out.read_text()) if out.exists() else None
    return p, report


def _root(report: dict) -> dict:
    return next(c for c in report["postmortem"]["causes"] if c["cause"])


def _named(p, report) -> None:
    """The real fault named, exit 1, nothing invented."""
    assert p.returncode == 1, p.stdout + p.stderr
    root = _root(report)
    assert root["kind"] == "ib_completion_error" and root["ranks"] == [3], root
    invented = [c for c in report["postmortem"]["causes"] if c["cause"] and c["kind"] != "ib_completion_error"]
    assert not invented, invented


def test_the_log_alone_names_the_fault(tmp_path):
    _named(*_diagnose(tmp_path, _job([]).encode()))


def test_a_rank_printing_the_reports_header_hides_nothing(tmp_path):
    # the first line of ncclcheck's own report, printed by a rank (a copy of an earlier report in its log): the lines
    # after it are the job's, not the report's
    spoof = ["[rank1]:ncclcheck diagnose 2 nodes, 4 ranks, torchrun",
             "[rank1]:previous run's report pasted by the script above"]
    _named(*_diagnose(tmp_path, _job(spoof).encode()))


@pytest.mark.parametrize("sample", [
    "CUDA error: an illegal memory access was encountered", "CUDA out of memory. Tried to allocate 2.00 GiB",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus", "ncclSystemError: System call failed"])
def test_a_sample_a_rank_prints_mid_line_invents_no_cause(tmp_path, sample):
    # a data sample or a model's generated text holds a class's words: it is text the rank printed, not a program's
    # own message
    text = [f'[rank1]:[2026-11-28 10:00:20,123] eval sample 17: text="the forum post said {sample} so I rebooted"']
    _named(*_diagnose(tmp_path, _job(text).encode()))


def test_nul_bytes_in_a_logs_start_are_gaps_not_a_binary_file(tmp_path):
    # logrotate's copytruncate leaves a hole of NULs where the file began; a rank may print one
    data = b"\x00" * 8192 + _job(["[rank2]:a sample with a NUL \x00 inside"]).encode()
    _named(*_diagnose(tmp_path, data))


def test_invisible_characters_never_reach_a_report(tmp_path):
    hidden = "\u061c\u200b\u200c\u200d\u2060\ufeff\u202e"
    warn = WARN.replace("Got completion", f"Got{hidden} completion")
    data = _job([]).replace(WARN, warn).encode()
    log = tmp_path / "job.log"
    log.write_bytes(data)
    for fmt in ("--html", "--markdown", "--json"):
        out = tmp_path / f"r{fmt[2:]}"
        p = run_cli("diagnose", str(log), fmt, str(out))
        assert p.returncode == 1, p.stderr
        written = out.read_text(encoding="utf-8")
        assert not any(c in written for c in hidden), fmt
        assert not any(c in p.stdout for c in hidden)
