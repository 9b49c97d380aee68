"""Issue 36 holes 3 and 5, issue 32's empty dumps: small hostile files among diagnose's inputs each become one line
naming the file (or exit 2), in bounded time and memory, never a crash, a hang or an OOM. Each file is made here, by
the recipe that crashed or hung the old reader (recipes beside each case)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import struct

import pytest

from ncclcheck.postmortem.inputs import read_inputs
from ncclcheck.postmortem.unpickle import MAX_DEPTH, loads_plain, scan
from tests.conftest import run_cli

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
REAL = os.path.join(FIX, "kill", "nccl_trace_rank_1")  # a real pickled dump torch wrote (make_fixtures.py)


def _real_doc() -> dict:
    with open(REAL, "rb") as f:
        return pickle.load(f)


def _deep_tuple_pg(depth: int) -> bytes:
    """A real dump whose first entry's process_group is a tuple nested `depth` deep (1 MB for 10^6): hashing it
    overflowed the C stack (SIGSEGV)."""
    doc = _real_doc()
    doc["entries"][0]["process_group"] = "PGMARK"
    data = pickle.dumps(doc, protocol=2)
    marker = b"X\x06\x00\x00\x00PGMARK"  # BINUNICODE 'PGMARK'
    assert data.count(marker) == 1
    return data.replace(marker, b"K\x01" + b"\x85" * depth, 1)


def _deep_tuple_key(depth: int) -> bytes:
    """The same tuple as a key of pg_config: the C unpickler hashes it while loading."""
    doc = _real_doc()
    doc["pg_config"]["PGMARK"] = {}
    data = pickle.dumps(doc, protocol=2)
    marker = b"X\x06\x00\x00\x00PGMARK"
    assert data.count(marker) == 1
    return data.replace(marker, b"K\x01" + b"\x85" * depth, 1)


def _bigint_seq() -> bytes:
    """collective_seq_id an 8 KB integer (LONG4): printing it raised ValueError (exit 3)."""
    doc = _real_doc()
    doc["entries"][0]["collective_seq_id"] = 1 << 65_000
    return pickle.dumps(doc, protocol=4)


def _memo_flood(n: int) -> bytes:
    """A list of n memo references (2 bytes each): 200 MB of them were 2.69 GB of pointers."""
    return b"\x80\x04]\x94(" + b"h\x00" * n + b"e."


CASES = {
    "deep_tuple_pg": lambda p: p.write_bytes(_deep_tuple_pg(1_000_000)),
    "deep_tuple_key": lambda p: p.write_bytes(_deep_tuple_key(1_000_000)),
    "deep_tuple_key_past_the_fast_path": lambda p: p.write_bytes(_deep_tuple_key(1_500_000)),
    "bigint_seq": lambda p: p.write_bytes(_bigint_seq()),
    "deep_json": lambda p: p.write_text('{"version": "2.4", "entries": ' + "[" * 200_000 + "]" * 200_000 + "}"),
    "memo_flood": lambda p: p.write_bytes(_memo_flood(13_000_000)),
    "deep_ranks_string": lambda p: p.write_text(json.dumps({
        "version": "2.4", "entries": [], "pg_config": {"0": {"ranks": "[" * 100_000 + "]" * 100_000}}})),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_dump_is_one_refused_line_not_a_crash(tmp_path, case):
    d = tmp_path / "job"
    d.mkdir()
    shutil.copy(REAL, d / "nccl_trace_rank_1")
    bad = d / "nccl_trace_rank_0"
    CASES[case](bad)
    out = tmp_path / "r.json"
    p = run_cli("diagnose", str(d), "--json", str(out), timeout=120)
    assert p.returncode in (0, 1), (p.returncode, p.stderr[-2000:])
    doc = json.loads(out.read_text())["postmortem"]
    seen = {r["path"]: r["why"] for r in doc["refused"]}
    names = {r["path"] for r in doc["inputs"]}
    assert str(bad) in seen or str(bad) in names, (seen, names)
    if case == "memo_flood":  # the old reader loaded it whole (200 MB of them: 2.69 GB)
        assert "more than 12000000 objects" in seen[str(bad)]
    assert "Traceback" not in p.stderr


def test_a_fifo_inside_the_directory_or_named_is_refused_not_waited_on(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    shutil.copy(REAL, d / "nccl_trace_rank_1")
    os.mkfifo(d / "nccl_trace_rank_0")
    out = tmp_path / "r.json"
    p = run_cli("diagnose", str(d), "--json", str(out), timeout=60)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    refused = {r["path"]: r["why"] for r in json.loads(out.read_text())["postmortem"]["refused"]}
    assert "FIFO" in refused[str(d / "nccl_trace_rank_0")]
    for named in (str(d / "nccl_trace_rank_0"), "/dev/zero"):  # exit 3 (RecursionError in path expansion) before
        p = run_cli("diagnose", named, timeout=60)
        assert p.returncode == 2 and "Traceback" not in p.stderr, (named, p.returncode, p.stderr[-2000:])
        assert named in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_every_input_refused_is_exit_2_naming_the_file(tmp_path):
    (tmp_path / "nccl_trace_rank_0").write_bytes(_memo_flood(10))
    (tmp_path / "nccl_trace_rank_1").write_bytes(b"\x80\x04garbage")
    p = run_cli("diagnose", str(tmp_path))
    assert p.returncode == 2 and "could be read" in p.stderr and "nccl_trace_rank_" in p.stderr, p.stderr


def test_a_zero_byte_dump_is_a_rank_killed_while_dumping(tmp_path):
    """Issue 32: rank 2 was killed while torch wrote its dump: a file of 0 bytes, not "no dumps"."""
    for r in (0, 1):
        shutil.copy(os.path.join(FIX, "kill", f"nccl_trace_rank_{r}"), tmp_path)
    (tmp_path / "nccl_trace_rank_2").write_bytes(b"")
    out = tmp_path / "r.json"
    p = run_cli("diagnose", str(tmp_path), "--json", str(out))
    assert p.returncode == 1, p.stderr
    doc = json.loads(out.read_text())["postmortem"]
    assert any("rank 2's dump is empty: killed while dumping?" in c["text"] for c in doc["causes"])
    only = tmp_path / "only"
    only.mkdir()
    (only / "nccl_trace_rank_5").write_bytes(b"")
    p = run_cli("diagnose", str(only), "--json", str(out))
    assert p.returncode == 1, p.stderr  # a finding, not "nothing readable"
    assert "rank 5's dump is empty" in json.loads(out.read_text())["postmortem"]["verdict"]


def test_a_world_size_from_a_file_is_bounded_by_what_it_holds(tmp_path):
    """Hole 3: a report with world_size 10**12 made diagnose loop over ranks to 23 GB."""
    shutil.copy(os.path.join(FIX, "kill", "launcher.log"), tmp_path)
    rep = {"schema": "ncclcheck.report/1", "command": "preflight", "world": {"world_size": 10 ** 12, "nnodes": 1},
           "nodes": [{"node_rank": 0, "hostname": "h0"}], "checks": []}
    (tmp_path / "pf.json").write_text(json.dumps(rep))
    out = tmp_path / "r.json"
    p = run_cli("diagnose", str(tmp_path), "--json", str(out), timeout=120)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    assert json.loads(out.read_text())["postmortem"]["world_size"] < 1024


def test_two_hundred_thousand_pg_ranks_are_linear(tmp_path):
    """An 850 KB dump whose pg_config lists 200,000 ranks ran past 100 s (a list membership test per rank)."""
    doc = _real_doc()
    doc["pg_config"] = {k: dict(v, ranks=json.dumps(list(range(200_000)))) for k, v in doc["pg_config"].items()}
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(doc))
    p = run_cli("diagnose", str(tmp_path), "--json", str(tmp_path / "r.json"), timeout=60)
    assert p.returncode in (0, 1), p.stderr[-2000:]


def test_scan_admits_every_real_dump_and_refuses_each_bound():
    for root, _, names in os.walk(FIX):
        for n in names:
            path = os.path.join(root, n)
            with open(path, "rb") as f:
                data = f.read()
            if data[:1] == b"\x80":
                with open(path, "rb") as f:
                    assert loads_plain(data) == pickle.load(f)
    ok = {"a": [(1, 2), {"b": b"x"}], (1, (2, 3)): -(1 << 70), "f": 1.5, "n": None, "t": True}
    for proto in (2, 3, 4, 5):
        if proto > 2:
            assert loads_plain(pickle.dumps(ok, protocol=proto)) == ok
    nested: list = []
    for _ in range(MAX_DEPTH + 1):
        nested = [nested]
    with pytest.raises(ValueError, match="nested more than"):
        scan(pickle.dumps(nested))
    with pytest.raises(ValueError, match="integer of"):
        scan(b"\x80\x04\x8b" + struct.pack("<I", 100) + b"\x01" * 100 + b".")
    with pytest.raises(ValueError):
        scan(b"\x80\x04\x8c\xff")  # ends inside an argument


def test_read_inputs_names_a_symlink_found_inside_a_directory(tmp_path):
    (tmp_path / "nccl_trace_rank_0").symlink_to("/etc/hostname")
    inp = read_inputs([str(tmp_path)])
    assert "symbolic link" in inp.refused[0]["why"]


def test_a_memo_index_past_what_was_made_is_refused():
    """LONG_BINPUT 2^30: the C unpickler sizes its memo array to the index (8 GB touched)."""
    for data in (b"\x80\x04Nr\xff\xff\xff\x3f.", b"\x80\x02Np1073741823\n."):
        with pytest.raises(ValueError, match="memo index|MiB of memory"):  # the C path, under its memory bound
            loads_plain(data)
        with pytest.raises(ValueError, match="memo index"):  # the opcode scan (the path without that bound)
            scan(data)


def test_mutated_real_dumps_never_crash_the_reader(tmp_path):
    """A seeded fuzz over the classes above: real dumps (pickle and JSON) truncated, with bytes flipped, opcodes
    inserted (tuple, memo get/put, mark) and runs repeated; each is read, analysed and diagnosed without an exception
    escaping (refused, or read as whatever it still is)."""
    import random

    from ncclcheck.errors import UsageError
    from ncclcheck.postmortem.diagnose import diagnose

    rng = random.Random(36)
    seeds = [open(os.path.join(FIX, "kill", n), "rb").read() for n in ("nccl_trace_rank_0", "nccl_trace_rank_0.json")]
    inserts = [b"\x85", b"\x85" * 100, b"h\x00", b"r\xff\xff\xff\x00", b"(", b"\x8a\xff", b"]", b"}", b"t", b"e",
               b"[" * 100, b"1e999", b"NaN", b"\x00"]
    for i in range(120):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            what = rng.randrange(4)
            if what == 0:
                data[at] = rng.randrange(256)
            elif what == 1:
                data[at:at] = rng.choice(inserts)
            elif what == 2:
                del data[at:]
                if not data:
                    data = bytearray(b"\x80")
            else:
                n = rng.randint(1, 16)
                data[at:at] = data[at:at + n] * rng.randint(2, 50)
        d = tmp_path / f"case{i}"
        d.mkdir()
        (d / "nccl_trace_rank_0").write_bytes(bytes(data))
        shutil.copy(REAL, d / "nccl_trace_rank_1")
        try:
            rep = diagnose([str(d)])
        except UsageError:
            continue
        assert rep.to_json()


def test_one_dump_named_for_a_far_rank_makes_a_bounded_report(tmp_path):
    """One 1.8 KB dump named nccl_trace_rank_999999 made a million causes: 43 s, 3.9 GB, a 600 MB report. The ranks
    past MAX_RANK_CAUSES share one line."""
    from ncclcheck.postmortem.analyze import MAX_RANK_CAUSES
    from ncclcheck.postmortem.bound import MAX_LISTED_RANKS
    from ncclcheck.postmortem.diagnose import diagnose

    shutil.copy(REAL, tmp_path / "nccl_trace_rank_99999")
    a = diagnose([str(tmp_path)]).extra["postmortem"]
    assert len(a["causes"]) <= MAX_RANK_CAUSES + 1 and len(a["ranks"]) <= 4096
    assert a["causes"][-1]["text"].endswith("also left no dump") and a["causes"][-1]["ranks_total"] > 90_000
    assert len(a["causes"][-1]["ranks"]) == MAX_LISTED_RANKS  # listed up to the bound, counted in full


def test_a_report_of_the_wrong_types_among_real_dumps_leaves_the_verdict_unchanged(tmp_path):
    """A preflight report among a job's files is read as hostile as the rest: "world": "w" and nodes whose fields
    have the wrong types crashed diagnose (exit 3, AttributeError; found by scripts/bench_accuracy.py)."""
    shutil.copytree(os.path.join(FIX, "kill"), tmp_path / "kill")
    alone = run_cli("diagnose", str(tmp_path / "kill"), "--json", "-")
    (tmp_path / "kill" / "preflight.json").write_text(json.dumps({
        "schema": "ncclcheck.report/1", "command": "preflight", "status": "fail", "exit_code": 1, "world": "w",
        "checks": [1, "x", None, {"id": 5, "status": [], "node": "zz", "summary": {"a": 1}, "evidence": "e"}],
        "nodes": [{"node_rank": "a", "hostname": 5, "facts": []}], "recommendations": [{"name": 1}, "x"]}))
    hostile = run_cli("diagnose", str(tmp_path / "kill"), "--json", "-")
    assert hostile.returncode == alone.returncode == 1, hostile.stderr[-2000:]
    root = [[c["kind"], c["ranks"]] for c in json.loads(hostile.stdout)["postmortem"]["causes"] if c.get("cause")]
    assert root == [[c["kind"], c["ranks"]] for c in json.loads(alone.stdout)["postmortem"]["causes"] if c.get("cause")]
