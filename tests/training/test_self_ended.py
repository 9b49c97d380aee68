"""A rank that ends on its own is the cause, every run (issue 53 item 1): a 2-rank gloo job under a real torchrun,
armed as the README's training-script section says (ncclcheck.guard(postmortem_dir=PM)), whose rank 1 raises
RuntimeError before its 6th all_reduce, calls sys.exit(3) there, or SIGKILLs itself there
(tests/fixtures/armed_job.py raise / exit / sigkill). `ncclcheck diagnose` of the armed directory alone, and of it
with the launcher's output, must name rank 1, what it did (the exception, sys.exit(3), SIGKILL) and, where it could
write it, its line; the header names torchrun. The race it closes: gloo may not yet have marked rank 1's 5th
all_reduce complete when the exception hit, and then rank 0's recorder read as "rank 1 never finished all_reduce #5:
a peer, a NIC or a link" (2 runs in 9 before).

raise_slow / exit_slow: the same raise and sys.exit(3), the rank's exit then slowed by an atexit handler of its own
(SLOW_EXIT_S) as slow exception handling, atexit handlers or a process group's teardown slow a real one: rank 0 times
out waiting for it (3 s), torchrun's first observed failure, and torchrun stops rank 1 with SIGTERM while it is still
exiting. The stop's write once replaced rank 1's "raised" with "told to stop" and the verdict lost its exception; it
must name rank 1, what it did, its line, and the stop as what came after, and each run must be one that staged it
(rank 1's stacks say the stop came after its end).

The default suite runs each case once, exit_slow apart (the raises armed with the guard, as the issue ran it; the
others with ncclcheck.arm(PM), the same arming without the guard's preflight: 9 s a job here instead of 13); the long
tier (scripts/long_tests.py) runs them 20, 10, 10, 5 and 5 times, armed with the guard (NCCLCHECK_SELF_ENDED_RUNS=N
runs each N times instead) and says how many were right."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ncclcheck.postmortem import stacks
from tests.conftest import REPO, cli_env, run_cli

JOB = os.path.join(REPO, "tests", "fixtures", "armed_job.py")


def _line(code: str) -> int:
    """The fixture's line that does it (its own source: no number written twice)."""
    with open(JOB) as f:
        return next(i for i, ln in enumerate(f, 1) if ln.strip() == code)


RAISE = 'raise RuntimeError("simulated bug")'
# scenario -> (words the root cause must hold with the launcher's output, without it, the line it must name)
CASES = {
    "raise": (("RuntimeError: simulated bug",), ("RuntimeError: simulated bug",),
              f"armed_job.py:{_line(RAISE)} in <module>"),
    "exit": (("sys.exit(3)",), ("sys.exit(3)",), f"armed_job.py:{_line('sys.exit(3)')} in <module>"),
    # a SIGKILL cannot be caught: no stacks, no line; the launcher's table says the signal, the armed directory alone
    # says it left nothing an armed rank writes on every end it can catch
    "sigkill": (("SIGKILL",), ("killed (SIGKILL",), None),
}
STOPPED_AFTER = "then, still exiting, it was told to stop (SIGTERM)"
SLOW = {"raise_slow": "raise", "exit_slow": "exit"}  # the fixture's scenario, its exit slowed: stopped still exiting
for _slow, _plain in SLOW.items():
    CASES[_slow] = (CASES[_plain][0] + (STOPPED_AFTER,), CASES[_plain][1] + (STOPPED_AFTER,), CASES[_plain][2])
LONG_RUNS = {"raise": 20, "exit": 10, "sigkill": 10, "raise_slow": 5, "exit_slow": 5}  # the counts, and 5


def run_job(tmp_path, scenario: str, arm: str = "guard") -> tuple:
    """The job once under torchrun: (its exit code, the armed directory, the launcher's output file). arm: "guard"
    (ncclcheck.guard(postmortem_dir=PM)) or "1" (ncclcheck.arm(PM))."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    pm, log = tmp_path / "pm", tmp_path / "launcher.log"
    # slowed: rank 0 must time out (3 s) while rank 1 still exits (30 s at most: torchrun's stop cuts it short)
    slow = {"ARM_TIMEOUT_S": "3", "SLOW_EXIT_S": "30"} if scenario in SLOW else {}
    env = cli_env({"OMP_NUM_THREADS": "1", "ARM": arm, "ARM_TIMEOUT_S": "30", **slow},
                  drop=("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCH_FR_BUFFER_SIZE"))
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                        "--monitor-interval=0.5", JOB, SLOW.get(scenario, scenario), str(pm)], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=240)
    log.write_text(p.stdout + p.stderr)
    return p.returncode, pm, log


def wrong(scenario: str, pm, log) -> list:
    """What diagnose got wrong of one run, read both ways ([] when right)."""
    with_log, alone, line = CASES[scenario]
    out = []
    if scenario in SLOW:  # a run that did not stage it (rank 1 ended before the stop) is no run of this case
        try:
            then = stacks.parse((pm / "stacks_rank_1.txt").read_text(), "s")["then"]
        except (OSError, TypeError) as e:
            then = f"unread: {e}"
        if then != "told to stop (SIGTERM)":
            out.append(f"not staged: rank 1's stacks say then={then!r}")
    for paths, need in (((pm,), alone), ((pm, log), with_log)):
        p = run_cli("diagnose", *map(str, paths), "--json", "-")
        if p.returncode != 1:
            out.append(f"diagnose {len(paths)} input(s): exit {p.returncode}: {p.stderr[-300:]}")
            continue
        doc = json.loads(p.stdout)
        root = next(c for c in doc["checks"] if c["id"] == "postmortem.root_cause")
        said = root["summary"]
        bad = [w for w in (*need, *([line] if line else ())) if w not in said]
        if root["evidence"].get("ranks") != [1] or not said.startswith("rank 1 ") or bad:
            out.append(f"diagnose {len(paths)} input(s): {said!r} (missing {bad}, ranks "
                       f"{root['evidence'].get('ranks')})")
        if doc["world"]["launcher"] != "torchrun":
            out.append(f"diagnose {len(paths)} input(s): launcher {doc['world']['launcher']!r}")
    return out


def _unretired(pm) -> bool:
    """The race of the issue: rank 1's last recorded collective not yet marked complete (retired) in its dump."""
    try:
        with open(pm / "nccl_trace_rank_1.json") as f:
            entries = json.load(f).get("entries") or []
    except (OSError, ValueError):
        return False
    return bool(entries) and entries[-1].get("retired") is False


@pytest.mark.slow  # torchrun worlds of real processes, the guard's preflight in each
@pytest.mark.parametrize("scenario", sorted(set(CASES) - {"exit_slow", "raise_slow"}))  # the slowed exits: long
def test_a_rank_that_ended_on_its_own_is_named_with_what_it_did_and_its_line(tmp_path, scenario):
    rc, pm, log = run_job(tmp_path, scenario, "guard" if scenario in ("raise", "raise_slow") else "1")
    assert rc == 1, log.read_text()[-3000:]
    assert wrong(scenario, pm, log) == [], log.read_text()[-3000:]


@pytest.mark.long
@pytest.mark.parametrize("scenario", sorted(LONG_RUNS))
def test_a_rank_that_ended_on_its_own_is_named_right_every_run(tmp_path, scenario):
    runs = int(os.environ.get("NCCLCHECK_SELF_ENDED_RUNS") or LONG_RUNS[scenario])
    misses, raced = [], 0
    for i in range(runs):
        rc, pm, log = run_job(tmp_path / str(i), scenario)
        got = wrong(scenario, pm, log) if rc == 1 else [f"the job exited {rc}"]
        if got:
            misses.append((i, got))
        raced += _unretired(pm)
    print(f"\nself-ended {scenario}: right {runs - len(misses)} of {runs} ({raced} in which gloo had not marked rank "
          "1's last collective complete)")
    assert not misses, misses
