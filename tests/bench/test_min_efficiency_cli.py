"""--min-efficiency through the CLI: a fraction or a one-line usage error; a gate that cannot be evaluated fails."""

from __future__ import annotations

import json

import pytest

from ncclcheck.cli import build_parser, config_from_args
from ncclcheck.errors import UsageError
from tests.conftest import run_cli


def build_config_for_tests(argv: list):
    return config_from_args(build_parser().parse_args(argv), env={})


@pytest.mark.parametrize("cmd", ["bench", "links"])
@pytest.mark.parametrize("value", ["1.5", "0", "-0.2", "abc", "nan"])
def test_not_a_fraction_is_a_usage_error(cmd, value):
    with pytest.raises(UsageError, match="--min-efficiency"):
        build_config_for_tests([cmd, "--min-efficiency", value])


@pytest.mark.parametrize("cmd, section", [("bench", "bench"), ("links", "links")])
def test_the_fraction_reaches_the_config(cmd, section):
    cfg = build_config_for_tests([cmd, "--min-efficiency", "0.8"])
    assert getattr(cfg, section).min_efficiency == 0.8


@pytest.mark.slow  # spawns ranks
def test_bench_gate_on_loopback_ranks_fails_saying_why():
    p = run_cli("bench", "--sizes", "64K", "--ops", "all_reduce", "--iters", "2", "--warmup", "0",
                "--min-efficiency", "0.5", "--json", "-")
    assert p.returncode == 1, p.stderr
    rep = json.loads(p.stdout)
    [gate] = [c for c in rep["checks"] if c["id"] == "bench.min_efficiency"]
    assert gate["status"] == "fail" and "loopback" in gate["summary"]
    assert "no link bounds them" in rep["bench"][0]["bound_by"]
