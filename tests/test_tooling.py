"""The tools CI runs see the whole package: `ruff check ncclcheck` lints every .py under ncclcheck/ (a folder named
like one of ruff's default excludes, as `dist` was, would silently drop out), and pytest collects every test file
under tests/."""

from __future__ import annotations

import os
import pathlib
import re
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


# What CI's `ruff check` is given (.ci/run): the product, the code behind scripts/, the suite and the entry points.
LINTED = ("ncclcheck", "ncclcheck_lab", "tests", "scripts")


def test_ruff_lints_every_python_file_of_the_package():
    out = subprocess.run([*_ruff(), "check", "--show-files", *LINTED], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    shown = {pathlib.Path(line.strip()).resolve() for line in out.stdout.splitlines() if line.strip()}
    every = {p.resolve() for d in LINTED for p in (ROOT / d).rglob("*.py")}
    # a command in scripts/ without .py (scripts/netlab) is Python too: its first line says so
    every |= {p.resolve() for p in (ROOT / "scripts").iterdir()
              if p.is_file() and p.suffix == "" and p.read_text(errors="replace").startswith("#!/usr/bin/env python")}
    assert {p.name for p in every} >= {"cli.py", "bench_scale.py", "netlab"}
    assert every - shown == set(), sorted(str(p.relative_to(ROOT)) for p in every - shown)
    assert "ncclcheck_lab" in (ROOT / ".ci" / "run").read_text().split("ruff check", 1)[1].splitlines()[0]


def test_no_code_edits_sys_path_to_find_scripts_or_the_lab():
    """scripts/ are thin entry points over the importable package ncclcheck_lab; tests import it normally. A
    sys.path edit makes code that works only from one directory (and hides a missing package entry)."""
    edits = [f"{p.relative_to(ROOT)}:{i}" for d in ("scripts", "ncclcheck_lab", "tests")
             for p in sorted((ROOT / d).rglob("*")) if p.is_file() and (p.suffix == ".py" or p.parent.name == "scripts")
             for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
             if re.search(r"sys\.path\s*(\.(insert|append|extend)\(|\[|\+?=)", line)]
    assert edits == []


def test_every_script_is_a_thin_entry_point_over_ncclcheck_lab():
    """Each command in scripts/ names its module and goes through scripts/_entry.py (the one import-or-say-why),
    and that module exists with a main."""
    import importlib

    for p in sorted((ROOT / "scripts").iterdir()):
        if p.suffix == ".sh" or p.name == "_entry.py" or not p.is_file():
            continue
        text = p.read_text()
        m = re.search(r'^    run\("([\w.]+)"\)$', text, re.M)
        assert "from _entry import run" in text and m and len(text.splitlines()) <= 10, p.name
        assert callable(importlib.import_module(f"ncclcheck_lab.{m.group(1)}").main), p.name


def test_a_script_in_a_checkout_that_is_not_importable_says_how_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-S", str(ROOT / "scripts" / "bench_logs.py"), "--help"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "cannot import ncclcheck" in out.stderr, out.stderr


def _whole_suite_collected(config) -> bool:
    """This session was given the whole of tests/ (CI's run, or a bare `pytest`), not a file or a node id."""
    tests = (ROOT / "tests").resolve()
    return any(pathlib.Path(a.split("::")[0]).resolve() in (tests, ROOT.resolve()) for a in config.args)


def test_pytest_collects_every_test_file(request):
    # every tier: the long tests (scripts/long_tests.py) are deselected from CI's run, never from the suite. When this
    # session collected the whole suite its own list is read (conftest keeps it from before any deselection);
    # otherwise the suite is collected again (about 20 s on a loaded machine, 30 on CI's)
    from tests.conftest import COLLECTED_FILES

    if _whole_suite_collected(request.config) and COLLECTED_FILES in request.config.stash:
        collected = {str(pathlib.Path(p).relative_to(ROOT)) for p in request.config.stash[COLLECTED_FILES]}
    else:
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m",
                              "long or not long", "tests"],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
        collected = {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}
    files = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")}
    assert files and files - collected == set(), sorted(files - collected)


def cycles(edges: dict) -> list:
    """The strongly connected components of more than one module (Tarjan): each is an import cycle."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    found: list = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_cycles_finds_a_cycle_and_none_in_a_chain():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycle_between_the_packages_modules():
    # lazy imports inside functions count (grimp reads them all): a cycle means two modules that each need the other,
    # which the layers contract cannot see inside one layer (rendezvous/serve.py and store.py were one)
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("ncclcheck")
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith("ncclcheck")}
             for m in graph.modules}
    assert cycles(edges) == []
