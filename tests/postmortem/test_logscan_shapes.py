"""A line of a shape that holds nothing to read is passed over by its shape (postmortem/logscan.py's _Template): the
reading must be the one the full way gives, line for line, on every log the tests hold and on generated training
output (prefixes, time stamps, step lines, wrapped lines, tracebacks between them)."""

from __future__ import annotations

import glob
import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclcheck.nccl import endings
from ncclcheck.postmortem import launcher, logscan
from ncclcheck.postmortem.logscan import LogScan
from tests.postmortem.test_logscan import fed

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _reading(data: bytes, shapes: bool, cuts=()) -> dict:
    scan = fed("job.log", data, cuts, shapes)
    parts = {r: (p.lines, p.index, p.hosts, p.host, p.nccl, p.head, p.phase) for r, p in scan.ranks().items()}
    return {"ranks": parts, "order": list(parts), "by_host": scan.nccl_by_host(), "failures": scan.failures(),
            "known": scan.known, "ended": scan.ended, "text": scan.has_text, "lines": scan.lines,
            "launcher": scan.launcher, "worlds": scan.worlds, "tests": (scan.tests_header, scan.tests_rows,
                                                                      scan.tests_end), "program": scan.program_seen,
            "steps_at": scan.steps_at, "note": scan.note(), "last": scan._last_known}


def test_every_log_the_tests_hold_reads_alike_by_shape():
    logs = sorted(glob.glob(os.path.join(TESTS, "**", "*.log"), recursive=True))
    assert len(logs) >= 300
    for path in logs:
        with open(path, "rb") as f:
            data = f.read()
        assert _reading(data, True) == _reading(data, False), path


def test_the_literals_a_shape_is_read_by_hold_no_digit():
    # the shape reads every digit as 0: a literal with a digit would tell two lines of one shape apart
    assert logscan._DIGIT_FREE
    assert not any(re.search(r"\d", lit) for lit in logscan._without_digits(endings.OTHER_LITERALS))
    assert not any(re.search(r"\d", m) for m in logscan._TABLE_MARKS)


def test_a_training_loop_is_read_by_shape():
    body = [f"[rank{r}]:[2026-11-28 10:00:{s % 60:02d},123] [INFO] [train.py:212] step {s} | loss 2.{s:04d} | "
            f"tokens/s {90000 + s * 7 + r}" for s in range(1, 200) for r in range(4)]
    data = ("\n".join(body) + "\n").encode()
    scan = LogScan("job.log")
    scan.feed(data)
    scan.close()
    # a few shapes (the digits' widths), each read the full way once per rank
    assert 0 < len([t for t in scan._templates.values() if t]) < 20
    assert list(scan.ranks()) == [0, 1, 2, 3]
    assert all(p.phase == endings.STEPS for p in scan.ranks().values())
    assert _reading(data, True) == _reading(data, False)


PREFIXES = ["", "[rank0]:", "[rank1]: ", "[rank12]:", "[1,2]<stderr>:", " 3: ", "node-b: [rank2]: ", "[pod/w-1/c] ",
            "[default0]:", "(RayTrainWorker pid=4411, ip=198.18.0.2) ", "2026-11-28T10:00:01.123Z ", "h7: [rank3]:"]
WORDS = ["step 12 | loss 2.3456 | lr 3.0e-04", "epoch 3 iter 45/1000 loss=0.123", "saving checkpoint to /ckpt/step_45",
         "eval: ppl 12.34 acc 0.56 over 1000 samples and a long tail of words so that the line wraps at sixty",
         "Traceback (most recent call last):", '  File "train.py", line 3, in <module>', "RuntimeError: boom 12",
         "torch.distributed.DistBackendError: NCCL error in: x.cpp:93, unhandled system error", "Done!",
         "node-a:12:13 [0] NCCL INFO comm 0x3486dfe0 rank 1 nRanks 4 localRanks 1 - Init COMPLETE",
         "node-a:12:13 [0] NCCL WARN NET/IB : Got completion from peer 198.18.0.2<43122> with status=12",
         "# nThread 1 nGpus 1 minBytes 8 maxBytes 128", "   ", "", "continued words of a wrapped line 77",
         "Root Cause (first observed failure):", "  exitcode  : -9 (pid: 7)", "(RayTrainWorker pid=4411) Started"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True,
          database=None)
@given(st.lists(st.tuples(st.sampled_from(PREFIXES), st.sampled_from(WORDS), st.integers(0, 99)), min_size=1,
                max_size=150), st.lists(st.integers(1, 400), max_size=20), st.sampled_from([1, 2, 64]),
       st.sampled_from([(1 << 14, 1024), (1, 1024), (1, 5), (64, 3)]))
def test_generated_job_output_reads_alike_by_shape(body, cuts, min_run, bytes_window):
    # runs of lines are read at once from chunks of min_run lines (64: as the reader does; 1: every chunk); a read of
    # BYTES_MIN or more goes as bytes (1: every read), its runs looked up RUN_WINDOW lines at a time
    text = "\n".join(p + re.sub(r"\d+", lambda m, k=k: str(int(m.group()) + k), w) for p, w, k in body) + "\n"
    data = text.encode()
    was = logscan.MIN_RUN, logscan.BYTES_MIN, logscan.RUN_WINDOW
    logscan.MIN_RUN, (logscan.BYTES_MIN, logscan.RUN_WINDOW) = min_run, bytes_window
    try:
        assert _reading(data, True, cuts) == _reading(data, False, cuts)
    finally:
        logscan.MIN_RUN, logscan.BYTES_MIN, logscan.RUN_WINDOW = was


def test_a_ray_table_and_its_workers_lines_read_alike():
    states = f"{launcher.STATES_RAY}"
    assert states  # the prefix of a Ray worker is its rank only once the table said so: such lines go the full way
    data = ("(RayTrainWorker pid=4411, ip=198.18.0.2) step 1 loss 2\n" * 3).encode()
    assert _reading(data, True) == _reading(data, False)
