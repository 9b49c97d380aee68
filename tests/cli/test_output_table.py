"""Every output format of render/formats.py works on every subcommand, `env` and `report` included, or is refused
the same way everywhere (a format that cannot go to stdout refuses '-')."""

from __future__ import annotations

import json

import pytest

from ncclcheck import cli
from ncclcheck.errors import UsageError
from ncclcheck.options import COMMANDS, build_parser, config_from_args
from ncclcheck.render.formats import FORMATS


def test_env_writes_every_format(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NCCLCHECK_LOG_DIR", str(tmp_path / "logs"))
    paths = {name: tmp_path / f"env.{name}" for name in FORMATS}
    argv = ["env"] + [a for name, fmt in FORMATS.items() for a in (fmt.flag, str(paths[name]))]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert json.loads(paths["json"].read_text())["command"] == "env"
    assert paths["html"].read_text().startswith("<!DOCTYPE html>")
    assert "No settings recommended" in paths["env_out"].read_text()
    assert all(p.stat().st_size > 0 for p in paths.values())
    # and `report` renders the saved run to every format again
    again = {name: tmp_path / f"again.{name}" for name in FORMATS}
    argv = ["report", str(paths["json"]), "--quiet"] + [a for name, fmt in FORMATS.items()
                                                        for a in (fmt.flag, str(again[name]))]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert json.loads(again["json"].read_text())["nodes"] == json.loads(paths["json"].read_text())["nodes"]


@pytest.mark.parametrize("command", COMMANDS)
def test_stdout_is_for_the_formats_that_may_go_there(command, tmp_path):
    run = [str(tmp_path / "run.json")] if command in ("report", "diagnose") else []
    if run:
        (tmp_path / "run.json").write_text("{}")
    if command == "watch":  # a watch without a job's master is a usage error of its own
        run = ["--master-addr", "127.0.0.1"]
    for name, fmt in FORMATS.items():
        args = build_parser().parse_args([command, *run, fmt.flag, "-"])
        if fmt.stdout:
            assert config_from_args(args, env={}).output.files == {name: "-"}
        else:
            with pytest.raises(UsageError, match=f"{fmt.flag} cannot go to stdout"):
                config_from_args(args, env={})
