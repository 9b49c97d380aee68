"""Every class torch's own flight-recorder analyzer tests, and point-to-point hangs, named by diagnose (issue 46):
dumps written as torch writes them (tests/postmortem/fr_classes.py), diagnosed as a user would (ncclcheck diagnose
DIR); torch's own matcher is run beside on the same entries and must see the class we name."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from ncclcheck.postmortem.diagnose import diagnose
from tests.postmortem import fr_classes
from tests.postmortem.test_diagnose import FIX

CASES = sorted(fr_classes.CASES)


def _diagnose(tmp_path, case):
    rep = diagnose([fr_classes.write(str(tmp_path), case)])
    pm = rep.extra["postmortem"]
    return rep, pm, next((c for c in pm["causes"] if c["cause"]), None)


@pytest.mark.parametrize("case", CASES)
def test_each_class_is_named_and_healthy_stays_healthy(tmp_path, case):
    _, kind, ranks, _ = fr_classes.CASES[case]
    rep, pm, root = _diagnose(tmp_path, case)
    if kind is None:
        assert root is None and rep.exit_code == 0, pm["causes"]
        assert rep.checks[0].status.value == "pass"
    else:
        assert root is not None and (root["kind"], root["ranks"]) == (kind, ranks), pm["causes"]
        assert rep.exit_code == 1


ONE_COLLECTIVE = ["type", "size_input", "size_output", "size_own", "state", "dtype_output"]


@pytest.mark.parametrize("case", ONE_COLLECTIVE)
def test_torchs_own_matcher_sees_the_class_we_name(tmp_path, case):
    from torch.distributed.flight_recorder.components.utils import match_one_event

    dumps = fr_classes.CASES[case][0]()
    a, b = dumps[0]["entries"][0], dumps[1]["entries"][0]
    assert match_one_event(a, b, {"0": {0, 1}}, "0").state.name == fr_classes.CASES[case][3]


def test_a_coalesced_group_names_the_op_and_its_position(tmp_path):
    _, _, root = _diagnose(tmp_path, "coalesced_size_3")
    assert root["position"] == 1 and root["side"] == "input"
    assert "op 2 of 3 (broadcast) of the coalesced group #1" in root["text"]
    assert "rank 0 called broadcast(5x5 Float) where ranks 1, 2 called broadcast(4x4 Float)" in root["text"]


def test_an_output_dtype_mismatch_says_the_output_side(tmp_path):
    _, _, root = _diagnose(tmp_path, "dtype_output_3")
    assert root["side"] == "output" and "-> 4x4 Half" in root["text"], root["text"]


def test_an_unmatched_send_says_who_waits_for_whom_and_what_the_peer_does(tmp_path):
    _, pm, root = _diagnose(tmp_path, "p2p_unmatched")
    assert root["text"].startswith("rank 0 waits in send #1 (1024 Float) to rank 1; rank 1 never posted the recv "
                                   "from rank 0 and waits in all_reduce #3 of default_pg"), root["text"]
    # rank 0 did not skip all_reduce #3: it is stuck in its send, a consequence
    assert not any(c["cause"] and c["kind"] == "never_entered" for c in pm["causes"])
    blocked = next(c for c in pm["causes"] if c["kind"] == "blocked")
    assert blocked["ranks"] == [0] and "send #1" in blocked["text"]


def test_a_pipeline_stage_that_skipped_a_recv_is_named(tmp_path):
    _, _, root = _diagnose(tmp_path, "pipeline_skip")
    assert "rank 1 waits in send #4 (1024 Float) to rank 2; rank 2 never posted the recv from rank 1" in root["text"]


def test_a_cycle_of_sends_is_named_as_one(tmp_path):
    _, _, root = _diagnose(tmp_path, "p2p_cycle")
    assert "rank 0 waits in send #1" in root["text"] and "-> rank 2 waits in send #1 (1048576 Float) to rank 0" \
        in root["text"], root["text"]


def test_sequence_ids_as_decimal_strings_are_read(tmp_path):
    """torch's own analyzer tests write collective_seq_id as "1": the same dumps, the same verdict."""
    d = tmp_path / "strings"
    d.mkdir()
    for r, doc in fr_classes.CASES["coalesced_size_3"][0]().items():
        for e in doc["entries"]:
            e["collective_seq_id"], e["p2p_seq_id"] = str(e["collective_seq_id"]), str(e["p2p_seq_id"])
        (d / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(doc))
    root = next(c for c in diagnose([str(d)]).extra["postmortem"]["causes"] if c["cause"])
    assert root["kind"] == "size_mismatch" and root["ranks"] == [0]


def test_a_dump_read_but_unusable_is_said_never_nothing_wrong(tmp_path):
    for r in (0, 1):
        doc = fr_classes.dump([fr_classes.ar(0, 1), fr_classes.ar(1, 2)], 2)
        for e in doc["entries"]:
            e["collective_seq_id"] = "seq-" + str(e["collective_seq_id"])
        (tmp_path / f"nccl_trace_rank_{r}.json").write_text(json.dumps({**doc, "entries": [
            {**e, "process_group": list(e["process_group"])} for e in doc["entries"]]}))
    rep = diagnose([str(tmp_path)])
    assert rep.exit_code == 1
    coll = next(c for c in rep.checks if c.id == "postmortem.collectives")
    assert "collective_seq_id" in rep.checks[0].summary and "none of its 2 entries" in rep.checks[0].summary
    # said once, by the root cause: the check that holds it refers to it and is not a second failure
    assert coll.status.value == "warn" and "rank 1's flight-recorder dump" in coll.summary, coll.summary
    assert coll.summary.endswith(", because of the root cause (postmortem.root_cause)")
    assert [c.id for c in rep.checks if c.status.value == "fail"] == ["postmortem.root_cause"]


def test_a_subgroup_is_named_with_its_ranks():
    """issue 44 F: a rank missing from a subgroup's collective names that group (its ranks)."""
    rep = diagnose([os.path.join(FIX, "subgroup_skip")])
    assert "all_reduce #2 of process group 1 (ranks 1, 2, 3)" in rep.checks[0].summary, rep.checks[0].summary


# staged for real with gloo under torchrun (make_fixtures.py): what gloo's recorder keeps of each class
STAGED = [("coalesced_size", "size_mismatch", [3], "broadcast #5 of default_pg: rank 3 called broadcast(5x5 Float)"),
          ("output_dtype", "exception", [3], "different dtypes"),  # refused on the culprit before it is recorded
          # no send/recv in gloo's recorder: the rank stuck in its send never entered the loss all_reduce (an op id
          # in pg_status, once read as a sequence id, had named "collective #5")
          ("pipeline_skip", "never_entered", [1], "never entered all_reduce #4 of default_pg"),
          ("p2p_size", "collective_mismatch", [1], "SIGABRT")]


@pytest.mark.parametrize("case, kind, ranks, words", STAGED)
def test_gloo_staged_classes_name_the_culprit(case, kind, ranks, words):
    rep = diagnose([os.path.join(FIX, case)])
    root = next(c for c in rep.extra["postmortem"]["causes"] if c["cause"])
    assert (root["kind"], root["ranks"]) == (kind, ranks) and rep.exit_code == 1, root
    assert words in rep.extra["postmortem"]["verdict"], rep.extra["postmortem"]["verdict"]
