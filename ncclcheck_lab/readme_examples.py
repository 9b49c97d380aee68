"""Run every code block of README.md as pasted, in order, in one fresh temporary directory, as a new user would.

A block is a fenced ```bash / ```sh / ```console / ```python block: a shell block runs through bash as one script
(a ```console block's `$ ` lines only), a Python block through python3 as one script. An inline `code` span that is a
command (`ncclcheck ...`, `python3 ...`, `torchrun ...`) runs on its own. Blocks share the directory, so a file one
block writes (train.py, run.json) is there for the next, as in a user's terminal. `ncclcheck` on PATH means this
checkout.

What cannot run on one machine is listed with the reason (SKIPS: several nodes, an allocation, root, an install);
what a block must show is checked (EXPECT: the verdict a failure demo must print, the exit code it ends with). A
block that matches no skip rule and exits otherwise, or prints a traceback, fails the script (exit 1). Each block's
processes are stopped when it ends (its own session), so a demo that starts a job in the background leaves nothing.

Each page of docs/ opens with the task and its examples (`--openings`): the shell and Python blocks above its first
`## ` heading. The openings run the same way, one directory for all of them; one that is a README block word for word
is the README's run.

    python3 scripts/readme_examples.py            # run them; a table of ok / SKIP / FAIL
    python3 scripts/readme_examples.py --list     # what would run and what is skipped, and why
    python3 scripts/readme_examples.py --openings # every docs page's opening example
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Optional

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
TIMEOUT_S = 300  # one block: a demo job under torchrun on a loaded 2-core machine is the longest

# (pattern, reason): the first that matches a line of an example skips the whole example. Each reason says why it
# cannot run here and, where one exists, what runs it instead.
SKIPS = (
    (r"^pip install", "installs into the environment (network, minutes); this script runs the checkout itself, "
     "and CI's .ci/run installs it exactly so"),
    (r"python3? -m pytest", "the test suite itself (this script is one of its tests)"),
    (r"scripts/readme_examples\.py", "this script itself: it would run itself again"),
    (r"scripts/long_tests\.py", "the suite's long tier (tens of minutes of labs, as root); tests/test_tooling.py "
     "checks that the two tiers together collect every test"),
    (r"^sudo scripts/netlab|^scripts/netlab", "builds a network-namespace lab as root (tests/lab/test_netlab.py "
     "runs it)"),
    (r"scripts/bench_scale\.py", "a benchmark of minutes (thousands of simulated nodes); its small run is "
     "tests/scripts' and tests/preflight's"),
    (r"scripts/bench_live\.py", "a benchmark of minutes (thousands of simulated ranks in a private network "
     "namespace, as root); its small run is tests/scripts/test_bench_live.py"),
    (r"scripts/bench_vs_nccl_tests\.py", "needs an NVIDIA GPU, nvcc and an nccl-tests source tree (DIR); "
     "tests/bench/test_bench_vs_nccl_tests.py runs its parsers and refusals, docs/gpu.md its run on a lent H100"),
    (r"--master-addr (h1|10\.)|--rdzv-endpoint h1",
     "several nodes of a cluster: run it on each node (tests/lab runs the same commands on namespace hosts)"),
    (r"(^|\s)(srun|mpirun|salloc|sbatch)\b", "needs a Slurm / Open MPI allocation of several nodes "
     "(tests/lab/test_launchers_lab.py runs the same commands on namespace hosts)"),
    (r"\bscontrol\b", "reads a Slurm allocation (outside one it looks its controller up in DNS); "
     "tests/lab/test_guard_lab.py runs these lines under salloc"),
    (r"^fabric run", "several nodes through Lightning's launcher (tests/lab/test_launchers_lab.py)"),
    (r"^ncclcheck diagnose (/shared/|DIR)", "reads what a failed job left on a shared path (the README's own "
     "failing job above is diagnosed as pasted)"),
    (r"^ncclcheck watch --master-addr H\b", "watches a running job (H and P its master; the README's own hanging "
     "job above is watched as pasted)"),
)


class Expect(NamedTuple):
    pattern: str  # the first line of the example it applies to
    rc: int  # the exit status the example ends with (a shell block: its last command's)
    shows: str  # a regex its output must match: the verdict the demo exists to show
    why: str
    fails: str = ""  # a regex of the block's commands that exit non-zero by design (the failing job, the verdict)


# What a demo must show, and its commands that exit non-zero by design. Every other command must exit 0 (a shell
# block's failing commands are reported by an ERR trap, so one that fails in the middle of a block is seen too).
EXPECT = (
    Expect(r"^cat > job\.log", 1, r"root cause: \[postmortem\.root_cause\] rank 2 never entered all_reduce #1204",
           "diagnose names the rank missing from the watchdog lines of a pasted log", r"^ncclcheck diagnose job\.log"),
    Expect(r"^cat > train\.py", 0, r"ncclcheck preflight .*PASS", "the guard's one line on a healthy job"),
    Expect(r"^cat > fail\.py", 1, r"root cause: \[postmortem\.root_cause\] rank 1 .*RuntimeError: simulated bug",
           "diagnose exits 1 when it names a cause: rank 1 and its exception",
           r"^torchrun .*fail\.py|^ncclcheck diagnose"),
    Expect(r"^cat > hang\.py", 0, r"rank 1 \(host [^)]*\).*all_reduce #6",
           "watch names rank 1 and the all_reduce the other rank waits in (the block ends by stopping the job)",
           r"^ncclcheck watch|^kill "),
    Expect(r"^ncclcheck preflight --nnodes 2 --node-rank 1 --master-addr 127\.0\.0\.1", 0,
           r"ncclcheck preflight 2 nodes, 2 ranks.*\nPASS ", "two nodes on one machine form a world: the first "
           "screen's header and verdict"),
    # docs/'s openings
    Expect(r"^cat > slow\.py", 0, r"root cause: \[live\.slow\] rank 1 \(host [^)]*\) calls collectives late",
           "watch names rank 1 as the one that slows every step (the block ends by stopping the job)",
           r"^ncclcheck watch|^kill "),
    Expect(r"^python3 -c 'import secrets", 0, r"trust: token.*\nPASS ", "two nodes with a token pass, and the report "
           "says its trust level"),
    Expect(r"^ncclcheck preflight --nnodes 2 --node-rank 0 --master-addr 127\.0\.0\.1 --master-port 29516", 1,
           r"root cause: \[rendezvous\.world\] .*node rank\(s\) 1", "node 0 of two alone names the node that never "
           "joined as its root cause", r"^ncclcheck preflight"),
)
SHELL_LANGS = ("bash", "sh", "shell", "console")
COMMAND = re.compile(r"^(ncclcheck( |$)|python3? |torchrun |srun |mpirun |fabric |sudo |pip |source |import ncclcheck)")


@dataclass
class Example:
    line: int
    text: str
    lang: str = "bash"  # bash (a shell script) or python

    @property
    def first(self) -> str:
        return next((ln.strip() for ln in self.text.splitlines() if ln.strip() and not ln.strip().startswith("#")),
                    "")

    @property
    def skip(self) -> Optional[str]:
        code = [_code(ln) for ln in self.text.splitlines()] if self.lang == "bash" else self.text.splitlines()
        for pattern, reason in SKIPS:
            if any(re.search(pattern, ln) for ln in code):
                return reason
        return None

    @property
    def in_checkout(self) -> bool:
        """A block of the developers' commands (scripts/, lint-imports) runs where they are: in the checkout."""
        return any(re.search(r"(^|\s)(python3? scripts/|lint-imports\b)", _code(ln)) for ln in self.text.splitlines())

    @property
    def expect(self) -> Optional[Expect]:
        return next((e for e in EXPECT if re.search(e.pattern, self.first)), None)


def _code(line: str) -> str:
    """A shell line without its comment (a comment may name a command the line does not run)."""
    return re.sub(r"(^|\s)#.*$", "", line).strip()


def examples(readme: str) -> list[Example]:
    """The README's examples in order: fenced code blocks whole, then inline spans that are commands."""
    out: list[Example] = []
    lines = readme.splitlines()
    fence: Optional[str] = None
    body: list = []
    start = 0
    for i, line in enumerate(lines, 1):
        s = line.strip()
        if s.startswith("```"):
            if fence is None:
                fence, body, start = (s[3:].strip() or "text"), [], i + 1
                continue
            if fence in SHELL_LANGS:
                if fence == "console":
                    body = [ln.strip()[2:] for ln in body if ln.strip().startswith("$ ")]
                if any(ln.strip() and not ln.strip().startswith("#") for ln in body):
                    out.append(Example(start, "\n".join(body) + "\n", "bash"))
            elif fence == "python":
                out.append(Example(start, "\n".join(body) + "\n", "python"))
            fence = None
            continue
        if fence is not None:
            body.append(line)
    # inline spans may wrap across lines: search the prose with the fenced blocks and tables blanked out (a table's
    # cells name commands; they are not examples)
    prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), readme, flags=re.S)
    prose = re.sub(r"(?m)^\|.*$", "", prose)
    for m in re.finditer(r"`([^`]+)`", prose):
        text = " ".join(m.group(1).split())
        if COMMAND.match(text) and not text.startswith("ncclcheck-"):
            lang = "python" if text.startswith("import ") else "bash"
            out.append(Example(prose.count("\n", 0, m.start()) + 1, text + "\n", lang))
    seen, unique = set(), []
    for e in out:
        if e.text not in seen:
            seen.add(e.text)
            unique.append(e)
    return sorted(unique, key=lambda e: e.line)


def opening(text: str) -> list:
    """A page's opening examples: its shell and Python blocks above its first `## ` heading."""
    head = text.split("\n## ", 1)[0]
    lines = head.splitlines()
    return [e for e in examples(head) if 1 < e.line <= len(lines) + 1 and lines[e.line - 2].lstrip().startswith("```")]


def openings() -> list:
    """(page name, its opening examples) of every docs page, in name order."""
    return [(page.name, opening(page.read_text(encoding="utf-8"))) for page in sorted(DOCS.glob("*.md"))]


def _shim(bindir: Path) -> None:
    """`ncclcheck` on PATH runs this checkout (not an installed copy), whatever the working directory."""
    exe = bindir / "ncclcheck"
    exe.write_text(f'#!/bin/sh\nexec {sys.executable} -m ncclcheck "$@"\n')
    exe.chmod(0o755)


def _stop(p: subprocess.Popen) -> None:
    """Stop whatever the example left running in its session (a demo's background job), then reap it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=10)
            time.sleep(0.5 if sig == signal.SIGTERM else 0)  # the session's other members get their signal too
        except subprocess.TimeoutExpired:
            continue


FAILED = "README-EXAMPLE-FAILED"
# Reports each failing command of a shell block (not those inside && / || lists or in the background), its exit
# status and its line, without changing how the block runs as pasted.
TRAP = f"trap 'echo \"{FAILED} (exit $?): $BASH_COMMAND\"' ERR\n"


def run_one(e: Example, work: Path, env: dict) -> tuple:
    """(exit status or "timeout", output) of one example run in `work`."""
    argv = [sys.executable, "-"] if e.lang == "python" else ["bash", "-s"]
    script = e.text if e.lang == "python" else TRAP + e.text
    p = subprocess.Popen(argv, cwd=REPO if e.in_checkout else work, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(script, timeout=TIMEOUT_S)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        _stop(p)
        out, rc = (p.communicate()[0] or ""), "timeout"
    _stop(p)
    return rc, out


def verdict(e: Example, rc, out: str) -> Optional[str]:
    """None when the example did what the README says, else why not."""
    want = e.expect
    if rc != (want.rc if want else 0):
        return f"exit {rc}, expected {want.rc if want else 0}"
    for failed in re.findall(FAILED + r" \(exit \d+\): (.*)", out):
        if not (want and want.fails and re.search(want.fails, failed.strip())):
            return f"a command failed: {failed.strip()}"
    if "Traceback (most recent call last)" in out and not (want and want.rc):
        return "printed a traceback"
    if want and not re.search(want.shows, out, flags=re.S):
        return f"did not show /{want.shows}/ ({want.why})"
    return None


def run(selected: list, keep: bool = False, where: str = "README") -> int:
    """Run each example (an Example of `where`, or a (page, Example) pair) in one temporary directory."""
    items = [(where, e) if isinstance(e, Example) else e for e in selected]
    work = Path(tempfile.mkdtemp(prefix="ncclcheck-readme-"))
    bindir = work / ".bin"
    bindir.mkdir()
    _shim(bindir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL", "MASTER_", "SLURM_", "OMPI_", "TORCH"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GLOO_SOCKET_IFNAME", "PYTEST_CURRENT_TEST")}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO),
               NCCLCHECK_LOG_DIR=str(work / ".logs"), COLUMNS="120")
    failed = 0
    try:
        for at, e in items:
            head = e.first if len(e.text.splitlines()) == 1 else f"{e.first}  [{len(e.text.splitlines())} lines]"
            if e.skip:
                print(f"SKIP  {at}:{e.line:<4} {head}\n      {e.skip}")
                continue
            t0 = time.monotonic()
            rc, out = run_one(e, work, env)
            took = time.monotonic() - t0
            why = verdict(e, rc, out)
            if why is None:
                print(f"ok    {at}:{e.line:<4} {head}  ({took:.1f} s)")
            else:
                failed += 1
                tail = "\n".join("      | " + ln for ln in out.splitlines()[-25:])
                print(f"FAIL  {at}:{e.line:<4} {head}  ({why}, {took:.1f} s)\n{tail}")
    finally:
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    ran = sum(1 for _, e in items if not e.skip)
    print(f"{ran - failed} of {ran} examples ran ok, {failed} failed, {len(selected) - ran} skipped (reasons above)")
    return 1 if failed else 0


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="list the examples and the skip reasons; run nothing")
    ap.add_argument("--only", metavar="REGEX", help="only the examples matching this (the others are not listed)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (its path is printed)")
    ap.add_argument("--openings", action="store_true", help="every docs page's opening example instead (one that is "
                    "a README block word for word is the README's run)")
    args = ap.parse_args(argv)
    if args.openings:
        readme = {e.text for e in examples(README.read_text(encoding="utf-8"))}
        pages = [(f"docs/{name}", e) for name, es in openings() for e in es if e.text not in readme
                 and (not args.only or re.search(args.only, e.text))]
        if args.list:
            for at, e in pages:
                print(f"{'SKIP' if e.skip else 'run '}  {at}:{e.line:<4} {e.first}" + (f"\n      {e.skip}" if e.skip
                                                                                     else ""))
            return 0
        return run(pages, args.keep)
    selected = [e for e in examples(README.read_text(encoding="utf-8"))
                if not args.only or re.search(args.only, e.text)]
    if args.list:
        for e in selected:
            print(f"{'SKIP' if e.skip else 'run '}  README:{e.line:<4} {e.first}" + (f"\n      {e.skip}" if e.skip
                                                                                    else ""))
        return 0
    return run(selected, args.keep)


if __name__ == "__main__":
    sys.exit(main())
