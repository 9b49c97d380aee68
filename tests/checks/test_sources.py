"""host.sources: a source of the node's facts that did not answer fails the node naming it; a cut output warns."""

from __future__ import annotations

from ncclcheck.checks.local import LocalInput
from ncclcheck.checks.sources import check_sources


def _run(sources):
    return check_sources(LocalInput.of({"sources": sources}, node_rank=0))


def test_a_wedged_source_fails_naming_it():
    r = _run({"bound_s": 10, "unanswered": [{"source": "nvidia-smi",
                                             "why": "nvidia-smi did not answer in 5 s: the driver may be wedged"}],
              "cut": []})
    assert r.status.value == "fail" and r.summary == "nvidia-smi did not answer in 5 s: the driver may be wedged"


def test_a_cut_output_warns_and_every_answer_passes():
    assert _run({"unanswered": [], "cut": [{"source": "journalctl", "why": "journalctl printed more"}]}).status.value \
        == "warn"
    assert _run({"unanswered": [], "cut": []}).status.value == "pass"
    assert _run(None).status.value == "skip" and _run({"unanswered": "x", "cut": 3}).status.value == "pass"
