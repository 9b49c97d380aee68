"""Rows reach a pipe as they are measured (issue 24, item 2): `ncclcheck bench --sizes 1M-64M --ops
all_reduce,all_gather | ...` shows its first row while the sweep still runs, as nccl-tests does. Before the fix a
pipe received every line at exit, so a Slurm job log stayed empty and a job killed at its time limit left nothing.

And the JSON of a run stopped by Ctrl-C never says it succeeded (item 3): status fail, exit_code 130."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading

import jsonschema
import pytest

from ncclcheck.render.words import PLACEMENTS
from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.slow  # spawns torch ranks

ROW = re.compile(r"^\s+\d+\*?\s+\d+\s+(" + "|".join(p.word for p in PLACEMENTS.values()) + r")\s")


def test_first_row_reaches_a_pipe_before_the_sweep_ends(tmp_path):
    # stderr goes to a file: the rest of stdout is then read through the same buffered reader as the first row (a
    # communicate() reads the pipe's fd and loses the lines that reader had already buffered: once, under a loaded
    # machine, the second row arrived with the first and only 13 of 14 rows were counted)
    with open(tmp_path / "stderr", "w+", encoding="utf-8") as err:
        p = subprocess.Popen([sys.executable, "-m", "ncclcheck", "bench", "--sizes", "1M-64M", "--ops",
                              "all_reduce,all_gather"], stdout=subprocess.PIPE, stderr=err, text=True,
                             cwd=REPO, env=cli_env({"NCCLCHECK_LOG_DIR": str(tmp_path)}))
        bound = threading.Timer(300, p.kill)  # nothing hangs: the reads below end when the process does
        bound.start()
        try:
            seen = []
            for line in p.stdout:  # blocks until a whole line arrives: a block-buffered stdout would give none here
                seen.append(line)
                if ROW.match(line):
                    break
            assert seen and ROW.match(seen[-1]), (seen, p.poll())
            assert p.poll() is None, "the first row arrived only when the run ended"
            assert seen[-1].startswith("   1048576") and seen[0].startswith("all_reduce  type float32")
            rest = p.stdout.read()
            p.wait()
        finally:
            bound.cancel()
            if p.poll() is None:
                p.kill()
            p.stdout.close()
        err.seek(0)
        assert p.returncode == 0, err.read()[-3000:]
    out = "".join(seen) + rest
    assert sum(1 for ln in out.splitlines() if ROW.match(ln)) == 14  # 7 sizes x 2 ops, each printed once
    assert all(ln == ln.rstrip() for ln in out.splitlines())


def test_an_interrupted_bench_json_says_fail_and_exit_130(tmp_path):
    from tests.cli.test_interrupt import _interrupted_run

    doc = _interrupted_run(tmp_path, ["bench", "--sizes", "1K-64M", "--iters", "400"], tmp_path / "run.json")
    assert (doc["status"], doc["exit_code"]) == ("fail", 130)
    with open(f"{REPO}/ncclcheck/schema/report-1.schema.json", encoding="utf-8") as f:
        jsonschema.validate(doc, json.load(f))
