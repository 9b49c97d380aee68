#!/usr/bin/env python3
"""Preflight at scale, simulated: N virtual nodes, many per process (one thread each), run the real node-agent code
path (run_local_checks on generated facts, preflight.cluster.run_cluster_preflight: join, fact upload, verdict,
sampled mesh probes over real loopback sockets, result, exit-code agreement, then the report) against one real c10d
TCPStore on 127.0.0.1, hosted by virtual node 0 exactly as a real node 0 hosts it.

Faults injected at every N, each of which the report must name:
  run "formed":   one node with different code, one with a different NCCL version, one whose probes all fail
  run "no-world": one node that never joins, one duplicated node rank (the world cannot form: rendezvous.world)
Bytes through node 0's store are counted per store request in TCPStore's wire format (1-byte command, 8-byte length
before every string, the reply), for every client including node 0's own; TCP/IP headers are not counted.

Prints, per N and run, the wall time per phase, bytes per node, which faults were named and the JSON report size;
the LAST line is exactly `nodes=N wall_s=W node0_bytes_per_node=B faults_named=K/T` for the largest N, with W the
formed run's wall time (the no-world run waits out its --timeout by design) and B from the formed run.
Everything stays on loopback (127.0.0.0/8): as root the script re-runs itself in a private network namespace
(`unshare -n`, loopback only), because c10d reverse-resolves socket addresses when it connects and the machine's
resolver must not see those queries (in this sandbox they also stall a connect for 5 s when they time out).

    python3 scripts/bench_scale.py --nodes 8,64,256,1024
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import json
import logging
import os
import re
import resource
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ncclcheck import __version__  # noqa: E402
from ncclcheck.agent.launchers import detect_placement  # noqa: E402
from ncclcheck.checks import run_local_checks  # noqa: E402
from ncclcheck.checks.local import LocalInput  # noqa: E402
from ncclcheck.config import Config, WorldConfig  # noqa: E402
from ncclcheck.model import Report  # noqa: E402
from ncclcheck.nccl import reachability  # noqa: E402
from ncclcheck.preflight import cluster, probe  # noqa: E402
from ncclcheck.rendezvous.budget import Budget  # noqa: E402

_tls = threading.local()
# Simulation only: 1,024 virtual nodes share 2 cores, one GIL and one process's descriptors. Since the store no longer
# serialises every call behind one process-wide lock (issue 20), every node probes at once: this many at a time keeps
# the sockets under the descriptor limit, and a probe's connect bound is raised so a listener thread waiting its turn
# for the GIL is not taken for a dead peer (a real node, alone on its machine, answers in microseconds).
PROBERS = threading.BoundedSemaphore(64)
SIM_CONNECT_S = 10.0
BREAKDOWN: dict = {}  # store bytes by key family (join, mesh/ep, mesh/row, world/result, ...) for --breakdown


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
            for k in keys[:1]:
                part = "/".join(k.split("/")[2:4]) if k.count("/") >= 3 else k.split("/")[-1]
                part = part.rstrip("0123456789").rstrip("/")
                BREAKDOWN[part] = BREAKDOWN.get(part, 0) + n

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

    def probe_peers(my_rank, peers, *a, **kw):
        if getattr(_tls, "probes_fail", False):
            peers = {r: {**p, "endpoints": {i: [["127.0.0.1", dead_port] for _ in eps]
                                            for i, eps in (p.get("endpoints") or {}).items()}}
                     for r, p in peers.items()}
        with PROBERS:
            return real(my_rank, peers, *a, **kw)

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


def facts_for(base: dict, r: int, fault: str) -> dict:
    f = copy.deepcopy(base)
    host = f"gpu{r:04d}"
    addr = node_addr(r)
    f["host"] = {**(f.get("host") or {}), "hostname": host, "fqdn": host, "resolves_to": [addr],
                 "fqdn_resolves_to": [addr], "loopback": False, "resolve_error": None}
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
# One run


class Phases:
    """Node 0's phase boundaries, recorded by wrapping the protocol's steps on node 0's thread only."""

    def __init__(self):
        self.t: dict = {}

    def wrap(self, name: str, module=cluster) -> None:
        real = getattr(module, name)

        def timed(*a, **kw):
            t0 = time.monotonic()
            try:
                return real(*a, **kw)
            finally:
                if getattr(_tls, "node0", False):
                    self.t[name] = (t0, time.monotonic())

        setattr(module, name, timed)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(n: int, base: dict, faults: dict, timeout: float, counter: list, phases: Phases, skip: set,
        dup_of: int | None) -> dict:
    port = free_port()
    counter[0] = counter[1] = 0
    phases.t.clear()
    results: dict = {}
    t_start = time.monotonic()

    def node(r: int, slot: str) -> None:
        _tls.node0 = r == 0 and slot == "main"
        _tls.probes_fail = faults.get(r) == "probes"
        f = facts_for(base, r, faults.get(r, "") if slot == "main" else "")
        if slot != "main":
            f["host"]["hostname"] = f"gpu{r:04d}-dup"
        world = WorldConfig(nnodes=n, node_rank=r, master_addr="127.0.0.1", master_port=port, timeout_s=timeout)
        cfg = Config(command="preflight", world=world)
        placement = detect_placement({}, world)
        local = run_local_checks(LocalInput.of(f, node_rank=r, multi_node=True, nproc_per_node=None,
                                               backend="gloo", master=None))
        if _tls.node0:
            phases.t["node0_enter"] = (t_start, time.monotonic())
        budget = dataclasses.replace(Budget.of(cfg), connect_attempt_s=SIM_CONNECT_S)
        out = cluster.run_cluster_preflight(cfg, placement, f, local, budget, join_grace_s=0.5)
        t_rep = time.monotonic()
        rep = Report(command="preflight", version=__version__, started="", world=out.world, nodes=out.nodes,
                     checks=out.checks, recommendations=out.recommendations)
        doc = json.dumps(rep.to_dict(), default=str) if _tls.node0 else None
        rep = dataclasses.replace(rep, agreed_exit_code=out.agree_exit_code(rep.exit_code))
        results[(r, slot)] = {"exit": rep.exit_code, "doc": doc, "report_s": time.monotonic() - t_rep,
                              "line": f"node {r}: {rep.status.value}", "formed": out.formed,
                              "report": rep if _tls.node0 else None}

    threads = [threading.Thread(target=node, args=(r, "main"), daemon=True) for r in range(n) if r not in skip]
    if dup_of is not None:
        threads.append(threading.Thread(target=node, args=(dup_of, "dup"), daemon=True))
    # Node 0 first, the others once its store listens: under gVisor (this sandbox) a storm of probe connects while
    # c10d's server is being constructed can stall that constructor for minutes; on real nodes nothing shares a
    # process, and a node started before node 0 just retries its bounded probe (tests/unit/test_world.py covers it).
    threads[0].start()
    end = time.monotonic() + timeout
    while time.monotonic() < end and not phases.t.get("_connect"):
        time.sleep(0.01)
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(timeout=timeout * 4 + 120)
    wall = time.monotonic() - t_start
    hung = sum(t.is_alive() for t in threads)
    return {"wall": wall, "results": results, "bytes": counter[0], "requests": counter[1], "hung": hung,
            "phases": dict(phases.t), "t0": t_start}


def named(report: Report, cid: str, needle: str) -> bool:
    return any(c.id == cid and c.status.value == "fail" and needle in c.summary for c in report.checks)


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


def isolate() -> None:
    """Re-exec in a private network namespace with only loopback up (root only; otherwise run as is)."""
    import shutil
    import subprocess

    if os.environ.get("NCCLCHECK_SCALE_NETNS") or os.geteuid() != 0 or not shutil.which("unshare"):
        return
    env = dict(os.environ, NCCLCHECK_SCALE_NETNS="1")
    cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', sys.executable, *sys.argv]
    sys.exit(subprocess.call(cmd, env=env))


def main() -> None:
    isolate()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="8,64,256,1024", help="comma-separated N values")
    ap.add_argument("--timeout", type=float, default=60.0, help="--timeout of the formed run")
    ap.add_argument("--breakdown", action="store_true", help="print store bytes per node by key family")
    ap.add_argument("--json-out", help="write node 0's JSON report of the largest formed run here")
    a = ap.parse_args()
    logging.disable(logging.WARNING)
    # Hundreds of threads in one interpreter: switch the GIL less often than the 5 ms default so CPU-bound phases
    # are not spent handing the lock around (each real node has its own interpreter and none of this contention).
    sys.setswitchinterval(0.05)
    threading.stack_size(512 * 1024)
    counter, lock = [0, 0], threading.Lock()
    install_counter(counter, lock)
    install_probe_fault()
    phases = Phases()
    for name in ("_connect", "_host_decides", "_mesh_start", "_mesh_collect", "run_cross_checks", "recommendations"):
        phases.wrap(name)
    phases.wrap("build_matrix", reachability)
    base = base_facts()
    import torch.distributed  # noqa: F401 - every real node imports it on its own machine; pay it once, up front
    sizes = [int(x) for x in a.nodes.split(",") if x.strip()]
    last = ""
    for n in sizes:
        code_r, nccl_r, probe_r = max(1, n // 3), max(2, (2 * n) // 3), n - 2
        faults = {code_r: "code", nccl_r: "nccl", probe_r: "probes"}
        gc.collect()
        BREAKDOWN.clear()
        ra = run(n, base, faults, a.timeout, counter, phases, skip=set(), dup_of=None)
        if a.breakdown:
            print("  bytes/node by key: " + ", ".join(f"{k or '?'} {v / n:,.0f}" for k, v in
                                                     sorted(BREAKDOWN.items(), key=lambda kv: -kv[1])), flush=True)
        r0 = ra["results"].get((0, "main")) or {}
        rep = r0.get("report")
        checks = {}
        if rep is not None:
            checks = {
                f"code differs on node {code_r}": named(rep, "code.consistent", f"node {code_r} (gpu{code_r:04d})"),
                f"NCCL differs on node {nccl_r}": named(rep, "versions.consistent",
                                                        f"node {nccl_r} (gpu{nccl_r:04d})"),
                f"probes fail on node {probe_r}": named(rep, "net.peer_reachability",
                                                        f"node {probe_r} (gpu{probe_r:04d})"),
            }
            pr = next((c for c in rep.checks if c.id == "net.peer_reachability"), None)
            wrongly = pr is not None and set(re.findall(r"node (\d+) \(", pr.summary)) != {str(probe_r)}
        codes = sorted({v["exit"] for v in ra["results"].values()})
        ph = ra["phases"]
        t0 = ra["t0"]

        def span(k, ph=ph):
            return f"{ph[k][1] - ph[k][0]:.2f}" if k in ph else "?"

        print(f"  node 0 compute: build_matrix {span('build_matrix')} s, cross checks {span('run_cross_checks')} s, "
              f"rules {span('recommendations')} s", flush=True)
        print(f"N={n} formed: wall {ra['wall']:.2f} s | join+verdict {span('_host_decides')} s, mesh(own probes) "
              f"{span('_mesh_start')} s, rows+checks {span('_mesh_collect')} s, report at node 0 "
              f"{r0.get('report_s', 0):.2f} s | bytes/node {ra['bytes'] / n:,.0f} ({ra['requests'] / n:.1f} "
              f"requests/node) | exit codes {codes} | hung {ra['hung']}", flush=True)
        if ph:
            print(f"  node 0 timeline: starts at {ph['node0_enter'][1] - t0:.2f} s, store up at "
                  f"{ph['_connect'][1] - t0:.2f} s, verdict at {ph['_host_decides'][1] - t0:.2f} s, result at "
                  f"{ph.get('_mesh_collect', (0, t0))[1] - t0:.2f} s", flush=True)
        doc = r0.get("doc") or ""
        mesh = next((c.summary for c in (rep.checks if rep else []) if c.id == "net.peer_reachability"), "")
        print(f"  JSON report at node 0: {len(doc):,} bytes, schema {validate(doc) if doc else 'no report'}; "
              f"peer_reachability: {mesh[:160]}{' (names other nodes too)' if rep and wrongly else ''}", flush=True)
        if rep is not None:
            from ncclcheck.render.html import render_html
            from ncclcheck.render.junit import render_junit
            from ncclcheck.render.markdown import render_markdown

            t = time.monotonic()
            md, xml, html = render_markdown(rep), render_junit(rep), render_html(rep)
            print(f"  node 0 renders (outside the wall time): Markdown {len(md):,} B, JUnit {len(xml):,} B "
                  f"({xml.count('<testcase ')} testcases), HTML {len(html):,} B in {time.monotonic() - t:.2f} s",
                  flush=True)
        if a.json_out and n == sizes[-1] and doc:
            with open(a.json_out, "w") as fh:
                fh.write(doc)
        # The world that cannot form: one node never starts, another claims node 1's rank.
        miss, dup = n - 1, 1
        rb = run(n, base, {}, max(8.0, 5.0 + n * 0.01), counter, phases, skip={miss}, dup_of=dup)
        b0 = (rb["results"].get((0, "main")) or {})
        wsum = ""
        for v in rb["results"].values():
            if v.get("report") is not None:
                wsum = next((c.summary for c in v["report"].checks if c.id == "rendezvous.world"), "")
        checks[f"node {miss} never joins"] = f"node rank(s) {miss} never joined" in wsum
        checks[f"node rank {dup} duplicated"] = f"node rank {dup} claimed by 2 nodes" in wsum
        print(f"N={n} no-world: wall {rb['wall']:.2f} s (waits out --timeout), bytes/node {rb['bytes'] / n:,.0f}, "
              f"exit codes {sorted({v['exit'] for v in rb['results'].values()})}, node 0 says: {wsum[:140]}",
              flush=True)
        del b0
        k, t = sum(checks.values()), len(checks)
        print("  faults: " + "; ".join(f"{name}: {'named' if ok else 'MISSED'}" for name, ok in checks.items()))
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  peak RSS so far {rss_mb:,.0f} MiB", flush=True)
        last = f"nodes={n} wall_s={ra['wall']:.1f} node0_bytes_per_node={ra['bytes'] / n:.0f} faults_named={k}/{t}"
    print(last)


if __name__ == "__main__":
    main()
