"""Output files: unwritable paths are a one-line usage error before the run; files appear whole or not at all."""

from __future__ import annotations

import os
import pathlib

import pytest

from ncclcheck.errors import UsageError
from ncclcheck.render.files import check_writable, write_outputs

from .conftest import load_example


def test_missing_directory(tmp_path):
    with pytest.raises(UsageError, match="does not exist") as err:
        check_writable(str(tmp_path / "nope" / "r.html"))
    assert "\n" not in str(err.value)


def test_a_directory_is_not_a_file(tmp_path):
    with pytest.raises(UsageError, match="is a directory"):
        check_writable(str(tmp_path))


def test_empty_path():
    with pytest.raises(UsageError):
        check_writable("")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_read_only_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(UsageError, match="cannot write"):
            check_writable(str(ro / "r.xml"))
    finally:
        ro.chmod(0o700)


def test_writable_path_leaves_nothing_behind(tmp_path):
    check_writable(str(tmp_path / "r.html"))
    assert list(tmp_path.iterdir()) == []


def test_write_outputs_writes_each_requested_file(tmp_path):
    report = load_example("preflight-fail-3node")
    paths = {k: str(tmp_path / f"out.{k}") for k in ("html", "markdown", "junit", "env_out")}
    written = write_outputs(report, **paths)
    assert written == [os.path.abspath(p) for p in paths.values()]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(os.path.basename(p) for p in paths.values())
    assert (tmp_path / "out.html").read_text().startswith("<!DOCTYPE html>")
    assert (tmp_path / "out.junit").read_text().startswith('<?xml version="1.0" encoding="UTF-8"?>')
    assert "export NCCL_SOCKET_IFNAME='=eth0'" in (tmp_path / "out.env_out").read_text()
    assert "rendezvous.world" in (tmp_path / "out.markdown").read_text()


def test_write_outputs_only_what_was_asked(tmp_path):
    report = load_example("links-slow-node")
    assert write_outputs(report) == []
    assert write_outputs(report, markdown=str(tmp_path / "s.md")) == [str(tmp_path / "s.md")]
    assert [p.name for p in tmp_path.iterdir()] == ["s.md"]


def test_overwrite_is_atomic_and_keeps_nothing_temporary(tmp_path):
    target = tmp_path / "r.md"
    target.write_text("old")
    write_outputs(load_example("links-slow-node"), markdown=str(target))
    assert target.read_text().startswith("## ")
    assert [p.name for p in tmp_path.iterdir()] == ["r.md"]


def test_write_failure_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot write"):
        write_outputs(load_example("links-slow-node"), junit=str(tmp_path / "missing" / "r.xml"))


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_rendering_never_imports_torch(tmp_path):
    import subprocess
    import sys

    example = str(pathlib.Path(__file__).parent / "examples" / "bench-gate-fail.json")
    code = (
        "import json, sys\n"
        "from ncclcheck.model import Report\n"
        "from ncclcheck.render.files import write_outputs\n"
        f"r = Report.from_json(json.load(open({example!r})))\n"
        f"write_outputs(r, html={str(tmp_path / 'r.html')!r}, markdown={str(tmp_path / 'r.md')!r},"
        f" junit={str(tmp_path / 'r.xml')!r}, env_out={str(tmp_path / 'r.env')!r})\n"
        "assert 'torch' not in sys.modules, 'render imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
