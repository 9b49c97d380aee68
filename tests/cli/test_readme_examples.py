"""The README is for users: every code block runs as pasted (scripts/readme_examples.py) or says why it cannot here,
its table of commands is the commands table. That every page tells what is true now, not how it got there:
tests/test_docs.py."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ncclcheck.commands import COMMANDS
from ncclcheck_lab import readme_examples as rx
from tests.conftest import REPO, cli_env

README = rx.README.read_text(encoding="utf-8")


def test_every_block_either_runs_or_says_why_not():
    found = rx.examples(README)
    blocks = [e for e in found if "\n" in e.text.rstrip("\n") or e.first.startswith("cat >")]
    runs = {e.first: e for e in found if e.skip is None}
    for must_run in ("ncclcheck preflight", "cat > train.py <<'EOF'", "cat > fail.py <<'EOF'",
                     "cat > hang.py <<'EOF'", "ncclcheck report run.json --html report.html --junit junit.xml",
                     "import ncclcheck", "ncclcheck health --json health.json"):
        assert any(first.startswith(must_run) for first in runs), must_run
    assert any(e.lang == "python" and e.skip is None and "\n" in e.text.strip() for e in found)  # the API block
    multi = [e for e in found if "--master-addr 10.40.0.11" in e.text]
    assert multi and all("several nodes" in e.skip for e in multi)
    assert all(e.skip is None or len(e.skip) > 20 for e in found)  # a reason, not a placeholder
    assert len(blocks) >= 8


def test_every_fenced_block_is_an_example_or_plain_text():
    """No block is left out silently: a fence is a shell or Python block (run or skipped with its reason) or text
    shown as output."""
    fences = re.findall(r"(?m)^```(\w*)\n(.*?)^```", README, flags=re.S)
    assert fences
    found = {e.text for e in rx.examples(README)}
    for lang, body in fences:
        assert lang in rx.SHELL_LANGS + ("python", "text"), lang
        if lang in ("bash", "sh", "shell", "python"):
            assert body in found, body[:80]


def test_blocks_are_found_whole_and_inline_spans_that_wrap():
    text = ("Run `torchrun --nnodes 3\n  --rdzv-backend c10d -m ncclcheck preflight` on every node.\n"
            "```bash\nncclcheck env\nncclcheck env --json x.json  # and save it\n```\n"
            "| `ncclcheck links` | a table cell names a command; it is not an example |\n"
            "```console\n$ ncclcheck env\nsome output\n```\n```python\nimport ncclcheck\nprint(1)\n```\n")
    got = [(e.line, e.lang, e.text) for e in rx.examples(text)]
    assert got == [(1, "bash", "torchrun --nnodes 3 --rdzv-backend c10d -m ncclcheck preflight\n"),
                   (4, "bash", "ncclcheck env\nncclcheck env --json x.json  # and save it\n"),
                   (9, "bash", "ncclcheck env\n"),
                   (13, "python", "import ncclcheck\nprint(1)\n")]


def test_a_block_is_skipped_by_its_code_not_by_a_comment_that_names_a_command():
    assert rx.Example(1, "ncclcheck health --drain --dry-run   # the scontrol commands\n").skip is None
    assert "Slurm" in rx.Example(1, "ncclcheck env\nsrun ncclcheck preflight\n").skip


def test_a_command_that_fails_mid_block_fails_the_block(tmp_path):
    e = rx.Example(1, "false\necho still here\n")
    rc, out = rx.run_one(e, tmp_path, cli_env())
    assert rc == 0 and rx.verdict(e, rc, out) == "a command failed: false"
    ok = rx.Example(1, "false || echo handled\ntrue\n")
    rc, out = rx.run_one(ok, tmp_path, cli_env())
    assert rx.verdict(ok, rc, out) is None


def test_the_commands_table_is_the_commands_table():
    """README's table of commands == `ncclcheck --help`'s commands (commands.py), name and words, in order."""
    section = README[README.index("## Commands"):]
    section = section[:section.index("\n## ")]
    rows = re.findall(r"(?m)^\| `ncclcheck ([a-z-]+)` \| (.*) \|$", section)
    want = [(c.name, c.help) for c in COMMANDS]
    assert rows == want, "\n".join(f"| `ncclcheck {n}` | {h} |" for n, h in want)



@pytest.mark.slow  # about a minute: three demo jobs under torchrun, two nodes on loopback, a short bench
def test_readme_examples_run_as_pasted():
    p = subprocess.run([sys.executable, f"{REPO}/scripts/readme_examples.py"], capture_output=True, text=True,
                       env=cli_env(), timeout=1200)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
    assert ", 0 failed," in p.stdout and "ok    README:" in p.stdout
