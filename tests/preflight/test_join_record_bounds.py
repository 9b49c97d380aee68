"""A join record's hostname is bounded (issue 63: a stranger's 6 MB hostname was printed whole into node 0's
report): a longer one refuses the record, naming why."""

from __future__ import annotations

from ncclcheck.preflight.cluster import MAX_HOSTNAME, _join_record


def _record(hostname: str) -> dict:
    return {"node_rank": 1, "nnodes": 2, "pid": 1, "uuid": "u", "hostname": hostname, "facts": {}, "checks": []}


def test_a_hostname_past_the_bound_refuses_the_record():
    assert _join_record(_record("gpu01")) is None
    assert _join_record(_record("h" * MAX_HOSTNAME)) is None
    why = _join_record(_record("h" * (6 << 20)))
    assert why and "hostname is 6,291,456 characters long" in why
