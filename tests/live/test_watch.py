"""watch's analysis on what was fetched from a real hung job (fixtures/sleep, made by `watch --dump`; HOW.md), its
--dump read back by diagnose, and its usage errors."""

from __future__ import annotations

import json
import os
import socket

from ncclcheck.live.watch import Answer, build_inputs, moved
from ncclcheck.postmortem import flight
from ncclcheck.postmortem.analyze import analyse
from ncclcheck.postmortem.diagnose import diagnose
from tests.conftest import run_cli

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "sleep")


def _fetched() -> tuple:
    """(answers, records) as watch holds them after fetching the job in fixtures/sleep."""
    first, records = {}, {}
    for r in range(4):
        with open(os.path.join(HERE, f"ncclcheck_live_rank_{r}.json")) as f:
            doc = json.load(f)
        me = doc.pop(flight.LIVE_KEY)
        records[r] = {"rank": r, "host": me["host"], "addr": "127.0.0.1", "port": 40000 + r, "local_rank": r}
        first[r] = Answer(r, {**{k: me[k] for k in ("rank", "host", "local_rank", "pid", "progress", "stacks")},
                              "flight": doc})
    return first, records


def _docs(first, records):
    from ncclcheck.live.watch import live_doc

    return {r: live_doc(a, records[r]) for r, a in first.items() if a.doc is not None}


def test_names_the_sleeping_rank_its_host_the_collective_and_where_it_is():
    first, records = _fetched()
    a = analyse(build_inputs(first, records, {}, _docs(first, records)))
    root = next(c for c in a["causes"] if c["cause"])
    assert root["kind"] == "never_entered" and root["ranks"] == [3] and root["pg"] == "0" and root["seq"] == 6
    assert "host vm" in root["text"] and "all_reduce #6" in root["text"]
    assert "main thread is at live_worker.py:60 in main: time.sleep(HANG_S)" in root["text"]


def test_a_rank_that_does_not_answer_is_named_as_such():
    first, records = _fetched()
    first[3] = Answer(3, why="127.0.0.1:40003: Connection refused")
    a = analyse(build_inputs(first, records, {}, _docs(first, records)))
    root = next(c for c in a["causes"] if c["cause"])
    assert root["ranks"] == [3] and "did not answer (127.0.0.1:40003: Connection refused)" in root["text"]
    assert "host vm" in root["text"]  # its registration still ties it to its host


def test_a_rank_never_registered_is_named():
    first, records = _fetched()
    del first[3], records[3]
    a = analyse(build_inputs(first, records, {3: "never registered in the job's store"}, _docs(first, records)))
    root = next(c for c in a["causes"] if c["cause"])
    assert root["ranks"] == [3] and "never registered" in root["text"]


def test_progress_is_a_change_of_counters():
    first, _ = _fetched()
    same = {r: Answer(r, {"progress": a.doc["progress"]}) for r, a in first.items()}
    assert moved(first, same) == []
    later = dict(same)
    later[1] = Answer(1, {"progress": {"0": {"enqueued": 7, "started": -1, "completed": 6}}})
    assert moved(first, later) == [1]


def test_diagnose_reads_the_dump_to_the_same_answer(tmp_path):
    first, records = _fetched()
    first[2] = Answer(2, why="no answer within the bound")
    inp = build_inputs(first, records, {}, _docs(first, records))
    live = analyse(inp)
    from ncclcheck.live.watch import write_dump

    write_dump(str(tmp_path), _docs(first, records), inp)
    later = diagnose([str(tmp_path)]).extra["postmortem"]
    assert later["verdict"] == live["verdict"] and later["verdict"]
    assert [c["text"] for c in later["causes"]] == [c["text"] for c in live["causes"]]


def test_usage_errors_are_one_line_exit_2(tmp_path):
    for args in (["watch"], ["watch", "--master-addr", "127.0.0.1", "--master-port", "x"],
                 ["watch", "--master-addr", "127.0.0.1", "--dump", str(tmp_path / "f")]):
        (tmp_path / "f").write_text("a file")
        p = run_cli(*args, timeout=60)
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_no_job_at_the_master_is_exit_1_named(validate_report):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        p = run_cli("watch", "--master-addr", "127.0.0.1", "--master-port", str(port), "--json", "-", timeout=60)
    assert p.returncode == 1
    doc = validate_report(p.stdout)
    assert doc["command"] == "watch" and doc["checks"][0]["id"] == "rendezvous.master_reachable"


def test_with_a_token_a_forged_registration_is_refused_and_named():
    import torch.distributed as dist

    from ncclcheck.live import wire
    from ncclcheck.live.watch import read_registry
    from ncclcheck.rendezvous.store import Guard, JsonStore

    raw = dist.HashStore()
    signed, stranger = JsonStore(raw, guard=Guard(token=b"k")), JsonStore(raw)
    rec = {"v": wire.VERSION, "rank": 0, "world_size": 2, "local_rank": 0, "host": "h0", "addr": "127.0.0.1",
           "port": 4000, "pid": 1, "auth": True, "attempt": 0}
    signed.set(f"{wire.PREFIX}world", {"world_size": 2, "attempt": 0})
    signed.set(f"{wire.PREFIX}rank/0", rec)
    stranger.set(f"{wire.PREFIX}rank/1", {**rec, "rank": 1, "addr": "198.18.9.9"})  # points watch elsewhere
    n, records, missing = read_registry(JsonStore(raw, guard=Guard(token=b"k")))
    assert n == 2 and list(records) == [0]
    assert "refused" in missing[1] and "not signed with the job token" in missing[1]
