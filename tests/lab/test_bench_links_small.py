"""scripts/bench_links.py run small (3 hosts, each at 200mbit, 1 MiB once per pair): its own correctness fields in
its --json figures, the rounds the circle method needs for 3 hosts (3: an odd count sits one host out each round) and
no slow node or link named in a lab whose hosts are alike; never the ratio or the seconds (timings).

Marked long (scripts/long_tests.py runs it): two links runs (2 hosts, then 3), five CLI processes importing torch,
took 60 s under load, past the lab lane's budget for one test."""

from __future__ import annotations

import json

import pytest

from ncclcheck_lab import bench_links

pytestmark = [pytest.mark.lab, pytest.mark.long]


def test_three_alike_hosts_take_three_rounds_and_nobody_is_named_slow(tmp_path, capsys):
    out = tmp_path / "figures.json"
    rc = bench_links.main(["--hosts", "3", "--size", "1M", "--iters", "1", "--rate", "200mbit", "--timeout", "60",
                           "--deadline", "180", "--json", str(out)])
    fig = json.loads(out.read_text())
    assert rc == 0 and fig["hosts"] == 3 and fig["rounds"] == 3, fig
    assert fig["slow_nodes"] == [] and fig["slow"] == [], fig
    assert fig["pair_s"] > 0 and fig["links_s"] > 0, fig
    assert "links on 3 hosts" in capsys.readouterr().out
