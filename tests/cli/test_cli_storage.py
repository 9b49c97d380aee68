"""preflight --shared-dir / --need through the CLI: usage errors exit 2; a --need larger than the free space fails
with storage.space; the JSON validates; nothing is left in the directory."""

from __future__ import annotations

import json
import os

import pytest

from ncclcheck.cli import build_parser, config_from_args
from ncclcheck.errors import UsageError
from ncclcheck.render.validate import schema_problem
from tests.conftest import run_cli


@pytest.mark.parametrize("argv, needle", [
    (["preflight", "--need", "1G"], "--shared-dir"),
    (["preflight", "--shared-dir", "/x", "--need", "lots"], "--need"),
    (["preflight", "--shared-dir", ""], "--shared-dir"),
])
def test_bad_storage_flags_are_usage_errors(argv, needle):
    with pytest.raises(UsageError, match=needle):
        config_from_args(build_parser().parse_args(argv), env={})


def test_flags_reach_the_config():
    cfg = config_from_args(build_parser().parse_args(["preflight", "--shared-dir", "/a", "--shared-dir", "/b",
                                                      "--need", "64M"]), env={})
    assert cfg.storage.dirs == ("/a", "/b") and cfg.storage.need_bytes == 64 << 20


@pytest.mark.slow  # spawns a process
def test_need_above_free_space_fails_and_leaves_the_directory_empty(tmp_path):
    out = tmp_path / "run.json"
    share = tmp_path / "share"
    share.mkdir()
    p = run_cli("preflight", "--shared-dir", str(share), "--need", "1000T", "--json", str(out))
    assert p.returncode == 1, (p.stdout, p.stderr)
    report = json.loads(out.read_text())
    assert schema_problem(report) is None, schema_problem(report)
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["storage.space"]["status"] == "fail" and "--need 1000 TiB" in checks["storage.space"]["summary"]
    assert checks["storage.writable"]["status"] == "pass"
    assert report["nodes"][0]["facts"]["storage"]["dirs"][0]["mount"]["fs_type"]
    assert os.listdir(share) == []
