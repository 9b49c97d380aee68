"""Run `python -m ncclcheck ARGS --json FILE` on several lab hosts at once (for the lab benchmark scripts).

The scripts' counterpart of tests/lab/harness.Lab.ncclcheck, without pytest: a lab comes from netlab_lib.up(), each
host's command is wrapped by netlab_lib.host_argv(), and the checkout's code runs (PYTHONPATH = repo root)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .netlab import lib as nl

REPO = Path(__file__).resolve().parents[1]

SCRUBBED_PREFIXES = ("MASTER_", "NCCL_", "GLOO_", "NCCLCHECK_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "TORCHELASTIC_",
                     "TORCH_NCCL_")
SCRUBBED_NAMES = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "ROLE_RANK"}


@dataclass
class Run:
    host: str
    rc: Optional[int]
    elapsed: float
    report: Optional[dict]
    output: str


def lab_name(prefix: str) -> str:
    """A lab name (1-8 chars) no lab on this machine has."""
    taken = nl.registered_labs()
    while True:
        name = prefix + secrets.token_hex(2)
        if name not in taken and not nl.state_path(name).exists():
            return name


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in SCRUBBED_NAMES and not k.startswith(SCRUBBED_PREFIXES)}
    out["PYTHONPATH"] = str(REPO)
    return out


def ncclcheck(state: nl.LabState, hosts_to_args: Mapping[str, Sequence[str]], deadline: float) -> dict[str, Run]:
    """Start every host's command at once; kill (process group) whatever still runs after deadline seconds."""
    scratch = Path(tempfile.mkdtemp(prefix="ncclcheck-labrun-"))
    procs = {}
    start = time.monotonic()
    for host, args in hosts_to_args.items():
        argv = [sys.executable, "-m", "ncclcheck", *map(str, args), "--json", str(scratch / f"{host}.json")]
        out = open(scratch / f"{host}.out", "w+")
        procs[host] = (subprocess.Popen(nl.host_argv(state, host, argv), stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, env=env(), cwd=scratch, start_new_session=True),
                       out)
    runs = {}
    for host, (proc, out) in procs.items():
        try:
            proc.wait(timeout=max(0.0, start + deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        elapsed = time.monotonic() - start  # an upper bound for hosts waited on after a slower one
        out.seek(0)
        try:
            report = json.loads((scratch / f"{host}.json").read_text())
        except (OSError, ValueError):
            report = None
        runs[host] = Run(host, proc.returncode, elapsed, report, out.read())
        out.close()
    shutil.rmtree(scratch, ignore_errors=True)
    return runs
