"""scripts/bench_preflight.py run small (one healthy lab of 2 hosts): its own correctness field, labs_passed=1/1 on
its last line (preflight exited 0 on every host; the script stops with an error at the first host that did not), and
a row for the 2-host lab; never its seconds (docs quote the 2/4/8 figures from a quiet machine)."""

from __future__ import annotations

import pytest

from ncclcheck_lab import bench_preflight

pytestmark = pytest.mark.lab


def test_a_two_host_lab_passes_on_every_host(capsys):
    rc = bench_preflight.main(["--sizes", "2", "--timeout", "60"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and lines[-1] == "labs_passed=1/1", lines
    assert any(ln.split()[:1] == ["2"] for ln in lines), lines
