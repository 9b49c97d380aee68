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
