"""The README's examples, run literally in a fresh temporary directory (scripts/readme_examples.py): the ones that
make sense on one machine must work as pasted; the others are listed with the reason each is skipped."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ncclcheck_lab import readme_examples as rx
from tests.conftest import REPO, cli_env


def test_every_example_either_runs_or_says_why_not():
    found = rx.examples(rx.README.read_text(encoding="utf-8"))
    texts = {e.text: e for e in found}
    for must_run in ("ncclcheck preflight", "ncclcheck env", "ncclcheck report RUN.json --html out.html",
                     "ncclcheck --help"):
        assert must_run in texts and texts[must_run].skip is None, must_run
    assert any(e.python and e.skip is None for e in found)  # the Python API line runs too
    multi = [e for e in found if "--master-addr 10.40.0.11" in e.text]
    assert multi and all("several nodes" in e.skip for e in multi)
    assert all(e.skip is None or len(e.skip) > 20 for e in found)  # a reason, not a placeholder


def test_inline_examples_that_wrap_across_lines_are_found():
    text = ("Run `torchrun --nnodes 3\n  --rdzv-backend c10d -m ncclcheck preflight` on every node.\n"
            "```bash\n$ ncclcheck env\n```")
    got = [(e.line, e.text) for e in rx.examples(text)]
    assert got == [(1, "torchrun --nnodes 3 --rdzv-backend c10d -m ncclcheck preflight"), (4, "ncclcheck env")]


@pytest.mark.slow  # about a minute: the default bench and links sweeps run as the README shows them
def test_readme_examples_run_as_pasted():
    p = subprocess.run([sys.executable, f"{REPO}/scripts/readme_examples.py"], capture_output=True, text=True,
                       env=cli_env(), timeout=1200)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
    assert ", 0 failed," in p.stdout and "ok    README:" in p.stdout
