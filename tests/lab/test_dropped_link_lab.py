"""A dead link among a dozen real hosts (issue 27, item 3): 12 lab hosts, one `ncclcheck preflight` each, nothing
passing between h5 and h9 in either direction (nftables on both ends). Every node exits 1 and node 0's report names
that pair's two hosts, and no other, though each of the pair reached every other node. The 64-host version, with a
healthy run first and the figures, is scripts/bench_lab64.py."""

from __future__ import annotations

import re

import pytest

from tests.lab.test_preflight_lab import check, explain, world

pytestmark = pytest.mark.lab

HOSTS = 12
TIMEOUT = 60  # a bound on each wait, not the run's length: 12 processes importing torch on 2 cores join slowly


@pytest.mark.long  # 12 hosts (3-host dropped links stay in CI through test_preflight_lab): scripts/long_tests.py
def test_a_dropped_link_among_twelve_hosts_names_its_two_ends_and_nothing_else(lab):
    lab12 = lab(HOSTS, scenario="dropped-link h5 h9")
    # From an empty directory: the default --code is the working directory, and the scratch one grows while the
    # hosts write their output into it (code.consistent would see nodes differ).
    cwd = lab12.tmp / "cwd"
    cwd.mkdir()
    args = {h: [*world(lab12, HOSTS, TIMEOUT), "--node-rank", str(i)] for i, h in enumerate(lab12.hosts)}
    runs = lab12.ncclcheck(args, deadline=TIMEOUT * 3, cwd=cwd)
    assert all(r.rc == 1 for r in runs.values()), explain(runs)
    report = runs["h1"].report
    c = check(runs["h1"], "net.peer_reachability")
    assert c["status"] == "fail", c
    assert set(re.findall(r"\bh\d+\b", c["summary"])) == {"h5", "h9"}, c
    assert "4->8" in c["detail"] or "8->4" in c["detail"], c  # the pair, by node rank
    # every other failed check (none is expected) must not name a host either
    others = [x for x in report["checks"] if x["status"] == "fail" and x["id"] != "net.peer_reachability"]
    assert not others, others
