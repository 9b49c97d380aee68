"""The one table of commands (ncclcheck/commands.py) is the only list of commands: the parser, the CLI's dispatch, the
Python API, `__all__`, the check registry and the docs' index are derived from it or held to it here, row by row."""

from __future__ import annotations

import argparse
import importlib
import os
import re

import pytest

import ncclcheck
from ncclcheck import api
from ncclcheck.checks.registry import REGISTRY
from ncclcheck.commands import COMMANDS, NAMES
from ncclcheck.options import FLAG_GROUPS, build_parser, options_of, subparser

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_help_lists_exactly_the_tables_commands_in_its_order():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert tuple(sub.choices) == NAMES


@pytest.mark.parametrize("row", COMMANDS, ids=lambda r: r.name)
def test_every_command_has_its_api_function_with_the_same_flags_and_defaults(row):
    fn = getattr(ncclcheck, row.api_name)  # lazily exported by the package, named after the command
    assert fn is getattr(api, row.api_name) and row.api_name in ncclcheck.__all__ and row.api_name in api.__all__
    assert callable(fn) and row.name in (fn.__doc__ or "")
    flags = options_of(row.name)
    assert flags, row.name
    from ncclcheck.options import namespace_for

    # every flag of the command is a keyword of the function, with the parser's own default
    ns = namespace_for(row.name, {}, row.api_name)
    assert {k: getattr(ns, k) for k in flags} == flags
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_flag'"):
        fn(no_such_flag=1)


@pytest.mark.parametrize("row", COMMANDS, ids=lambda r: r.name)
def test_every_runner_imports_and_takes_the_one_signature(row):
    import inspect

    fn = api.runner(row.name)
    params = inspect.signature(fn).parameters
    assert list(params)[:1] == ["config"] and {"observer", "placement"} <= set(params), row.runner


@pytest.mark.parametrize("row", COMMANDS, ids=lambda r: r.name)
def test_every_flag_group_is_known_and_adds_flags(row):
    assert row.flags and all(g in FLAG_GROUPS for g in row.flags), row.flags
    sub = subparser(build_parser(), row.name)
    assert {a.dest for a in sub._actions} - {"help"}, row.name


def test_every_flag_group_is_used_by_some_command():
    used = {g for row in COMMANDS for g in row.flags}
    assert set(FLAG_GROUPS) == used


def test_the_registry_names_only_the_tables_commands():
    named = {c for spec in REGISTRY for c in spec.commands}
    assert named <= set(NAMES), named - set(NAMES)


def test_world_commands_are_the_ones_that_take_world_flags():
    for row in COMMANDS:
        assert row.world == ("world" in row.flags), row.name
        assert not row.ranks or row.world, row.name


def test_the_architecture_docs_index_every_command_and_its_package():
    with open(os.path.join(REPO, "docs", "architecture.md"), encoding="utf-8") as f:
        text = f.read()
    index = text.split("## Commands and their packages", 1)[1].split("\n## ", 1)[0]
    for row in COMMANDS:
        line = next((ln for ln in index.splitlines() if re.match(rf"\|\s*`{row.name}`\s*\|", ln)), None)
        assert line, f"docs/architecture.md: no index row for {row.name}"
        module = row.runner.split(":")[0]
        assert module.replace("ncclcheck.", "").replace(".", "/") in line, (row.name, line)
    importlib.import_module("ncclcheck.commands")
