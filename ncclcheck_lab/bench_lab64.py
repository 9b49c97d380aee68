#!/usr/bin/env python3
"""Many real lab hosts, one `ncclcheck preflight` process each (issue 27, item 3): a healthy world passes, and a dead
link or a host firewall among them is named, and no other node.

Brings up a namespace lab of N hosts (scripts/netlab, default 64), starts the real CLI on every host at once as a
user would on every node (`python -m ncclcheck preflight --nnodes N --node-rank I --master-addr h1 ... --json
SHARED/run.json`, the same --json path everywhere: one report per job), then
  healthy: every host must exit 0, the shared directory must hold exactly one report (node 0's, naming all N nodes),
           every other host print at most one line, and no check fail;
  faults:  each --fault switched on in turn (`link:hA,hB` = nftables on both ends drops everything between them, both
           directions; `inbound:hX` = hX's firewall drops every new inbound TCP connection): every host must exit 1
           and node 0's report must fail net.peer_reachability naming exactly the fault's hosts, and no failed
           check may name any other host.
Prints, per phase, wall time, load average (1 min, sampled every second), memory (the preflight processes' summed RSS
and the machine's memory in use), and ends with the line
    hosts=N healthy_exit=K/N fault_named=F/P false_findings=E
Exits 1 on any miss, 2 on bad arguments, 130 on Ctrl-C; the lab is torn down in every case (also on SIGTERM) and the
script says whether anything of it was left. Needs root. The machine is shared: run it under the heavy-run lock,

    flock /tmp/ncclcheck-heavy.lock python3 scripts/bench_lab64.py [--hosts 64] [--timeout 180] [--fault link:h33,h34]

A run stops (and fails) when the machine's available memory falls below --min-free-mib: 64 processes import torch.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import psutil

from ncclcheck import hostranges
from ncclcheck.nccl import reachability

from . import labrun
from .labrun import nl

PORT = 29500
REPORT = "run.json"
GIB = 1 << 30
HOST_RE = re.compile(r"\bh(?:\d+|\[[0-9,\-]+\])(?![\w\[])")  # h7, h[3-5,9]: how the report names lab hosts


@dataclass(frozen=True)
class Fault:
    """One fault switched on for a phase: the netlab scenario, and the hosts a correct report names."""

    kind: str  # link | inbound
    hosts: tuple

    @property
    def label(self) -> str:
        return f"{self.kind}:{','.join(self.hosts)}"

    @property
    def scenario(self) -> list[str]:
        return ["dropped-link", *self.hosts] if self.kind == "link" else ["inbound-drop", *self.hosts]


def parse_fault(text: str, n: int) -> Fault:
    """'link:h33,h34' or 'inbound:h40' -> Fault; ValueError with the reason otherwise."""
    kind, _, rest = text.partition(":")
    hosts = tuple(h.strip() for h in rest.split(",") if h.strip())
    want = {"link": 2, "inbound": 1}.get(kind)
    if want is None or len(hosts) != want:
        raise ValueError(f"bad fault {text!r}: use link:hA,hB or inbound:hX")
    for h in hosts:
        if not re.fullmatch(r"h\d+", h) or not 2 <= int(h[1:]) <= n:
            raise ValueError(f"bad fault {text!r}: {h} is not one of h2..h{n} (h1 is node 0, the rendezvous host: "
                             "cutting it off is the master-unreachable case, not this one)")
    if kind == "link":
        a, b = (int(h[1:]) - 1 for h in hosts)  # node ranks
        if a == b:
            raise ValueError(f"bad fault {text!r}: a link needs two different hosts")
        if b not in reachability.probe_targets(n, a) and a not in reachability.probe_targets(n, b):
            raise ValueError(f"bad fault {text!r}: above {reachability.FULL_MESH_MAX} nodes the mesh is sampled and "
                             f"no probe crosses {hosts[0]}-{hosts[1]}; ring neighbours (h33,h34) are always probed")
    return Fault(kind, hosts)


# ------------------------------------------------------------------------------------------------------- monitoring

def mem_available() -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes."""
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable"):
            info[key] = int(rest.split()[0]) * 1024
    return info["MemTotal"], info["MemAvailable"]


class Monitor:
    """Samples load average, the machine's memory and the summed RSS of the given processes' trees every second;
    calls on_low_memory once when MemAvailable falls below floor_bytes."""

    def __init__(self, pids: list[int], floor_bytes: int, on_low_memory) -> None:
        self.pids, self.floor, self.on_low = pids, floor_bytes, on_low_memory
        total, avail = mem_available()
        self.total, self.base_used = total, total - avail
        self.load_start = os.getloadavg()[0]
        self.load_peak = self.load_start
        self.used_peak, self.avail_min, self.rss_peak = self.base_used, avail, 0
        self.low_memory = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.load_end = os.getloadavg()[0]

    def _rss(self) -> int:
        total = 0
        for pid in self.pids:
            try:
                p = psutil.Process(pid)
                procs = [p, *p.children(recursive=True)]
            except psutil.Error:
                continue
            for q in procs:
                try:
                    total += q.memory_info().rss
                except psutil.Error:
                    pass
        return total

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.load_peak = max(self.load_peak, os.getloadavg()[0])
            _, avail = mem_available()
            self.avail_min = min(self.avail_min, avail)
            self.used_peak = max(self.used_peak, self.total - avail)
            self.rss_peak = max(self.rss_peak, self._rss())
            if avail < self.floor and not self.low_memory:
                self.low_memory = True
                self.on_low()


# ------------------------------------------------------------------------------------------------------------ phases

@dataclass
class HostResult:
    host: str
    rc: Optional[int]
    elapsed: float
    stdout: str
    stderr: str


@dataclass
class Phase:
    label: str
    fault: Optional[Fault]
    hosts: dict = field(default_factory=dict)  # host -> HostResult
    files: list = field(default_factory=list)  # what the shared report directory holds afterwards
    report: Optional[dict] = None
    wall: float = 0.0
    timed_out: list = field(default_factory=list)
    monitor: Optional[Monitor] = None


def kill_all(procs: dict) -> None:
    for proc, *_ in procs.values():
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def run_phase(state: nl.LabState, label: str, fault: Optional[Fault], args: argparse.Namespace, port: int,
              scratch: Path) -> Phase:
    """Start one preflight per host at once, wait for all (killing survivors at the deadline), collect."""
    n = state.n
    d = scratch / label.replace(":", "-").replace(",", "-")
    shared = d / "shared"
    shared.mkdir(parents=True)
    # Each host's working directory is the code code.consistent fingerprints by default: an empty one nobody writes
    # to, as a project checkout would be. The phase directory itself changes while hosts run (their output files
    # grow), and nodes fingerprinting it at different moments differ: code.consistent failed on 6 of 64 that way.
    cwd = d / "cwd"
    cwd.mkdir()
    phase = Phase(label, fault)
    procs = {}
    start = time.monotonic()
    try:
        for i, host in enumerate(state.hosts):
            argv = [sys.executable, "-m", "ncclcheck", "preflight", "--nnodes", str(n), "--node-rank", str(i),
                    "--master-addr", state.ip("h1"), "--master-port", str(port), "--timeout", str(args.timeout),
                    "--json", str(shared / REPORT)]
            out, err = open(d / f"{host}.out", "w+"), open(d / f"{host}.err", "w+")
            proc = subprocess.Popen(nl.host_argv(state, host, argv), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, env=labrun.env(), cwd=cwd, start_new_session=True)
            procs[host] = (proc, out, err)
        mon = Monitor([p.pid for p, *_ in procs.values()], args.min_free_mib << 20, lambda: kill_all(procs))
        end = start + args.deadline
        ended: dict = {}
        with mon:
            while len(ended) < len(procs):
                for host, (proc, *_) in procs.items():
                    if host not in ended and proc.poll() is not None:
                        ended[host] = time.monotonic() - start
                if time.monotonic() > end:
                    phase.timed_out = [h for h in procs if h not in ended]
                    kill_all(procs)
                    for host, (proc, *_) in procs.items():
                        proc.wait()
                        ended.setdefault(host, time.monotonic() - start)
                time.sleep(0.2)
        phase.monitor = mon
        phase.wall = max(ended.values())
        for host, (proc, out, err) in procs.items():
            out.seek(0)
            err.seek(0)
            phase.hosts[host] = HostResult(host, proc.returncode, ended[host], out.read(), err.read())
    finally:
        kill_all(procs)
        for proc, out, err in procs.values():
            proc.wait()
            out.close()
            err.close()
    phase.files = sorted(p.name for p in shared.iterdir())
    try:
        phase.report = json.loads((shared / REPORT).read_text())
    except (OSError, ValueError):
        phase.report = None
    return phase


# ---------------------------------------------------------------------------------------------------------- judging

def named_hosts(check: dict, report: dict) -> set:
    """The lab hosts a check names: its own node's, and every host or host range in its summary."""
    by_rank = {nd.get("node_rank"): nd.get("hostname") for nd in report.get("nodes") or []}
    out = set()
    if isinstance(check.get("node"), int):
        out.add(by_rank.get(check["node"]) or f"node {check['node']}")
    for token in HOST_RE.findall(check.get("summary") or ""):
        out.update(hostranges.expand(token))
    return out


@dataclass
class Verdict:
    ok_exit: int  # hosts with the expected exit code
    one_report: bool
    chatty: list  # hosts other than node 0 that printed more than one line
    named: bool  # (fault phases) the fault's hosts were named by a failed net.peer_reachability
    false: list  # [(check id, summary)] failed checks that name something that is not wrong
    reach: Optional[dict]  # the net.peer_reachability check of node 0's report


def judge(phase: Phase, n: int) -> Verdict:
    want_rc = 0 if phase.fault is None else 1
    ok_exit = sum(1 for r in phase.hosts.values() if r.rc == want_rc)
    rep = phase.report or {}
    one = (phase.files == [REPORT] and bool(rep) and (rep.get("world") or {}).get("nnodes") == n
           and sorted(nd.get("node_rank") for nd in rep.get("nodes") or []) == list(range(n)))
    chatty = [h for h, r in phase.hosts.items() if h != "h1" and len(r.stdout.strip().splitlines()) > 1]
    checks = rep.get("checks") or []
    reach = next((c for c in checks if c.get("id") == "net.peer_reachability"), None)
    failed = [c for c in checks if c.get("status") == "fail"]
    if phase.fault is None:
        return Verdict(ok_exit, one, chatty, False, [(c["id"], c.get("summary")) for c in failed], reach)
    want = set(phase.fault.hosts)
    named = bool(reach and reach.get("status") == "fail" and named_hosts(reach, rep) == want)
    false = [(c["id"], c.get("summary")) for c in failed
             if not named_hosts(c, rep) or named_hosts(c, rep) - want]
    return Verdict(ok_exit, one, chatty, named, false, reach)


def show(phase: Phase, v: Verdict, n: int) -> None:
    want_rc = 0 if phase.fault is None else 1
    rep = phase.report or {}
    m = phase.monitor
    slowest = max(phase.hosts.values(), key=lambda r: r.elapsed)
    print(f"\nphase {phase.label}: {n} hosts, exit {want_rc} on {v.ok_exit}/{n}"
          + (f" (others: {sorted({r.rc for r in phase.hosts.values() if r.rc != want_rc}, key=str)})"
             if v.ok_exit < n else "")
          + f", one report: {'yes' if v.one_report else 'NO'} (shared directory holds {phase.files or 'nothing'})")
    print(f"  wall {phase.wall:.1f} s (slowest host {slowest.host}), node 0's duration_s "
          f"{rep.get('duration_s', '?')}" + (f"; killed at the deadline: {phase.timed_out}" if phase.timed_out else ""))
    if m is not None:
        print(f"  load average (1 min): {m.load_start:.1f} at start, peak {m.load_peak:.1f}, {m.load_end:.1f} at end "
              f"({os.cpu_count()} cores)")
        print(f"  memory: preflight processes' summed RSS peak {m.rss_peak / GIB:.2f} GiB (shared pages counted once "
              f"per process); machine in use {m.base_used / GIB:.2f} -> peak {m.used_peak / GIB:.2f} GiB of "
              f"{m.total / GIB:.1f}; lowest MemAvailable {m.avail_min / GIB:.2f} GiB"
              + ("; STOPPED: below --min-free-mib" if m.low_memory else ""))
    if v.reach:
        ev = v.reach.get("evidence") or {}
        print(f"  net.peer_reachability: {v.reach['status']}: {v.reach.get('summary')}")
        if ev.get("loaded_total"):
            print(f"  named as loaded (busy, not cut off): {ev['loaded_total']} node(s)")
    if phase.fault is not None:
        print(f"  fault {phase.fault.label} named: {'yes' if v.named else 'NO'}")
    for cid, summary in v.false:
        print(f"  FALSE FINDING {cid}: {summary}")
    warned = [c for c in rep.get("checks") or [] if c.get("status") == "warn"]
    for c in warned[:10]:
        print(f"  warning {c['id']}: {c.get('summary')}")
    if len(warned) > 10:
        print(f"  ... and {len(warned) - 10} more warnings")
    if v.chatty:
        print(f"  hosts printing more than one line (one report per job): {v.chatty[:8]}")
    bad = [r for r in phase.hosts.values() if r.rc != want_rc][:3]
    for r in bad:
        print(f"  --- {r.host} rc={r.rc} after {r.elapsed:.1f} s, last output:")
        print("    " + "\n    ".join((r.stdout + r.stderr).strip().splitlines()[-6:]))


# ------------------------------------------------------------------------------------------------------------- main

def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Run it under flock /tmp/ncclcheck-heavy.lock (the machine is shared).")
    ap.add_argument("--hosts", type=int, default=64, help=f"lab hosts, 2..{nl.MAX_HOSTS} (default 64)")
    ap.add_argument("--timeout", type=int, default=180, help="preflight --timeout on every host (default 180)")
    ap.add_argument("--fault", action="append", metavar="link:hA,hB|inbound:hX|none",
                    help="a fault phase after the healthy one (repeatable; default link:h33,h34, or the last two "
                         "hosts below 34); none: the healthy phase only")
    ap.add_argument("--deadline", type=float, default=None,
                    help="kill a phase's processes still running after this many seconds (default 3 x --timeout)")
    ap.add_argument("--keep", action="store_true",
                    help="keep every host's output and the reports (the path is printed)")
    ap.add_argument("--min-free-mib", type=int, default=2048,
                    help="stop a phase (and fail) when MemAvailable falls below this (default 2048)")
    args = ap.parse_args(argv)
    n = args.hosts
    if not 2 <= n <= nl.MAX_HOSTS:
        ap.error(f"--hosts {n}: want 2..{nl.MAX_HOSTS}")
    if args.timeout < 1:
        ap.error("--timeout must be at least 1")
    args.deadline = args.deadline or 3.0 * args.timeout
    specs = args.fault or [f"link:h{min(n - 1, 33)},h{min(n, 34)}" if n >= 3 else "none"]
    try:
        faults = [] if specs == ["none"] else [parse_fault(s, n) for s in specs]
    except ValueError as e:
        ap.error(str(e))
    if why := nl.missing_requirements():
        print("bench_lab64: needs " + ", ".join(why), file=sys.stderr)
        return 2
    # SIGINT too: a shell starts a background job with SIGINT ignored, and the lab must go whatever stops us.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    name = labrun.lab_name("lb")
    scratch = Path(tempfile.mkdtemp(prefix="ncclcheck-lab64-"))
    phases: list[tuple[Phase, Verdict]] = []
    rc = 0
    try:
        t = time.monotonic()
        state = nl.up(name, n, owner_pid=os.getpid())
        print(f"lab {name}: {n} hosts up in {time.monotonic() - t:.1f} s (h1 = node 0 at {state.ip('h1')}); "
              f"preflight --timeout {args.timeout}" + (f"; output kept under {scratch}" if args.keep else ""),
              flush=True)
        plan: list[Optional[Fault]] = [None, *faults]
        for k, fault in enumerate(plan):
            nl.scenario(name, ["healthy"])
            if fault is not None:
                nl.scenario(name, fault.scenario)
            phase = run_phase(state, "healthy" if fault is None else fault.label, fault, args, PORT + k, scratch)
            v = judge(phase, n)
            show(phase, v, n)
            sys.stdout.flush()
            phases.append((phase, v))
    except KeyboardInterrupt:
        print("\nbench_lab64: interrupted; tearing the lab down", file=sys.stderr)
        rc = 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the teardown itself must not be cut short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        nl.down(name)
        left = nl.leftovers(name)
        print(f"lab {name} torn down" + (f"; LEFT BEHIND: {left}" if left else ", nothing left"), flush=True)
        if left:
            rc = rc or 1
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    healthy = [(p, v) for p, v in phases if p.fault is None]
    faulty = [(p, v) for p, v in phases if p.fault is not None]
    healthy_exit = healthy[0][1].ok_exit if healthy else 0
    named = sum(1 for _, v in faulty if v.named)
    false = sum(len(v.false) for _, v in phases)
    miss = (len(phases) != 1 + len(faults)
            or any(not v.one_report or v.ok_exit != n or v.chatty or (p.monitor and p.monitor.low_memory)
                   or p.timed_out for p, v in phases)
            or named != len(faults) or false)
    print(f"hosts={n} healthy_exit={healthy_exit}/{n} fault_named={named}/{len(faults)} false_findings={false}")
    return rc or (1 if miss else 0)


if __name__ == "__main__":
    sys.exit(main())
