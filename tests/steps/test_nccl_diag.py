"""NCCL's own diagnostics on recorded outputs shipped in tests/data/nccl: `ncclras -f json` (laid out as NCCL
2.28.7's writer prints it) read into nccl.ras, saved NCCL_DEBUG captures into nccl.transport per host, and the
per-host topology/graph dump variables and the report's links to what a GPU run wrote."""

from __future__ import annotations

import json
import pathlib

import pytest

from ncclcheck.checks.nccl_ras import parse_ras_json, ras_check, ras_check_from_text
from ncclcheck.model import NodeInfo, Recommendation, Status
from ncclcheck.nccl.debuglog import capture_host
from ncclcheck.steps.nccl_debug import (
    captures_section,
    checks_from_captures,
    nccl_debug_env,
    transport_checks,
)

DATA = pathlib.Path(__file__).parents[1] / "data" / "nccl"


def _ras(name: str) -> str:
    return (DATA / name).read_text()


def test_healthy_job_passes():
    r = ras_check_from_text(_ras("ras-healthy.json"), "ras.json")
    assert r.status is Status.PASS and "8 ranks" in r.summary and "2.28.7" in r.summary


def test_dead_rank_fails_naming_host_and_gpu_and_the_rank_behind():
    r = ras_check_from_text(_ras("ras-dead-rank.json"), "ras.json")
    assert r.status is Status.FAIL
    assert r.summary == "dead: rank 6 (198.18.0.12, GPU 2)"
    assert "rank 7 (198.18.0.12) AllReduce 41249 of 41250" in r.detail
    assert [d["rank"] for d in r.evidence["dead"]] == [6] and r.evidence["timeouts"] == 1


def test_unresponsive_but_not_dead_warns_and_async_error_fails():
    doc = json.loads(_ras("ras-dead-rank.json"))
    comm = doc["communicators"][0]
    comm["missing_ranks"][0]["status"]["considered_dead"] = False
    for rank in comm["ranks"]:  # nobody behind
        rank["collective_counts"]["AllReduce"] = 41250
    doc["ras"]["timeouts_count"] = 0
    r = ras_check(parse_ras_json(json.dumps(doc)))
    assert r.status is Status.WARN and "unresponsive" in r.summary and "rank 6" in r.summary
    comm["ranks"][2]["status"]["async_error"] = 6  # ncclRemoteError
    assert ras_check(parse_ras_json(json.dumps(doc))).status is Status.FAIL


def test_a_real_text_report_of_a_running_job_passes_and_says_what_ras_cannot_see():
    """ncclras 2.28.3 (no -f json) on a lent H100, about a 1-rank NCCL 2.28.9 job whose GPU never started all_reduce
    #6 (docs/gpu.md): RAS says RUNNING, OK; the pass says what it covers."""
    r = ras_check_from_text(_ras("ras-text-running-ok.txt"), "ras.txt")
    assert r.status is Status.PASS, r.summary
    assert "1 communicator group(s), 1 ranks" in r.summary and "NCCL 2.28.9" in r.summary
    assert "stuck before a collective" in r.summary


# Rendered from the client's format strings (src/ras/client_support.cc: rasOutAppend in rasClientRunComms and
# rasClientBreakDownErrors): no job wrote these lines; the real report above is the healthy one.
def _text_report(errors: str, warnings: str = "", status: str = "RUNNING", flags: str = "OK") -> str:
    return ("NCCL version 2.28.9 compiled with CUDA 13.0\nCUDA runtime version 13000, driver version 13000\n\n"
            "Job summary\n===========\n\n  Nodes  Processes         GPUs  Processes     GPUs\n"
            "(total)   per node  per process    (total)  (total)\n"
            "      2          4            1          8        8\n\n"
            "Communicators... (0.004s)\n=============\n\n"
            "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
            "    #  in group  per comm  per node  per comm  in group\n"
            f"    0         1         2         4         8         8  {status:>8}  {flags:>6}\n\n"
            f"Errors\n======\n\n{errors}Warnings\n========\n\n{warnings}")


DEAD = ("DEAD\n  1 job process is considered dead (unreachable via the RAS network)\n"
        "  Process 4711 on node gpu7 managing GPU 2\n\n")
ASYNC = ("#0-0 (9e2a3c41d1b5f7a0) ERROR\n  Asynchronous error on 1 rank\n"
         "  Rank 6 reported remote process exited or there was a network error -- GPU 2 managed by process 4711 "
         "on node gpu7\n\n")
MISSING = ("#0-0 (9e2a3c41d1b5f7a0) INCOMPLETE\n  Missing communicator data from 1 rank\n"
           "  Rank 5 -- GPU 1 managed by process 4710 on node gpu7\n\n")
BEHIND = ("TIMEOUT\n  Encountered 2 communication timeouts while gathering communicator data\n\n"
          "#0-0 (9e2a3c41d1b5f7a0) MISMATCH\n  Communicator ranks have different AllReduce operation counts\n"
          "  Rank 7 has launched up to operation 41249 -- GPU 3 managed by process 4712 on node gpu7\n\n")


def test_a_text_report_with_errors_fails_naming_the_dead_process_and_the_rank_that_reported():
    r = ras_check_from_text(_text_report(DEAD + ASYNC, BEHIND, flags="ERROR,MISMATCH"), "ras.txt")
    assert r.status is Status.FAIL
    assert r.summary == "dead: process 4711 (gpu7, GPU 2)"
    assert ("error: rank 6 (gpu7, GPU 2) reported remote process exited or there was a network error"
            in r.detail), r.detail
    assert "rank 7 (gpu7, GPU 3) has launched up to operation 41249" in r.detail and r.evidence["timeouts"] == 2


def test_a_text_report_of_missing_or_lagging_ranks_warns_and_an_aborted_group_fails():
    r = ras_check_from_text(_text_report(MISSING, BEHIND, flags="INCOMPLETE,MISMATCH"), "ras.txt")
    assert r.status is Status.WARN and "rank 5 (gpu7, GPU 1)" in r.summary, r.summary
    r = ras_check_from_text(_text_report("", status="ABORT"), "ras.txt")
    assert r.status is Status.FAIL and "communicator group 0 status ABORT" in r.summary


def test_a_hostile_text_report_is_bounded_and_printable():
    from ncclcheck.checks.nccl_ras_text import MAX_REFS, MAX_TEXT, parse_ras_text

    lines = "".join(f"  Rank {i} -- GPU 0 managed by process {i} on node h\x1b[31m{'x' * 500}\n" for i in range(3000))
    parsed = parse_ras_text(_text_report(f"#0-0 (ab) INCOMPLETE\n{lines}\n"))
    [gone] = [c["unresponsive"] for c in parsed["communicators"] if c["unresponsive"]]
    assert len(gone) == MAX_REFS and all(len(g["host"]) <= MAX_TEXT and "\x1b" not in g["host"] for g in gone)


def test_nccl_init_banner_in_a_launcher_log_is_not_a_ras_report():
    from ncclcheck.checks.nccl_ras_text import looks_like_ras_text

    assert not looks_like_ras_text("NCCL version 2.28.9+cuda13.0\nrank 0 step 0 ok\nErrors\n======\n")
    assert looks_like_ras_text(_ras("ras-text-running-ok.txt"))


@pytest.mark.parametrize("text", ["", "Collecting data...\nGroup 0: 8 ranks\n", "{\"x\": 1}", "{broken"])
def test_output_that_is_not_the_json_form_is_a_skip(text):
    r = ras_check_from_text(text, "ras.txt")
    assert r.status is Status.SKIP and "ras.txt" in r.summary


def test_saved_debug_captures_become_transport_checks_per_host():
    texts = {str(p): p.read_text() for p in sorted(DATA.glob("nccl.node-*"))}
    assert {capture_host(p, t) for p, t in texts.items()} == {"node-a", "node-b"}
    recs = [Recommendation("NCCL_SOCKET_IFNAME", "=eth0", "fastest"), Recommendation("NCCL_IB_HCA", "=mlx5_0", "x")]
    res = checks_from_captures(texts, [NodeInfo(0, "node-a.cluster"), NodeInfo(1, "node-b")], recs)
    by_node = {r.node: r for r in res}
    assert by_node[0].status is Status.WARN and "mlx5_1" in by_node[0].detail  # HCAs outside NCCL_IB_HCA
    assert by_node[1].status is Status.WARN and "ibp12s0" in by_node[1].summary
    assert all(r.id == "nccl.transport" for r in res)


def test_capture_host_from_file_name_when_lines_have_no_prefix():
    assert capture_host("/x/nccl.gpu-07.4242", "NCCL version 2.21.5+cuda12.4\n") == "gpu-07"
    assert capture_host("/x/other.log", "") is None


def test_debug_env_dumps_topology_and_graph_per_host():
    env = nccl_debug_env("/run/nc", "gpu-07", dump_rank=8)
    assert env["NCCL_TOPO_DUMP_FILE"] == "/run/nc/nccl-topo.gpu-07.xml"
    assert env["NCCL_GRAPH_DUMP_FILE"] == "/run/nc/nccl-graph.gpu-07.xml"
    assert env["NCCL_TOPO_DUMP_FILE_RANK"] == env["NCCL_GRAPH_DUMP_FILE_RANK"] == "8"
    assert "NCCL_TOPO_DUMP_FILE" not in nccl_debug_env("/run/nc")


def test_gpu_run_results_are_linked_and_checked():
    parsed_a = {"version": "2.21.5", "bootstrap": [{"ifname": "eth0", "addr": "198.18.0.1"}], "transports": {}}
    results = [
        {"rank": 0, "node_rank": 0, "host": "gpu-a", "parsed": parsed_a, "file": "/l/nccl.gpu-a.1",
         "topo_file": "/l/nccl-topo.gpu-a.xml", "graph_file": "/l/nccl-graph.gpu-a.xml"},
        {"rank": 1, "node_rank": 0, "host": "gpu-a", "parsed": parsed_a, "file": "/l/nccl.gpu-a.2"},
        {"rank": 2, "node_rank": 1, "host": "gpu-b", "parsed": None, "file": None, "note": "no file"},
    ]
    sec = captures_section(results)
    assert sec["gpu-a"] == {"node_rank": 0, "debug": ["/l/nccl.gpu-a.1", "/l/nccl.gpu-a.2"],
                            "topo": "/l/nccl-topo.gpu-a.xml", "graph": "/l/nccl-graph.gpu-a.xml"}
    assert sec["gpu-b"] == {"node_rank": 1, "debug": []}
    (chk,) = transport_checks(results)
    assert chk.node == 0 and chk.status is Status.PASS and "eth0" in chk.summary
    assert transport_checks([results[2]])[0].status is Status.SKIP


def test_an_nccl_warning_of_the_tiny_run_is_read_by_the_one_failure_table():
    """preflight's --nccl-debug capture reads NCCL's WARN lines with the table diagnose uses (issue 61): the cause and
    its fix, whichever command met the line."""
    from ncclcheck.nccl.debuglog import parse_nccl_debug
    from ncclcheck.steps.nccl_debug import compare_with_recommendation

    text = ("gpu0001:4242:4242 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
            "gpu0001:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
            "[2026-11-23 10:00:00] gpu0001:4242:4259 [0] misc/shmutils.cc:85 NCCL WARN Error while creating shared "
            "memory segment /dev/shm/nccl-AbC (size 9637888), error: No space left on device (28)\n")
    r = compare_with_recommendation(parse_nccl_debug(text), [])
    assert r.status.value == "warn" and "/dev/shm" in r.summary and "--shm-size" in r.fix
