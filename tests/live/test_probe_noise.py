"""scripts/probe_noise.py at a small size (its figure is docs/live.md's): probes of a healthy simulated job whose
transfers are CPU-bound measure something and name nothing. No timing is judged here: the script prints the shares."""

from __future__ import annotations

import pytest

from ncclcheck.live import straggle
from ncclcheck_lab.probe_noise import main, measure, render

pytestmark = pytest.mark.slow


def test_probe_noise_small_size_fills_its_fields(capsys):
    res = measure(probes=2, busy=1)
    assert res["sim_errors"] == 0 and res["probes"] == 2 and res["busy"] == 1, res
    assert res["rounds_median"] >= 2, res  # a probe that stops early has still judged two rounds
    assert res["floors"] == {"host": straggle.CAPACITY_FLOOR, "pair": straggle.PAIR_CAPACITY_FLOOR}
    assert res["named"] == 0, res  # nothing named where no link is slow
    assert render(res).startswith("probes=2 busy=1 named=0 ")
    assert main(["--probes", "0"]) == 2 and "--probes must be 1 or more" in capsys.readouterr().err
