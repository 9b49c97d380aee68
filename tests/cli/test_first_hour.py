"""What a new user met in the first hour (issue 24, item 6): each one pinned by a test that failed before its fix."""

from __future__ import annotations

import json
import os

import pytest

from ncclcheck import cli
from ncclcheck.bench.gates import baseline, min_busbw
from ncclcheck.config import BenchConfig
from ncclcheck.model import BenchRow, NodeInfo, Report
from ncclcheck.recommend import NodeView, recommend_local
from ncclcheck.recommend.mesh import MeshView, recommend_mesh
from ncclcheck.render.junit import render_junit
from tests.conftest import REPO, run_cli
from tests.fakefacts import facts, iface

EXAMPLE = os.path.join(REPO, "tests", "render", "examples", "preflight-pass-2node.json")


def test_one_form_of_nccl_socket_ifname_standalone_and_multi_node():
    one = {r.name: r for r in recommend_local(NodeView(facts(interfaces=[iface("eth0", ipv4="10.0.0.1")])))}
    nodes = [(r, f"h{r}", facts(interfaces=[iface("eth0", ipv4=f"10.0.0.{r + 1}")])) for r in range(2)]
    mesh = {"eth0": {"matrix": [[None, True], [True, None]], "errors": {}, "duplicates": {}, "nodes": [0, 1]}}
    many = {r.name: r for r in recommend_mesh(MeshView(nodes, mesh))}
    assert one["NCCL_SOCKET_IFNAME"].value == many["NCCL_SOCKET_IFNAME"].value == "=eth0"
    for rec in (one["NCCL_SOCKET_IFNAME"], many["NCCL_SOCKET_IFNAME"]):
        assert "leading '='" in rec.reason and "prefix" in rec.reason  # what the '=' means, said where it is shown


@pytest.mark.parametrize("argv, says", [
    (["preflight", "--quiet", "--print-all"], "contradict"),
    (["preflight", "--master-addr", "127.0.0.1:abc"], "the port in --master-addr '127.0.0.1:abc' must be an integer"),
    (["bench", "--sizes", "-1M"], "sizes cannot be negative"),
    (["report", "/dev/null"], "/dev/null: not a regular file"),
    (["preflight", "--nccl-debug", "/nonexistent"], "no such file"),
])
def test_usage_errors_say_what_is_wrong(argv, says, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err


def test_nccl_ras_on_a_wrong_or_binary_file_is_a_usage_error(tmp_path, capsys):
    text, binary = tmp_path / "notes.txt", tmp_path / "core"
    text.write_text("ncclras said something\n")
    binary.write_bytes(bytes(range(256)) * 4)
    for path, says in ((text, "not ncclras output: neither `ncclras -f json` output (no JSON object"),
                       (binary, "a binary file")):
        assert cli.main(["preflight", "--nccl-ras", str(path)]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("ncclras") <= 3 and err.count("\n") == 1, err  # one line, not stuttered


def _bench(status_wrong: int) -> Report:
    row = BenchRow("all_reduce", 1 << 20, 1 << 18, "float32", False, 10.0, 1.0, 1.0, status_wrong, [10.0])
    cfg = BenchConfig(sizes=(1 << 20,), check=True)
    from ncclcheck.bench.gates import correctness

    return Report("bench", "0", "", checks=[correctness([row], cfg)], bench=[row])


def test_a_failed_run_is_not_saved_as_a_baseline_without_force(tmp_path, capsys):
    path = str(tmp_path / "base.json")
    cli._save_baseline(path, False, _bench(3))
    assert not os.path.exists(path) and "--force" in capsys.readouterr().err
    cli._save_baseline(path, True, _bench(3))
    assert json.load(open(path))["status"] == "fail"
    ok = str(tmp_path / "ok.json")
    cli._save_baseline(ok, False, _bench(0))
    assert json.load(open(ok))["status"] == "pass"


def test_force_is_a_flag_where_save_baseline_is():
    p = cli.build_parser()
    for cmd in ("preflight", "bench", "links"):
        assert p.parse_args([cmd, "--save-baseline", "b.json", "--force"]).force


def test_torch_noise_alone_is_nothing_to_log(tmp_path):
    log = tmp_path / "ncclcheck-h1-20260101-000000-1.log"
    log.write_text("[W1123 socket.cpp:767] [c10d] The hostname of the client socket cannot be retrieved. err=-3\n")
    assert not cli.has_content(str(log))
    cli._finish_logging(str(log))
    assert not log.exists()
    log.write_text("[W1123 socket.cpp:767] [c10d] The hostname of the client socket cannot be retrieved. err=-3\n"
                   "2026-01-01 ncclcheck ERROR rank 1 died\n")
    assert cli.has_content(str(log))


def test_logs_are_named_by_host_and_pruned_per_host(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "log_host", lambda: "h2")
    other = [tmp_path / f"ncclcheck-h1-20260101-0000{i:02d}-{i}.log" for i in range(cli.LOG_KEEP + 3)]
    for f in other:
        f.write_text("h1's\n")
    monkeypatch.setenv("NCCLCHECK_LOG_DIR", str(tmp_path))
    path = cli._setup_logging()
    try:
        assert os.path.basename(path).startswith("ncclcheck-h2-")
        assert all(f.exists() for f in other)  # another host's logs in a shared home are its own to prune
    finally:
        cli._finish_logging(path)


def test_report_html_does_not_print_the_whole_text_report(tmp_path):
    out = tmp_path / "r.html"
    p = run_cli("report", EXAMPLE, "--html", str(out), env={"NCCLCHECK_LOG_DIR": str(tmp_path)})
    assert p.returncode == 0 and out.exists(), p.stderr
    assert "Recommended environment" not in p.stdout and "rendezvous.world" not in p.stdout
    assert p.stdout.startswith("PASS") and f"wrote {out}" in p.stdout


def test_junit_hostname_is_the_nodes():
    bench = Report("bench", "0", "", nodes=[NodeInfo(0, "gpu017")])
    assert 'hostname="gpu017"' in render_junit(bench)
    own = Report("preflight", "0", "", nodes=[NodeInfo(2, "gpu019")])  # node 2's own report (%n, --print-all)
    assert 'hostname="gpu019"' in render_junit(own)


def test_gloo_fix_text_does_not_speak_of_the_transport_nccl_chose():
    row = BenchRow("all_reduce", 1 << 20, 1 << 18, "float32", False, 10.0, 1.0, 1.0, None, [10.0])
    cfg = BenchConfig(sizes=(1 << 20,), min_busbw_gbps=5.0)
    assert "NCCL chose" not in min_busbw([row], cfg, "gloo").fix and "GLOO_SOCKET_IFNAME" in min_busbw([row], cfg,
                                                                                                        "gloo").fix
    assert "NCCL chose" in min_busbw([row], cfg, "nccl").fix
    base = BenchRow("all_reduce", 1 << 20, 1 << 18, "float32", False, 5.0, 10.0, 10.0, None, [5.0])
    assert "NCCL chose" not in baseline([row], [base], 0.1, "b.json", "gloo").fix


def test_single_form_ops_are_measured_once_and_say_so_in_html():
    from ncclcheck.bench.runners import unsupported_reason
    from ncclcheck.render.html import render_html

    assert "one (in-place) form" in unsupported_reason("all_reduce", True, 2)
    assert unsupported_reason("all_gather", True, 2) is None  # two real forms: both measured
    row = BenchRow("all_reduce", 1 << 20, 1 << 18, "float32", False, 10.0, 1.0, 1.0, None, [10.0],
                   {"in_place_call": True})
    page = render_html(Report("bench", "0", "", bench=[row]))
    assert "single form (in place)" in page and "out-of-place" not in page


def test_one_row_is_one_row():
    from ncclcheck.bench.straggler import find_stragglers

    (check,) = find_stragglers([{"arrival_us": [0.0, 1.0], "rank_time_us": [10.0, 10.0]}]).checks
    assert "(1 row," in check.summary
