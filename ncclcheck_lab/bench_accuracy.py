#!/usr/bin/env python3
"""Accuracy benchmark (issue 32, "a verdict that is never wrong"): run every scenario of the fault corpus
(ncclcheck_lab/accuracy_corpus.py, rendered in docs/accuracy.md) and say, per scenario, the verdict it must give, what
it got, and what kind of miss it was: false_healthy (a fault called healthy), false_cause (a failure with the wrong
node / link / rank / cause, a hang, a crash, an efficiency above 1) or false_alarm (a healthy run failed).

    sudo python3 scripts/bench_accuracy.py [--only PATTERN] [--list] [--json OUT] [--timeout S] [--markdown]

The last line is exactly `scenarios=N right=N false_healthy=N false_cause=N false_alarm=N`, the wall time the line
before it; exit 0 only when every scenario is right. Lab scenarios share ONE 4-host lab (scripts/netlab via
tests/lab/harness.Lab), faults staged one after another with netlab's scenario switches and switched off after each;
Slurm is started on it once, when the first scenario needs it. The lab is torn down on every exit (an exception,
SIGTERM, Ctrl-C). The script takes /tmp/ncclcheck-heavy.lock itself when a selected scenario needs the lab (and
knows when it already runs under `flock /tmp/ncclcheck-heavy.lock ...`). Needs root, iproute2, nftables, slurm-wlm,
munge, openmpi-bin for the lab scenarios; the diagnose and hostile-file scenarios need none of it.
"""

from __future__ import annotations

import argparse
import fcntl
import fnmatch
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

from . import accuracy_corpus as ac

REPO = Path(__file__).resolve().parents[1]

LOCK = "/tmp/ncclcheck-heavy.lock"
PY = sys.executable
PORT = ac.PORT
OK_TIMEOUT, FAIL_TIMEOUT = 30, 8  # preflight --timeout: a bound on each wait; failing runs must give up soon
FIXTURES = REPO / "tests" / "postmortem" / "fixtures"
WORKER = FIXTURES / "fr_worker.py"
# jobs armed with ncclcheck.arm (opts worker=armed) or ncclcheck.guard(postmortem_dir=) (worker=guarded)
ARMED = REPO / "tests" / "fixtures" / "armed_job.py"
ARMED_ENV = {"ARM_TIMEOUT_S": "5", "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
DDP = REPO / "tests" / "fixtures" / "train_ddp.py"
GUARD_ENV = {"COLUMNS": "200", "GUARD_TIMEOUT": "20", "NUM_NODES": "3", "GUARD_CODE": str(REPO / "tests" / "fixtures")}
FR_ENV = {"TORCH_FR_BUFFER_SIZE": "64", "FR_TIMEOUT_S": "5", "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
FR_PORT = 29531


# -- turning reports into items --------------------------------------------------------------------------------------
def _tokens(ev) -> str:
    """Evidence made into words a Need can name: rank N, kind:K, missing:N, odd:N."""
    if not isinstance(ev, dict):
        return ""
    out = []
    if isinstance(ev.get("kind"), str):
        out.append(f"kind:{ev['kind']}")
    for r in ev.get("ranks") or []:
        out.append(f"rank {r}")
    for key in ("missing", "odd_nodes"):
        for v in ev.get(key) or []:
            out.append(f"{key.split('_')[0]}:{v}")
    return " ".join(out)


def report_items(doc) -> list:
    items = []
    if not isinstance(doc, dict):
        return items
    for c in doc.get("checks") or []:
        if not isinstance(c, dict):
            continue
        node = f" | node {c['node']}" if isinstance(c.get("node"), int) else ""
        text = f"{c.get('summary', '')}{node} | {_tokens(c.get('evidence'))}"
        items.append(ac.Item(str(c.get("id")), str(c.get("status")), text, str(c.get("detail") or "")))
    sweep = doc.get("sweep")
    if isinstance(sweep, dict):
        for v in sweep.get("nodes") or []:
            st = {"bad": "fail", "healthy": "pass"}.get(v.get("status"), "warn")
            # the headline is the node; the message explains (it lists the peers it was slow with)
            items.append(ac.Item(f"sweep.{v.get('status')}", st, f"{v.get('name')} node {v.get('node')}",
                                 str(v.get("message") or "")))
    return items


def wrong_figures(doc) -> list:
    """Efficiencies above 1 in a report (bench rows, links matrix): a wrong bound."""
    out = []
    if not isinstance(doc, dict):
        return out
    for r in doc.get("bench") or []:
        e = r.get("efficiency") if isinstance(r, dict) else None
        if isinstance(e, (int, float)) and e > ac.EFFICIENCY_WRONG_ABOVE:
            out.append(f"bench {r.get('op')} {r.get('bytes')} B efficiency {e:.2f} (bound {r.get('bound_by')})")
    links = doc.get("links") or {}
    m = links.get("efficiency") if isinstance(links, dict) else None
    for a, row in enumerate(m or []):
        for b, e in enumerate(row or []):
            if isinstance(e, (int, float)) and e > ac.EFFICIENCY_WRONG_ABOVE:
                by = (links.get("bound_by") or [[]] * (a + 1))[a]
                out.append(f"links {a}->{b} efficiency {e:.2f} (bound {by[b] if b < len(by) else '?'})")
    return out


def merge(docs: list) -> tuple:
    """Items (deduplicated) and wrong figures of several processes' reports."""
    seen, items, wrong = set(), [], []
    for d in docs:
        for i in report_items(d):
            if (i.check, i.status, i.text, i.detail) not in seen:
                seen.add((i.check, i.status, i.text, i.detail))
                items.append(i)
        for w in wrong_figures(d):
            if w not in wrong:
                wrong.append(w)
    return items, wrong


def load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][:160] if lines else ""


# -- processes -------------------------------------------------------------------------------------------------------
def _kill(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=2)
            return
        except subprocess.TimeoutExpired:
            continue


RUNNING: list = []  # every process group started on the lab, killed by Context.close if still there


def run_many(lab, commands: dict, deadline: float, env: dict, cwd: Path, out: Path) -> dict:
    """{label: (host, argv)} all at once on the lab (several labels may share a host); whatever runs past deadline
    is killed and its exit is None. Returns {label: (rc, stdout+stderr)}."""
    procs, res = {}, {}
    for label, (host, argv) in commands.items():
        f = open(out / f"{label.replace(':', '-')}.log", "w+")
        procs[label] = (subprocess.Popen(lab.argv(host, argv), stdin=subprocess.DEVNULL, stdout=f,
                                         stderr=subprocess.STDOUT, env=lab.env(env), cwd=cwd,
                                         start_new_session=True), f)
        RUNNING.append(procs[label][0])
    end = time.monotonic() + deadline

    def wait(label):
        proc, f = procs[label]
        try:
            proc.wait(timeout=max(0.0, end - time.monotonic()))
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            _kill(proc)
            rc = None
        f.seek(0)
        res[label] = (rc, f.read())
        f.close()

    threads = [threading.Thread(target=wait, args=(k,)) for k in procs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {k: res[k] for k in commands}


def run_local(argv: list, timeout: float, cwd: Optional[Path] = None) -> tuple:
    """A command on this machine (diagnose, report): (rc or None when killed at timeout, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCLCHECK_", "MASTER_", "SLURM_"))}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        return None, out, err


# -- the context: one lab, Slurm once, captures once -----------------------------------------------------------------
class Context:
    def __init__(self, timeout: float, keep: bool = False) -> None:
        self.timeout = timeout
        self.keep = keep
        self.lab = None
        self.slurm = None
        self.captures: dict = {}
        self.scratch = Path(tempfile.mkdtemp(prefix="ncclcheck-accuracy-"))
        self._n = 0

    def dir(self, name: str) -> Path:
        self._n += 1
        d = self.scratch / f"{self._n:02d}-{name}"
        d.mkdir()
        return d

    def need_lab(self):
        if self.lab is None:
            from ncclcheck_lab.labrun import lab_name

            from .netlab.harness import Lab
            self.lab = Lab(4, name=lab_name("acc"))
        return self.lab

    def need_slurm(self) -> dict:
        if self.slurm is None:
            from .netlab import launchers as nlx
            self.slurm = nlx.slurm_up(self.need_lab().state, timeout=60)
        return self.slurm

    def subst(self, text: str) -> str:
        lab = self.lab
        if lab is None or "{" not in text:
            return text
        from .netlab import launchers as nlx
        table = {h: lab.ip(h) for h in lab.hosts}
        table.update(unused=f"198.18.{lab.state.slot}.250", slurmd=str(nlx.SLURMD_PORT))
        return re.sub(r"\{(\w+)\}", lambda m: table.get(m.group(1), m.group(0)), text)

    def expect(self, e: ac.Expect) -> ac.Expect:
        needs = tuple(ac.Need(n.check, tuple(self.subst(x) for x in n.names), n.statuses,
                              tuple(self.subst(x) for x in n.one_of)) for n in e.needs)
        return ac.Expect(e.exit, needs, tuple(self.subst(x) for x in e.forbid))

    def stage(self, s: ac.Scenario) -> None:
        lab = self.need_lab()
        lab.healthy()
        for tok in s.lab:
            lab.scenario(*self.subst(tok).split())

    def close(self) -> None:
        for proc in RUNNING:  # interrupted mid-scenario: its processes would outlive their namespaces
            if proc.poll() is None:
                _kill(proc)
        if self.lab is not None:
            self.lab.down()
            self.lab = None
        if self.keep:
            print(f"outputs kept in {self.scratch}", file=sys.stderr)
        else:
            shutil.rmtree(self.scratch, ignore_errors=True)


def code_dirs(ctx: Context, d: Path, hosts, drift: Optional[str]) -> dict:
    """--code per host: one copy of the training code each, the drift host's differs."""
    out = {}
    for h in sorted({h for h, _ in hosts}):
        c = d / f"code-{h}"
        c.mkdir()
        (c / "train.py").write_text("print('changed')\n" if h == drift else "print('hello')\n")
        out[h] = ["--code", str(c)]
    return out


def outcome_of(runs: dict, docs: list, check_tracebacks: bool = True) -> ac.Outcome:
    items, wrong = merge(docs)
    if check_tracebacks:
        wrong += [f"traceback from {k}" for k, (_, text) in runs.items() if "Traceback (most recent call last)" in text]
    note = "; ".join(f"{k}: {last_line(t)}" for k, (rc, t) in runs.items() if not docs and rc not in (0,))
    return ac.Outcome({k: rc for k, (rc, _) in runs.items()}, items, wrong, note)


# -- runners ---------------------------------------------------------------------------------------------------------
def run_preflight(ctx: Context, s: ac.Scenario) -> ac.Outcome:
    lab = ctx.need_lab()
    d = ctx.dir(s.name)
    cwd = d / "cwd"  # empty: the default --code is the working directory, which must not grow during the run
    cwd.mkdir()
    # a fault that stops the world from forming must be named soon; one the formed world finds needs it to form
    t = FAIL_TIMEOUT if any(n.check.startswith("rendezvous.") for n in s.expect.needs) else OK_TIMEOUT
    master = ctx.subst(s.opt("master", "{h1}"))
    drift = code_dirs(ctx, d, s.hosts(), s.opt("code_drift")) if s.opt("code_drift") else {}
    cmds = {}
    for h, r in s.hosts():
        label = f"{h}:{r}"
        cmds[label] = (h, [PY, "-m", "ncclcheck", "preflight", "--nnodes", str(s.nnodes), "--node-rank", str(r),
                           "--master-addr", master, "--master-port", str(PORT), "--timeout", str(t),
                           *drift.get(h, []), "--json", str(d / "report-%h-%n.json")])
    runs = run_many(lab, cmds, min(ctx.timeout, t + 60), {}, cwd, d)
    return outcome_of(runs, [x for x in (load(p) for p in sorted(d.glob("report-*.json"))) if x])


def run_launcher(ctx: Context, s: ac.Scenario) -> ac.Outcome:
    from .netlab import launchers as nlx
    lab = ctx.need_lab()
    launcher = s.opt("launcher")
    env = ctx.need_slurm() if launcher == "srun" else {}
    d = ctx.dir(s.name)
    cwd = d / "cwd"
    cwd.mkdir()
    t = 10 if any(n.check.startswith("rendezvous.") for n in s.expect.needs) else 60  # as run_preflight's
    hosts = [("h1", 0), ("h2", 1), ("h3", 2)]
    drift = code_dirs(ctx, d, hosts, s.opt("code_drift")) if s.opt("code_drift") else {}
    args = ["preflight", "--timeout", str(t)]
    deadline = min(ctx.timeout, 240)
    base_env = {**env, "COLUMNS": "200"}
    if launcher.startswith("torchrun"):
        c10d = launcher == "torchrun-c10d"
        cmds = {}
        for h, i in hosts:
            world = (["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{lab.ip('h1')}:{PORT}", "--rdzv-id", "acc"]
                     if c10d else ["--node-rank", str(i), "--master-addr", lab.ip("h1"), "--master-port", str(PORT)])
            cmds[h] = (h, [PY, "-m", "torch.distributed.run", "--nnodes", "3", "--nproc-per-node", "2", *world,
                           "-m", "ncclcheck", *args, *drift.get(h, []), "--json", str(d / "pf-%h.json")])
        runs = run_many(lab, cmds, deadline, base_env, cwd, d)
        return outcome_of(runs, [x for x in (load(p) for p in sorted(d.glob("pf-*.json"))) if x],
                          check_tracebacks=False)  # torchrun prints its own traceback when a worker exits 1
    if launcher == "srun":
        argv = ["srun", "-N", "3", "-w", "h[1-3]", "--ntasks-per-node=2", PY, "-m", "ncclcheck", *args,
                "--master-port", str(PORT), "--json", str(d / "pf-%n.json")]
    else:
        mpi_env = {"MASTER_ADDR": lab.ip("h1"), "MASTER_PORT": str(PORT), "PYTHONPATH": str(REPO), "COLUMNS": "200"}
        argv = nlx.mpirun_argv(lab.state, 2, [PY, "-m", "ncclcheck", *args, "--json", str(d / "pf-%n.json")],
                               mpi_env)
        argv[argv.index("--host") + 1] = ",".join(f"{h}:2" for h, _ in hosts)
    runs = run_many(lab, {launcher: ("h1", argv)}, deadline, base_env, cwd, d)
    return outcome_of(runs, [x for x in (load(p) for p in sorted(d.glob("pf-*.json"))) if x])


GUARD_FAILED = re.compile(r"GUARD-FAILED rank=(\d+) after=[\d.]+s: (.*?)(?=GUARD-FAILED rank=|$)", re.M)


def guard_job(ctx: Context, d: Path, hosts) -> dict:
    lab = ctx.need_lab()
    cmds = {f"{h}-{i}": (h, [PY, "-m", "torch.distributed.run", "--nnodes", "3", "--nproc-per-node", "2",
                             "--node-rank", str(i), "--master-addr", lab.ip("h1"), "--master-port", str(PORT),
                             str(DDP)]) for h, i in hosts}
    return run_many(lab, cmds, min(ctx.timeout, 200), GUARD_ENV, d, d)


def run_guard(ctx: Context, s: ac.Scenario) -> ac.Outcome:
    d = ctx.dir(s.name)
    runs = guard_job(ctx, d, s.hosts())
    ctx.captures[s.name] = runs  # what diag-guard-* scenarios read
    items = [ac.Item("guard.failed", "fail", f"rank {m.group(1)}: {m.group(2)}")
             for _, text in runs.values() for m in GUARD_FAILED.finditer(text)]
    trained = sum(text.count("TRAINED ") for _, text in runs.values())
    note = f"{trained} rank(s) printed TRAINED"
    return ac.Outcome({k: rc for k, (rc, _) in runs.items()}, items, [], note)


def _world(lab, i: int, n: int, t: int) -> list:
    return ["--nnodes", str(n), "--node-rank", str(i), "--master-addr", lab.ip("h1"), "--master-port", str(PORT),
            "--nproc-per-node", "1", "--timeout", str(t)]


def run_measure(ctx: Context, s: ac.Scenario, cmd: list, n: int) -> ac.Outcome:
    lab = ctx.need_lab()
    d = ctx.dir(s.name)
    cwd = d / "cwd"
    cwd.mkdir()
    t = 90
    cmds = {f"h{i + 1}": (f"h{i + 1}", [PY, "-m", "ncclcheck", *cmd, *_world(lab, i, n, t), "--json",
                                        str(d / f"report-h{i + 1}.json")]) for i in range(n)}
    runs = run_many(lab, cmds, min(ctx.timeout, t + 90), {}, cwd, d)
    return outcome_of(runs, [x for x in (load(p) for p in sorted(d.glob("report-*.json"))) if x])


def run_links(ctx: Context, s: ac.Scenario) -> ac.Outcome:
    return run_measure(ctx, s, ["links", "--size", "4M", "--iters", "3"], 4)


def run_bench(ctx: Context, s: ac.Scenario) -> ac.Outcome:
    return run_measure(ctx, s, ["bench", "--sizes", "2M-8M:4", "--ops", "all_reduce,all_gather", "--iters", "3",
                                "--warmup", "1", "--min-efficiency", "0.5"], 3)


def run_sweep(ctx: Context, s: ac.Scenario) -> ac.Outcome:
    lab = ctx.need_lab()
    env = ctx.need_slurm()
    d = ctx.dir(s.name)
    nodes = f"h[1-{s.nnodes}]"
    argv = ["srun", "-N", str(s.nnodes), "-w", nodes, "--ntasks-per-node=1", PY, "-m", "ncclcheck", "sweep",
            "--drain", "--size", "2M", "--iters", "3", "--timeout", "60", "--json", str(d / "sweep.json"),
            "--good-out", str(d / "good"), "--bad-out", str(d / "bad")]
    try:
        runs = run_many(lab, {"srun": ("h1", argv)}, min(ctx.timeout, 300), {**env, "COLUMNS": "300"}, d, d)
    finally:  # a drained node would be refused to the next scenario
        lab.exec("h1", ["scontrol", "update", f"NodeName={','.join(lab.hosts)}", "State=RESUME"], env=env)
    docs = [x for x in [load(d / "sweep.json")] if x]
    return outcome_of(runs, docs, check_tracebacks=False)


MAX_REPORT_BYTES = 64 << 20  # a report past this from a few MiB of inputs is unbounded output: not even parsed


def diagnose(d: Path, out: Path, timeout: float) -> ac.Outcome:
    rc, so, se = run_local([PY, "-m", "ncclcheck", "diagnose", str(d), "--json", str(out)], timeout)
    size = out.stat().st_size if out.exists() else 0
    doc = load(out) if rc in (0, 1) and size <= MAX_REPORT_BYTES else None
    items, wrong = merge([doc] if doc else [])
    if size > MAX_REPORT_BYTES:
        inputs = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
        wrong.append(f"a {size >> 20} MiB report from {inputs >> 10} KiB of inputs (unbounded output)")
    if "Traceback (most recent call last)" in se:
        wrong.append("traceback on stderr")
    return ac.Outcome({"diagnose": rc}, items, wrong, "" if doc else last_line(se) or last_line(so))


def run_diag_fixture(ctx: Context, s: ac.Scenario) -> ac.Outcome:
    d = ctx.dir(s.name)
    return diagnose(REPO / ac.fixture_dir(s.opt("fixture")), d / "report.json", min(ctx.timeout, 120))


def run_diag_log(ctx: Context, s: ac.Scenario) -> ac.Outcome:
    d = ctx.dir(s.name)
    return diagnose(REPO / s.opt("file"), d / "report.json", min(ctx.timeout, 120))


def log_score(mine: list, cases: dict) -> dict:
    """One set of log cases' figures: right, failed jobs called ended well, healthy jobs given a cause (or any
    failure), and on the logs that hold the cause, ncclcheck's right answers beside the naive baseline's."""
    base = {r["name"]: ac.baseline_right(cases[r["name"]], (REPO / cases[r["name"]].file).read_text(errors="replace"))
            for r in mine}
    held = [r for r in mine if cases[r["name"]].expect == "cause"]
    return {"right": sum(r["class"] == ac.RIGHT for r in mine), "of": len(mine),
            "ended_well": sum(r["class"] == ac.FALSE_HEALTHY for r in mine if cases[r["name"]].expect != "healthy"),
            "given_cause": sum(r["class"] != ac.RIGHT for r in mine if cases[r["name"]].expect == "healthy"),
            "baseline": sum(base.values()), "held": len(held), "held_ours": sum(r["class"] == ac.RIGHT for r in held),
            "held_baseline": sum(base[r["name"]] for r in held),
            "missed": sorted(r["name"].removeprefix("log-") for r in mine if r["class"] != ac.RIGHT)}


def _ratio(ours: int, theirs: int) -> str:
    return f"{ours / theirs:.1f}x" if theirs else "inf"


def first_scores() -> dict:
    """Each batch's first score, as recorded (FIRST_SCORES): {batch: score}."""
    path = REPO / ac.FIRST_SCORES
    return json.loads(path.read_text()) if path.exists() else {}


def record_first_score(batch: str, results: list) -> str:
    """Write the batch's first score once; a batch already scored keeps its first score (exit 2 otherwise)."""
    scores = first_scores()
    if batch in scores:
        raise SystemExit(f"batch {batch} was first scored on {scores[batch]['date']}: a first score is kept, "
                         f"never replaced")
    cases = {f"log-{c.name}": c for c in ac.log_cases(str(REPO)) if c.batch == batch}
    mine = [r for r in results if r["name"] in cases]
    if not mine or len(mine) != len(cases):
        raise SystemExit(f"batch {batch}: {len(mine)} of its {len(cases)} cases were run (run them all: --only "
                         f"diag-log)")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    scores[batch] = {**log_score(mine, cases), "date": time.strftime("%Y-%m-%d"),
                     "code": head.stdout.strip() or "?"}
    (REPO / ac.FIRST_SCORES).parent.mkdir(parents=True, exist_ok=True)
    (REPO / ac.FIRST_SCORES).write_text(json.dumps(scores, indent=1, sort_keys=True) + "\n")
    return f"batch {batch}: first score recorded in {ac.FIRST_SCORES}"


def log_summary(results: list) -> list:
    """The log corpus's lines: right per tier, the failed jobs called ended well and the healthy ones given a cause,
    and the naive baseline (the last line holding "NCCL WARN" or "Error") scored on the same logs; then each fresh
    batch's first score (on logs nobody here had seen) beside its score now."""
    cases = {f"log-{c.name}": c for c in ac.log_cases(str(REPO))}
    mine = [r for r in results if r["name"] in cases]
    if not mine:
        return []
    sc = log_score(mine, cases)
    out = [f"logs: {sc['right']}/{sc['of']} right ({100 * sc['right'] / sc['of']:.0f} %; {ac.by_evidence(mine)}); "
           f"failed jobs called ended well: {sc['ended_well']}; healthy jobs given a cause: {sc['given_cause']}",
           f"logs, baseline (the last line holding 'NCCL WARN' or 'Error'): {sc['baseline']}/{sc['of']} right; "
           f"on the {sc['held']} logs that hold the cause: ncclcheck {sc['held_ours']}, baseline "
           f"{sc['held_baseline']} ({_ratio(sc['held_ours'], sc['held_baseline'])})"]
    for batch, first in sorted(first_scores().items()):
        now = [r for r in mine if cases[r["name"]].batch == batch]
        n = log_score(now, cases) if now else None
        out.append(f"batch {batch}: first score {first['right']}/{first['of']} "
                   f"({100 * first['right'] / max(1, first['of']):.0f} %) on {first['code']} ({first['date']}), "
                   f"ended well {first['ended_well']}, given a cause {first['given_cause']}, on the "
                   f"{first['held']} that hold the cause {first['held_ours']} vs the baseline's "
                   f"{first['held_baseline']}" + (f"; now {n['right']}/{n['of']}" if n else ""))
    return out


def job_capture(ctx: Context, job: str, launcher: str, worker: str = "fr") -> Path:
    """The output (and flight-recorder dumps) of a real job on the lab, made once per run of the benchmark."""
    d = ctx.scratch / f"capture-{job}-{launcher}"
    if d.exists():
        return d
    lab = ctx.need_lab()
    lab.healthy()
    if job.startswith("guard"):
        made = ac.by_name()["guard-healthy" if job == "guard" else job]
        runs = ctx.captures.get(made.name)
        if runs is None:
            ctx.stage(made)
            runs = guard_job(ctx, ctx.dir(made.name), made.hosts())
            lab.healthy()
        d.mkdir()
        for k, (_, text) in runs.items():
            (d / f"launcher-{k}.log").write_text(text)
        return d
    d.mkdir()
    dumps = d / "pm"
    dumps.mkdir()
    if launcher == "torchrun":
        script, env = ((ARMED, {**ARMED_ENV, **({"ARM": "guard"} if worker == "guarded" else {})})
                       if worker in ("armed", "guarded") else (WORKER, FR_ENV))
        cmds = {h: (h, [PY, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2", "--node-rank",
                        str(i), "--master-addr", lab.ip("h1"), "--master-port", str(FR_PORT), "--monitor-interval",
                        "0.5", str(script), job, str(dumps)]) for i, h in enumerate(("h1", "h2"))}
        runs = run_many(lab, cmds, min(ctx.timeout, 180), env, d, d)
        for h, (_, text) in runs.items():
            (dumps / f"launcher-{h}.log").write_text(text)
    else:
        env = {**ctx.need_slurm(), **FR_ENV, "MASTER_ADDR": lab.ip("h1"), "MASTER_PORT": str(FR_PORT)}
        task = f"RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS exec {PY} {WORKER} {job} {dumps}"
        runs = run_many(lab, {"srun": ("h1", ["srun", "--label", "-N", "2", "-w", "h[1-2]", "--ntasks-per-node=2",
                                              "/bin/sh", "-c", task])}, min(ctx.timeout, 180), env, d, d)
        (dumps / "srun.log").write_text(runs["srun"][1])
    return d


def run_diag_job(ctx: Context, s: ac.Scenario) -> ac.Outcome:
    src = job_capture(ctx, s.opt("job"), s.opt("launcher_job"), s.opt("worker", "fr"))
    d = ctx.dir(s.name)
    inp = d / "in"
    inp.mkdir()
    for p in src.rglob("*"):
        if p.is_file() and (s.opt("read") == "all" or p.suffix == ".log"):
            shutil.copy(p, inp / p.name)
    return diagnose(inp, d / "report.json", min(ctx.timeout, 120))


class _Evil:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def hostile_file(kind: str, d: Path, base: Optional[Path]) -> tuple:
    """(file name, bytes) of a hostile input; the evil pickle would create d/pwned if it ever ran."""
    if kind == "deep-json":
        return "nccl_trace_rank_9.json", b"[" * 200_000 + b"]" * 200_000
    if kind == "evil-pickle":
        return "nccl_trace_rank_9", pickle.dumps(_Evil(str(d / "pwned")))
    if kind == "truncated-pickle":
        whole = (base / "nccl_trace_rank_0").read_bytes()
        return "nccl_trace_rank_9", whole[: len(whole) // 2]
    if kind == "error-types":
        return "error_9.json", json.dumps({"message": {"message": ["x"], "extraInfo": {"timestamp": "soon",
                                                                                       "py_callstack": 5}},
                                           "rank": "x"}).encode()
    if kind == "dump-types":
        return "nccl_trace_rank_9.json", json.dumps({"version": "2.4", "pg_config": "x", "pg_status": [],
                                                     "entries": [{"record_id": "a", "collective_seq_id": None,
                                                                  "profiling_name": 5, "state": [],
                                                                  "input_sizes": "big"}]}).encode()
    if kind == "binary-log":
        return "launcher2.log", bytes(range(256)) * 16 + b"\x00\xff\xfe rank 3 \xc3\x28 Failures:\x00exitcode"
    if kind == "failure-table":
        return "launcher2.log", ("Failures:\n  <NO_OTHER_FAILURES>\nRoot Cause (first observed failure):\n[0]:\n"
                                 "  time      : not-a-time\n  host      : \x1b[31mevil\x07\n"
                                 "  rank      : 99999999999999999999999 (local_rank: -5)\n"
                                 "  exitcode  : -99999999999999999999 (pid: 1) (SIGBOGUS)\n"
                                 "  error_file: /etc/shadow\n  traceback : " + "A" * 200_000 + "\n").encode()
    if kind == "report-in-dir":
        return "preflight.json", json.dumps({"schema": "ncclcheck.report/1", "command": "preflight", "status": "fail",
                                             "exit_code": 1, "world": "w",
                                             "checks": [1, "x", None, {"id": 5, "status": [], "node": "zz",
                                                                       "summary": {"a": 1}, "evidence": "e"}],
                                             "nodes": [{"node_rank": "a", "hostname": 5, "facts": []}]}).encode()
    if kind == "report-types":
        return "report.json", json.dumps({"schema": "ncclcheck.report/1", "command": "preflight", "status": 7,
                                          "checks": "nope", "world": [1], "nodes": 5, "exit_code": "x"}).encode()
    raise ValueError(kind)


def run_hostile(ctx: Context, s: ac.Scenario) -> ac.Outcome:
    d = ctx.dir(s.name)
    inp = d / "in"
    base = FIXTURES / s.opt("base") if s.opt("base") else None
    if base:
        shutil.copytree(base, inp)
    else:
        inp.mkdir()
    name, data = hostile_file(s.opt("file"), d, base)
    (inp / name).write_bytes(data)
    if s.opt("command") == "report":
        rc, so, se = run_local([PY, "-m", "ncclcheck", "report", str(inp / name)], min(ctx.timeout, 60))
        wrong = ["traceback on stderr"] if "Traceback (most recent call last)" in se else []
        out = ac.Outcome({"report": rc}, [], wrong, last_line(se))
    else:
        out = diagnose(inp, d / "report.json", min(ctx.timeout, 120))
    if (d / "pwned").exists():
        out.wrong.append("the pickle's os.system RAN")
    return out


RUNNERS = {"preflight": run_preflight, "launcher": run_launcher, "guard": run_guard, "links": run_links,
           "bench": run_bench, "sweep": run_sweep, "diag-fixture": run_diag_fixture, "diag-job": run_diag_job,
           "hostile": run_hostile, "diag-log": run_diag_log}


# -- main ------------------------------------------------------------------------------------------------------------
def selected(patterns: Optional[list]) -> list:
    if not patterns:
        return list(ac.SCENARIOS)
    batch = {f"log-{c.name}": c.batch for c in ac.log_cases(str(REPO))}  # "batch:A": a fresh batch's cases
    return [s for s in ac.SCENARIOS if any(fnmatch.fnmatch(s.name, p) or p in s.name or p == s.kind
                                           or (p.startswith("batch:") and batch.get(s.name) == p[6:])
                                           for p in patterns)]


def _holds_lock() -> bool:
    """True when an inherited descriptor is the lock file: we run under `flock /tmp/ncclcheck-heavy.lock ...`."""
    try:
        return any(os.readlink(f"/proc/self/fd/{fd}") == LOCK for fd in os.listdir("/proc/self/fd"))
    except OSError:
        return False


def take_lock():
    if _holds_lock():
        return None
    f = open(LOCK, "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"waiting for {LOCK} (another lab run holds it)", file=sys.stderr, flush=True)
        fcntl.flock(f, fcntl.LOCK_EX)
    return f


def run_one(ctx: Context, s: ac.Scenario) -> dict:
    t0 = time.monotonic()
    out = None
    try:
        if s.needs_lab and s.kind not in ("diag-job",):
            ctx.stage(s)
        out = RUNNERS[s.kind](ctx, s)
        cls, why = ac.classify(ctx.expect(s.expect), out)
    except Exception as e:  # the benchmark's own trouble (a lab that would not come up): not the verdict's
        cls, why = "error", f"{type(e).__name__}: {e}"
    finally:
        if s.needs_lab and ctx.lab is not None:
            try:
                ctx.lab.healthy()
            except Exception as e:
                print(f"  (could not switch {s.name}'s faults off: {e})", file=sys.stderr)
    return ac.result_json(s, cls, why, out, time.monotonic() - t0)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", metavar="PATTERN",
                    help="scenarios whose name matches (glob or substring) or whose kind is PATTERN; repeatable")
    ap.add_argument("--list", action="store_true", help="list the selected scenarios and their verdicts, run nothing")
    ap.add_argument("--markdown", action="store_true", help="print docs/accuracy.md's table, run nothing")
    ap.add_argument("--json", metavar="OUT", help="write per-scenario results as JSON")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="longest any one scenario's processes may run before they are killed (default 300 s)")
    ap.add_argument("--keep", action="store_true", help="keep every scenario's outputs (printed where)")
    ap.add_argument("--first-score", metavar="BATCH",
                    help="record the fresh batch's score as its first score (once, before anything is changed for "
                         "it; refused when it has one)")
    a = ap.parse_args(argv)
    chosen = selected(a.only)
    if a.markdown:
        sys.stdout.write(ac.markdown_table([s for s in chosen if s.kind != "diag-log"]))
        return 0
    if a.list:
        for s in chosen:
            print(f"{s.name:36} {s.kind:12} {s.expect.describe()}")
        print(f"{len(chosen)} scenario(s)")
        return 0
    if not chosen:
        print(f"no scenario matches {a.only}", file=sys.stderr)
        return 2
    lock = take_lock() if any(s.needs_lab for s in chosen) else None
    ctx = Context(a.timeout, a.keep)

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    start = time.monotonic()
    results = []
    try:
        for s in chosen:
            r = run_one(ctx, s)
            results.append(r)
            print(f"{r['class'].upper():13} {s.name:36} {r['seconds']:6.1f}s  must: {r['expect']}", flush=True)
            if r["class"] != ac.RIGHT:
                print(f"{'':13} got: {r['got']}\n{'':13} why: {r['why']}", flush=True)
    finally:
        ctx.close()
        if lock is not None:
            lock.close()
    if a.json:
        Path(a.json).write_text(ac.dumps(results))
    counts = {c: sum(r["class"] == c for r in results) for c in ac.CLASSES}
    errors = sum(r["class"] == "error" for r in results)
    if errors:
        print(f"{errors} scenario(s) could not be run (class error: see above)")
    if a.first_score:
        print(record_first_score(a.first_score, results))
    for line in log_summary(results):
        print(line)
    print(f"by evidence: {ac.by_evidence(results)}")
    print(f"wall {time.monotonic() - start:.0f} s")
    print(f"scenarios={len(results)} right={counts['right']} false_healthy={counts['false_healthy']} "
          f"false_cause={counts['false_cause']} false_alarm={counts['false_alarm']}")
    return 0 if counts["right"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
