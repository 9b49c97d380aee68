"""The Python API as a user calls it (README, `ncclcheck.__all__`): every function with its defaults, the obvious
keyword arguments of its command, a docstring, and a Report whose to_json() is text and to_dict() a dict."""

from __future__ import annotations

import inspect
import json
import socket

import pytest

import ncclcheck
from ncclcheck.checks.registry import unregistered
from ncclcheck.errors import UsageError
from ncclcheck.model import Report

API = [n for n in ncclcheck.__all__ if n.startswith("run_")]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_advertised_function_exists_with_a_docstring():
    from ncclcheck.commands import COMMANDS

    assert set(API) == {c.api_name for c in COMMANDS}  # one per command of the table: diagnose, watch, health too
    for name in API:
        fn = getattr(ncclcheck, name)
        assert callable(fn) and (inspect.getdoc(fn) or "").strip(), name


def test_run_preflight_with_its_defaults_returns_a_report_with_text_and_dict_json():
    rep = ncclcheck.run_preflight()
    assert isinstance(rep, Report) and rep.command == "preflight" and rep.checks
    text = rep.to_json()
    assert isinstance(text, str) and json.loads(text) == json.loads(json.dumps(rep.to_dict(), default=str))
    assert isinstance(rep.to_dict(), dict) and rep.to_dict()["schema"] == "ncclcheck.report/1"
    assert Report.from_json(text).to_dict()["checks"] == rep.to_dict()["checks"]
    assert unregistered("preflight", [c.id for c in rep.checks]) == []


def test_the_report_is_frozen():
    rep = ncclcheck.run_env()
    with pytest.raises(AttributeError):
        rep.partial = True  # built once by the command's pipeline


def test_keyword_arguments_are_the_commands_flags_and_are_checked_like_them():
    with pytest.raises(UsageError, match="--master-addr"):
        ncclcheck.run_preflight(nnodes=2)  # as `ncclcheck preflight --nnodes 2`: who is the master?
    with pytest.raises(UsageError, match="1X"):
        ncclcheck.run_bench(sizes="1M-1X")
    with pytest.raises(UsageError, match="unknown op"):
        ncclcheck.run_bench(ops="allreduce")
    with pytest.raises(TypeError, match="unexpected keyword argument 'sizez'.*sizes"):
        ncclcheck.run_bench(sizez="1M")
    with pytest.raises(TypeError, match="Config or keyword arguments"):
        from ncclcheck.config import Config

        ncclcheck.run_env(Config("env"), code=".")


def test_the_api_and_the_cli_build_the_same_config():
    from ncclcheck.options import api_config, build_parser, config_from_args

    def cli(*argv):
        return config_from_args(build_parser().parse_args(list(argv)), env={})

    for command, kw, argv in [
        ("bench", {}, []),
        ("bench", {"sizes": "1M-4M", "ops": "all", "dtype": "float64", "iters": 3, "check": True},
         ["--sizes", "1M-4M", "--ops", "all", "--dtype", "float64", "--iters", "3", "--check"]),
        ("links", {}, []),
        ("links", {"size": "1M", "rounds": "quick", "seed": 7}, ["--size", "1M", "--rounds", "quick", "--seed", "7"]),
    ]:
        a, b = api_config(command, kw, "run_" + command, env={}), cli(command, *argv)
        assert (a.bench, a.links, a.output) == (b.bench, b.links, b.output), command
    assert api_config("bench", {"sizes": [1 << 20, 4 << 20]}, "run_bench", env={}).bench.sizes == (1 << 20, 4 << 20)
    assert "reduce" in api_config("bench", {"ops": "all"}, "run_bench", env={}).bench.ops


def test_run_env_and_run_recommend_with_defaults():
    env = ncclcheck.run_env()
    assert env.command == "env" and env.nodes and env.checks == []
    rec = ncclcheck.run_recommend()
    assert rec.command == "recommend" and isinstance(rec.recommendations, list)


def test_run_report_reads_a_saved_run(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(ncclcheck.run_env().to_json())
    again = ncclcheck.run_report(run=str(path))
    assert again.command == "env" and again.nodes
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(UsageError, match="not an ncclcheck report"):
        ncclcheck.run_report(run=str(tmp_path / "bad.json"))


@pytest.mark.slow  # spawns ranks
@pytest.mark.long  # the whole default sweep (20 s); CI: test_run_bench_and_run_links_take_their_flags below
def test_run_bench_with_its_defaults_runs_the_clis_sweep():
    rep = ncclcheck.run_bench()
    assert rep.command == "bench" and rep.exit_code == 0, [c.to_json() for c in rep.checks]
    from ncclcheck.config import BenchConfig

    want = BenchConfig()
    assert {r.op for r in rep.bench} == set(want.ops) and {r.extra.get("requested_bytes", r.bytes)
                                                           for r in rep.bench} == set(want.sizes)
    assert unregistered("bench", [c.id for c in rep.checks]) == []


@pytest.mark.slow  # spawns ranks
def test_run_bench_and_run_links_take_their_flags():
    rep = ncclcheck.run_bench(sizes="64K", ops="all_reduce", iters=2, warmup=1, check=True)
    assert [(r.op, r.bytes) for r in rep.bench] == [("all_reduce", 64 << 10)] and rep.bench[0].wrong == 0
    links = ncclcheck.run_links(size="256K", iters=1)
    assert links.command == "links" and links.links and links.links["size"] == 256 << 10
    assert unregistered("links", [c.id for c in links.checks]) == []


@pytest.mark.slow  # waits out the master probe
def test_run_preflight_of_a_node_whose_master_is_unreachable():
    rep = ncclcheck.run_preflight(nnodes=2, node_rank=1, master_addr="127.0.0.1", master_port=_closed_port(),
                                  timeout=2)
    assert rep.exit_code == 1 and rep.root_cause().id == "rendezvous.master_reachable"
