"""torch's own flight-recorder analyzer (torchfrtrace) and `ncclcheck diagnose` on the same real failures.

Each scenario of tests/postmortem/fixtures/make_fixtures.py is made fresh (a 4-rank gloo job under torchrun, the
culprit is rank 3; "healthy" has none), then both tools read its dumps: torchfrtrace the pickles alone (it wants one
file per rank in a directory), ncclcheck everything the job left. Then a 1,024-rank dump set is built from the
structure of a real 4-rank dump (every rank a copy of rank 0's, one rank missing the last collective) and timed.

    python scripts/bench_postmortem.py [--entries 200] [--ranks 1024] [--keep DIR]
    python scripts/bench_postmortem.py --saved --scenarios kill --ranks 16 --entries 20    # the kept dumps, seconds

Last line: scenarios=N ours=K torchfrtrace=F agree=A (ours/torchfrtrace: scenarios each named right; agree:
scenarios where both named a culprit and it was the same).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Optional

from ncclcheck.postmortem.diagnose import diagnose

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# every other scenario: the last rank (3). pipeline_skip: stage 2 skipped the recv that rank 1 waits to send (gloo's
# recorder keeps no send/recv, so from the dumps alone rank 1 is only seen missing the next all_reduce)
CULPRIT = {"healthy": None, "pipeline_skip": (2,), "p2p_size": (1,)}


def _make_fixtures():
    spec = importlib.util.spec_from_file_location("make_fixtures", os.path.join(REPO, "tests", "postmortem",
                                                                                 "fixtures", "make_fixtures.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ours(path: str, cpu: Optional[list] = None) -> tuple:
    t0, c0 = time.perf_counter(), time.process_time()
    rep = diagnose([path])
    dt = time.perf_counter() - t0
    if cpu is not None:  # on a shared machine the CPU seconds say more than the wall clock
        cpu.append(time.process_time() - c0)
    first = rep.checks[0]
    ranks = first.evidence.get("ranks") if first.status.value == "fail" else None
    return (tuple(ranks) if ranks else None), f"{first.evidence.get('kind', first.status.value)}", dt


_MISSING = re.compile(r"Missing dump files from ranks \{([\d, ]+)\}")
_CULPRIT = re.compile(r"Culprit rank (\d+); Error type: (\w+)")
_RANKS = re.compile(r"(?:not (?:present|joined)|missing|mismatch)[^{\n]*\{([\d, ]+)\}", re.IGNORECASE)


def theirs(path: str) -> tuple:
    """torchfrtrace on the scenario's pickled dumps: (ranks it named or None, what it said, seconds, it ran to the
    end)."""
    tmp = tempfile.mkdtemp(prefix="frtrace-")
    try:
        for name in os.listdir(path):
            if re.fullmatch(r"nccl_trace_rank_\d+", name):
                shutil.copy(os.path.join(path, name), tmp)
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", tmp],
                               capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return None, "timed out", time.perf_counter() - t0, False
        dt = time.perf_counter() - t0
        text = p.stdout + p.stderr
        m = _MISSING.search(text) or _RANKS.search(text)
        ranks = tuple(sorted(int(x) for x in m.group(1).split(",") if x.strip())) if m else None
        culprits = _CULPRIT.findall(text)
        if culprits and not ranks:  # a mismatch: torch names the ranks that differ from the first one, and the class
            ranks = tuple(sorted({int(r) for r, _ in culprits}))
            if p.returncode == 0:
                return ranks, f"named {list(ranks)} {culprits[0][1]}", time.perf_counter() - t0, True
        if p.returncode != 0:
            last = [ln for ln in text.strip().splitlines() if ln.strip()][-1:] or ["(no output)"]
            return ranks, f"exit {p.returncode}: {last[0][:70]}", dt, False
        return ranks, ("named " + str(list(ranks))) if ranks else "named nobody", dt, True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def synthetic(out: str, real_dump: str, nranks: int, entries: int, culprit: int) -> None:
    """nranks dumps shaped like a real one: its first entry as the template, `entries` collectives per rank (the
    ring buffer's worth, sequence ids continuing), the culprit missing the last collective."""
    with open(real_dump, "rb") as f:
        doc = pickle.load(f)  # our own fixture, made by make_fixtures.py: trusted
    tmpl = doc["entries"][0]
    base = copy.deepcopy(doc)
    rows = []
    for i in range(entries):
        e = dict(tmpl, record_id=i, collective_seq_id=i + 1, op_id=i + 1, retired=True,
                 time_created_ns=tmpl["time_created_ns"] + i * 1000)
        rows.append(e)
    rows[-1] = dict(rows[-1], retired=False)
    os.makedirs(out, exist_ok=True)
    for r in range(nranks):
        mine = rows[:-1] if r == culprit else rows
        base["entries"] = mine
        last = mine[-1]["collective_seq_id"]
        base["pg_status"] = {"0": {"last_enqueued_collective": last, "last_started_collective": -1,
                                   "last_completed_collective": last - (0 if r == culprit else 1)}}
        base["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(nranks)))}}
        with open(os.path.join(out, f"nccl_trace_rank_{r}"), "wb") as f:
            pickle.dump(base, f)


def _classes(root: str) -> tuple:
    """Each fr_classes case through both tools: (cases, ours right, theirs right, agree)."""
    spec = importlib.util.spec_from_file_location("fr_classes", os.path.join(REPO, "tests", "postmortem",
                                                                              "fr_classes.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    print(f"\n{'class (rendered)':24} {'culprit':10} {'torchfrtrace':34} {'ncclcheck':40}")
    o = t = a = 0
    for name, (_, kind, ranks, _) in mod.CASES.items():
        path = mod.write(os.path.join(root, "classes"), name)
        want = tuple(ranks) if ranks else None
        o_ranks, o_kind, _ = ours(path)
        t_ranks, t_said, _, t_ran = theirs(path)
        o += o_ranks == want and (kind is None or o_kind == kind)
        # 1 vs 1: torch names the rank that differs from the first; a culprit among the pair is right
        t += (t_ranks == want or bool(want and t_ranks and set(t_ranks) <= set(want) and len(want) == 2 and
                                      kind != "p2p_unmatched")) and (want is not None or t_ran)
        a += bool(o_ranks and t_ranks and o_ranks == t_ranks)
        print(f"{name:24} {str(list(want) if want else '-'):10} {t_said[:34]:34} "
              f"{(str(list(o_ranks)) if o_ranks else '-') + ' ' + o_kind:40}", flush=True)
    return len(mod.CASES), o, t, a


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--entries", type=int, default=200,
                    help="collectives per rank in the synthetic set (default 200; 2000 is torch's example buffer)")
    ap.add_argument("--keep", metavar="DIR", help="make the scenarios here and keep them")
    ap.add_argument("--scenarios", default="", help="comma list (default: all)")
    ap.add_argument("--saved", action="store_true",
                    help="read the scenarios kept in tests/postmortem/fixtures instead of running each job afresh "
                         "(seconds instead of minutes: the default suite's small run)")
    ap.add_argument("--classes", action="store_true",
                    help="also every class of torch's own analyzer tests and the point-to-point cases, written as "
                         "torch writes NCCL dumps (tests/postmortem/fr_classes.py; no job run)")
    args = ap.parse_args(argv)
    mk = _make_fixtures()
    root = args.keep or tempfile.mkdtemp(prefix="bench-postmortem-")
    names = [s for s in (args.scenarios.split(",") if args.scenarios else mk.SCENARIOS) if s]
    if unknown := [s for s in names if s not in mk.SCENARIOS]:
        ap.error(f"unknown scenario {unknown[0]!r}: one of {', '.join(mk.SCENARIOS)}")
    print(f"{'scenario':14} {'culprit':8} {'torchfrtrace':44} {'s':>6}  {'ncclcheck':26} {'s':>6}")
    n_ours = n_theirs = agree = 0
    for name in names:
        path = os.path.join(root, name)
        if args.saved:
            shutil.copytree(os.path.join(REPO, "tests", "postmortem", "fixtures", name), path)
        else:
            mk.make(name, path)
        want = CULPRIT.get(name, (mk.NPROC - 1,))
        o_ranks, o_kind, o_dt = ours(path)
        t_ranks, t_said, t_dt, t_ran = theirs(path)
        n_ours += o_ranks == want
        n_theirs += t_ranks == want and (want is not None or t_ran)  # a crash names nobody: not "healthy"
        agree += bool(o_ranks and t_ranks and o_ranks == t_ranks)
        print(f"{name:14} {str(list(want) if want else '-'):8} {t_said[:44]:44} {t_dt:6.2f}  "
              f"{(str(list(o_ranks)) if o_ranks else '-') + ' ' + o_kind:26} {o_dt:6.2f}", flush=True)
    if args.classes:
        n, o, t, a = _classes(root)
        names += [f"class:{c}" for c in range(n)]
        n_ours, n_theirs, agree = n_ours + o, n_theirs + t, agree + a
    big = os.path.join(root, f"synthetic_{args.ranks}")
    culprit = args.ranks // 2 + 5
    src = os.path.join(root, "healthy", "nccl_trace_rank_0")
    if not os.path.exists(src):
        if args.saved:
            src = os.path.join(REPO, "tests", "postmortem", "fixtures", "healthy", "nccl_trace_rank_0")
        else:
            mk.make("healthy", os.path.join(root, "healthy"))
    synthetic(big, src, args.ranks, args.entries, culprit)
    cpu: list = []
    o_ranks, o_kind, o_dt = ours(big, cpu)
    ok = o_ranks == (culprit,)
    print(f"synthetic: {args.ranks} ranks x {args.entries} entries, culprit rank {culprit}: ncclcheck named "
          f"{list(o_ranks) if o_ranks else '-'} ({o_kind}) in {o_dt:.2f} s wall, {cpu[0]:.2f} s CPU "
          f"({'right' if ok else 'WRONG'}; target < 10 s; load average {os.getloadavg()[0]:.1f})")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(f"scenarios={len(names)} ours={n_ours} torchfrtrace={n_theirs} agree={agree}")
    return 0 if n_ours == len(names) and ok else 1


if __name__ == "__main__":
    sys.exit(main())
