"""The open-file limit for the world: raised up to the hard limit when node 0 needs it, named when still too low."""

import resource

from ncclcheck.agent.limits import BASE_FDS, ensure_nofile, nofile_needed
from ncclcheck.checks.local import LocalInput, check_nofile
from ncclcheck.model import Status
from tests.fakefacts import facts


class FakeLimit:
    """RLIMIT_NOFILE of a pretend process: getrlimit/setrlimit that enforce soft <= hard like the kernel."""

    def __init__(self, soft, hard, refuse=False):
        self.soft, self.hard, self.refuse, self.calls = soft, hard, refuse, []

    def get(self, which):
        assert which == resource.RLIMIT_NOFILE
        return self.soft, self.hard

    def set(self, which, pair):
        self.calls.append(pair)
        if self.refuse:
            raise OSError(1, "Operation not permitted")
        soft, hard = pair
        assert hard == self.hard and (hard == resource.RLIM_INFINITY or soft <= hard)
        self.soft = soft


def test_node0_needs_a_descriptor_per_node_the_others_a_constant():
    assert nofile_needed(8192, True) - nofile_needed(4096, True) == 4096
    assert nofile_needed(8192, False) == nofile_needed(2, False) == BASE_FDS


def test_a_1024_soft_limit_is_raised_for_8192_nodes_and_the_check_passes():
    lim = FakeLimit(1024, 65536)
    out = ensure_nofile(8192, True, lim.get, lim.set)
    assert out["raised"] and out["soft_before"] == 1024 and out["soft"] == nofile_needed(8192, True)
    r = check_nofile(LocalInput.of(facts(), node_rank=0, multi_node=True, nofile=out))
    assert r.status is Status.PASS and "raised it from 1,024" in r.summary


def test_a_hard_limit_below_the_world_is_named_with_the_fixes():
    lim = FakeLimit(1024, 4096)
    out = ensure_nofile(8192, True, lim.get, lim.set)
    assert out["soft"] == 4096  # raised as far as the hard limit allows
    r = check_nofile(LocalInput.of(facts(), node_rank=0, multi_node=True, nofile=out))
    assert r.status is Status.FAIL and "4,096" in r.summary and f"{nofile_needed(8192, True):,}" in r.summary
    for fix in ("ulimit -n", "LimitNOFILE", "PropagateResourceLimits"):
        assert fix in r.fix


def test_a_refused_raise_is_named_and_nothing_is_raised_when_enough():
    lim = FakeLimit(1024, 65536, refuse=True)
    out = ensure_nofile(8192, True, lim.get, lim.set)
    assert not out["raised"] and "not permitted" in out["error"]
    r = check_nofile(LocalInput.of(facts(), node_rank=0, multi_node=True, nofile=out))
    assert r.status is Status.FAIL and "not permitted" in r.summary
    lim = FakeLimit(1024, 65536)
    out = ensure_nofile(64, False, lim.get, lim.set)
    assert lim.calls == [] and not out["raised"]
    unl = FakeLimit(resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    assert ensure_nofile(100000, True, unl.get, unl.set)["soft"] is None and unl.calls == []


def test_single_node_skips():
    assert check_nofile(LocalInput.of(facts())).status is Status.SKIP


def test_node_0_of_a_large_world_spaces_out_the_collector_and_puts_it_back():
    import gc

    from ncclcheck.agent.limits import COLLECTOR_GEN0, COLLECTOR_NODES, spaced_collector

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with spaced_collector(COLLECTOR_NODES, holds_world=True):
            assert gc.get_threshold() == (COLLECTOR_GEN0, 10, 10)
        assert gc.get_threshold() == (700, 10, 10)
        with spaced_collector(COLLECTOR_NODES - 1, holds_world=True):  # a small world: as it was
            assert gc.get_threshold() == (700, 10, 10)
        with spaced_collector(16384, holds_world=False):  # a member holds its own node only
            assert gc.get_threshold() == (700, 10, 10)
        try:  # put back when the preflight raises too (guard() runs inside the user's process)
            with spaced_collector(16384, holds_world=True):
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            pass
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_a_bounded_hold_of_a_large_world_pauses_the_collector_and_puts_it_back_as_it_was():
    """watch's look holds every rank's decoded recorder for at most its bound: the collector does not run in it; after
    it, the collector is enabled again only where it was before (the API's watch() runs in the user's process)."""
    import gc

    from ncclcheck.agent.limits import COLLECTOR_NODES, spaced_collector

    was = gc.isenabled()
    try:
        gc.enable()
        with spaced_collector(COLLECTOR_NODES, bounded=True):
            assert not gc.isenabled()
        assert gc.isenabled()
        with spaced_collector(COLLECTOR_NODES - 1, bounded=True):  # a small look: as it was
            assert gc.isenabled()
        try:
            with spaced_collector(COLLECTOR_NODES, bounded=True):
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            pass
        assert gc.isenabled()
        gc.disable()  # the user's own choice stays
        with spaced_collector(COLLECTOR_NODES, bounded=True):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_the_message_says_what_is_counted_and_whether_it_is_enough():
    """Issue 53: 'covers the 258 descriptors this node probes its mesh peers needs' left a new user guessing."""
    lim = FakeLimit(20000, 20000)
    host = check_nofile(LocalInput.of(facts(), node_rank=0, multi_node=True, nofile=ensure_nofile(2, True, lim.get,
                                                                                                    lim.set)))
    assert host.summary == (f"open-file limit (ulimit -n) 20,000 is enough: this node needs "
                            f"{nofile_needed(2, True):,} open files (ncclcheck's own files plus one connection per "
                            "node: this node hosts the rendezvous of 2 nodes)")
    peer = check_nofile(LocalInput.of(facts(), node_rank=1, multi_node=True, nofile=ensure_nofile(2, False, lim.get,
                                                                                                    lim.set)))
    assert peer.summary.endswith(f"needs {BASE_FDS:,} open files (ncclcheck's own files and its probes of the other "
                                 "nodes)")
    low = FakeLimit(100, 100)
    bad = check_nofile(LocalInput.of(facts(), node_rank=0, multi_node=True, nofile=ensure_nofile(2, True, low.get,
                                                                                                   low.set)))
    assert bad.status is Status.FAIL and "is too low: this node needs" in bad.summary
    one = check_nofile(LocalInput.of(facts()))
    assert "multi-node" in one.summary and "store" not in one.summary
