# ruff: noqa: E501  (a log line stays one line, as the program prints it)
"""The bounds docs/trust.md states for reading logs, each as the code enforces it (postmortem/inputs.py): a log's
head and tail past MAX_TEXT_BYTES, its middle skipped for the time past READ_SECONDS, MAX_TOTAL_BYTES in all; what
was not read is said in the report, and the failure at the end is still named. The sizes are made small here so the
files are too; the rule is the one a 2 GiB file meets."""

from __future__ import annotations

import pytest

from ncclcheck.postmortem import inputs
from ncclcheck.postmortem.diagnose import diagnose

KIB = 1 << 10
HEAD = "".join(f"node-a:{100 + r}:{100 + r} [{r}] NCCL INFO comm 0x1 rank {r} nRanks 2 localRanks 2 - Init COMPLETE\n"
               for r in range(2))
END = ("[rank1]:node-a:101:120 [1] NCCL WARN NET/IB : Got completion from peer 198.18.0.2<43122> with status=12 "
       "opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:198.18.0.1 remoteGids::ffff:198.18.0.2 hca mlx5_0\n")


def _log(path, steps: int = 40_000) -> int:
    """A 2-rank job's output: NCCL's init (which process is which rank), a training loop, the failure at its end."""
    body = "".join(f"[rank{s % 2}]:step {s} | loss 2.{s % 9999:04d}\n" for s in range(steps))
    path.write_text(HEAD + body + END)
    return path.stat().st_size


def _report(paths) -> dict:
    rep = diagnose([str(p) for p in paths])
    return {c.id: c for c in rep.checks}


def _named_at_the_end(checks) -> bool:
    root = checks["postmortem.root_cause"]
    return root.evidence.get("kind") == "ib_completion_error" and "host node-a" in root.summary


def test_a_log_past_its_size_bound_is_read_as_its_head_and_tail(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "MAX_TEXT_BYTES", 256 * KIB)
    monkeypatch.setattr(inputs, "HEAD_BYTES", 64 * KIB)
    monkeypatch.setattr(inputs, "CHUNK", 16 * KIB)
    size = _log(tmp_path / "job.log")
    checks = _report([tmp_path / "job.log"])
    assert _named_at_the_end(checks)  # the host comes from the head, the failure from the tail
    said = checks["postmortem.inputs"].summary
    skipped = size - 256 * KIB
    assert f"the middle {skipped:,} bytes not read" in said and "time" not in said


def test_a_log_whose_reading_time_is_spent_is_read_to_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "READ_SECONDS", 0.0)
    monkeypatch.setattr(inputs, "HEAD_BYTES", 64 * KIB)
    monkeypatch.setattr(inputs, "MIN_TAIL_BYTES", 64 * KIB)
    monkeypatch.setattr(inputs, "CHUNK", 64 * KIB)
    size = _log(tmp_path / "job.log")
    checks = _report([tmp_path / "job.log"])
    assert _named_at_the_end(checks)
    ev = checks["postmortem.inputs"].evidence["partly"]
    assert len(ev) == 1 and "(the time to read logs was spent)" in ev[0]["note"]
    skipped = int(ev[0]["note"].split("the middle ")[1].split(" bytes")[0].replace(",", ""))
    assert skipped == size - 64 * KIB - 64 * KIB  # the head and the last MIN_TAIL_BYTES, nothing else
    assert "time to read logs was spent" in checks["postmortem.inputs"].summary


def test_a_log_read_within_its_time_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "HEAD_BYTES", 64 * KIB)
    monkeypatch.setattr(inputs, "MIN_TAIL_BYTES", 64 * KIB)
    monkeypatch.setattr(inputs, "CHUNK", 64 * KIB)
    _log(tmp_path / "job.log")
    checks = _report([tmp_path / "job.log"])
    assert _named_at_the_end(checks) and checks["postmortem.inputs"].evidence["partly"] == []


@pytest.mark.parametrize("n", [3])
def test_files_past_the_total_bound_are_listed_as_not_read(tmp_path, monkeypatch, n):
    monkeypatch.setattr(inputs, "MAX_TOTAL_BYTES", 64 * KIB)
    for i in range(n):
        _log(tmp_path / f"job{i}.log", steps=4_000)
    checks = _report(sorted(tmp_path.glob("*.log")))
    refused = checks["postmortem.inputs"].evidence["refused"]
    assert [r["path"].rsplit("/", 1)[1] for r in refused] == ["job1.log", "job2.log"]
    assert all("were read already" in r["why"] for r in refused)
