"""Run every example in README.md literally, in a fresh temporary directory, the way a new user pastes them.

Examples are the lines of the README's ```bash / ```console blocks and the inline `code` spans that are commands
(`ncclcheck ...`, `python3 ...`, `torchrun ...`, `import ncclcheck; ...`). Each one that makes sense on one machine
runs through bash (Python ones through `python3 -c`) with `ncclcheck` on PATH meaning this checkout; the others are
listed with the reason each is skipped (SKIPS below: several nodes, root and a lab, the network, the suite itself).
An example that matches no skip rule and exits non-zero fails the script (exit 1).

    python3 scripts/readme_examples.py            # run them; a table of ok / SKIP / FAIL
    python3 scripts/readme_examples.py --list     # what would run and what is skipped, and why
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
TIMEOUT_S = 300  # one example: the default bench sweep on a loaded 2-core machine is the longest

# (pattern, reason): the first that matches an example skips it. Each reason says why it cannot run here and,
# where one exists, what runs it instead.
SKIPS = (
    (r"^pip install", "installs into the environment (network, minutes); this script runs the checkout itself"),
    (r"python3? -m pytest", "the test suite itself (this script is one of its tests)"),
    (r"scripts/readme_examples\.py", "this script itself: it would run itself again"),
    (r"scripts/long_tests\.py", "the suite's long tier (tens of minutes of labs, as root); tests/test_tooling.py "
     "checks that the two tiers together collect every test"),
    (r"^sudo scripts/netlab", "builds a network-namespace lab as root (tests/lab/test_netlab.py runs it)"),
    (r"scripts/bench_scale\.py", "a benchmark of minutes (1,024 simulated nodes); scripts/bench_scale.py --help"),
    (r"scripts/bench_vs_nccl_tests\.py", "needs an NVIDIA GPU, nvcc and an nccl-tests source tree (DIR); "
     "tests/bench/test_bench_vs_nccl_tests.py runs its parsers and refusals, docs/gpu.md its run on a lent H100"),
    (r"scripts/bench_report\.py REPORT", "measures a saved report of a large run (REPORT.json, made by "
     "scripts/bench_scale.py --json-out); tests/render/test_shared_facts.py reads one back"),
    (r"^(srun|mpirun)\b", "needs a Slurm / Open MPI allocation of several nodes (tests/lab/test_launchers_lab.py)"),
    (r"\bscontrol\b", "reads a Slurm allocation (outside one it looks its controller up in DNS); "
     "tests/lab/test_guard_lab.py runs these lines under salloc"),
    (r"^fabric run", "several nodes through Lightning's launcher (tests/lab/test_launchers_lab.py)"),
    (r"--nnodes [2-9]|--num-nodes [2-9]|--master-addr (h1|10\.)|--rdzv-endpoint h1",
     "several nodes: run it on each node (tests/lab runs the same commands on namespace hosts)"),
    (r"torchrun \.\.\. train\.py", "a placeholder for the user's own training job (tests/lab/test_diagnose_lab.py "
     "runs a real one and diagnoses what it left)"),
    (r"^ncclcheck diagnose (/shared/|DIR)", "reads what a failed job left on a shared path (tests/postmortem makes "
     "real failures and diagnoses them)"),
    (r"^ncclcheck watch --master-addr H\b", "watches a running job (H and P its master; tests/live/test_live_job.py "
     "runs it on a real hung torchrun job)"),
)
COMMAND = re.compile(r"^(ncclcheck( |$)|python3? |torchrun |srun |mpirun |fabric |sudo |pip |source |import ncclcheck)")


@dataclass
class Example:
    line: int
    text: str
    python: bool = False  # run with python3 -c (an inline Python example)

    @property
    def skip(self) -> Optional[str]:
        for pattern, reason in SKIPS:
            if re.search(pattern, self.text):
                return reason
        return None


def examples(readme: str) -> list[Example]:
    """The README's examples in order: block lines (prompts removed), then inline spans that are commands."""
    out: list[Example] = []
    lines = readme.splitlines()
    fence: Optional[str] = None
    held: Optional[Example] = None  # a command whose line ends in a backslash: the next line continues it
    for i, line in enumerate(lines, 1):
        s = line.strip()
        if s.startswith("```"):
            fence = None if fence is not None else (s[3:].strip() or "text")
            if held is not None:  # a block that ends on a backslash: the command is what it holds
                out.append(held)
                held = None
            continue
        if fence in ("bash", "console", "sh", "shell"):
            if held is not None:
                held.text = f"{held.text[:-1].rstrip()} {s}"
                if not s.endswith("\\"):
                    out.append(held)
                    held = None
                continue
            cmd = s[2:] if s.startswith("$ ") else s
            if cmd and not cmd.startswith("#"):
                if cmd.endswith("\\"):
                    held = Example(i, cmd)
                else:
                    out.append(Example(i, cmd))
    # inline spans may wrap across lines: search the prose with the fenced blocks blanked out
    prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), readme, flags=re.S)
    for m in re.finditer(r"`([^`]+)`", prose):
        text = " ".join(m.group(1).split())
        if COMMAND.match(text) and not text.startswith("ncclcheck-"):
            out.append(Example(prose.count("\n", 0, m.start()) + 1, text, python=text.startswith("import ")))
    seen, unique = set(), []
    for e in out:
        if e.text not in seen:
            seen.add(e.text)
            unique.append(e)
    return sorted(unique, key=lambda e: e.line)


def _shim(bindir: Path) -> None:
    """`ncclcheck` on PATH runs this checkout (not an installed copy), whatever the working directory."""
    exe = bindir / "ncclcheck"
    exe.write_text(f'#!/bin/sh\nexec {sys.executable} -m ncclcheck "$@"\n')
    exe.chmod(0o755)


def run(selected: list[Example], keep: bool = False) -> int:
    work = Path(tempfile.mkdtemp(prefix="ncclcheck-readme-"))
    bindir = work / ".bin"
    bindir.mkdir()
    _shim(bindir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL", "MASTER_", "SLURM_", "OMPI_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GLOO_SOCKET_IFNAME")}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO),
               NCCLCHECK_LOG_DIR=str(work / ".logs"), COLUMNS="120")
    failed = 0
    try:
        # Setup, not an example: the saved run that `ncclcheck report RUN.json` names.
        if any("RUN.json" in e.text and not e.skip for e in selected):
            subprocess.run(["ncclcheck", "preflight", "--quiet", "--json", "RUN.json"], cwd=work, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TIMEOUT_S)
        for e in selected:
            if e.skip:
                print(f"SKIP  README:{e.line:<4} {e.text}\n      {e.skip}")
                continue
            argv = [sys.executable, "-c", e.text] if e.python else ["bash", "-c", e.text]
            t0 = time.monotonic()
            try:
                p = subprocess.run(argv, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
                rc, out = p.returncode, p.stdout
            except subprocess.TimeoutExpired as exc:
                rc, out = "timeout", (exc.stdout or b"").decode(errors="replace") if isinstance(
                    exc.stdout, bytes) else (exc.stdout or "")
            took = time.monotonic() - t0
            if rc == 0 and "Traceback" not in out:
                print(f"ok    README:{e.line:<4} {e.text}  ({took:.1f} s)")
            else:
                failed += 1
                tail = "\n".join("      | " + ln for ln in out.splitlines()[-15:])
                print(f"FAIL  README:{e.line:<4} {e.text}  (exit {rc}, {took:.1f} s)\n{tail}")
    finally:
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    ran = sum(1 for e in selected if not e.skip)
    print(f"{ran - failed} of {ran} examples ran ok, {failed} failed, {len(selected) - ran} skipped (reasons above)")
    return 1 if failed else 0


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="list the examples and the skip reasons; run nothing")
    ap.add_argument("--only", metavar="REGEX", help="only the examples matching this")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (its path is printed)")
    args = ap.parse_args(argv)
    selected = [e for e in examples(README.read_text(encoding="utf-8"))
                if not args.only or re.search(args.only, e.text)]
    if args.list:
        for e in selected:
            print(f"{'SKIP' if e.skip else 'run '}  README:{e.line:<4} {e.text}" + (f"\n      {e.skip}" if e.skip
                                                                                   else ""))
        return 0
    return run(selected, args.keep)


if __name__ == "__main__":
    sys.exit(main())
