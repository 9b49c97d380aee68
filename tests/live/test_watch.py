"""watch's analysis on what was fetched from a real hung job (fixtures/sleep, made by `watch --dump`; HOW.md), its
--dump read back by diagnose, and its usage errors."""

from __future__ import annotations

import json
import os
import socket

from ncclcheck.live.outlast import moved
from ncclcheck.live.watch import Answer, build_inputs
from ncclcheck.postmortem import flight
from ncclcheck.postmortem.analyze import analyse
from ncclcheck.postmortem.diagnose import diagnose
from ncclcheck_lab.loopstore import loopback_store
from tests.conftest import free_port, run_cli

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



def test_phases_sampled_after_the_documents_were_made_land_where_live_doc_puts_them():
    """watch makes the first look's documents while the phases are sampled and adds the phases after (with_phases):
    the documents, and what diagnose's Inputs read of them, are those made with the phases at once."""
    from ncclcheck.live.straggle import Sampled
    from ncclcheck.live.watch import live_docs, with_phases

    first, records = _fetched()
    sampled = {1: {"0": [[1, 2, 5, 4], [3, 4, 6, 5]]}, 7: {"0": [[1, 2, 3, 4]]}}  # rank 7: not fetched
    at_once = live_docs(first, records, {}, sampled)
    later = live_docs(first, records, {}, {})
    inp = build_inputs(first, records, {}, later)
    assert inp.phases == {}
    asked = [{"rank": 1, "host": "vm", "asked_bytes": 1 << 16, "asked_items": 4096, "rows": 2, "dropped": 0,
              "error": None}]
    with_phases(later, inp, Sampled(sampled, asked))
    assert inp.sampling == asked
    assert later == at_once and inp.phases == build_inputs(first, records, {}, at_once).phases == {1: sampled[1]}

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


def _end(rank: int, **over) -> dict:
    from ncclcheck.live import wire

    return {"v": wire.VERSION, "rank": rank, "job": "j", "run": "0" * wire.RUN_CHARS, "attempt": 0,
            "reason": "raised RuntimeError: simulated bug", "where": "/w/train.py:12 in main", "time": None,
            "launcher": "torchrun", "chain": ["RuntimeError: simulated bug"], "from_collective": False, **over}


def test_a_rank_that_left_its_end_in_the_store_is_named_by_it_and_the_dump_keeps_it(tmp_path):
    """A gone rank's word in the store (its stacks file's fields) outranks "did not answer": the rank, its exception,
    its line; --dump keeps it, and diagnose of the dump says the same (issue 53 item 1)."""
    from ncclcheck.live.watch import write_dump

    first, records = _fetched()
    first[3] = Answer(3, why="127.0.0.1:40003: Connection refused")
    inp = build_inputs(first, records, {}, _docs(first, records), ends={3: _end(3)})
    live = analyse(inp)
    root = next(c for c in live["causes"] if c["cause"])
    assert root["ranks"] == [3] and root["kind"] == "exception", root
    assert "raised RuntimeError: simulated bug at /w/train.py:12 in main" in root["text"]
    write_dump(str(tmp_path), _docs(first, records), inp)
    later = diagnose([str(tmp_path)]).extra["postmortem"]
    assert later["verdict"] == live["verdict"]


def test_an_end_record_of_the_wrong_shape_is_refused():
    from ncclcheck.live import wire

    assert wire.end_problem(3, _end(3)) is None
    for bad in (_end(2), _end(3, reason=7), _end(3, where="x" * 5000), _end(3, chain="RuntimeError"),
                _end(3, chain=["x"] * 100), _end(3, from_collective="no"), _end(3, run="zz"), _end(3, v="other")):
        assert wire.end_problem(3, bad) is not None, bad
    first, records = _fetched()
    inp = build_inputs(first, records, {}, _docs(first, records), ends={3: _end(3, reason=["not", "text"])})
    assert 3 not in inp.stacks


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


def test_a_store_that_takes_the_client_late_is_tried_again_within_the_bound_and_a_refusal_is_final(monkeypatch):
    """The store's port answers but its first client connect times out (a store in a loaded process once took more
    than the try, a quarter of --timeout): watch tries again while --timeout lasts, then looks; a refusal is final."""

    from ncclcheck.live.watch import watch
    from ncclcheck.options import api_config
    from ncclcheck.rendezvous import store as store_mod

    port = free_port()
    st = loopback_store(port)
    calls = []
    real = store_mod.STORE_CLIENT

    def late_once(host, p, try_s, timeout_s, why="The client socket has timed out after 2500ms while trying to "
                                                "connect"):
        calls.append(try_s)
        if len(calls) == 1:
            raise RuntimeError(why)
        return real(host, p, try_s, timeout_s)

    config = api_config("watch", {"master_addr": "127.0.0.1", "master_port": str(port), "timeout": "8"}, "test")
    monkeypatch.setattr(store_mod, "STORE_CLIENT", late_once)
    checks = {c.id: c for c in watch(config).checks}
    assert "rendezvous.master_reachable" not in checks and len(calls) == 2, checks
    assert "no armed rank registered" in checks["live.answered"].summary, checks  # it read the store: nobody there
    calls.clear()
    monkeypatch.setattr(store_mod, "STORE_CLIENT", lambda *a: late_once(*a, why="Connection refused"))
    checks = {c.id: c for c in watch(config).checks}
    assert checks["rendezvous.master_reachable"].status.value == "fail" and len(calls) == 1, checks
    del st


def test_with_a_token_a_forged_registration_is_refused_and_named():
    import torch.distributed as dist

    from ncclcheck.live import wire
    from ncclcheck.live.fetch import read_registry
    from ncclcheck.rendezvous.store import Guard, JsonStore

    raw = dist.HashStore()
    signed, stranger = JsonStore(raw, guard=Guard(token=b"k")), JsonStore(raw)
    rec = {"v": wire.VERSION, "rank": 0, "world_size": 2, "local_rank": 0, "host": "h0", "addr": "127.0.0.1",
           "port": 4000, "pid": 1, "auth": "token", "attempt": 0, "job": "nojob", "run": "ab" * 16}
    signed.set(f"{wire.PREFIX}world", {"world_size": 2, "attempt": 0, "job": "nojob", "run": "ab" * 16})
    signed.set(f"{wire.PREFIX}rank/0", rec)
    stranger.set(f"{wire.PREFIX}rank/1", {**rec, "rank": 1, "addr": "198.18.9.9"})  # points watch elsewhere
    reg = read_registry(JsonStore(raw, guard=Guard(token=b"k")))
    assert reg.n == 2 and list(reg.records) == [0]
    assert "refused" in reg.missing[1] and "not signed with the job token" in reg.missing[1]



def test_the_registry_reads_end_records_only_when_the_ranks_counted_one():
    """A rank raises wire.ENDS_KEY after writing its end record: watch reads no end key while the counter is 0
    (thousands of absent keys were ~2 store requests a rank, 0.35 s at 4,096 ranks), every one otherwise, a counter
    that is not one (a stranger's value) included."""
    import torch.distributed as dist

    from ncclcheck.live import wire
    from ncclcheck.live.fetch import read_registry
    from ncclcheck.rendezvous.store import JsonStore

    raw = dist.HashStore()
    st = JsonStore(raw)
    n = 256
    st.set(wire.WORLD_KEY, {"world_size": n, "attempt": 0, "job": "j", "run": "0" * wire.RUN_CHARS})
    for r in range(n):
        st.set(wire.rank_key(r), {"v": wire.VERSION, "rank": r, "world_size": n, "local_rank": r % 8,
                                  "host": f"h{r // 8}", "addr": "127.0.0.1", "port": 4000 + r, "pid": 1 + r,
                                  "auth": "none", "attempt": 0, "job": "j", "run": "0" * wire.RUN_CHARS})
    calls = []

    class Counted(JsonStore):
        def _call(self, name, *args):
            calls.append(name)
            return super()._call(name, *args)

    reg = read_registry(Counted(raw), ends=True)
    assert len(reg.records) == n and reg.ends == {} and len(calls) < 20, calls  # 2 per 512 keys, and the counter
    assert not raw.check([wire.ENDS_KEY])  # looked for, never written by watch
    st.set(wire.end_key(5), _end(5))
    assert read_registry(JsonStore(raw), ends=True).ends == {}  # not counted: not read
    st.add(wire.ENDS_KEY, 1)
    assert list(read_registry(JsonStore(raw), ends=True).ends) == [5]
    raw.set(wire.ENDS_KEY, "not a number")
    assert list(read_registry(JsonStore(raw), ends=True).ends) == [5]

# A host's link dropped mid-collective (fixtures/dropped-h2, dropped-node0: watch --dump on lab host h1 of a real job,
# HOW.md): its ranks cannot answer. The verdict names that host once, with its ranks, and the collective the others
# wait in; node 0 cut off (h1, where watch ran) is h1 reaching no other host, not two other hosts each down.
def _diagnosed(name: str, observer: object = ...) -> dict:
    from ncclcheck.postmortem.inputs import read_inputs

    inp = read_inputs([os.path.join(os.path.dirname(__file__), "fixtures", name)])
    if observer is not ...:
        inp.observer = observer
    return analyse(inp)


def test_a_host_none_of_whose_ranks_answer_is_named_with_its_ranks_and_the_collective():
    a = _diagnosed("dropped-h2")
    root = next(c for c in a["causes"] if c["cause"])
    assert root["kind"] == "host_cut" and root["ranks"] == [2, 3], root
    assert a["verdict"].startswith("host h2 (ranks 2, 3): none of its ranks answered"), a["verdict"]
    assert "the host is down or its link is cut; ranks 0, 1, 4, 5 wait in all_reduce #6 of default_pg" in a["verdict"]
    assert [c for c in a["causes"] if c["kind"] == "no_dump"] == []  # not again, rank by rank


def test_ranks_still_inside_a_collective_others_finished_are_behind_the_cut_host_not_culprits():
    # fixtures/dropped-h2-ring-ahead: the ring's far side (h3) finished all_reduce #7 and entered #8 before h2's
    # link dropped; h1's ranks were still inside #7 (pg_status, as torch's JSON writes it: "7", "6"). They once
    # read as "ranks 0, 1 never entered all_reduce #8" and hid the cut host.
    a = _diagnosed("dropped-h2-ring-ahead")
    root = next(c for c in a["causes"] if c["cause"])
    assert root["kind"] == "host_cut" and root["ranks"] == [2, 3], a["verdict"]
    assert not [c for c in a["causes"] if c["kind"] == "never_entered"], a["causes"]
    behind = [c for c in a["causes"] if c["kind"] == "unfinished"]
    assert [(c["ranks"], c["seq"], c["cause"]) for c in behind] == [([0, 1], 7, False)]
    assert "never finished all_reduce #7 of default_pg, which ranks 4, 5 completed" in behind[0]["text"]


def _group(enqueued: int, completed, entries: list) -> dict:
    return {"version": "2.10", "pg_status": {"0": {"last_enqueued_collective": str(enqueued),
                                                   "last_started_collective": "-1",
                                                   **({} if completed is None else
                                                      {"last_completed_collective": str(completed)})}},
            "entries": [{"record_id": q, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": q,
                         "profiling_name": "gloo:all_reduce", "input_sizes": [[1024]], "input_dtypes": ["Float"],
                         "state": "scheduled", "is_p2p": False} for q in entries]}


def _four(ranks: dict) -> dict:
    dumps = {r: flight.normalise(doc, r, f"rank{r}", "json") for r, doc in ranks.items()}
    return {g["pg"]: g for g in flight.analyse_groups(dumps, sorted(ranks))}["0"]


def test_inside_an_earlier_collective_is_read_from_torchs_json_counters_and_needs_someone_who_finished_it():
    behind = {0: _group(7, 6, [6, 7]), 1: _group(7, 6, [6, 7])}
    ahead = {2: _group(8, 7, [7, 8]), 3: _group(8, 7, [7, 8])}
    assert _four({**behind, **ahead})["unfinished"] == {"0": 7, "1": 7}
    # a rank that finished its last collective and stopped calling is a culprit, not behind (the sleep case)
    assert _four({0: _group(7, 7, [6, 7]), 1: _group(8, 7, [7, 8])})["unfinished"] == {}
    # nobody completed #7: nothing says the lagging ranks wait for data others already had
    assert _four({0: _group(7, 6, [6, 7]), 1: _group(8, 6, [7, 8])})["unfinished"] == {}
    # no completion counter in the dump: the default is not evidence
    assert _four({0: _group(7, None, [6, 7]), 1: _group(8, 7, [7, 8])})["unfinished"] == {}


def test_with_every_rank_answering_ranks_stuck_inside_a_finished_collective_are_the_cause():
    from ncclcheck.postmortem.inputs import Inputs

    inp = Inputs()
    docs = {0: _group(7, 6, [6, 7]), 1: _group(7, 6, [6, 7]), 2: _group(8, 7, [7, 8]), 3: _group(8, 7, [7, 8])}
    inp.dumps = {r: flight.normalise(d, r, f"rank{r}", "json") for r, d in docs.items()}
    a = analyse(inp)
    root = next(c for c in a["causes"] if c["cause"])
    assert root["kind"] == "unfinished" and root["ranks"] == [0, 1] and root["seq"] == 7, a["causes"]
    assert "never entered" not in a["verdict"]


def test_a_lagging_rank_whose_gpu_never_started_the_collective_others_finished_is_the_cause():
    # NCCL, timing on: a rooted broadcast #7 finished on the root's side while rank 2's GPU never started it (state
    # scheduled) and rank 3 started it and waits for rank 2's data. Rank 2 is the cause, not a rank left behind.
    from ncclcheck.postmortem.inputs import Inputs

    def nccl(enqueued: int, completed: int, states: dict) -> dict:
        doc = _group(enqueued, completed, sorted(states))
        doc["pg_status"]["0"]["last_started_collective"] = str(completed)
        for e in doc["entries"]:
            q = e["collective_seq_id"]
            e.update(profiling_name="nccl:broadcast", state=states[q],
                     time_discovered_started_ns=0 if states[q] == "scheduled" else 10 ** 18 + q)
        return doc

    docs = {0: nccl(8, 7, {7: "completed", 8: "started"}), 1: nccl(8, 7, {7: "completed", 8: "started"}),
            2: nccl(7, 6, {6: "completed", 7: "scheduled"}), 3: nccl(7, 6, {6: "completed", 7: "started"})}
    inp = Inputs()
    inp.dumps = {r: flight.normalise(d, r, f"rank{r}", "json") for r, d in docs.items()}
    a = analyse(inp)
    root = next(c for c in a["causes"] if c["cause"])
    assert root["kind"] == "not_started" and root["ranks"] == [2] and root["seq"] == 7, a["causes"]
    assert "broadcast #7" in root["text"] and "never started it" in root["text"]


def test_node_0_cut_off_is_named_from_where_watch_runs():
    a = _diagnosed("dropped-node0")
    root = next(c for c in a["causes"] if c["cause"])
    assert root["kind"] == "host_cut" and root["ranks"] == [0, 1], root
    assert a["verdict"].startswith("host h1 (ranks 0, 1), where watch runs, reaches none of the other 2 hosts (h2, "
                                   "h3: ranks 2, 3, 4, 5 did not answer"), a["verdict"]
    assert "h1's link is cut" in a["verdict"]
    assert a["verdict"].endswith("ranks 0, 1 wait in all_reduce #6 of default_pg")
    # the same data watched from a host outside the job: nothing says h1 is the one cut off, each silent host named
    b = _diagnosed("dropped-node0", observer="login1")
    assert [c["ranks"] for c in b["causes"] if c["kind"] == "host_cut"] == [[2, 3], [4, 5]]


def test_a_host_whose_ranks_refuse_is_not_called_cut_off():
    first, records = _fetched()  # one host (vm): every rank refused, as a watcher without the job's key is answered
    for r in range(4):
        first[r] = Answer(r, why="it answers only with the job's key")
    a = analyse(build_inputs(first, records, {}, {}, observer="vm"))
    assert not any(c["kind"] == "host_cut" for c in a["causes"]), a["causes"]


def test_a_look_at_a_large_world_pauses_the_cycle_collector_and_puts_it_back(monkeypatch):
    """A look decodes every rank's recorder (millions of objects at 4,096 ranks) within its bound: while it holds them
    the collector does not run (agent/limits.spaced_collector, bounded), at a small job's look it runs as it was, and
    after either it is as it was (the API's watch() runs inside the user's process)."""
    import gc

    from ncclcheck.agent.limits import COLLECTOR_NODES
    from ncclcheck.live import watch as w
    from ncclcheck.live.fetch import Registry

    seen = []
    monkeypatch.setattr(w, "_look", lambda *a: seen.append(gc.isenabled()))
    was = gc.isenabled()
    try:
        gc.enable()
        for n in (COLLECTOR_NODES, COLLECTOR_NODES - 1):
            monkeypatch.setattr(w, "read_registry", lambda st, ends=False, n=n: Registry(n, dict.fromkeys(range(n))))
            w.look(None, w.Budget(), None, None, 0.0)
            assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False, True]
