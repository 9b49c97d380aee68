"""What an armed rank's responder costs its training loop, idle and under a stranger's flood (issue 45 item 6).

One training process pinned to CPU 0, unarmed or armed by turns with the real responder (ncclcheck.live.responder.
start, registered in the job's own store: the process is rank 0 of a one-rank gloo job whose store it hosts, and
all-reduces its gradients every step, so the flight recorder the responder serves is a real one, 2,000 entries).
The stranger (this process's threads, pinned to CPU 1) floods a responder in turns:
- connect: connect and close, as fast as its threads can;
- requests: connect, read the hello, send an `all` request without the job's key (answered when the job has none,
  refused when it has one), read whatever comes back;
- blob: the same with a 1 MiB `blob` request naming the job's other rank (from the rank's own host, so without a
  key it is a rank of the job asking: the worst case, served from the blob built once);
- rate: the same with a `rate` request of the job's other rank (the responder downloads a blob from it, within its
  Spend: issue 55).
The job has two ranks: the training process is rank 0, the decoy (below) rank 1, both registered in the training
process's store, so a `rate` has a peer to download from.
Under a flood, the armed process is compared with the unarmed one while the same flood hits a decoy (a second,
armed, idle process pinned beside the stranger): the stranger's own load on the machine is then the same in both
(measured without that control, a flood phase read up to 2x FASTER than the idle unarmed one on this VM). Each turn
trains for --phase-s seconds; --rounds rounds of every phase are interleaved, each phase beside its control, so a
shared machine's drifting load falls on both alike. Per phase: the median steps per second over the rounds, the
median over the rounds of its ratio to its control in the same round (slowdown = 1 - ratio), what the flood
achieved (connections or replies per second), and whether a watcher's own request, made in the middle of the
phase, was answered and how long it took.

    python3 scripts/responder_cost.py [--rounds 5] [--phase-s 4] [--key none|token] [--threads 8]

The goal (docs/live.md, docs/trust.md): the armed loop within 1 % of the unarmed one when nobody floods it, within
5 % under any flood, a `blob` or `rate` flood costing no more than twice what an `all` flood costs (issue 55), and
the watcher answered meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Optional

# each phase and its control: the same conditions (the stranger's flood, at a decoy for the unarmed process) without
# the armed rank's responder in the training process
PHASES = ("unarmed", "armed", "unarmed+connect", "armed+connect", "unarmed+requests", "armed+requests",
          "unarmed+blob", "armed+blob", "unarmed+rate", "armed+rate")
CONTROL = {p: "unarmed" + p[p.index("+"):] if "+" in p else "unarmed" for p in PHASES}
FLOODS = {"requests": lambda peer: {"kind": "all"}, "blob": lambda peer: {"kind": "blob", "bytes": 1 << 20,
          "from": peer}, "rate": lambda peer: {"kind": "rate", "ranks": [peer]}}
WORLD = 2  # the training process is rank 0 of the job, the decoy rank 1
TRAIN_CPU, ATTACK_CPU = 0, 1


# --- the training process -------------------------------------------------------------------------------------------

def trainer(job_port: int = 0) -> int:
    """A one-rank gloo job on loopback; told on stdin: `arm` (start the responder: `armed PORT ADDR`), `disarm`
    (close it: `disarmed`), `train SECONDS` (-> `steps N ELAPSED`), `quit`. One process for every phase, armed or
    not: two processes differ by several percent on their own (memory layout, caches). Its responder is rank 0 of a
    job of WORLD ranks whose store is its own; with `job_port`, rank 1 of the job whose store is there (the decoy)."""
    os.environ.update({"TORCH_FR_BUFFER_SIZE": "2000", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": _free_port(),
                       "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"})
    import torch
    import torch.distributed as dist

    from ncclcheck.live.responder import start

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=0, world_size=1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randn(64, 256)

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()

    for _ in range(600):  # warm, and a full flight recorder (2,000 entries) for the responder to serve
        step()
    responder = None
    print(f"ready {os.environ['MASTER_PORT']}", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        if cmd[0] == "arm":
            responder = start(rank=1 if job_port else 0, world_size=WORLD, local_rank=0,
                              master=("127.0.0.1", job_port or int(os.environ["MASTER_PORT"])))
            if responder is None or not responder.registered.wait(60):
                print("error the responder did not register", flush=True)
                return 1
            print(f"armed {responder.port} {responder.addr}", flush=True)
        elif cmd[0] == "disarm":
            if responder is not None:
                responder.close()
                responder = None
            print("disarmed", flush=True)
        elif cmd[0] == "train":
            seconds, n, t0 = float(cmd[1]), 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                step()
                n += 1
            print(f"steps {n} {time.perf_counter() - t0:.6f}", flush=True)
    if responder is not None:
        responder.close()
    dist.destroy_process_group()
    return 0


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


class Trainer:
    """The training process, pinned to `cpu`, driven over its stdin."""

    def __init__(self, env: dict, cpu: int = TRAIN_CPU, job_port: int = 0) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "ncclcheck_lab.responder_cost", "--trainer",
                                      str(job_port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        line = self._say("")
        if not line or line[0] != "ready":
            raise RuntimeError(f"the trainer did not start: {' '.join(line)}")
        self.store_port, self.port, self.addr = int(line[1]), 0, ""

    def _say(self, cmd: str) -> list:
        if cmd:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
        return self.proc.stdout.readline().split()

    def arm(self, on: bool) -> None:
        if on == bool(self.port):
            return
        line = self._say("arm" if on else "disarm")
        if on and (not line or line[0] != "armed"):
            raise RuntimeError(f"the trainer's responder did not start: {' '.join(line)}")
        self.port, self.addr = (int(line[1]), line[2]) if on else (0, "")

    def train(self, seconds: float) -> float:
        """Steps per second over `seconds` of training."""
        _, n, elapsed = self._say(f"train {seconds}")
        return int(n) / float(elapsed)

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


# --- the stranger ---------------------------------------------------------------------------------------------------

class Flood:
    """`threads` threads hammering addr:port until stopped; counts what they achieved."""

    def __init__(self, kind: str, addr: str, port: int, threads: int, peer: int = 0) -> None:
        self.kind, self.addr, self.port, self.peer = kind, addr, port, peer
        self.stop = threading.Event()
        self.connects = self.replies = self.refusals = self.failures = 0
        self.t0 = time.monotonic()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self) -> None:
        from ncclcheck.live import wire
        from ncclcheck.rendezvous.budget import FIXED

        while not self.stop.is_set():
            try:
                with socket.create_connection((self.addr, self.port), timeout=5) as s:
                    self.connects += 1
                    if self.kind == "connect":
                        continue
                    end = FIXED.deadline(5)
                    hello = json.loads(wire.recv_frame(s, wire.MAX_HELLO, end, FIXED))
                    s.sendall(wire.frame(json.dumps({**FLOODS[self.kind](self.peer), "job": hello.get("job"),
                                                     "run": hello.get("run")}).encode()))
                    reply = wire.recv_frame(s, wire.MAX_REPLY, end, FIXED)
                    if reply.startswith(b'{"error"'):
                        self.refusals += 1
                    else:
                        self.replies += 1
            except (OSError, ValueError):
                self.failures += 1

    def close(self) -> dict:
        self.stop.set()
        for t in self.threads:
            t.join(10)
        s = max(1e-9, time.monotonic() - self.t0)
        return {"connects_per_s": self.connects / s, "replies_per_s": self.replies / s,
                "refusals_per_s": self.refusals / s, "failures": self.failures}


def _watcher(t: Trainer, token: Optional[bytes]) -> dict:
    """A watcher's own `progress` request to the armed rank, as watch makes it: answered? in how long?"""
    from ncclcheck.live.auth import Session
    from ncclcheck.live.fetch import Asker, ask, read_registry
    from ncclcheck.rendezvous.budget import Budget
    from ncclcheck.rendezvous.store import Guard, open_store

    b = Budget(timeout_s=10.0)
    st = open_store("127.0.0.1", t.store_port, False, 10.0, guard=Guard(token=token))
    reg = read_registry(st)
    if 0 not in reg.records:
        return {"answered": False, "why": f"not registered: {reg.missing}", "s": None}
    asker = Asker(Session("token" if token else "none", token, t.store_port, b), reg.job, reg.run)
    t0 = time.monotonic()
    a = ask(reg.records[0], "progress", asker, b.deadline(10.0), b)
    return {"answered": a.doc is not None, "why": a.why, "s": round(time.monotonic() - t0, 4)}


def measure(rounds: int, phase_s: float, key: str, threads: int) -> dict:
    """Runs the rounds; returns {"phases": {phase: {...}}, "key": ...}. Each flood phase has its control: the same
    flood, from the same threads, at a decoy (an armed rank that does not train, pinned beside the stranger), while
    the unarmed process trains, so the stranger's own load on the machine is the same in both."""
    token = b"responder-cost-token" if key == "token" else None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_repo(), os.environ.get("PYTHONPATH", "")])}
    for k in [k for k in env if k.startswith(("NCCLCHECK_", "SLURM_", "MASTER_", "NCCL_"))]:
        del env[k]
    if token:
        env["NCCLCHECK_TOKEN"] = token.decode()
    # This process (the stranger's threads) is pinned for the measurement and given its CPUs back after it: the
    # default suite calls measure() inside a pytest worker, and left pinned, every later test of that worker and
    # every process it started ran on one CPU (a healthy links world once measured a pair 20x slow there).
    try:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {ATTACK_CPU})
    except (OSError, AttributeError):
        before = None
    try:
        return _measure(rounds, phase_s, env, threads, key, token)
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)


def _measure(rounds: int, phase_s: float, env: dict, threads: int, key: str, token: Optional[bytes]) -> dict:
    job = Trainer(env)
    decoy = Trainer(env, cpu=ATTACK_CPU, job_port=job.store_port)  # the job's rank 1: armed, never trains
    decoy.arm(True)
    rates: dict = {p: [] for p in PHASES}
    floods: dict = {p: [] for p in PHASES if "+" in p}
    watched: dict = {p: [] for p in PHASES if p.startswith("armed")}
    try:
        for i in range(rounds):
            # each phase beside its control, in turn first and second: the drift of a shared machine's load falls
            # on both alike, and each round gives its own ratio
            for phase in [p for pair in zip(PHASES[::2], PHASES[1::2]) for p in (pair if i % 2 == 0 else pair[::-1])]:
                job.arm(phase.startswith("armed"))
                target, peer = (job, 1) if phase.startswith("armed") else (decoy, 0)
                flood = Flood(phase.split("+")[1], target.addr, target.port, threads, peer) if "+" in phase else None
                probe: list = []
                timer = None
                if phase in watched:
                    timer = threading.Timer(phase_s / 2, lambda got=probe: got.append(_watcher(job, token)))
                    timer.start()
                rates[phase].append(job.train(phase_s))
                if timer is not None:
                    timer.join()
                    watched[phase].extend(probe)
                if flood is not None:
                    floods[phase].append(flood.close())
    finally:
        job.close()
        decoy.close()
    out = {}
    for phase in PHASES:
        med = statistics.median(rates[phase])
        ratios = [a / b for a, b in zip(rates[phase], rates[CONTROL[phase]])]
        ratio = statistics.median(ratios)
        row = {"steps_per_s": round(med, 1), "control": CONTROL[phase], "ratio": round(ratio, 4),
               "slowdown": round(1 - ratio, 4), "rounds": len(rates[phase]),
               "ratios": [round(x, 4) for x in ratios]}
        if phase in floods:
            row["flood"] = {k: round(statistics.median(f[k] for f in floods[phase]), 1)
                            for k in ("connects_per_s", "replies_per_s", "refusals_per_s")}
        if phase in watched:
            w = watched[phase]
            row["watcher_answered"] = sum(x["answered"] for x in w)
            row["watcher_asked"] = len(w)
            row["watcher_s_max"] = max((x["s"] or 0 for x in w), default=None)
            row["watcher_why"] = next((x["why"] for x in w if not x["answered"]), "")
        out[phase] = row
    return {"key": key, "rounds": rounds, "phase_s": phase_s, "threads": threads, "phases": out}


def _repo() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def render(res: dict) -> str:
    lines = [f"responder cost (key: {res['key']}; {res['rounds']} rounds x {res['phase_s']:g} s per phase, trainers on "
             f"CPU {TRAIN_CPU}, the stranger's {res['threads']} threads on CPU {ATTACK_CPU})"]
    for phase, row in res["phases"].items():
        if phase == row["control"]:
            lines.append(f"  {phase:17s} {row['steps_per_s']:9,.1f} steps/s  (control)")
            continue
        flood = row.get("flood")
        what = "" if not flood else (f"; flood {flood['connects_per_s']:,.0f} connections/s" +
                                     (f", {flood['replies_per_s']:,.0f} replies/s, {flood['refusals_per_s']:,.0f} "
                                      "refusals/s" if not phase.endswith("connect") else ""))
        watch = "" if "watcher_asked" not in row else (f"; watcher answered {row['watcher_answered']}/"
                                                       f"{row['watcher_asked']}, slowest {row['watcher_s_max']} s")
        lines.append(f"  {phase:17s} {row['steps_per_s']:9,.1f} steps/s  vs {row['control']}: ratio "
                     f"{row['ratio']:.3f} (rounds {min(row['ratios']):.3f}-{max(row['ratios']):.3f}), slowdown "
                     f"{100 * row['slowdown']:+.1f} %{what}{watch}")
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--phase-s", type=float, default=4.0)
    ap.add_argument("--key", choices=("none", "token", "both"), default="both")
    ap.add_argument("--threads", type=int, default=8, help="the stranger's threads")
    ap.add_argument("--json", action="store_true", help="one JSON object per key instead of the table")
    ap.add_argument("--trainer", type=int, help=argparse.SUPPRESS)  # the training process: its job's store port
    a = ap.parse_args(argv)
    if a.trainer is not None:
        return trainer(a.trainer)
    if (os.cpu_count() or 1) < 2:
        print("responder_cost needs 2 CPUs (the trainers on one, the stranger on the other)", file=sys.stderr)
        return 2
    for key in (("none", "token") if a.key == "both" else (a.key,)):
        res = measure(a.rounds, a.phase_s, key, a.threads)
        print(json.dumps(res) if a.json else render(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
