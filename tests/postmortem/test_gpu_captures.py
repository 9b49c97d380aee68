"""Real NCCL jobs on a lent H100 and a lent H200 (fixtures/gpu-h100, fixtures/gpu-h200, made by
fixtures/gpu/make_gpu_captures.sh; each README's table says what each must tell), and the live dump
`ncclcheck watch --dump` kept of a real NCCL job whose GPU was stuck
(tests/live/fixtures/gpu-stuck-live, tests/live/test_watch_gpu.py). Each read by `ncclcheck diagnose` as a user would.
These replace, as evidence, the lines rendered from format strings (fixtures/nccl_rendered) for the same causes."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import REPO, run_cli

FIXTURES = os.path.join(REPO, "tests", "postmortem", "fixtures")
# each card's captures, and the cases it holds (the H200's `guarded` ran without HOSTLIST_DIR: its README says why)
CARDS = {"gpu-h100": 9, "gpu-h200": 8}
LIVE = os.path.join(REPO, "tests", "live", "fixtures", "gpu-stuck-live")
WRAPPER = "invalid usage"  # torch's wrapper of an NCCL error: never the headline where NCCL's own line exists


def diagnosed(folder: str) -> tuple[int, dict, dict]:
    p = run_cli("diagnose", folder, "--json", "-")
    doc = json.loads(p.stdout)
    return p.returncode, next(c for c in doc["checks"] if c["id"] == "postmortem.root_cause"), doc


def _cases(names: list) -> list:
    return [(card, n) for card in CARDS for n in names if os.path.isdir(os.path.join(FIXTURES, card, n))]


@pytest.mark.parametrize("card", sorted(CARDS))
def test_every_folder_is_in_the_table_with_how_it_was_made(card):
    gpu = os.path.join(FIXTURES, card)
    table = open(os.path.join(gpu, "README.md")).read()
    folders = sorted(d for d in os.listdir(gpu) if os.path.isdir(os.path.join(gpu, d)))
    assert len(folders) == CARDS[card]
    for d in folders:
        assert f"| {d} |" in table
        how = open(os.path.join(gpu, d, "HOW.txt")).read()
        assert how.startswith(f"case {d}: torchrun") and "exit " in how
    assert "nccl 2.28.9" in open(os.path.join(gpu, "versions.txt")).read()


@pytest.mark.parametrize("card, case", _cases(["healthy", "guarded", "ib_fallback"]))
def test_a_job_that_ended_well_is_said_to_have_ended_well(card, case):
    rc, root, doc = diagnosed(os.path.join(FIXTURES, card, case))
    assert rc == 0 and root["status"] == "pass", root
    if case == "ib_fallback":  # NCCL_IB_HCA named an HCA this host lacks: NCCL said so in INFO and used sockets
        transport = next(c for c in doc["checks"] if c["id"] == "postmortem.transport")
        assert "eth0 over Socket" in transport["summary"]


FAILURES = {
    "net_plugin": ("net_plugin", [0], ("NCCL_NET=IB",)),
    "no_socket_if": ("no_socket_interface", [0], ("socket interface",)),
    "duplicate_gpu": ("duplicate_gpu", [0, 1], ("same GPU", "Duplicate GPU detected")),
    "device_assert": ("device_assert", [0], ("device-side assert",)),
    "gpu_stuck": ("not_started", [0], ("called all_reduce #6", "its GPU never started it")),
    "killed": ("died", [0], ("SIGKILL",)),
}


@pytest.mark.parametrize("card, case", _cases(list(FAILURES)))
def test_each_failure_names_its_rank_and_cause(card, case):
    kind, ranks, words = FAILURES[case]
    rc, root, _ = diagnosed(os.path.join(FIXTURES, card, case))
    assert rc == 1 and root["status"] == "fail", root
    assert root["evidence"]["kind"] == kind and root["evidence"]["ranks"] == ranks, root
    for w in words:
        assert w in root["summary"], (w, root["summary"])
    assert WRAPPER not in root["summary"] and "SignalException" not in root["summary"]


def test_the_live_dump_of_a_stuck_gpu_reads_as_watch_said_it():
    rc, root, _ = diagnosed(LIVE)
    assert rc == 1 and root["evidence"]["kind"] == "not_started" and root["evidence"]["ranks"] == [0], root
    assert "called all_reduce #6 of default_pg but its GPU never started it" in root["summary"]
    # what watch printed live, kept with the record of that run (docs/gpu.md)
    with open(os.path.join(REPO, "docs", "gpu-record", "2026-11-25", "watch_gpu.json")) as f:
        live = next(c for c in json.load(f)["checks"] if c["id"] == "postmortem.root_cause")
    assert live["evidence"]["kind"] == "not_started" and live["evidence"]["ranks"] == [0]
