"""The file-side attacks of issue 21 and the store attacks of issue 36, by hand, against a checkout: one line each.

    python3 scripts/trust_attacks.py [REPO]      # REPO defaults to this checkout; run it on main to compare
    python3 scripts/trust_attacks.py replay [REPO]   # issue 36: records of one run replayed into another (ATTACKS)
    python3 scripts/trust_attacks.py drip [REPO]     # issue 45: clients dripping requests into node 0's store front
    python3 scripts/trust_attacks.py live [REPO]     # issue 45: the live plane (reach scan, idle slots, a fake
                                                     # responder's 63 MiB reply, a record copied from another job)
    python3 scripts/trust_attacks.py --store [--gets N] [--timeout T] [--only NAME] [REPO]   # the store attacks only
    python3 scripts/trust_attacks.py round4 [REPO [NAME...]]   # issue 55: rate as a port scanner, blob floods, a lone
                                                 # surrogate, huge lines, control characters, a newline in a file
                                                 # name, munge's records, a squatter on a sharded master port
    python3 scripts/trust_attacks.py round5 [REPO [NAME...]]   # issue 63: hostile baselines, a wedged driver, a
                                                 # node's own tools' output, reads of nothing, nvidia-smi's odd
                                                 # values, a stranger's flood of the responder (trust_round5.py)

The store attacks (STORE_ATTACKS below: a name and a function of the master port) run a real 2-node preflight on
127.0.0.1 (node 0 and node 1 as two `python -m ncclcheck preflight` processes) with a stranger on the master port
from the moment node 0 listens, and print node 0's peak RSS (its whole process tree: the store's front is its child)
and each node's wall time against the bound T + 10 s. Careful with `--store` against a checkout without the front
(main before issue 36): the unread-GET attack grew node 0 to 24 GB there, until the OOM killer; pass a small --gets.

Each attack runs `python -m ncclcheck` from REPO in a subprocess: a saved report with a newline in `version` and
`started` rendered to an env file and a labels script (then sourced/run: does a canary appear?), an ESC sequence in a
hostname on the terminal (FORCE_COLOR), a 0600 report rewritten, the log directory's and a log's mode, deep nesting
and NaN given to `report`, SIGTERM to a standalone bench.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

from . import peak_rss
from .loopstore import loopback_store

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ATTACKS:  # an attack by name: `replay [REPO]`
        return ATTACKS[sys.argv[1]](os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else REPO))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", nargs="?", default=REPO)
    ap.add_argument("--store", action="store_true", help="only the store attacks (issue 36)")
    ap.add_argument("--gets", type=int, default=20000, help="pipelined unread GETs of the 4 MiB value")
    ap.add_argument("--idle", type=int, default=500, help="idle connections")
    ap.add_argument("--timeout", type=float, default=20.0, help="T, the nodes' --timeout")
    ap.add_argument("--only", help="run only the store attack of this name")
    a = ap.parse_args()
    repo = os.path.abspath(a.repo)
    if not a.store:
        file_attacks(repo)
    store_attacks(repo, a)
    return 0


def file_attacks(repo: str) -> None:
    tmp = tempfile.mkdtemp(prefix="ncclcheck-attacks-")
    env = {**os.environ, "PYTHONPATH": repo, "NCCLCHECK_LOG_DIR": os.path.join(tmp, "logs")}
    for k in [k for k in env if k.startswith(("NCCL_", "MASTER_"))]:
        del env[k]

    def cli(*args, **kw):
        return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True, text=True,
                              env={**env, **kw.pop("extra", {})}, cwd=tmp, timeout=kw.pop("timeout", 120), **kw)

    example = json.load(open(os.path.join(repo, "tests", "render", "examples", "preflight-pass-2node.json")))
    canary = os.path.join(tmp, "canary")
    doc = dict(example, version=f"0.1\ntouch {canary}\n", started=f"now\ntouch {canary}")
    doc["nodes"] = [dict(n) for n in example["nodes"]]
    doc["nodes"][0]["hostname"] = "gpu01\x1b]0;owned\x07"
    run = os.path.join(tmp, "run.json")
    json.dump(doc, open(run, "w"))
    p = cli("report", run, "--env-out", os.path.join(tmp, "env.sh"))
    subprocess.run(["bash", "-c", f". {tmp}/env.sh; bash -c true"], capture_output=True, env={"PATH": "/usr/bin:/bin",
                   "NCCLCHECK_NODE_RANK": "0"})
    print(f"newline in version/started -> env file sourced: {'RAN touch' if os.path.exists(canary) else 'nothing ran'}"
          f" (exit {p.returncode})")
    if os.path.exists(canary):
        os.remove(canary)
    p = cli("report", run, "--format", "labels")
    with open(os.path.join(tmp, "labels.sh"), "w") as f:
        f.write(p.stdout)
    os.makedirs(os.path.join(tmp, "bin"), exist_ok=True)
    with open(os.path.join(tmp, "bin", "kubectl"), "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(os.path.join(tmp, "bin", "kubectl"), 0o755)
    subprocess.run(["sh", os.path.join(tmp, "labels.sh")], capture_output=True,
                   env={"PATH": f"{tmp}/bin:/usr/bin:/bin"})
    ran = "RAN touch" if os.path.exists(canary) else "nothing ran"
    print(f"newline in version/started -> labels script run: {ran}")
    p = cli("report", run, extra={"FORCE_COLOR": "1"})
    seen = "REACHES it" if "\x1b]0;" in p.stdout else "stripped"
    print(f"ESC ]0; (window title) in a hostname -> terminal: {seen}")
    private = os.path.join(tmp, "private.json")
    open(private, "w").write("{}")
    os.chmod(private, 0o600)
    cli("report", run, "--markdown", private)
    new = os.path.join(tmp, "new.json")
    cli("report", run, "--junit", new)
    print(f"a 0600 report rewritten -> {oct(stat.S_IMODE(os.stat(private).st_mode))}; a new report -> "
          f"{oct(stat.S_IMODE(os.stat(new).st_mode))}")
    logs = os.path.join(tmp, "logs")
    deep = os.path.join(tmp, "deep.json")
    open(deep, "w").write(json.dumps(example)[:-1] + ', "x": ' + "[" * 100000 + "]" * 100000 + "}")
    p = cli("report", deep)
    log = [f for f in os.listdir(logs) if f.endswith(".log")] if os.path.isdir(logs) else []
    print(f"report on deeply nested JSON -> exit {p.returncode}: {p.stderr.strip()[:110]}")
    print(f"log directory -> {oct(stat.S_IMODE(os.stat(logs).st_mode))}; a log -> "
          f"{oct(stat.S_IMODE(os.stat(os.path.join(logs, log[0])).st_mode)) if log else 'none kept'}")
    nan = os.path.join(tmp, "nan.json")
    bench = json.load(open(os.path.join(repo, "tests", "render", "examples", "bench-gate-fail.json")))
    bench["bench"][0]["busbw_gbps"] = float("nan")
    open(nan, "w").write(json.dumps(bench))
    p = cli("report", nan, "--html", os.path.join(tmp, "nan.html"))
    print(f"report on NaN -> exit {p.returncode}: {p.stderr.strip()[:110]}")
    out = os.path.join(tmp, "bench.json")
    proc = subprocess.Popen([sys.executable, "-m", "ncclcheck", "bench", "--sizes", "1K-64M", "--iters", "400",
                             "--json", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=tmp, start_new_session=True)
    time.sleep(12)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=60)
    rep = json.load(open(out)) if os.path.exists(out) else None
    print(f"SIGTERM mid-bench -> exit {proc.returncode}; "
          + (f"partial JSON: status {rep['status']}, exit_code {rep['exit_code']}" if rep else "no JSON written"))


# --- the store attacks of issue 36: a stranger on node 0's master port --------------------------------------------

MAGIC = 0x3C85F7CE  # c10d's VALIDATE magic (scripts/sim_store.py has the wire protocol)
VALIDATE, SET, GET = 0, 1, 3


def _s(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def no_attack(port: int, a, stop: threading.Event) -> str:
    """The control: the same two nodes with nobody on the master port (a loaded host's own wall times)."""
    return "nobody on the master port"


def unread_gets(port: int, a, stop: threading.Event) -> str:
    """SET a 4 MiB key, then pipeline GETs of it and never read a reply (issue 36, hole 1)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(bytes([VALIDATE]) + struct.pack("<I", MAGIC) + bytes([SET]) + _s(b"/big") + _s(b"x" * (4 << 20)))
    get = bytes([GET]) + _s(b"/big")
    sent = 0
    try:
        for _ in range(0, a.gets, 1000):
            s.sendall(get * min(1000, a.gets - sent))
            sent += min(1000, a.gets - sent)
    except OSError as e:
        return f"{sent:,} GETs sent, then {e.strerror or e}"
    stop.wait()
    s.close()
    return f"{sent:,} GETs sent"


def idle_flood(port: int, a, stop: threading.Event) -> str:
    """Open connections to the master port and never say anything on them (issue 36, hole 6)."""
    socks = []
    for _ in range(a.idle):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            break
    stop.wait()
    for c in socks:
        c.close()
    return f"{len(socks):,} idle connections open"


# name -> attack(master port, args, stop event) -> what it did. Add an attack here (engineer `trust`: the replay of a
# signed record) and it runs the same way, with the same figures printed.
STORE_ATTACKS = {
    "none": no_attack,
    "unread-gets": unread_gets,
    "idle-flood": idle_flood,
}


def _tree_rss(pid: int) -> int:
    """RSS of pid and all its descendants, from /proc (bytes)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS:")), 0)
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return total


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def store_attacks(repo: str, a) -> None:
    tmp = tempfile.mkdtemp(prefix="ncclcheck-store-attacks-")
    env = {**os.environ, "PYTHONPATH": repo, "NCCLCHECK_LOG_DIR": os.path.join(tmp, "logs")}
    for k in [k for k in env if k.startswith(("NCCL_", "MASTER_", "NCCLCHECK_TOKEN"))]:
        del env[k]
    bound = a.timeout + 10
    for name, attack in STORE_ATTACKS.items():
        if a.only and name != a.only:
            continue
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]

        def node(rank: int, name: str = name, port: int = port) -> tuple:
            out = os.path.join(tmp, f"{name}-{rank}.json")
            cmd = [sys.executable, "-m", "ncclcheck", "preflight", "--nnodes", "2", "--node-rank", str(rank),
                   "--master-addr", "127.0.0.1", "--master-port", str(port), "--timeout", f"{a.timeout:g}",
                   "--json", out, "--quiet"]
            return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp), \
                out, time.monotonic()

        n0 = node(0)
        end = time.monotonic() + 60
        while not _accepts(port) and time.monotonic() < end and n0[0].poll() is None:
            time.sleep(0.05)
        stop, did = threading.Event(), []
        t = threading.Thread(target=lambda f=attack, p=port, e=stop, d=did: d.append(f(p, a, e)), daemon=True)
        t.start()
        n1 = node(1)
        peak, walls, codes = 0, {}, {}
        hard = time.monotonic() + bound + 30
        while len(walls) < 2 and time.monotonic() < hard:
            peak = max(peak, _tree_rss(n0[0].pid))
            for r, (p, _, t0) in enumerate((n0, n1)):
                if r not in walls and p.poll() is not None:
                    walls[r], codes[r] = time.monotonic() - t0, p.returncode
            time.sleep(0.05)
        for r, (p, _, _) in enumerate((n0, n1)):
            if p.poll() is None:
                p.kill()
                codes[r] = "killed"
        stop.set()
        t.join(10)
        world = ""
        try:
            doc = json.load(open(n0[1]))
            w = [c for c in doc["checks"] if c["id"] == "rendezvous.world"]
            world = f"{w[0]['status']}: {w[0]['summary']}" if w else ""
        except (OSError, ValueError, KeyError):
            world = "no report"
        wall = ", ".join(f"node {r} {walls[r]:.1f} s (exit {codes[r]})" if r in walls else f"node {r} > "
                         f"{bound + 30:.0f} s (killed)" for r in (0, 1))
        print(f"store attack {name} ({did[0] if did else 'still running'}): node 0 peak RSS (tree) "
              f"{peak / (1 << 20):,.0f} MiB; {wall}; bound T + 10 = {bound:g} s; node 0's world check: {world}")


def replay_attack(repo: str) -> int:
    """Issue 36, hole 4: two 2-node preflights on loopback with the same NCCLCHECK_TOKEN and no job id (so the same
    key prefix). An eavesdropper copies run A's signed world/verdict, world/result and world/final off the wire; in
    run B node 0 has a real fault (an NCCL_SOCKET_IFNAME that does not exist) and a stranger keeps writing A's
    records into B's store. Prints node 1's exit code in B and what it named."""
    import datetime as dt
    import socket
    import threading

    import torch.distributed as dist

    tmp = tempfile.mkdtemp(prefix="ncclcheck-replay-")
    env = {**os.environ, "PYTHONPATH": repo, "NCCLCHECK_LOG_DIR": os.path.join(tmp, "logs"),
           "NCCLCHECK_TOKEN": "one-token-for-the-pool"}
    for k in [k for k in env if k.startswith(("NCCL_", "MASTER_", "SLURM_"))]:
        del env[k]
    keys = [f"ncclcheck/preflight/{k}" for k in ("world/verdict", "world/result", "world/final")]

    def port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def client(p: int, until: float):
        while True:
            try:
                return dist.TCPStore("127.0.0.1", p, None, False, timeout=dt.timedelta(seconds=30))
            except Exception:  # noqa: BLE001 - node 0 not up yet
                if time.monotonic() > until:
                    raise
                time.sleep(0.02)

    def world(p: int, tag: str, node0_env: dict) -> list:
        procs = []
        for r in (0, 1):
            e = {**env, **(node0_env if r == 0 else {})}
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "ncclcheck", "preflight", "--nnodes", "2", "--node-rank", str(r),
                 "--master-addr", "127.0.0.1", "--master-port", str(p), "--timeout", "20", "--json",
                 os.path.join(tmp, f"{tag}-%r.json")], env=e, cwd=tmp, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
        return procs

    pa = port()
    procs = world(pa, "a", {})
    eve = client(pa, time.monotonic() + 60)
    eve.wait(keys, dt.timedelta(seconds=60))
    captured = {k: eve.get(k) for k in keys}
    codes_a = [p.wait(120) for p in procs]
    pb = port()
    procs = world(pb, "b", {"NCCL_SOCKET_IFNAME": "nosuchnic0"})
    stop = threading.Event()

    def replay() -> None:
        st = client(pb, time.monotonic() + 60)
        while not stop.is_set():
            try:
                for k, v in captured.items():
                    st.set(k, v)
            except Exception:  # noqa: BLE001 - B's store went away
                return
            time.sleep(0.002)

    t = threading.Thread(target=replay, daemon=True)
    t.start()
    codes_b = [p.wait(120) for p in procs]
    stop.set()
    doc = json.load(open(os.path.join(tmp, "b-1.json"))) if os.path.exists(os.path.join(tmp, "b-1.json")) else {}
    named = [r for r in (doc.get("trust") or {}).get("ignored", []) if "replay" in r]
    # B's own fault, as node 1's report shows it: node 0's check of the interface it was told to use
    kept = any(c["node"] == 0 and c["id"] == "net.socket_ifname" and c["status"] == "fail"
               for c in doc.get("checks", []))
    refused = any(c["id"] == "rendezvous.world" and "never published" in c["summary"] for c in doc.get("checks", []))
    what = ("names B's own fault" if kept else "refused the replayed records (its world failed: a stranger can make "
            "a run fail)" if refused else "ADOPTED run A's result: B's own fault is lost")
    print(f"run A exits {codes_a}; run B (node 0 told NCCL_SOCKET_IFNAME=nosuchnic0) with A's signed records "
          f"replayed: exits {codes_b}; node 1 {what}; replays it named: {len(named)}"
          + (f", e.g. {named[0]}" if named else ""))
    return 0


def drip_attack(repo: str) -> int:
    """Issue 45, item 5: node 0's store front (REPO's) with DRIPPERS connections each sending a MULTI_GET of the most
    keys a request may name one byte at a time, over and over, while a real c10d client makes 100 SET/GET pairs.
    Prints the real client's time alone and beside the drippers (the front re-parsed a client's whole buffer on
    every chunk: 6.2-8.4 s instead of 0.02-0.05 s)."""
    import datetime as dt

    import torch.distributed as dist

    drippers, pairs, keys = 4, 100, 4096
    code = ("import sys; from ncclcheck.rendezvous.store import Guard, open_store; "
            "st = open_store('127.0.0.1', int(sys.argv[1]), True, 30, guard=Guard()); "
            "print('ready', flush=True); sys.stdin.read()")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": repo}
    node0 = subprocess.Popen([sys.executable, "-c", code, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env, cwd=repo)
    try:
        if node0.stdout.readline().strip() != "ready":
            print("drip: node 0's store did not start")
            return 1
        client = dist.TCPStore("127.0.0.1", port, None, False, timeout=dt.timedelta(seconds=60))

        def real() -> float:
            t0 = time.monotonic()
            for i in range(pairs):
                client.set(f"k{i}", "v" * 64)
                client.get(f"k{i}")
            return time.monotonic() - t0

        alone = real()
        request = bytes([MULTI_GET]) + struct.pack("<Q", keys) + b"".join(_s(b"/drip/%d" % i) for i in range(keys))
        stop, sent = threading.Event(), [0] * drippers

        def drip(i: int) -> None:
            with socket.create_connection(("127.0.0.1", port)) as c:
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                c.sendall(bytes([VALIDATE]) + struct.pack("<I", MAGIC))
                while not stop.is_set():
                    for k in range(len(request)):
                        if stop.is_set():
                            return
                        try:
                            c.send(request[k:k + 1])
                        except OSError:
                            return
                        sent[i] += 1

        threads = [threading.Thread(target=drip, args=(i,), daemon=True) for i in range(drippers)]
        for t in threads:
            t.start()
        time.sleep(2)  # the drippers well into their requests
        beside = real()
        stop.set()
        for t in threads:
            t.join(10)
        print(f"drip: {pairs} SET/GET pairs of a real client: {alone:.3f} s alone, {beside:.3f} s beside {drippers} "
              f"connections dripping {keys:,}-key MULTI_GETs a byte at a time ({sum(sent):,} bytes dripped)")
    finally:
        node0.stdin.close()
        node0.wait(30)
    return 0


MULTI_GET = 10


# --- the live plane's attacks of issue 45: a stranger against armed ranks (REPO's responder) and REPO's watch -------

# an armed rank: a one-rank gloo group of its own (so its flight recorder holds a collective), then REPO's responder
_ARMED = ("import json, sys, torch, torch.distributed as dist; "
          "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1); "
          "dist.all_reduce(torch.zeros(1)); "
          "from ncclcheck.live.responder import start; r = start(); r.registered.wait(60); "
          "print(json.dumps({'addr': r.addr, 'port': r.port}), flush=True); sys.stdin.read()")


class _LiveJob:
    """A job's store (a TCPStore server here) and `ranks` armed ranks, each a process running REPO's responder."""

    def __init__(self, repo: str, ranks: int, token: str = "", extra: Optional[dict] = None) -> None:
        self.server = loopback_store(timeout_s=30)
        self.port = self.server.port
        self.env = {**os.environ, "PYTHONPATH": repo, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(self.port),
                    "WORLD_SIZE": str(ranks), "TORCH_FR_BUFFER_SIZE": "100"}
        for k in [k for k in self.env if k.startswith(("NCCLCHECK_", "SLURM_", "TORCHELASTIC_"))]:
            del self.env[k]
        if token:
            self.env["NCCLCHECK_TOKEN"] = token
        self.env.update(extra or {})
        self.procs, self.where = [], []
        for r in range(ranks):
            # cwd: `python -c` puts it first on sys.path, so a copy of ncclcheck there would win over REPO's
            p = subprocess.Popen([sys.executable, "-c", _ARMED], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True, env={**self.env, "RANK": str(r), "LOCAL_RANK": str(r)}, cwd=repo)
            self.procs.append(p)
            self.where.append(json.loads(p.stdout.readline()))

    def watch(self, repo: str, extra: tuple = (), timeout: int = 10) -> tuple:
        """REPO's `ncclcheck watch` on this job: (exit code, report, peak RSS in bytes)."""
        out = os.path.join(tempfile.mkdtemp(prefix="ncclcheck-live-attack-"), "watch.json")
        env = {k: v for k, v in self.env.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
        p, rss = peak_rss.run([sys.executable, "-m", "ncclcheck", "watch", "--master-addr", "127.0.0.1",
                               "--master-port", str(self.port), "--timeout", str(timeout), "--json", out, *extra],
                              out + ".rss", timeout=timeout * 10 + 60, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=repo)
        doc = json.load(open(out)) if os.path.exists(out) else {}
        return p.returncode, doc, rss or 0

    def close(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait(10)


def _answered(doc: dict) -> str:
    c = [c for c in doc.get("checks", []) if c.get("id") == "live.answered"]
    return c[0]["summary"][:160] if c else "no live.answered check"


def _ask_raw(addr: str, port: int, doc: dict) -> dict:
    """One request without any key, the way a stranger asks (the job and run, where a hello names them, copied)."""
    with socket.create_connection((addr, port), timeout=10) as s:
        (n,) = struct.unpack("!I", s.recv(4, socket.MSG_WAITALL))
        hello = json.loads(s.recv(n, socket.MSG_WAITALL))
        body = json.dumps({**doc, **{k: hello[k] for k in ("job", "run") if k in hello}}).encode()
        s.sendall(struct.pack("!I", len(body)) + body)
        s.settimeout(20)
        (n,) = struct.unpack("!I", s.recv(4, socket.MSG_WAITALL))
        return json.loads(s.recv(n, socket.MSG_WAITALL))


def live_attacks(repo: str) -> int:
    """Issue 45, items 2, 3, 4 and 8 against REPO's responders and watch, one line each."""
    key = "ncclcheck/live/rank/"

    # item 2: records for ranks past the world size, at an open and a closed port of the rank's own host
    job = _LiveJob(repo, 2)
    try:
        listening = socket.create_server(("127.0.0.1", 0))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            closed = s.getsockname()[1]
        rec = json.loads(job.server.get(f"{key}0"))
        for r, port in ((100, listening.getsockname()[1]), (101, closed)):
            job.server.set(f"{key}{r}", json.dumps({**rec, "rank": r, "port": port}))
        got = _ask_raw(job.where[0]["addr"], job.where[0]["port"], {"kind": "reach", "ranks": [100, 101]})
        listening.close()
        print(f"live reach (no key): records for ranks 100 (an open port) and 101 (a closed one) -> "
              f"reach {json.dumps(got.get('reach'))}, not tried {json.dumps(got.get('unknown'))}"
              + (f", refused: {got['error']}" if "error" in got else ""))
    finally:
        job.close()

    # item 3: 8 idle connections to rank 1, each reopened the moment it is closed; watch with the job's token
    job = _LiveJob(repo, 2, token="the-jobs-token")
    stop = threading.Event()

    def idle() -> None:
        while not stop.is_set():
            try:
                with socket.create_connection((job.where[1]["addr"], job.where[1]["port"]), timeout=5) as c:
                    while not stop.is_set() and c.recv(4096):
                        pass
            except OSError:
                pass
    try:
        threads = [threading.Thread(target=idle, daemon=True) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(1)
        code, doc, _ = job.watch(repo)
        print(f"live idle slots (token; 8 idle reconnecting connections to rank 1): watch exit {code}: "
              f"{_answered(doc)}")
    finally:
        stop.set()
        job.close()

    # item 4: rank 1's record pointed at a stranger's listener that replies with 63 MiB of {},{},...
    job = _LiveJob(repo, 2)
    fake = socket.create_server(("127.0.0.1", 0))
    reply = b"[" + b"{}," * ((63 << 20) // 3) + b"{}]"

    def serve() -> None:
        while True:
            try:
                c, _ = fake.accept()
            except OSError:
                return
            with c:
                try:
                    real = json.loads(job.server.get(f"{key}1"))  # the rank's own job and run, where it has them
                    hello = json.dumps({"v": real["v"], "rank": 1, "challenge": "a" * 32, "auth": real["auth"],
                                        **{k: real[k] for k in ("job", "run") if k in real}}).encode()
                    c.sendall(struct.pack("!I", len(hello)) + hello)
                    (n,) = struct.unpack("!I", c.recv(4, socket.MSG_WAITALL))
                    c.recv(n, socket.MSG_WAITALL)
                    c.sendall(struct.pack("!I", len(reply)) + reply)
                except (OSError, ValueError, KeyError, struct.error):
                    pass
    try:
        real = json.loads(job.server.get(f"{key}1"))
        threading.Thread(target=serve, daemon=True).start()
        job.server.set(f"{key}1", json.dumps({**real, "port": fake.getsockname()[1]}))
        code, doc, peak = job.watch(repo, timeout=20)
        print(f"live fake responder (no key; rank 1's record at a listener replying 63 MiB of {{}}): watch exit "
              f"{code}, peak RSS {peak / (1 << 20):,.0f} MiB: {_answered(doc)}")
    finally:
        fake.close()
        job.close()

    # item 8: two jobs with one pool token; job A's signed record of rank 1 copied into job B's store
    a, b = _LiveJob(repo, 2, token="one-pool-token"), _LiveJob(repo, 2, token="one-pool-token")
    try:
        b.server.set(f"{key}1", a.server.get(f"{key}1"))
        code, doc, _ = b.watch(repo)
        asked = {r["rank"]: r["addr"] for r in doc.get("live", {}).get("ranks", [])}
        to_a = asked.get(1) == f"{a.where[1]['addr']}:{a.where[1]['port']}"
        said = doc.get("live", {}).get("unanswered", {}).get("1", "")
        print(f"live copied record (one pool token; A's rank 1 copied into B's store): B's watch exit {code}, "
              f"{'ASKED JOB A`S RANK 1' if to_a else 'did not ask job A'}; rank 1: {said[:140] or 'answered'}")
    finally:
        a.close()
        b.close()
    return 0


# --- issue 55, round four: every live request as guarded as reach, every string clean where it enters, every file
# read within a bound, munge's records, a squatter sharing a sharded master port. Each attack is a function of REPO
# returning {"held": bool, "line": one line of what happened}; tests/scripts/test_trust_attacks.py asserts "held"
# for this checkout (each read False on main at c34e729, before them), `round4 [REPO]` prints the lines.

def _env(repo: str, **extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": repo, **extra}
    for k in [k for k in env if k.startswith(("NCCL_", "MASTER_", "SLURM_", "NCCLCHECK_", "TORCHELASTIC_"))
              and k not in extra]:
        del env[k]
    return env


def _cli(repo: str, *args: str, cwd: str, timeout: int = 300, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(repo, NCCLCHECK_LOG_DIR=os.path.join(cwd, "logs"), **extra), timeout=timeout)


def _poisoned_dumps(repo: str, tmp: str, text: str) -> str:
    """A copy of a real killed job's files (tests/postmortem/fixtures/kill: JSON dumps only) with `text` in each
    rank's host name, the main thread's stack frame and every entry's profiling name."""
    import shutil

    d = os.path.join(tmp, "job")
    shutil.copytree(os.path.join(repo, "tests", "postmortem", "fixtures", "kill"), d)
    for r in range(3):
        os.remove(os.path.join(d, f"nccl_trace_rank_{r}"))  # the pickles: their JSON twins are edited instead
        path = os.path.join(d, f"nccl_trace_rank_{r}.json")
        doc = json.load(open(path))
        for e in doc["entries"]:
            e["profiling_name"] = f"gloo:all_reduce{text}"
        doc["ncclcheck_live"] = {"rank": r, "host": f"gpu0{r}{text}", "local_rank": r, "stacks": [
            {"thread": "MainThread", "main": True, "frames": [
                {"file": f"/job/train{text}.py", "line": 60, "func": f"main{text}", "code": f"time.sleep(60){text}"}]}]}
        with open(path, "w") as f:  # ensure_ascii: "\ud800" as JSON writes it, plain ASCII on disk
            json.dump(doc, f)
    return d


SURROGATE = "\ud800"
CONTROLS = "\x1b]0;owned\x07\r\u202e"


def surrogate_attack(repo: str) -> dict:
    """Item 3: a lone surrogate in dumps' host names, stack frames and profiling names, through every output of
    diagnose; and in a saved report's host name and summary, through `ncclcheck report`. Held: no exit 3."""
    tmp = tempfile.mkdtemp(prefix="ncclcheck-surrogate-")
    job = _poisoned_dumps(repo, tmp, SURROGATE)
    outs = {"console": (), "json": ("--json", "-"), "html": ("--html", "o.html"), "prometheus": ("--prometheus",
            "o.prom"), "markdown": ("--markdown", "o.md"), "junit": ("--junit", "o.xml")}
    codes = {k: _cli(repo, "diagnose", job, *v, cwd=tmp).returncode for k, v in outs.items()}
    saved = json.load(open(os.path.join(repo, "tests", "render", "examples", "preflight-pass-2node.json")))
    saved["nodes"][0]["hostname"] = f"gpu01{SURROGATE}"
    saved["checks"][0]["summary"] += SURROGATE
    with open(os.path.join(tmp, "run.json"), "w") as f:
        json.dump(saved, f)
    codes["report"] = _cli(repo, "report", "run.json", "--html", "r.html", cwd=tmp).returncode
    held = all(c in (0, 1) for c in codes.values())
    return {"held": held, "codes": codes,
            "line": f"a lone surrogate (\\ud800) in dumps and a saved report -> exit codes {codes}"}


def controls_attack(repo: str) -> dict:
    """Item 5: ESC, BEL, CR and U+202E in dumps' host names, stack frames and profiling names: does any reach the
    HTML report (or the JSON, Markdown, Prometheus, JUnit, console)? Held: none, in any of them."""
    tmp = tempfile.mkdtemp(prefix="ncclcheck-controls-")
    job = _poisoned_dumps(repo, tmp, CONTROLS)
    raw: dict = {}
    for name, flag in (("html", "--html"), ("json", "--json"), ("markdown", "--markdown"), ("prometheus",
                       "--prometheus"), ("junit", "--junit")):
        out = os.path.join(tmp, f"o.{name}")
        _cli(repo, "diagnose", job, flag, out, cwd=tmp)
        text = open(out, encoding="utf-8", errors="replace").read() if os.path.exists(out) else ""
        if name == "json":  # JSON escapes them: read back what it holds
            text = json.dumps(json.loads(text), ensure_ascii=False) if text else ""
        raw[name] = sum(text.count(c) for c in "\x1b\x07\r\u202e")
    raw["console"] = sum(_cli(repo, "diagnose", job, cwd=tmp, FORCE_COLOR="0").stdout.count(c)
                         for c in "\x07\r\u202e")
    return {"held": not any(raw.values()), "raw": raw,
            "line": f"ESC, BEL, CR and U+202E in dumps' fields -> characters reaching each output {raw}"}


def newline_name_attack(repo: str) -> dict:
    """Item 6: a log whose file name holds a newline and a forged console row. Held: no console line starts with
    the forged row (the console indents a line it wraps, so indentation does not tell them apart)."""
    import shutil

    tmp = tempfile.mkdtemp(prefix="ncclcheck-name-")
    job = os.path.join(tmp, "job")
    shutil.copytree(os.path.join(repo, "tests", "postmortem", "fixtures", "kill"), job)
    forged = "    FAIL   forged.check  all  everything is fine"
    os.rename(os.path.join(job, "launcher.log"), os.path.join(job, f"launcher.log\n{forged}"))
    # a failure of no rank in it: the report names the file it came from (the kill job's own lines all have a rank)
    with open(os.path.join(job, f"launcher.log\n{forged}"), "a") as f:
        f.write("OSError: [Errno 28] No space left on device\n")
    out = _cli(repo, "diagnose", job, cwd=tmp).stdout
    split = any(line.lstrip().startswith(forged.lstrip()) for line in out.splitlines())  # a row of its own
    err = _cli(repo, "preflight", "--nccl-debug", f"missing.log\n{forged}", cwd=tmp).stderr  # a usage error
    err_split = any(line.lstrip().startswith(forged.lstrip()) for line in err.splitlines())
    return {"held": not split and not err_split and "launcher.log" in out,
            "line": f"a newline in a log's file name -> {'a FORGED console line' if split else 'one console line'}; "
                    f"in a missing --nccl-debug file's -> {'a FORGED error line' if err_split else 'one error line'}"}


def unbounded_read_attack(repo: str, mib: int = 300) -> dict:
    """Item 4: `preflight --nccl-debug FILE` on a capture whose second line is `mib` MiB long, and `--nccl-ras FILE`
    on a real ncclras text report followed by as long a line: preflight's peak RSS over a plain preflight's, and
    whether it says what it did not read. Held: neither grows by half the line, the capture's cut is said, and the
    ncclras file is refused as larger than any report (exit 2)."""
    tmp = tempfile.mkdtemp(prefix="ncclcheck-bigline-")
    files = {"debug": (os.path.join(tmp, "nccl.h1.1"), "h1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"),
             "ras": (os.path.join(tmp, "ras.txt"),
                     open(os.path.join(repo, "tests", "data", "nccl", "ras-text-running-ok.txt")).read() + "\n")}

    def preflight(tag: str, *args: str) -> tuple:
        p, rss = peak_rss.run([sys.executable, "-m", "ncclcheck", "preflight", *args, "--json", f"{tag}.json"],
                              os.path.join(tmp, f"{tag}.rss"), cwd=tmp, env=_env(repo), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=600)
        doc = json.load(open(os.path.join(tmp, f"{tag}.json"))) if os.path.exists(os.path.join(tmp, f"{tag}.json")) \
            else {}
        return p.returncode, rss or 0, doc, (p.stderr or b"").decode(errors="replace")

    try:
        for path, head in files.values():
            with open(path, "w") as f:
                f.write(head)
                for _ in range(mib):
                    f.write("x" * (1 << 20))
                f.write("\n")
        base = preflight("base")[1]
        code, rss, doc, _ = preflight("debug", "--nccl-debug", files["debug"][0])
        said = " ".join(c.get("detail") or "" for c in doc.get("checks", []) if c.get("id") == "nccl.transport")
        rcode, rrss, _, rerr = preflight("ras", "--nccl-ras", files["ras"][0])
    finally:
        for path, _ in files.values():
            if os.path.exists(path):
                os.remove(path)
    grew, rgrew = max(0, rss - base), max(0, rrss - base)
    half = (mib << 20) // 2
    held = grew < half and rgrew < half and "cut" in said and rcode == 2
    return {"held": held, "line": f"a {mib} MiB line: preflight --nccl-debug peak RSS +{grew / (1 << 20):,.0f} MiB "
            f"over a plain preflight (exit {code}; said: {said[-60:] or 'nothing'}); --nccl-ras after a real text "
            f"report +{rgrew / (1 << 20):,.0f} MiB (exit {rcode}{': ' + rerr.strip()[-70:] if rerr.strip() else ''})"}


class _Banner:
    """A stranger's service on loopback: says `banner` to whoever connects (an SSH server's first line), counts
    who did."""

    def __init__(self, banner: bytes = b"SSH-2.0-OpenSSH_9.6\r\n") -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, args=(banner,), daemon=True).start()

    def _serve(self, banner: bytes) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                c.sendall(banner)
            except OSError:
                pass
            c.close()

    def close(self) -> None:
        self.sock.close()


def _ask(addr: str, port: int, doc: dict, source: str = "", timeout: float = 30) -> tuple[dict, int, int]:
    """One request without any key (_ask_raw), from address `source`: (the reply, bytes sent, bytes received)."""
    with socket.create_connection((addr, port), timeout=timeout, source_address=(source, 0) if source else None) as s:
        (n_hello,) = struct.unpack("!I", s.recv(4, socket.MSG_WAITALL))
        hello = json.loads(s.recv(n_hello, socket.MSG_WAITALL))
        body = json.dumps({**doc, **{k: hello[k] for k in ("job", "run") if k in hello}}).encode()
        s.sendall(struct.pack("!I", len(body)) + body)
        (n,) = struct.unpack("!I", s.recv(4, socket.MSG_WAITALL))
        parts, got = [], 0
        while got < n:  # a large reply: MSG_WAITALL may return a part of it
            part = s.recv(min(n - got, 1 << 20))
            if not part:
                break
            parts.append(part)
            got += len(part)
        reply = b"".join(parts)
        return json.loads(reply), len(body) + 4, 4 + n_hello + 4 + len(reply)


def rate_scan_attack(repo: str) -> dict:
    """Item 1: no key; a stranger writes records for ranks 100-102 (at an SSH-like banner, a closed port, a silent
    listener) and rank 1 (a rank of the job) at the banner, then asks rank 0 for a `rate` of them. Held: ranks past
    the world size are never tried, and of rank 1 only "unreached" is said, no port's behaviour."""
    key = "ncclcheck/live/rank/"
    job = _LiveJob(repo, 2)
    banner, silent = _Banner(), socket.create_server(("127.0.0.1", 0))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    try:
        rec = json.loads(job.server.get(f"{key}0"))
        for r, port in ((100, banner.port), (101, closed), (102, silent.getsockname()[1])):
            job.server.set(f"{key}{r}", json.dumps({**rec, "rank": r, "port": port}))
        far, _, _ = _ask(job.where[0]["addr"], job.where[0]["port"], {"kind": "rate", "ranks": [100, 101, 102]})
        tried_far = banner.accepted
        job.server.set(f"{key}1", json.dumps({**rec, "rank": 1, "port": banner.port}))
        t0 = time.monotonic()
        near, _, _ = _ask(job.where[0]["addr"], job.where[0]["port"], {"kind": "rate", "ranks": [1]})
        took = time.monotonic() - t0
    finally:
        banner.close()
        silent.close()
        job.close()
    said = json.dumps({"far": far.get("rate") or far.get("unknown") or far, "rank 1": near.get("rate") or near})
    leaks = any(w in said for w in ("frame of", "refused", "timeout", "reset"))
    held = tried_far == 0 and not leaks and (near.get("rate") or {}).get("1") == {"ok": False, "kind": "unreached"}
    return {"held": held, "line": f"live rate (no key) of ranks 100-102 at loopback ports and of rank 1 at an SSH "
            f"banner: {tried_far} connects past the world size; said {said[:260]} (rank 1 in {took:.1f} s)"}


def blob_flood_attack(repo: str, n: int = 40) -> dict:
    """Item 2: no key; a stranger at another address of the rank's host (127.0.0.2: not a rank's) asks for 4 MiB
    and 1 MiB blobs. Held: every one refused (never built or sent to an address no rank of the job has), so he gets
    back less than 10x what he sent."""
    job = _LiveJob(repo, 2)
    sent = got = blobs = 0
    try:
        for i in range(n):
            size = (4 << 20) if i % 2 else (1 << 20)
            try:
                reply, a, b = _ask(job.where[0]["addr"], job.where[0]["port"], {"kind": "blob", "bytes": size,
                                   "from": 0}, source="127.0.0.2")
            except (OSError, ValueError, struct.error):
                continue
            sent, got, blobs = sent + a, got + b, blobs + ("pad" in reply)
    finally:
        job.close()
    ratio = got / max(1, sent)
    return {"held": blobs == 0 and ratio < 10, "ratio": ratio,
            "line": f"live blob flood (no key) from 127.0.0.2: {blobs} of {n} blobs sent; {got:,} bytes back for "
                    f"{sent:,} sent ({ratio:,.0f}x)"}


def _munged(tmp: str) -> Optional[tuple]:
    """A real munged on a private socket (as tests/rendezvous/test_trust.py starts one): (process, its socket, a
    slurm.conf naming it), or None where munge is not installed or this is not root."""
    import shutil

    from ncclcheck.facts import munge

    if shutil.which("munged") is None or not munge.available() or os.geteuid() != 0:
        return None
    key = os.path.join(tmp, "munge.key")
    with open(key, "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(key, 0o400)
    sock = os.path.join(tmp, "munge.socket")
    proc = subprocess.Popen(["munged", "--foreground", "--force", f"--socket={sock}", f"--key-file={key}",
                             f"--pid-file={tmp}/pid", f"--log-file={tmp}/log", f"--seed-file={tmp}/seed"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 10
    while not os.path.exists(sock) and time.monotonic() < end:
        time.sleep(0.05)
    conf = os.path.join(tmp, "slurm.conf")
    with open(conf, "w") as f:
        f.write(f"AuthType=auth/munge\nAuthInfo=socket={sock}\n")
    return proc, sock, conf


def munge_rate_attack(repo: str) -> dict:
    """Item 7: at level munge (a Slurm job, no token), a stranger overwrites rank 1's record to point at an SSH-like
    banner on the rank's host; a watcher of the job (a munge session of the job's user) asks rank 0 for a `rate`
    of rank 1. Held: rank 0 says only "unreached" (the record is not signed: nothing of the port is said)."""
    tmp = tempfile.mkdtemp(prefix="ncclcheck-munge-")
    got = _munged(tmp)
    if got is None:
        return {"held": None, "line": "munge rate: skipped (needs munge and munged, as root)"}
    proc, sock, conf = got
    env = {"SLURM_JOB_ID": "55", "SLURM_CONF": conf}  # a Slurm job where munged runs: level munge, no token
    banner = _Banner()
    job = None
    try:
        job = _LiveJob(repo, 2, extra=env)
        out = subprocess.run([sys.executable, "-c", _MUNGE_ASK, str(job.port), str(banner.port)], capture_output=True,
                             text=True, env=_env(repo, **env), timeout=120, cwd=repo)
        reply = json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {"error": out.stderr[-200:]}
    finally:
        banner.close()
        if job is not None:
            job.close()
        proc.terminate()
        proc.wait(10)
    one = (reply.get("rate") or {}).get("1")
    held = one == {"ok": False, "kind": "unreached"} and reply.get("auth") == "munge"
    return {"held": held, "line": f"live rate at level munge of rank 1 pointed at an SSH banner: rank 0 said "
            f"{json.dumps(one) if one else json.dumps(reply)[:160]} (its level: {reply.get('auth')})"}


# A watcher at level munge (REPO's): reads the job's registry, points rank 1's record at the banner (as a stranger
# may: munge's records are not signed), asks rank 0 for a rate of rank 1; prints the reply with rank 0's level.
_MUNGE_ASK = """
import json, sys
from ncclcheck.live.auth import Session
from ncclcheck.live.fetch import Asker, ask, read_registry
from ncclcheck.rendezvous.budget import Budget
from ncclcheck.rendezvous.store import Guard, open_store
port, banner = int(sys.argv[1]), int(sys.argv[2])
b = Budget(timeout_s=20.0)
st = open_store("127.0.0.1", port, False, 10.0, guard=Guard())
reg = read_registry(st)
rec = dict(reg.records[1], port=banner)
st.raw.set("ncclcheck/live/rank/1", json.dumps(rec))
a = ask(reg.records[0], "rate", Asker(Session("munge", None, port, b), reg.job, reg.run), b.deadline(20), b,
        {"ranks": [1]})
print(json.dumps({**(a.doc or {"error": a.why}), "auth": reg.records[0].get("auth")}))
"""


def squat_attack(repo: str) -> dict:
    """Item 8: a process of node 0's own user binds the master port first, with SO_REUSEPORT; node 0 then serves a
    world large enough that its front is sharded (a hard open-file limit of 512, 300 clients: two fronts). Held:
    node 0 refuses the port and names the squatter; else how many of 40 clients reached the squatter."""
    sq = socket.create_server(("", 0), family=socket.AF_INET6, dualstack_ipv6=True, reuse_port=True) \
        if socket.has_dualstack_ipv6() else socket.create_server(("", 0), reuse_port=True)
    sq.settimeout(0.2)
    port = sq.getsockname()[1]
    node0 = subprocess.Popen([sys.executable, "-c", _SQUAT_NODE0, str(port)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=_env(repo), cwd=repo)
    reached, conns = 0, []
    try:
        said = json.loads(node0.stdout.readline() or "{}")
        if "fronts" in said:
            for _ in range(40):
                try:
                    conns.append(socket.create_connection(("127.0.0.1", port), timeout=2))
                except OSError:
                    continue
            while True:
                try:
                    c, _ = sq.accept()
                except OSError:
                    break
                reached += 1
                c.close()
    finally:
        for c in conns:
            c.close()
        sq.close()
        node0.kill()
        node0.wait(10)
    refused = said.get("refused", "")
    held = str(os.getpid()) in refused
    what = f"node 0 refused it: {refused[:150]}" if refused else \
        f"node 0 served it with {said.get('fronts')} fronts; {reached} of {len(conns)} clients reached the squatter"
    return {"held": held, "line": f"master port squatted first with SO_REUSEPORT (sharded front): {what}"}


_SQUAT_NODE0 = """
import datetime as dt, json, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))  # 300 clients need two fronts under it
from ncclcheck.rendezvous.serve import serve_store
try:
    store, front = serve_store(int(sys.argv[1]), dt.timedelta(seconds=30), lambda why: None, clients=300)
    print(json.dumps({"fronts": len(front.procs)}), flush=True)
except ConnectionError as e:
    print(json.dumps({"refused": str(e)}), flush=True)
sys.stdin.read()
"""

ROUND4 = {"rate-scan": rate_scan_attack, "blob-flood": blob_flood_attack, "surrogate": surrogate_attack,
          "unbounded-read": unbounded_read_attack, "controls": controls_attack, "newline-name": newline_name_attack,
          "munge-rate": munge_rate_attack, "squat": squat_attack}


def run_round(attacks: dict, repo: str) -> int:
    """Every attack of a round against REPO (the names after it on the command line: those alone), one line each,
    HELD, NOT HELD or skipped first."""
    only = sys.argv[3:]
    for name, attack in attacks.items():
        if only and name not in only:
            continue
        got = attack(repo)
        mark = "skipped" if got["held"] is None else "HELD" if got["held"] else "NOT HELD"
        print(f"{mark:8s} {name}: {got['line']}", flush=True)
    return 0


def round4(repo: str) -> int:
    """Every attack of issue 55 against REPO."""
    return run_round(ROUND4, repo)


def round5(repo: str) -> int:
    """Every attack of issue 63 (ncclcheck_lab/trust_round5.py) against REPO."""
    from .trust_round5 import ROUND5

    return run_round(ROUND5, repo)


# Attacks by name (the first argument); without one, main()'s file-side attacks of issue 21.
ATTACKS = {"replay": replay_attack, "drip": drip_attack, "live": live_attacks, "round4": round4, "round5": round5}


if __name__ == "__main__":
    sys.exit(main())
