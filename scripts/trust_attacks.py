"""The file-side attacks of issue 21, by hand, against a checkout: prints one line per attack with its outcome.

    python3 scripts/trust_attacks.py [REPO]      # REPO defaults to this checkout; run it on main to compare
    python3 scripts/trust_attacks.py replay [REPO]   # issue 36: records of one run replayed into another (ATTACKS)

Each attack runs `python -m ncclcheck` from REPO in a subprocess: a saved report with a newline in `version` and
`started` rendered to an env file and a labels script (then sourced/run: does a canary appear?), an ESC sequence in a
hostname on the terminal (FORCE_COLOR), a 0600 report rewritten, the log directory's and a log's mode, deep nesting
and NaN given to `report`, SIGTERM to a standalone bench.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time


def main() -> int:
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(__file__)))
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
    return 0


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


# Attacks by name (the first argument); without one, main()'s file-side attacks of issue 21.
ATTACKS = {"replay": replay_attack}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ATTACKS:
        sys.exit(ATTACKS[sys.argv[1]](os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else
                                                      os.path.dirname(os.path.dirname(__file__)))))
    sys.exit(main())
