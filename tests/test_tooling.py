"""The tools CI runs see the whole package: `ruff check ncclcheck` lints every .py under ncclcheck/ (a folder named
like one of ruff's default excludes, as `dist` was, would silently drop out), and pytest collects every test file
under tests/."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parents[1]


def _ruff() -> list:
    probe = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "ruff"]
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.skip("ruff is not installed (.ci/run installs it)")


def test_ruff_lints_every_python_file_of_the_package():
    out = subprocess.run([*_ruff(), "check", "--show-files", "ncclcheck"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    shown = {pathlib.Path(line.strip()).resolve() for line in out.stdout.splitlines() if line.strip().endswith(".py")}
    every = {p.resolve() for p in (ROOT / "ncclcheck").rglob("*.py")}
    assert every and every - shown == set(), sorted(str(p.relative_to(ROOT)) for p in every - shown)


@pytest.mark.slow  # collects the whole suite (about 20 s)
def test_pytest_collects_every_test_file():
    # every tier: the long tests (scripts/long_tests.py) are deselected from CI's run, never from the suite
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m",
                          "long or not long", "tests"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    collected = {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}
    files = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")}
    assert files and files - collected == set(), sorted(files - collected)
