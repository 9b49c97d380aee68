"""render/waits.py: one plain line per wait event, naming the node, what it waits for, what it has seen and its
bound; and the observers that carry them (stderr, plain off a terminal, above the bar on one)."""

from __future__ import annotations

import io

from ncclcheck.render.progress import LineObserver, WaitLines, make_observer
from ncclcheck.render.waits import wait_line

WHO = {"command": "preflight", "node_rank": 1, "host": "vm"}


def _ev(**kw) -> dict:
    return {**WHO, "waited_s": 1.04, "bound_s": 60.0, "again": False, "changed": True, **kw}


def test_the_issues_two_sentences():
    refused = wait_line(_ev(wait="master", addr="127.0.0.1", port=29599, status="refused", tries=1))
    assert refused == ("ncclcheck preflight: node 1 (vm): master 127.0.0.1:29599 refused the connection: nothing "
                       "listens on that port yet; retrying until 60 s (1.0 s so far)")
    join = wait_line(_ev(node_rank=0, wait="join", nnodes=2, joined=1, missing=[1], missing_n=1, hosts=[[0, "vm"]]))
    assert join == ("ncclcheck preflight: node 0 (vm): waiting for node 1 of 2 to join (joined: node 0 (vm)); "
                    "until 60 s (1.0 s so far)")


def test_what_changed_and_what_did_not():
    ev = _ev(node_rank=0, wait="join", nnodes=2, joined=1, missing=[1], missing_n=1, hosts=[[0, "vm"]],
             waited_s=11.2, again=True, changed=False)
    assert ": still waiting for node 1 of 2 to join" in wait_line(ev) and "(11 s so far)" in wait_line(ev)
    many = wait_line(_ev(wait="join", nnodes=16384, joined=16380, missing=[3, 4, 5, 77], missing_n=4,
                         hosts=[[0, "gpu0000"], [1, "gpu0001"]], again=True, changed=True))
    assert "waiting for 4 of 16,384 nodes to join (node ranks 3-5,77) (16,380 joined, among them node 0 (gpu0000), " \
           "node 1 (gpu0001))" in many, many
    capped = wait_line(_ev(wait="join", nnodes=9000, joined=10, missing=list(range(10, 74)), missing_n=8990))
    assert "node ranks 10-73, ...)" in capped and len(capped) < 300, capped


def test_each_master_outcome_and_each_wait_has_its_words():
    said = {s: wait_line(_ev(wait="master", addr="m0", port=1, status=s, tries=3, give_up_s=5.0, error="E"))
            for s in ("refused", "timeout", "unresolvable", "no_route", "error", None)}
    assert "time out" in said["timeout"] and "retrying until 60 s" in said["timeout"]
    assert "master name m0 does not resolve (3 tries): looking it up again for 5 s, then giving up" in \
        said["unresolvable"]
    assert "until" not in said["unresolvable"]  # it gives up long before the bound
    assert "no route to master m0:1" in said["no_route"] and "master m0:1: E" in said["error"]
    assert "connecting to master m0:1" in said[None]
    for what, words in (("store", "rendezvous store at"), ("verdict", "to say who joined"),
                        ("mesh", "mesh endpoints"), ("rows", "mesh probes (3 of 8 in)"),
                        ("result", "cross-node checks"), ("final", "agreed exit code"), ("readers", "read why")):
        line = wait_line(_ev(wait=what, addr="m0", port=1, nodes=8, done=3))
        assert words in line and line.startswith("ncclcheck preflight: node 1 (vm): "), line


def test_what_came_from_other_nodes_cannot_break_the_line():
    line = wait_line(_ev(wait="join", nnodes=3, joined=2, missing=[2], missing_n=1,
                         hosts=[[0, "a\x1b[31m\nFAKE"], [1, "b\r"]]))
    assert "\n" not in line and "\x1b" not in line and "\r" not in line, line


def test_the_lines_go_to_stderr_plain_and_never_to_the_report_stream():
    out, err = io.StringIO(), io.StringIO()
    obs = make_observer(out, {}, waits=err, command="preflight")  # a pipe: plain lines
    assert isinstance(obs, LineObserver)
    obs.start(2, "nodes joined")
    obs.wait({"wait": "join", "node_rank": 0, "nnodes": 2, "joined": 1, "missing": [1], "hosts": [[0, "vm"]]})
    obs.stop()
    assert out.getvalue() == "nodes joined: 0 of 2\n"
    assert err.getvalue().startswith("ncclcheck preflight: node 0: waiting for node 1 of 2") and "\x1b" not in \
        err.getvalue()
    only = WaitLines(err, command="guard")
    only.start(3, "x")
    only.advance("y")
    only.row("bench_row", {})
    only.stop()
    only.wait({"wait": "verdict", "node_rank": 2, "addr": "h", "port": 5})
    assert err.getvalue().splitlines()[-1].startswith("ncclcheck guard: node 2: joined the rendezvous at h:5")
    assert only.streamed == 0 and only.progress is False
