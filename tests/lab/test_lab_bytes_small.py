"""scripts/lab_bytes.py run small (one healthy lab of 2 hosts): its own correctness fields, every node's preflight
exited 0 (the script stops with an error otherwise), and node 0's interface bytes counted: the store's and eth0's
own counters above 0; never the byte figures themselves (docs quote those at 4 and 16 hosts)."""

from __future__ import annotations

import re

import pytest

from ncclcheck_lab import lab_bytes

pytestmark = pytest.mark.lab


def test_a_two_host_preflight_is_counted_on_node_zeros_interface(capsys):
    rc = lab_bytes.main(["--hosts", "2", "--timeout", "60"])
    out = capsys.readouterr().out
    m = re.search(r"run 1 N=2: eth0 ([\d,]+) B/node \(ratio to N=2: 1\.00\) \| store ([\d,]+) B", out)
    assert rc == 0 and m, out
    assert int(m.group(1).replace(",", "")) > 0 and int(m.group(2).replace(",", "")) > 0, out
