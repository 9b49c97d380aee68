#!/usr/bin/env python3
"""Preflight at scale, simulated: N virtual nodes run the real node-agent code path (run_local_checks on generated
facts, preflight.cluster.run_cluster_preflight: join, fact upload, verdict, sampled mesh probes over real loopback
sockets, result, exit-code agreement, then the report) against one real c10d TCPStore on 127.0.0.1.

Node 0 runs alone in its own process and hosts the store exactly as a real node 0 does (so its descriptors, memory
and CPU are its own and measured); the other N-1 virtual nodes are spread over worker processes of at most
--per-worker nodes each, every process with its soft RLIMIT_NOFILE raised to its hard limit. In a worker, gevent
patches sockets, selectors, threads and sleeps, so each virtual node runs the same product code as a greenlet and the
worker is one OS thread; its store client is scripts/sim_store.py, which speaks c10d's TCPStore wire protocol in
Python (torch's C++ client blocks an OS thread per wait: ~1,000 threads per worker made the run mostly the kernel's
GIL handoffs). Workers run niced, so node 0 keeps the CPU share of a machine of its own. --profile writes a cProfile
of node 0's product code.

The simulator never lies: every failure of the simulator itself (a thread's exception, a descriptor or thread that
could not be created, a worker that died or never reported, a node thread that never ended) is counted per process
and printed apart from the product's findings; a run with any such failure exits 3 and prints no figure.

Faults injected at every N, each of which the report must name:
  run "formed":   one node with different code, one with a different NCCL version, one whose probes all fail
  run "no-world": one node that never joins, one duplicated node rank (the world cannot form: rendezvous.world)
Bytes through node 0's store are counted per store request in TCPStore's wire format (1-byte command, 8-byte length
before every string, the reply), for every client including node 0's own; TCP/IP headers are not counted.

Prints, per N and run, the wall time per phase, bytes per node, which faults were named, false findings, node 0's
peak descriptors, peak RSS (its process and its store's front) and CPU seconds, the workers' CPU seconds, the report
sizes; then each phase's growth factor from the smallest to the largest N; the LAST line is exactly
`nodes=N wall_s=W node0_bytes_per_node=B faults_named=K/T sim_errors=E node0_rss_mb=M` for the largest N, with W the
formed run's wall time (the no-world run waits out its --timeout by design) and M node 0's peak RSS with its front.
Exit 0 only when every fault is named at every N with no false finding and no simulator error; 1 for a product miss; 3
for a simulator failure (no figure).
Everything stays on loopback (127.0.0.0/8): as root the script re-runs itself in a private network namespace
(`unshare -n`, loopback only), because c10d reverse-resolves socket addresses when it connects and the machine's
resolver must not see those queries (in this sandbox they also stall a connect for 5 s when they time out).

    python3 scripts/bench_scale.py --nodes 1024,4096,8192
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import gc
import inspect
import json
import logging
import multiprocessing as mp
import os
import pickle
import re
import resource
import socket
import sys
import threading
import time
import traceback

# c10d logs each wait slice that ends without the key (expected: waits are sliced) as a warning on fd 2
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

from ncclcheck import __version__
from ncclcheck.agent.launchers import detect_placement
from ncclcheck.agent.limits import ensure_nofile
from ncclcheck.checks import run_local_checks
from ncclcheck.checks.local import LocalInput
from ncclcheck.config import Config, WorldConfig
from ncclcheck.model import Report
from ncclcheck.nccl import reachability
from ncclcheck.preflight import cluster, probe
from ncclcheck.rendezvous.budget import Budget
from ncclcheck_lab import private_net

_tls = threading.local()
# Simulation only: hundreds of virtual nodes share one worker process's descriptors (and 2 cores): this many of them
# probe at a time, so the worker's sockets stay under its descriptor limit.
PROBERS_AT_ONCE = 64
WORKER_NICE = 10  # workers yield the CPU to node 0's process, which stands for a machine of its own
PROBERS = threading.BoundedSemaphore(PROBERS_AT_ONCE)
BREAKDOWN: dict = {}  # store bytes by key family (join, mesh/ep, mesh/row, world/result, ...) for --breakdown
BY_KEY = False  # --breakdown: the per-key accounting costs the simulator CPU, so only when asked
WANT: dict = {}  # options the workers read (set before they fork): --profile-worker


# ---------------------------------------------------------------------------------------------------------------
# Byte counting: a proxy in front of each virtual node's TCPStore client


class CountingStore:
    """Forwards to a torch Store, adding each request's and reply's wire bytes to a shared counter."""

    def __init__(self, raw, counter: list, lock: threading.Lock):
        self._raw, self._c, self._lock = raw, counter, lock

    def _add(self, n: int, keys=()) -> None:
        with self._lock:
            self._c[0] += n
            self._c[1] += 1
            for k in keys[:1] if BY_KEY else ():
                part = "/".join(k.split("/")[2:4]) if k.count("/") >= 3 else k.split("/")[-1]
                part = part.rstrip("0123456789").rstrip("/")
                BREAKDOWN[part] = BREAKDOWN.get(part, 0) + n
                BREAKDOWN["#" + part] = BREAKDOWN.get("#" + part, 0) + 1

    def set(self, key, value):
        self._add(1 + 8 + len(key) + 8 + len(value), [key])
        return self._raw.set(key, value)

    def get(self, key):
        v = self._raw.get(key)
        self._add(1 + 8 + len(key) + 8 + len(v), [key])
        return v

    def add(self, key, n):
        self._add(1 + 8 + len(key) + 8 + 8, [key])
        return self._raw.add(key, n)

    def check(self, keys):
        self._add(1 + 8 + sum(8 + len(k) for k in keys) + 1, list(keys))
        return self._raw.check(keys)

    def multi_get(self, keys):
        vs = self._raw.multi_get(keys)
        self._add(1 + 8 + sum(8 + len(k) for k in keys) + sum(8 + len(v) for v in vs), list(keys))
        return vs

    def wait(self, keys, timeout):
        self._add(1 + 8 + sum(8 + len(k) for k in keys) + 1, list(keys))
        return self._raw.wait(keys, timeout)


def install_counter(counter: list, lock: threading.Lock) -> None:
    real_open = cluster.open_store

    def counted_open(*a, **kw):
        st = real_open(*a, **kw)
        st.raw = CountingStore(st.raw, counter, lock)
        return st

    cluster.open_store = counted_open


def install_probe_fault() -> None:
    """The virtual node flagged `probes_fail` connects only to a closed port: its probes really fail, on the wire."""
    real = probe.probe_peers
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))  # bound, never listening: connects are refused
    dead_port = dead.getsockname()[1]
    install_probe_fault.keep = dead  # type: ignore[attr-defined]

    sig = inspect.signature(real)  # the product's own signature: `peers` found by name however it is passed

    def probe_peers(*a, **kw):
        call = sig.bind(*a, **kw)
        if getattr(_tls, "probes_fail", False):
            call.arguments["peers"] = {r: {**p, "endpoints": {i: [["127.0.0.1", dead_port] for _ in eps]
                                                              for i, eps in (p.get("endpoints") or {}).items()}}
                                       for r, p in call.arguments["peers"].items()}
        with PROBERS:
            return real(*call.args, **call.kwargs)

    probe.probe_peers = probe_peers


# ---------------------------------------------------------------------------------------------------------------
# Facts: this machine's real facts once (realistic sizes), varied per node


def base_facts() -> dict:
    from ncclcheck.agent.runner import load_torch
    from ncclcheck.facts import collect_node_facts

    return collect_node_facts(load_torch=load_torch, code_path=os.getcwd(), paths=[], master_addr=None,
                              tool_version=__version__)


def node_addr(r: int) -> str:
    a = r + 1
    return f"127.{20 + a // 65536}.{(a // 256) % 256}.{a % 256}"


_PICKLED: list = [None, b""]  # the base facts this process copies from, and their pickle


def facts_for(base: dict, r: int, fault: str) -> dict:
    # Each node gets its own copy (the product may write into its facts). Unpickling one pickle made per process costs
    # a fifth of deepcopy's walk (0.04 ms against 0.20 ms a node): simulator CPU the 2 cores give back to the nodes.
    if _PICKLED[0] is not base:
        _PICKLED[:] = [base, pickle.dumps(base, protocol=pickle.HIGHEST_PROTOCOL)]
    f = pickle.loads(_PICKLED[1])
    host = f"gpu{r:04d}"
    addr = node_addr(r)
    # Its own network identity, as a real node's (another machine's boot id): the one this machine's kernel gives
    # every virtual node would make them all one host, proven by the mesh (they do share this stack), and the product
    # then probes each peer's docker0 too (2 probes a peer instead of 1: the mesh of 8,192 nodes starved and failed).
    boot = f"{r:08x}-5ca1-4000-8000-000000000000"
    ident = {"boot_id": boot, "netns": "net:[4026531840]", "key": f"{boot}/4026531840"}
    f["host"] = {**(f.get("host") or {}), "hostname": host, "fqdn": host, "resolves_to": [addr],
                 "fqdn_resolves_to": [addr], "loopback": False, "resolve_error": None, "network_identity": ident}
    f["interfaces"] = [
        {"name": "lo", "kind": "loopback", "up": True, "running": True, "operstate": "unknown", "mtu": 65536,
         "speed_mbps": None, "ipv4": [{"address": "127.0.0.1", "prefixlen": 8}], "ipv6": []},
        {"name": "eth0", "kind": "physical", "up": True, "running": True, "operstate": "up", "mtu": 1500,
         "speed_mbps": 100000, "ipv4": [{"address": addr, "prefixlen": 8}], "ipv6": []},
        {"name": "docker0", "kind": "docker", "up": True, "running": False, "operstate": "down", "mtu": 1500,
         "speed_mbps": None, "ipv4": [{"address": "127.0.0.9", "prefixlen": 16}], "ipv6": []},
    ]
    f["route"] = {"interface": "eth0", "src": addr}
    f["env"] = {"vars": {}, "redacted": []}
    if fault == "code":
        f["code"] = {**(f.get("code") or {}), "hash": "sha256:other", "git_head": None, "dirty": True}
    if fault == "nccl":
        f["versions"] = {**(f.get("versions") or {}), "nccl": "2.19.3"}
    return f


# ---------------------------------------------------------------------------------------------------------------
# The simulator's own failures, counted per process and never mixed with the product's findings

_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS, errno.EAGAIN}
_RESOURCE_TEXT = ("Too many open files", "can't start new thread", "Cannot allocate memory")


class SimErrors:
    """Failures of the simulator itself in this process: count and the first few, one line each."""

    def __init__(self):
        self.count, self.first, self._lock = 0, [], threading.Lock()

    def note(self, what: str) -> None:
        with self._lock:
            self.count += 1
            if len(self.first) < 5:
                self.first.append(what[:300])


SIM = SimErrors()


def counted_socket(base: type) -> type:
    """A subclass of `base` (socket.socket, or gevent's in a worker) that names running out of descriptors or memory
    as a simulator failure, then raises as usual."""

    class _CountedSocket(base):  # type: ignore[valid-type,misc]
        def __init__(self, *a, **kw):
            try:
                super().__init__(*a, **kw)
            except OSError as e:
                if e.errno in _RESOURCE_ERRNOS:
                    SIM.note(f"pid {os.getpid()}: socket(): {e}")
                raise

        def accept(self):
            try:
                return super().accept()
            except OSError as e:
                if e.errno in _RESOURCE_ERRNOS - {errno.EAGAIN}:
                    SIM.note(f"pid {os.getpid()}: accept(): {e}")
                raise

    return _CountedSocket


def go_green() -> None:
    """A worker process: gevent patches sockets, selectors, threads, locks and sleeps, so each virtual node (its
    product code, its mesh listener, its prober) is a greenlet and the whole worker is one OS thread; the node's
    store client is sim_store.WireStore (torch's speaks the same bytes but blocks an OS thread per wait). Done first
    in the worker, before any lock, socket or thread of the simulator is made; node 0's process is never patched."""
    global _tls, PROBERS
    os.environ.setdefault("GEVENT_RESOLVER", "block")  # numeric addresses only: no resolver threads
    # A real node 0 has a machine to itself; here it shares 2 cores with every worker. Without this, its share of
    # the CPU fell from ~2/3 (2 workers at 1,024 nodes) to ~1/8 (16 at 8,192), and its own work (decoding every
    # node's facts, the checks, the report) looked superlinear in n when it was the simulator crowding it out.
    os.nice(WORKER_NICE)
    import warnings

    from gevent import monkey

    with warnings.catch_warnings():  # patching walks every live object: torch's deprecated aliases warn when touched
        warnings.simplefilter("ignore")
        monkey.patch_all()
    _tls = threading.local()  # made again: the module's was an OS-thread local, shared by every greenlet
    PROBERS = threading.BoundedSemaphore(PROBERS_AT_ONCE)  # a greenlet semaphore (an OS one would block them all)
    from ncclcheck.rendezvous import store

    from . import sim_store

    # The product's seam for a member's store client (node 0's process keeps torch's server and client): the rest of
    # open_store (the connect bound, the one-line ConnectionError, the JsonStore) is the product's own code.
    store.STORE_CLIENT = sim_store.client
    sim_store.source_address = node_source


def node_source() -> str | None:
    """The address the calling virtual node connects from (set by play)."""
    return getattr(_tls, "source", None)


NODE0_START_SOFT_NOFILE = 1024  # the soft limit many shells, systemd units and Slurm steps start a real node 0 with
# ... and the hard limit above it: systemd's default (DefaultLimitNOFILE=1024:524288 since v240). This machine's hard
# limit (20,000 here) is a sandbox's, below what 16,384 nodes need at node 0's store front (2 per node): a real node
# 0 of that size has a hard limit its operators set for it. Raised only where this process may (root); otherwise the
# product's host.nofile check fails on node 0 and says so, which the run then reports.
NODE0_HARD_NOFILE = 524288


def setup_process(counter: list, lock: threading.Lock, node0: bool) -> dict:
    """Every simulator process: its descriptor budget, the socket and thread watchers, the byte counter, the probe
    fault. A worker (hundreds of virtual nodes in one process, which no real node is) raises its soft RLIMIT_NOFILE
    to the hard limit itself; node 0's process starts at 1,024 like a real shell's and the product raises it
    (agent.limits.ensure_nofile, as api.run_preflight does). Returns the limit it starts under."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if node0:
        if hard != resource.RLIM_INFINITY and hard < NODE0_HARD_NOFILE:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, NODE0_HARD_NOFILE))
                hard = NODE0_HARD_NOFILE
            except (OSError, ValueError):
                pass  # not root: the machine's hard limit stays, and host.nofile judges it
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, NODE0_START_SOFT_NOFILE), hard))
    else:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    socket.socket = counted_socket(socket.socket)  # type: ignore[misc]

    def hook(args):
        if args.exc_type is SystemExit:
            return
        SIM.note(f"pid {os.getpid()} thread {args.thread.name if args.thread else '?'}: "
                 + "".join(traceback.format_exception_only(args.exc_type, args.exc_value)).strip())

    threading.excepthook = hook
    install_counter(counter, lock)
    if not node0:
        install_probe_fault()
    return {"nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}


def scan_resource_text(report_checks: list) -> int:
    """Failed checks whose text says the simulator's process ran out of something: the product reported it, but
    it is the simulator's failure, not the simulated cluster's."""
    bad = 0
    for c in report_checks:
        if c.status.value != "fail":
            continue
        text = json.dumps(c.to_json(), default=str)
        if any(t in text for t in _RESOURCE_TEXT):
            bad += 1
            SIM.note(f"a check says the simulator ran out: {c.id}: {c.summary[:160]}")
    return bad


SAMPLE_TICK_S = 1.0  # listing /proc/self/fd with thousands of entries costs node 0 CPU: once a second is enough


class Sampler:
    """Node 0's machine: the peak resident memory of node 0's process and of its children (the store's front is
    one: it holds what it relays), node 0's open descriptors and its children's CPU seconds, from /proc every tick."""

    def __init__(self, tick_s: float):
        import psutil

        self._me = psutil.Process()
        self.tick_s, self.fds, self.rss_kb, self._stop = tick_s, 0, 0, threading.Event()
        self.own_rss_kb, self.kids_cpu = 0, {}  # node 0's process alone; pid -> user+system seconds
        self._t = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._t.start()

    def _sample(self) -> None:
        import psutil

        try:
            self.fds = max(self.fds, len(os.listdir("/proc/self/fd")))
            own = self._me.memory_info().rss
            kids = 0
            for k in self._me.children(recursive=True):
                try:
                    kids += k.memory_info().rss
                    self.kids_cpu[k.pid] = sum(k.cpu_times()[:2])
                except psutil.Error:  # ended between the listing and the read
                    pass
            self.own_rss_kb = max(self.own_rss_kb, own // 1024)
            self.rss_kb = max(self.rss_kb, (own + kids) // 1024)
        except (OSError, psutil.Error) as e:
            SIM.note(f"sampler: {e}")

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            self._sample()

    def stop(self) -> None:
        self._stop.set()
        self._t.join()
        self._sample()


# ---------------------------------------------------------------------------------------------------------------
# One virtual node


class Phases:
    """Node 0's phase boundaries, recorded by wrapping the protocol's steps in node 0's process only."""

    def __init__(self):
        self.t: dict = {}

    def wrap(self, name: str, module=cluster, on_end=None) -> None:
        real = getattr(module, name)

        def timed(*a, **kw):
            t0 = time.monotonic()
            try:
                return real(*a, **kw)
            finally:
                self.t[name] = (t0, time.monotonic())
                if on_end is not None:
                    on_end()

        setattr(module, name, timed)


def play(r: int, slot: str, n: int, port: int, base: dict, fault: str, timeout: float, node0: bool) -> dict:
    """One virtual node, start to agreed exit code, exactly as the agent runs it. Node 0 also keeps its report."""
    _tls.probes_fail = fault == "probes"
    f = facts_for(base, r, fault if slot == "main" else "")
    # Its store connection from its own address, as a real node's: node 0's front judges connections per address
    # (16 silent ones from one address are a flood), and from one shared 127.0.0.1 16,384 nodes crowded on 2 cores
    # read as one host flooding it.
    _tls.source = f["route"]["src"]
    if slot != "main":
        f["host"]["hostname"] = f"gpu{r:04d}-dup"
    world = WorldConfig(nnodes=n, node_rank=r, master_addr="127.0.0.1", master_port=port, timeout_s=timeout)
    cfg = Config(command="preflight", world=world)
    placement = detect_placement({}, world)
    nofile = ensure_nofile(n, node0)  # what api.run_preflight does before any socket
    local = run_local_checks(LocalInput.of(f, node_rank=r, multi_node=True, nproc_per_node=None,
                                           backend="gloo", master=None, nofile=nofile))
    out = cluster.run_cluster_preflight(cfg, placement, f, local, Budget.of(cfg), join_grace_s=0.5)
    t_rep = time.monotonic()
    rep = Report(command="preflight", version=__version__, started="", world=out.world, nodes=out.nodes,
                 checks=out.checks, recommendations=out.recommendations)
    # The agent's order (preflight/pipeline.py): the exit code is agreed first, then node 0 writes its report; the
    # members do not wait while node 0 serialises tens of MB.
    rep = dataclasses.replace(rep, agreed_exit_code=out.agree_exit_code(rep.exit_code))
    doc = json.dumps(rep.to_dict(), default=str) if node0 else None
    res = {"exit": rep.exit_code, "report_s": time.monotonic() - t_rep, "formed": out.formed}
    if node0:
        res.update(doc=doc, report=rep)
    else:
        scan_resource_text(rep.checks)
    return res


# ---------------------------------------------------------------------------------------------------------------
# The processes


def cpu_s() -> float:
    """This process's user + system CPU seconds so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def worker_main(conn, ranks: list, dup_of, n: int, port: int, base: dict, faults: dict, timeout: float,
                bound_s: float) -> None:
    """A worker process: its virtual nodes as greenlets; sends {exits, bytes, requests, sim} when they all ended."""
    go_green()
    # A worker holds 2,048 nodes' objects in one heap, which no real node does: at Python's default thresholds the
    # cycle collector walked it every few thousand allocations (~14 % of a worker's CPU at 16,384 nodes, perf). The
    # heap inherited from the parent is frozen and young objects wait for 100,000 allocations: simulator CPU only.
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    counter, lock = [0, 0], threading.Lock()
    lim = setup_process(counter, lock, node0=False)
    results: dict = {}

    def body(r, slot):
        results[(r, slot)] = play(r, slot, n, port, base, faults.get(r, ""), timeout, node0=False)

    jobs = [(r, "main") for r in ranks] + ([(dup_of, "dup")] if dup_of is not None else [])
    prof = None
    if WANT.get("profile_worker") and 1 in ranks:  # the worker holding node 1: one worker's CPU, by function
        import cProfile

        prof = cProfile.Profile(time.process_time)
        prof.enable()
    threads = []
    for r, slot in jobs:
        t = threading.Thread(target=body, args=(r, slot), name=f"node{r}-{slot}", daemon=True)
        try:
            t.start()
        except RuntimeError as e:
            SIM.note(f"pid {os.getpid()}: could not start node {r}'s thread: {e}")
            continue
        threads.append(t)
    end = time.monotonic() + bound_s
    for t in threads:
        t.join(timeout=max(0.0, end - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    t_done = time.monotonic()  # its nodes all ended (CLOCK_MONOTONIC: one clock for every process of the machine)
    if prof is not None:
        prof.disable()
        prof.dump_stats(WANT["profile_worker"])
    exits: dict = {}
    for v in results.values():
        exits[v["exit"]] = exits.get(v["exit"], 0) + 1
    conn.send({"exits": exits, "bytes": counter[0], "requests": counter[1], "sim": SIM.count, "sim_first": SIM.first,
               "hung": hung, "ran": len(results), "nofile": lim["nofile"], "breakdown": dict(BREAKDOWN),
               "t_done": t_done, "cpu_s": cpu_s()})
    conn.close()
    os._exit(0)  # daemon threads still parked in a store wait must not hold the process


def node0_main(conn, up, n: int, port: int, base: dict, timeout: float, bound_s: float, want: dict) -> None:
    """Node 0's process: node 0 alone, hosting the store; judges its own report and sends the summary."""
    counter, lock = [0, 0], threading.Lock()
    lim = setup_process(counter, lock, node0=True)
    phases = Phases()
    phases.wrap("_connect", on_end=up.set)
    for name in ("_host_decides", "_mesh_start", "_mesh_collect", "run_cross_checks", "recommendations"):
        phases.wrap(name)
    phases.wrap("build_matrix", reachability)
    if want.get("mesh_out"):  # every row node 0 collected, for a verdict on the mesh to be checked by hand
        real_collect = cluster._mesh_collect

        def collect(*a, **kw):
            out_ = real_collect(*a, **kw)
            _, attempts, load, _ = out_
            with open(want["mesh_out"], "w") as fh:
                json.dump({"attempts": {str(k): v for k, v in attempts.items()},
                           "load": {str(k): v for k, v in load.items()}}, fh, default=str)
            return out_

        cluster._mesh_collect = collect
    sampler = Sampler(SAMPLE_TICK_S)
    box: dict = {}
    t0 = time.monotonic()

    def body():
        prof = None
        if want.get("profile"):
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        try:
            box["res"] = play(0, "main", n, port, base, "", timeout, node0=True)
        finally:
            if prof is not None:
                prof.disable()
                prof.dump_stats(want["profile"])

    t = threading.Thread(target=body, name="node0", daemon=True)
    t.start()
    t.join(timeout=bound_s)
    up.set()  # a node 0 that failed before its store listened must not leave the workers unstarted
    t_done = time.monotonic()  # node 0 has its report and the agreed exit code: what follows is the simulator's
    wall = t_done - t0
    sampler.stop()
    res = box.get("res") or {}
    rep = res.get("report")
    out = {"wall": wall, "t_done": t_done, "phases": {k: (a - t0, b - t0) for k, (a, b) in phases.t.items()},
           "exit": res.get("exit"),
           "report_s": res.get("report_s", 0.0), "hung": ["node0"] if t.is_alive() else [], "bytes": counter[0],
           "requests": counter[1], "fds": sampler.fds, "rss_mb": sampler.rss_kb / 1024, "nofile": lim["nofile"],
           "own_rss_mb": sampler.own_rss_kb / 1024, "nofile_now": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
           "breakdown": dict(BREAKDOWN), "cpu_s": cpu_s(), "front_cpu_s": sum(sampler.kids_cpu.values())}
    if rep is not None:
        scan_resource_text(rep.checks)
        out.update(judge(rep, want))
        doc = res.get("doc") or ""
        out["json_bytes"] = len(doc)
        out["schema"] = validate(doc) if doc else "no report"
        if want.get("json_out"):
            with open(want["json_out"], "w") as fh:
                fh.write(doc)
        if want.get("render"):
            from ncclcheck.render.html import render_html
            from ncclcheck.render.junit import render_junit
            from ncclcheck.render.markdown import render_markdown

            tr = time.monotonic()
            md, xml, html = render_markdown(rep), render_junit(rep), render_html(rep)
            out["renders"] = (f"Markdown {len(md):,} B, JUnit {len(xml):,} B ({xml.count('<testcase ')} testcases), "
                              f"HTML {len(html):,} B in {time.monotonic() - tr:.2f} s")
            if want.get("md_out"):
                with open(want["md_out"], "w") as fh:
                    fh.write(md)
    out.update(sim=SIM.count, sim_first=SIM.first)
    conn.send(out)
    conn.close()
    os._exit(0)


def _nodes_named(summary: str) -> set:
    """Node ranks a summary names: `node 7 (gpu0007)`, or `(node ranks 3-5,9)` (hostranges.who)."""
    out = {int(x) for x in re.findall(r"node (\d+) \(", summary)}
    for run_ in re.findall(r"node ranks ([\d,-]+)", summary):
        for part in run_.split(","):
            lo, _, hi = part.partition("-")
            if lo.isdigit():
                out |= set(range(int(lo), int(hi or lo) + 1))
    return out


def judge(rep: Report, want: dict) -> dict:
    """Which injected faults node 0's report names, and every failed finding that no fault explains."""
    fails = [c for c in rep.checks if c.status.value == "fail"]
    named, false = {}, []
    expect = want.get("expect", {})  # check id -> (fault name, the node it must name)
    for cid, (name, node) in expect.items():
        hits = [c for c in fails if c.id == cid and c.node is None]
        named[name] = any(node in _nodes_named(c.summary) for c in hits)
        for c in hits:
            extra = _nodes_named(c.summary) - {node}
            if extra:
                false.append(f"{cid} also names nodes {sorted(extra)[:8]}")
    world = next((c.summary for c in rep.checks if c.id == "rendezvous.world"), "")
    for name, needle in want.get("world", {}).items():
        named[name] = needle in world
    allowed = set(expect) | set(want.get("baseline_fails", ())) | ({"rendezvous.world"} if want.get("world") else set())
    for c in fails:
        if c.id not in allowed and c.node is None:
            false.append(f"{c.id}: {c.summary[:140]}")
    local_false = sorted({c.id for c in fails if c.node is not None and c.id not in allowed})
    false += [f"node-local {cid} failed on some node" for cid in local_false]
    return {"named": named, "false": false, "world_says": world[:160],
            "mesh_says": next((c.summary for c in rep.checks if c.id == "net.peer_reachability"), "")[:160]}


def validate(doc: str) -> str:
    try:
        import jsonschema
    except ImportError:
        return "jsonschema not installed"
    path = os.path.join(os.path.dirname(cluster.__file__), "..", "schema", "report-1.schema.json")
    with open(path) as fh:
        schema = json.load(fh)
    errs = list(jsonschema.Draft202012Validator(schema).iter_errors(json.loads(doc)))
    return "valid" if not errs else f"INVALID ({len(errs)} errors, first: {errs[0].message[:120]})"


# The master port, as a user's 29500 is, lies outside the ports the kernel hands out for bind(addr, 0) and connects
# (main's private namespace gives those EPHEMERAL_LOW-65535): drawn from the same range, node 0's own store server or a
# probe could take it between this pick and node 0's bind ("Address already in use" at 4,096 nodes, once).
EPHEMERAL_LOW = 10000


def free_port() -> int:
    for port in range(EPHEMERAL_LOW - 1, 1023, -1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port below {EPHEMERAL_LOW}")


def run(n: int, base: dict, faults: dict, timeout: float, skip: set, dup_of, per_worker: int, want: dict) -> dict:
    """One world of n virtual nodes: node 0's process, then the workers once node 0's store listens."""
    ctx = mp.get_context("fork")
    port = free_port()
    bound_s = timeout * 4 + 120  # every wait of the product is bounded by a few T: a node past this is hung
    up = ctx.Event()
    t_start = time.monotonic()
    r0, w0 = ctx.Pipe(duplex=False)
    p0 = ctx.Process(target=node0_main, args=(w0, up, n, port, base, timeout, bound_s, want), daemon=True)
    p0.start()
    w0.close()
    up.wait(timeout)
    ranks = [r for r in range(1, n) if r not in skip]
    chunks = [ranks[i:i + per_worker] for i in range(0, len(ranks), per_worker)]
    procs, pipes = [], {}
    for chunk in chunks:
        rd, wr = ctx.Pipe(duplex=False)
        dup = dup_of if dup_of is not None and dup_of in chunk else None
        p = ctx.Process(target=worker_main, args=(wr, chunk, dup, n, port, base, faults, timeout, bound_s),
                        daemon=True)
        p.start()
        wr.close()
        procs.append(p)
        pipes[rd] = p
    pipes[r0] = p0
    got: dict = {}
    end = time.monotonic() + bound_s + 60
    pending = set(pipes)
    while pending and time.monotonic() < end:
        for rd in mp.connection.wait(list(pending), timeout=max(0.0, end - time.monotonic())):
            try:
                got[rd] = rd.recv()
            except (EOFError, OSError):
                got[rd] = None
            pending.discard(rd)
    # The run ends when its last process's nodes ended; node 0's process then judges, validates and renders its
    # report for this script (seconds at 16,384 nodes), which is the simulator's work, timed apart (`checked`).
    checked = time.monotonic() - t_start
    ends = [m.get("t_done") for m in got.values() if m and m.get("t_done")]
    wall = (max(ends) - t_start) if len(ends) == len(pipes) else checked  # a process that never reported: all of it
    sim_first, sim = [], 0
    for rd, p in pipes.items():
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join()
        msg = got.get(rd)
        if msg is None:
            sim += 1
            sim_first.append(f"process {p.pid} died or never reported (exit code {p.exitcode})")
            continue
        sim += msg["sim"]
        sim_first += msg["sim_first"]
    msgs = [m for m in got.values() if m]
    exits: dict = {}
    for m in msgs:
        for k, v in (m.get("exits") or {}).items():
            exits[k] = exits.get(k, 0) + v
    n0 = got.get(r0) or {}
    if n0.get("exit") is not None:
        exits[n0["exit"]] = exits.get(n0["exit"], 0) + 1
    hung = [h for m in msgs for h in m["hung"]]
    breakdown: dict = {}
    for m in msgs:
        for k, v in (m.get("breakdown") or {}).items():
            breakdown[k] = breakdown.get(k, 0) + v
    return {"wall": wall, "checked": checked, "node0": n0, "bytes": sum(m["bytes"] for m in msgs),
            "requests": sum(m["requests"] for m in msgs), "exits": exits, "hung": hung, "sim": sim,
            "sim_first": sim_first, "workers": len(procs), "ran": sum(m.get("ran", 0) for m in msgs) + bool(n0),
            "nofile": min((m["nofile"] for m in msgs), default=0), "breakdown": breakdown,
            "cpu_s": sum(m.get("cpu_s", 0.0) for m in msgs if m is not n0)}


PHASES = (("join+verdict", "_host_decides"), ("mesh(own probes)", "_mesh_start"), ("rows+checks", "_mesh_collect"))


def main() -> None:
    # A wider port range for bind(addr, 0): one kernel holds every virtual node's listeners (the same docker0
    # address 16,384 times) and their probes' ephemeral ports, where a real node's kernel holds its own. With the
    # default 28,232 ports, the kernel's search for a free one (inet_csk_get_port) was ~40 % of the machine's CPU in
    # the mesh phase at 16,384 nodes (perf); 55,536 now, the master port below them (free_port).
    private_net.isolate("ncclcheck_lab.bench_scale", EPHEMERAL_LOW)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="8,64,256,1024", help="comma-separated N values")
    ap.add_argument("--timeout", type=float, default=60.0, help="--timeout of the formed run")
    ap.add_argument("--per-worker", type=int, default=2048, help="virtual nodes per worker process")
    ap.add_argument("--no-world", choices=("all", "smallest", "none"), default="all",
                    help="at which N to also run the world that cannot form (it waits out its --timeout)")
    ap.add_argument("--breakdown", action="store_true", help="print store bytes per node by key family")
    ap.add_argument("--json-out", help="write node 0's JSON report of the largest formed run here")
    ap.add_argument("--md-out", help="write node 0's Markdown report of the largest formed run here")
    ap.add_argument("--profile", help="cProfile node 0's product code in the largest formed run; stats to this file")
    ap.add_argument("--profile-worker", help="cProfile (CPU time) the worker process holding node 1; stats to this "
                    "file (its greenlets share one thread, so read tottime: cumulative times cross greenlets)")
    ap.add_argument("--mesh-out", help="write every probe row node 0 collected in the largest formed run (JSON)")
    a = ap.parse_args()
    global BY_KEY
    BY_KEY = a.breakdown
    WANT["profile_worker"] = a.profile_worker
    try:
        sizes = [int(x) for x in a.nodes.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--nodes takes comma-separated integers, not {a.nodes!r}")
    if not sizes or min(sizes) < 4 or a.per_worker < 1:
        ap.error("every N must be at least 4 and --per-worker at least 1")
    logging.disable(logging.WARNING)
    threading.stack_size(512 * 1024)
    base = base_facts()
    import torch.distributed  # noqa: F401 - every real node imports it on its own machine; forked processes share it
    baseline_fails = {c.id for c in run_local_checks(LocalInput.of(facts_for(base, 0, ""), node_rank=0,
                                                                   multi_node=True, nproc_per_node=None,
                                                                   backend="gloo", master=None))
                      if c.status.value == "fail"}
    print(f"this machine's own facts fail these node-local checks on every virtual node (not findings): "
          f"{sorted(baseline_fails) or 'none'}; parent RSS before forking "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB (inherited by every process)",
          flush=True)
    total_sim, product_ok, table, last = 0, True, [], ""
    for n in sizes:
        code_r, nccl_r, probe_r = max(1, n // 3), max(2, (2 * n) // 3), n - 2
        faults = {code_r: "code", nccl_r: "nccl", probe_r: "probes"}
        want = {"expect": {"code.consistent": (f"code differs on node {code_r}", code_r),
                           "versions.consistent": (f"NCCL differs on node {nccl_r}", nccl_r),
                           "net.peer_reachability": (f"probes fail on node {probe_r}", probe_r)},
                "baseline_fails": baseline_fails, "render": True,
                "json_out": a.json_out if n == sizes[-1] else None,
                "profile": a.profile if n == sizes[-1] else None, "md_out": a.md_out if n == sizes[-1] else None,
                "mesh_out": a.mesh_out if n == sizes[-1] else None}
        gc.collect()
        ra = run(n, base, faults, a.timeout, set(), None, a.per_worker, want)
        z = ra["node0"]
        ph = z.get("phases") or {}

        def span(k, ph=ph):
            return ph[k][1] - ph[k][0] if k in ph else float("nan")

        if a.breakdown:
            print("  node 0's timeline (s from its start): " + ", ".join(
                f"{k} {b0:.1f}-{b1:.1f}" for k, (b0, b1) in sorted(ph.items(), key=lambda kv: kv[1][0]))
                + f"; its report built by {z.get('wall', 0):.1f}", flush=True)
            bd = ra["breakdown"]
            for k, v in (z.get("breakdown") or {}).items():
                bd[k] = bd.get(k, 0) + v
            print("  bytes/node by key: " + ", ".join(f"{k or '?'} {v / n:,.0f}" for k, v in
                                                     sorted(bd.items(), key=lambda kv: -kv[1])
                                                     if not k.startswith("#")), flush=True)
            print("  requests/node by key: " + ", ".join(f"{k[1:] or '?'} {v / n:,.2f}" for k, v in
                                                        sorted(bd.items(), key=lambda kv: -kv[1])
                                                        if k.startswith("#")), flush=True)
        nbytes, nreq = ra["bytes"] + z.get("bytes", 0), ra["requests"] + z.get("requests", 0)
        print(f"N={n} formed: wall {ra['wall']:.2f} s over {ra['workers']} workers + node 0 (then "
              f"{ra['checked'] - ra['wall']:.1f} s of this script's checks and renders of the report) | "
              + ", ".join(f"{label} {span(k):.2f} s" for label, k in PHASES)
              + f", report at node 0 {z.get('report_s', 0):.2f} s | bytes/node {nbytes / n:,.0f} "
              f"({nreq / n:.1f} requests/node) | exit codes {dict(sorted(ra['exits'].items()))} | nodes ended "
              f"{ra['ran']}/{n}, hung {len(ra['hung'])}", flush=True)
        print(f"  node 0: compute build_matrix {span('build_matrix'):.2f} s, cross checks "
              f"{span('run_cross_checks'):.2f} s, rules {span('recommendations'):.2f} s; peak descriptors "
              f"{z.get('fds', 0):,} ({z.get('fds', 0) / n:.2f}/node; soft limit {z.get('nofile', 0):,} at start, "
              f"{z.get('nofile_now', 0):,} after the product raised it), peak RSS "
              f"{z.get('rss_mb', 0):,.0f} MiB (its process {z.get('own_rss_mb', 0):,.0f} MiB, the rest its store's "
              f"front); CPU: node 0 {z.get('cpu_s', 0):.1f} s, its front {z.get('front_cpu_s', 0):.1f} s, the "
              f"simulator's workers {ra['cpu_s']:.1f} s ({ra['cpu_s'] / max(1, n - 1) * 1000:.1f} ms per virtual "
              f"node)", flush=True)
        print(f"  JSON report at node 0: {z.get('json_bytes', 0):,} bytes ({z.get('json_bytes', 0) / n:,.0f} B/node), "
              f"schema {z.get('schema', '?')}; peer_reachability: {z.get('mesh_says', '')}", flush=True)
        if z.get("renders"):
            print(f"  node 0 renders (outside the wall time): {z['renders']}", flush=True)
        named = dict(z.get("named") or {})
        false = list(z.get("false") or [])
        sim = ra["sim"] + len(ra["hung"])
        rb = None
        if a.no_world == "all" or (a.no_world == "smallest" and n == sizes[0]):
            miss, dup = n - 1, 1
            want_b = {"world": {f"node {miss} never joins": f"node rank(s) {miss} never joined",
                                f"node rank {dup} duplicated": f"node rank {dup} claimed by 2 nodes"},
                      "baseline_fails": baseline_fails}
            rb = run(n, base, {}, max(8.0, 5.0 + n * 0.01), {miss}, dup, a.per_worker, want_b)
            zb = rb["node0"]
            named.update(zb.get("named") or {})
            false += zb.get("false") or []
            sim += rb["sim"] + len(rb["hung"])
            print(f"N={n} no-world: wall {rb['wall']:.2f} s (waits out --timeout), exit codes "
                  f"{dict(sorted(rb['exits'].items()))}, node 0 says: {zb.get('world_says', '')[:140]}", flush=True)
        k, t = sum(named.values()), len(named)
        print("  faults: " + "; ".join(f"{name}: {'named' if ok else 'MISSED'}" for name, ok in named.items()))
        print(f"  false findings: {len(false)}" + (": " + "; ".join(false[:6]) if false else ""))
        hung = ra["hung"] + (rb["hung"] if rb else [])
        firsts = ra["sim_first"] + (rb["sim_first"] if rb else []) + [f"node thread {h} never ended" for h in hung]
        print(f"  SIMULATOR errors (not findings): {sim}" + (": " + " | ".join(firsts[:6]) if sim else ""), flush=True)
        total_sim += sim
        product_ok = product_ok and k == t and not false
        table.append((n, ra["wall"], {label: span(key) for label, key in PHASES}, z.get("report_s", 0.0)))
        last = (f"nodes={n} wall_s={ra['wall']:.1f} node0_bytes_per_node={nbytes / n:.0f} faults_named={k}/{t} "
                f"sim_errors={sim} node0_rss_mb={z.get('rss_mb', 0):.0f}")
    if len(table) > 1:
        (n1, w1, p1, r1), (n2, w2, p2, r2) = table[0], table[-1]
        growth = [f"wall x{w2 / w1:.1f}"] + [f"{k} x{p2[k] / p1[k]:.1f}" if p1[k] > 0 else f"{k} ?" for k in p1]
        growth.append(f"report x{r2 / r1:.1f}" if r1 > 0 else "report ?")
        print(f"growth from N={n1} to N={n2} (x{n2 / n1:.0f} nodes): " + ", ".join(growth), flush=True)
    if total_sim:
        print(f"NO FIGURE: the simulator itself failed {total_sim} times; the measurement is invalid")
        sys.exit(3)
    print(last)
    sys.exit(0 if product_ok else 1)


if __name__ == "__main__":
    main()
