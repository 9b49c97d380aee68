"""scripts/links_rates.py run small (its slow-host series once: h2 of a 4-host lab shaped to 50mbit): its own
correctness field, `slow host named alone: 1 of 1` (links named node 1 and no link, no other node), and exit 0 (it
exits 1 on any miss); never its seconds or the matrix figures."""

from __future__ import annotations

import pytest

from ncclcheck_lab import links_rates

# long: a 3-4 host lab run of 40-50 s; CI runs the product cases it measures in test_dropped_link_lab.py and
# test_links_lab.py, scripts/long_tests.py runs the script
pytestmark = [pytest.mark.lab, pytest.mark.long]


def test_one_slow_host_run_names_that_host_alone(capsys):
    rc = links_rates.main(["--only", "slow_host", "--faulty", "1", "--rate", "50mbit", "--size", "1M", "--iters", "2",
                           "--timeout", "60", "--deadline", "180"])
    out = capsys.readouterr().out
    assert "slow host named alone: 1 of 1 (goal 1)" in out and rc == 0, out
