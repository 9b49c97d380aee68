"""scontrol is given one node's name or nothing (issue 63): `NodeName=gpu[01-99]` or `NodeName=a,b` is a hostlist
to Slurm, so a hostname recorded from another node must not widen a drain."""

from __future__ import annotations

import pytest

from ncclcheck.health.scontrol import Scontrol, ScontrolError


@pytest.mark.parametrize("name", ["gpu[01-99]", "gpu01,gpu02", "gpu01 gpu02", "ALL", "a=b", "", "x" * 300])
def test_a_hostlist_or_a_list_is_never_passed_to_scontrol(name):
    sc = Scontrol(binary="", dry_run=True)
    with pytest.raises(ScontrolError, match="not one node's name"):
        sc.drain(name, "r")
    with pytest.raises(ScontrolError):
        sc.resume(name)
    assert sc.commands == []


def test_one_nodes_name_is_passed():
    sc = Scontrol(binary="", dry_run=True)
    sc.drain("gpu-017.cluster_a", "ncclcheck: gpu.xid")
    assert sc.commands == ["scontrol update NodeName=gpu-017.cluster_a State=DRAIN 'Reason=ncclcheck: gpu.xid'"]
