"""The fake scontrol for tests: a PATH holding `scontrol` (tests/fake_scontrol.py), its node table and the
argv of every call, for tests of health/sweep draining."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

FAKE = Path(__file__).with_name("fake_scontrol.py")


class FakeSlurm:
    def __init__(self, tmp: Path):
        self.bin = tmp / "bin"
        self.bin.mkdir()
        (self.bin / "scontrol").write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
        (self.bin / "scontrol").chmod(0o755)
        self.state, self.log = tmp / "nodes.json", tmp / "calls.log"
        self.log.write_text("")
        self.mode = "ok"

    def nodes(self, **nodes: tuple) -> None:
        """name=(State, Reason or None[, Gres])."""
        self.state.write_text(json.dumps({n: {"State": v[0], "Reason": v[1], "Gres": v[2] if len(v) > 2 else None}
                                          for n, v in nodes.items()}))

    def node(self, name: str) -> dict:
        return json.loads(self.state.read_text())[name]

    def calls(self) -> list:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def updates(self) -> list:
        return [c for c in self.calls() if c and c[0] == "update"]

    def env(self, **extra: str) -> dict:
        """Its own variables only (PATH with the fake scontrol first): run_cli's cli_env() adds the rest of the
        environment, without the shell's NCCL_* variables (an image's NCCL_VERSION read as drift) and GPUs."""
        return {"PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
                "FAKE_SCONTROL_STATE": str(self.state), "FAKE_SCONTROL_LOG": str(self.log),
                "FAKE_SCONTROL_MODE": self.mode, **extra}
