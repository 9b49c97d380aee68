"""scripts/bench_lab64.py run small (3 hosts, its default fault link:h2,h3): its own correctness fields on its last
line, hosts=3 healthy_exit=3/3 fault_named=1/1 false_findings=0 (a healthy world passes on every host, the dropped
link is named by net.peer_reachability with no other host), the lab torn down with nothing left, and exit 0; never
its seconds or memory (docs quote the 64-host figures)."""

from __future__ import annotations

import pytest

from ncclcheck_lab import bench_lab64

# long: a 3-4 host lab run of 40-50 s; CI runs the product cases it measures in test_dropped_link_lab.py and
# test_links_lab.py, scripts/long_tests.py runs the script
pytestmark = [pytest.mark.lab, pytest.mark.long]


def test_three_hosts_pass_healthy_and_the_dropped_link_is_named_alone(capsys):
    rc = bench_lab64.main(["--hosts", "3", "--timeout", "60", "--min-free-mib", "512"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "hosts=3 healthy_exit=3/3 fault_named=1/1 false_findings=0", lines
    assert any("torn down, nothing left" in ln for ln in lines) and rc == 0, lines
