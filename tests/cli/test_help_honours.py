"""A command's --help lists only the flags it honours, derived from the one commands table: --env-out where the
report can hold recommended variables, --print-all where several processes print, --quiet's words for its seat
(every output flag is still accepted everywhere, so a script that passes them alike keeps working); the top-level
description names diagnosing a failure and watching a running job."""

from __future__ import annotations

import argparse

from ncclcheck.commands import COMMANDS
from ncclcheck.options import build_parser


def _flags(parser, name: str) -> dict:
    """The flags its --help lists, with their help."""
    sub = next(a for a in parser._actions if a.dest == "command").choices[name]
    return {opt: a.help for a in sub._actions for opt in a.option_strings if a.help != argparse.SUPPRESS}


def test_each_command_lists_the_output_flags_it_honours():
    parser = build_parser()
    for row in COMMANDS:
        flags = _flags(parser, row.name)
        assert ("--env-out" in flags) == row.recommends, row.name
        assert "--json" in flags and "--prometheus" in flags, row.name
        if row.name not in ("env", "report"):
            assert ("--print-all" in flags) == row.world, row.name
        if "--quiet" in flags:
            assert ("global rank 0" in flags["--quiet"]) == row.world, row.name
    for name in ("diagnose", "watch", "health"):
        flags = _flags(parser, name)
        assert "--print-all" not in flags and "global rank 0" not in flags["--quiet"], name
    assert "--env-out" not in _flags(parser, "watch") and "--env-out" not in _flags(parser, "health")
    assert "--env-out" in _flags(parser, "diagnose")  # with --preflight, the preflight's recommendations


def test_the_description_says_diagnose_and_watch():
    text = build_parser().description
    assert "diagnose" in text and "watch" in text and "failed" in text
