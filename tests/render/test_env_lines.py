"""`ncclcheck env` says what it read: an NVIDIA module that is not loaded is said so (no blank version), and a
code tree with no files says so instead of a digest (sha256 of nothing identifies no code)."""

from __future__ import annotations

import os

from rich.console import Console

from ncclcheck.model import NodeInfo, Report
from ncclcheck.render.console import render_env


def _shown(facts: dict) -> str:
    rep = Report(command="env", version="t", started="now", duration_s=0.0, checks=[],
                 nodes=[NodeInfo(0, "vm", facts)])
    term = Console(width=300, record=True, file=open(os.devnull, "w"))
    for part in render_env(rep):
        term.print(part, crop=False)
    return term.export_text()


def test_a_module_not_loaded_and_a_hash_of_nothing_are_said():
    gdr = {"peer_memory": {"nvidia_peermem": {"present": False}}, "nvidia_module": {"loaded": False},
           "kernel": "6.1", "not_read": []}
    empty = {"path": "/tmp/x", "kind": "tree", "hash": "sha256:e3b0c44298fc1c149afb", "files": 0, "bytes": 0}
    text = _shown({"gdr": gdr, "code": empty})
    assert "NVIDIA module not loaded;" in text and "module  not" not in text
    assert "tree /tmp/x: no files to hash (an empty folder" in text and "sha256" not in text
    gdr["nvidia_module"] = {"loaded": True, "version": "580.1", "taint": ""}
    tree = {**empty, "files": 12}
    text = _shown({"gdr": gdr, "code": tree})
    assert "NVIDIA module 580.1 taint (none)" in text and "(12 files)" in text
