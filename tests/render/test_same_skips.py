"""A skip that says the same thing on several nodes is one row in the terminal, Markdown and HTML (a two-node CPU
run said "no NVIDIA GPU" once per node for each GPU check); the JSON and JUnit keep every node's."""

from __future__ import annotations

from ncclcheck.model import NodeInfo, Report, failed, skipped
from ncclcheck.render.common import display_checks
from ncclcheck.render.junit import render_junit
from ncclcheck.render.markdown import render_markdown


def _report() -> Report:
    checks = [skipped("gpu.xid", "no NVIDIA GPU", node=0), skipped("gpu.xid", "no NVIDIA GPU", node=1),
              skipped("gpu.xid", "no NVIDIA GPU", node=2),
              skipped("ib.devices", "no RDMA devices", node=0), skipped("ib.devices", "no RDMA devices", node=2),
              skipped("ib.devices", "mlx5_0 unreadable", node=1), failed("net.interfaces", "eth1 down", node=1)]
    return Report(command="preflight", version="t", started="now", duration_s=0.0, checks=checks,
                  nodes=[NodeInfo(i, f"h{i}", {}) for i in range(3)])


def test_the_same_skip_on_every_node_is_one_row_and_on_some_names_them():
    shown = display_checks(_report(), ordered=False)
    assert [(c.id, c.node, c.summary) for c in shown] == [
        ("gpu.xid", None, "no NVIDIA GPU"),
        ("ib.devices", 0, "no RDMA devices (nodes 0, 2)"),
        ("ib.devices", 1, "mlx5_0 unreadable"),
        ("net.interfaces", 1, "eth1 down")]
    md = render_markdown(_report())
    assert md.count("no NVIDIA GPU") == 1 and "no RDMA devices (nodes 0, 2)" in md
    assert render_junit(_report()).count("gpu.xid[node") == 3  # JUnit: a test case per node, as CI tracks them
