"""Join records compacted against node 0's reference (preflight/joinref.py): what node 0 decides from is exactly what
the whole record would have given it, a record it cannot put back together is refused and named, and a record without
a reference is read as before."""

from __future__ import annotations

import copy
import json

from ncclcheck.model import CheckResult, failed, passed, skipped
from ncclcheck.preflight import joinref
from ncclcheck.preflight.cluster import _join_record


def _facts(host: str, code: str = "sha256:aaa") -> dict:
    return {"host": {"hostname": host, "resolves_to": ["198.18.0.1"]},
            "packages": {"hash": "sha256:p", "count": 2, "items": {"torch": "2.13.0", "rich": "14.0"}},
            "code": {"hash": code, "dirty": False}, "versions": {"nccl": "2.28.3", "torch": "2.13.0"},
            "gpu": {"count": 8, "names": ["H100"] * 8}}


def _checks(node: int, host: str) -> list:
    return [passed("host.shm", "/dev/shm 64 GiB", node=node, evidence={"bytes": 64 << 30}),
            skipped("gpu.count", "no NVIDIA GPU", node=node),
            failed("host.hostname_resolves", f"{host} does not resolve", node=node, fix="add it to /etc/hosts")]


def _record(node: int, facts: dict, checks: list) -> dict:
    return {"node_rank": node, "nnodes": 4, "hostname": facts["host"]["hostname"], "pid": 7, "uuid": f"u{node}",
            "launcher": "standalone", "facts": facts, "checks": [c.to_json() for c in checks]}


def _on_the_wire(rec: dict) -> dict:
    return json.loads(json.dumps(rec, default=str))


def _whole(rec: dict) -> tuple:
    """(facts, checks) node 0 gets from a record sent whole: the baseline every compacted record must equal."""
    rec = _on_the_wire(rec)
    assert _join_record(rec) is None
    return rec["facts"], [CheckResult.from_json(c) for c in rec["checks"]]


def test_a_compacted_record_puts_back_exactly_what_the_whole_record_carries():
    ref = joinref.Reference.of(_facts("gpu0000"), _checks(0, "gpu0000"))
    for facts, checks in [(_facts("gpu0007"), _checks(7, "gpu0007")),  # host differs, one check differs
                          (_facts("gpu0008", code="sha256:other"), _checks(8, "gpu0008"))]:  # and the code
        rec = _record(checks[0].node, facts, checks)
        sent = _on_the_wire(joinref.compact(copy.deepcopy(rec), ref.record))
        # only what differs travels: the host group (and the code that differs), the check naming the host
        assert set(sent["facts"]) == {"host"} | ({"code"} if facts["code"]["hash"] != "sha256:aaa" else set())
        assert [c for c in sent["checks"] if not isinstance(c, str)] == [sent["checks"][2]]
        assert len(json.dumps(sent)) < len(json.dumps(_on_the_wire(rec)))
        assert _join_record(sent) is None and ref.expand(sent) is None
        facts0, checks0 = _whole(rec)
        assert sent["facts"] == facts0 and joinref.checks_of(sent) == checks0


def test_a_record_compacted_against_another_reference_is_refused_and_named():
    ref = joinref.Reference.of(_facts("gpu0000"), _checks(0, "gpu0000"))
    forged = joinref.Reference.of(_facts("gpu0000", code="sha256:forged"), _checks(0, "gpu0000"))
    sent = _on_the_wire(joinref.compact(_record(3, _facts("gpu0003"), _checks(3, "gpu0003")), forged.record))
    assert ref.expand(sent) == "a join record compacted against a reference node 0 did not publish"


def test_a_record_naming_what_the_reference_lacks_is_refused():
    ref = joinref.Reference.of(_facts("gpu0000"), _checks(0, "gpu0000"))
    sent = _on_the_wire(joinref.compact(_record(3, _facts("gpu0003"), _checks(3, "gpu0003")), ref.record))
    bad = copy.deepcopy(sent)
    bad["same"]["facts"].append("nvlink")
    assert ref.expand(bad) == "a join record naming facts groups node 0's reference lacks"
    bad = copy.deepcopy(sent)
    bad["checks"][0] = "gpu.made_up"
    assert ref.expand(bad) == "a join record naming checks node 0's reference lacks"
    # a check id in place of a check is only read in a compacted record
    del sent["same"]
    assert _join_record(sent) == "a check without an id or with an unknown status"


def test_without_a_reference_the_record_travels_whole():
    rec = _record(2, _facts("gpu0002"), _checks(2, "gpu0002"))
    assert joinref.compact(rec, None) is rec
    ref = joinref.Reference.of(_facts("gpu0000"), _checks(0, "gpu0000"))
    whole = _on_the_wire(rec)
    assert ref.expand(whole) is None and whole["facts"] == _whole(rec)[0]


def test_a_reference_read_from_the_store_is_checked():
    ref = joinref.Reference.of(_facts("gpu0000"), _checks(0, "gpu0000"))
    assert joinref.read_reference(_on_the_wire(ref.record)) is None
    assert joinref.read_reference([1]) == "not a join reference"
    assert joinref.read_reference({"id": "x", "facts": {"a": 1}, "checks": {}}) == \
        "a join reference whose facts is not a table of digests"
    assert joinref.read_reference({"id": "x", "facts": {}, "checks": {str(i): "d" for i in range(5000)}}) == \
        "a join reference whose checks is not a table of digests"
