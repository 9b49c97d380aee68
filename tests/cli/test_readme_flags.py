"""The README and the parsers agree: every flag the README shows after `ncclcheck COMMAND` exists on that command,
and the output flags it says work on every command do (render/formats.py's table, on every subcommand)."""

from __future__ import annotations

import pathlib
import re

import pytest

from ncclcheck.options import COMMANDS, build_parser, flags_of, subparser
from ncclcheck.render.formats import FORMATS

ROOT = pathlib.Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CALL = re.compile(r"ncclcheck (" + "|".join(COMMANDS) + r")\b([^`\n]*)")


def readme_calls() -> list:
    """(command, flags) for every `ncclcheck COMMAND ...` in the README, up to the end of its code span or line."""
    return [(m.group(1), re.findall(r"(?<![\w-])--[a-z][a-z-]*", m.group(2))) for m in CALL.finditer(README)]


def test_the_readme_shows_commands_with_flags():
    calls = readme_calls()
    assert {c for c, _ in calls} >= {"preflight", "bench", "recommend", "report", "env"}
    assert sum(len(f) for _, f in calls) >= 10


@pytest.mark.parametrize("command, flags", readme_calls())
def test_every_flag_the_readme_shows_exists(command, flags):
    assert set(flags) <= flags_of(command), (command, sorted(set(flags) - flags_of(command)))


def test_output_flags_work_on_every_command_as_the_readme_says():
    reports = README[README.index("## Reports"):]
    reports = reports[:reports.index("\n## ")]
    for fmt in FORMATS.values():
        assert f"`{fmt.flag}`" in reports, fmt.flag
        for command in COMMANDS:
            assert fmt.flag in flags_of(command), (command, fmt.flag)
    assert "work on every command" in reports


def test_report_help_describes_its_output_flags():
    text = " ".join(subparser(build_parser(), "report").format_help().split())
    for fmt in FORMATS.values():
        assert f"{fmt.flag} {'PATH' if fmt.stdout else 'FILE'} {' '.join(fmt.help.split()[:4])}" in text, fmt.flag


def test_format_names_are_their_flags_keyword_names():
    for name, fmt in FORMATS.items():
        assert fmt.dest == name and fmt.flag == "--" + name.replace("_", "-")
