"""One agreement: the decider publishes, members adopt and acknowledge; a member's code is never lowered by what it
reads, and only ncclcheck's exit codes count (issue 21)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ncclcheck.rendezvous import agree
from ncclcheck.rendezvous.budget import FIXED
from ncclcheck.rendezvous.store import JsonStore

QUICK = replace(FIXED, final_agreement_s=0.3, wait_slice_s=0.1)


@pytest.mark.parametrize("own, published, left_with", [(0, 1, 1), (1, 0, 1), (0, 0, 0), (1, 3, 3), (3, 0, 3)])
def test_a_member_leaves_with_the_worse_of_its_own_and_the_agreed_code(hash_store, own, published, left_with):
    st = JsonStore(hash_store)
    assert agree.exit_code(st, "world/final", published, True, 1, QUICK) == published
    assert agree.exit_code(st, "world/final", own, False, 2, QUICK) == left_with


@pytest.mark.parametrize("forged", [b'{"exit_code": 7}', b'{"exit_code": "0"}', b'{"exit_code": true}', b"[0]"])
def test_a_forged_agreement_is_ignored_and_named(hash_store, forged):
    st = JsonStore(hash_store)
    hash_store.set("world/final", forged)
    assert agree.exit_code(st, "world/final", 1, False, 2, QUICK) == 1
    assert st.rejected and st.rejected[0].startswith("world/final:")


def test_without_an_agreement_a_member_keeps_its_own_code(hash_store):
    assert agree.exit_code(JsonStore(hash_store), "world/final", 1, False, 2, QUICK) == 1


def test_the_decider_waits_for_every_acknowledgement(hash_store):
    st = JsonStore(hash_store)
    agree.publish(st, "k", {"v": 1})
    assert not agree.await_acks(st, "k", 2, QUICK.deadline(0.2), QUICK)
    assert agree.adopt(st, "k", QUICK.deadline(1.0), QUICK) == {"v": 1}
    agree.acknowledge(st, "k")
    assert agree.await_acks(st, "k", 2, QUICK.deadline(1.0), QUICK)


def test_a_member_that_outlasts_the_store_leaves_only_after_the_decider_is_done(tcp_store):
    """outlast=True (a guard member whose script connects to the same port next): it leaves after the decider read
    every ack and said `closing`, not right after its own ack, while the decider still holds the store."""
    import datetime as dt
    import threading

    import torch.distributed as dist

    slow = replace(FIXED, final_agreement_s=60.0, wait_slice_s=0.1)
    left: list = []

    def member(name: str, outlast: bool) -> None:
        client = dist.TCPStore("127.0.0.1", tcp_store.port, None, False, timeout=dt.timedelta(seconds=60))
        agree.exit_code(JsonStore(client), "f", 0, False, 3, slow, outlast=outlast)
        left.append((name, client.add("f/acks", 0), client.check(["f/closing"])))  # acks and `closing` as it left

    decider = threading.Thread(target=agree.exit_code, args=(JsonStore(tcp_store), "f", 0, True, 3, slow))
    decider.start()
    first = threading.Thread(target=member, args=("outlasting", True))
    first.start()
    assert JsonStore(tcp_store).wait(["f/ack/1"], slow.deadline(60.0), slow)  # it has read the code and acked
    assert not left  # ... and still waits: the decider waits for the second member's ack
    member("second", False)
    for t in (decider, first):
        t.join(60)
    assert ("outlasting", 2, True) in left and [x[0] for x in left].count("second") == 1, left
