"""Issue 63, round five: a node's own tools and files as untrusted input, every saved baseline a usage error at worst,
preflight bounded on a wedged driver, the responder's share per address. One function per attack, each of REPO (a
checkout: run it on the tree before the fix to compare), returning {"held": bool, "line": what happened}:

    python3 scripts/trust_attacks.py round5 [REPO [NAME...]]

Every attack runs REPO's ncclcheck in a child process on a fake GPU node (ncclcheck_lab/fakehw.py: sysfs, procfs,
/dev/kmsg, a fake pynvml and nvidia-smi) whose pieces are made hostile one at a time.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import peak_rss
from .trust_attacks import _env

THIS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this checkout: ncclcheck_lab, fakehw
HEALTH = ("health", "--gpus", "2", "--dry-run", "--drain", "--node", "n1")


def _node(repo: str, tmp: str, spec: dict, with_pynvml: bool = True) -> dict:
    """The environment of a child ncclcheck of REPO on a fake node staged from `spec` under tmp/node."""
    from . import fakehw

    root = Path(tmp) / "node"
    got = fakehw.install(root, spec, with_pynvml=with_pynvml)
    env = _env(repo)
    for k in ("PATH", "NCCLCHECK_SYSFS_ROOT", "NCCLCHECK_PROCFS_ROOT", "NCCLCHECK_DEVFS_ROOT", "NCCLCHECK_FAKE_HW"):
        env[k] = got[k]
    env["PYTHONPATH"] = os.pathsep.join([str(root / "py"), repo, THIS])  # REPO's ncclcheck, this lab's fakehw
    env["NCCLCHECK_LOG_DIR"] = os.path.join(tmp, "logs")
    return env


def _run(env: dict, tmp: str, *args: str, timeout: float = 300) -> tuple:
    """(exit code or 'killed at N s', the JSON report or {}, stderr, wall seconds) of `python -m ncclcheck ARGS`."""
    out = os.path.join(tmp, f"r{time.monotonic_ns()}.json")
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "ncclcheck", *args, "--json", out], env=env, cwd=tmp,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        err = p.communicate(timeout=timeout)[1]
        rc = p.returncode
    except subprocess.TimeoutExpired:  # the whole session: a hung tool it started goes too
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        rc, err = f"killed at {timeout:g} s", ""
    doc = json.load(open(out)) if os.path.exists(out) else {}
    return rc, doc, err, time.monotonic() - t0


def _drained_for(doc: dict, cid: str) -> bool:
    acts = (doc.get("slurm") or {}).get("actions") or []
    return any(a.get("action") == "drain" and cid in (a.get("reason") or "") for a in acts)


def _pcie_x8() -> dict:
    from . import fakehw

    spec = fakehw.node_spec(gpus=2, nvswitches=0, ib_ports=2)
    spec["gpus"][1]["pcie"]["width"] = 8  # the node's real fault: health must still name it and drain
    return spec


# --------------------------------------------------------------------------------------------------- item 1
_FUZZ = r"""
import copy, json, os, sys, traceback
from ncclcheck.cli import build_parser, command_in
from ncclcheck.errors import UsageError
from ncclcheck.facts import collect_health_facts
from ncclcheck.health.run import run_health
from ncclcheck.model import NodeInfo
base_path, bad_path, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = json.load(open(base_path))
now = collect_health_facts()
HOSTILE = ["x", 7, [], {}, None, ["x"], {"x": 1}, 1e308]
def paths(v, p=()):
    yield p
    items = list(v.items()) if isinstance(v, dict) else list(enumerate(v[:2])) if isinstance(v, list) else []
    for k, x in items[:4] if p and p[-1] in ("items", "vars") else items:
        yield from paths(x, p + (k,))
def put(doc, p, val):
    for k in p[:-1]:
        doc = doc[k]
    doc[p[-1]] = val
def parse(argv):
    from ncclcheck.options import config_from_args
    return config_from_args(build_parser(command_in(argv)).parse_args(argv))
out = {"variants": 0, "usage": 0, "verdicts": 0, "named": 0, "crashes": 0, "crash": None,
       "joined": 0, "joined_crashes": 0, "joined_crash": None}
fpaths = [("nodes", 0, "facts") + p for p in paths(base["nodes"][0]["facts"])][1::step]
fpaths += [("nodes", 0, "hostname"), ("nodes", 0, "node_rank"), ("nodes",), ("nodes", 0)]
for p in fpaths:
    for h in HOSTILE:
        doc = copy.deepcopy(base)
        put(doc, p, h)
        json.dump(doc, open(bad_path, "w"))
        out["variants"] += 1
        try:
            rep = run_health(parse(["health", "--gpus", "2", "--dry-run", "--drain", "--node", "n1", "--baseline",
                                    bad_path]), "t", collect=lambda **kw: copy.deepcopy(now))
        except UsageError:
            out["usage"] += 1
            continue
        except Exception as e:
            out["crashes"] += 1
            out["crash"] = out["crash"] or f"{'.'.join(map(str, p))}={h!r}: {type(e).__name__}: {e}"[:160]
            continue
        out["verdicts"] += 1
        out["named"] += any(c.id == "slurm.drain" and "gpu.pcie" in c.summary for c in rep.checks)
# a stranger who joins with odd facts: node 0 compares them with its --baseline (the pipeline's own calls)
try:
    from ncclcheck.checks.registry import baseline_results
except ImportError:
    def baseline_results(nodes, golden, source):
        from ncclcheck.checks.counters import baseline_checks
        from ncclcheck.checks.drift import drift_checks
        return drift_checks(nodes, golden, source) + baseline_checks(nodes, golden, source)
from ncclcheck.checks.drift import load_golden
json.dump(base, open(bad_path, "w"))
golden = load_golden(bad_path)
for p in [p for p in paths(base["nodes"][0]["facts"])][1::step]:
    for h in HOSTILE:
        facts = copy.deepcopy(base["nodes"][0]["facts"])
        put(facts, p, h)
        out["joined"] += 1
        try:
            baseline_results([NodeInfo(1, base["nodes"][0]["hostname"], facts)], golden, bad_path)
        except Exception as e:
            out["joined_crashes"] += 1
            out["joined_crash"] = out["joined_crash"] or f"{'.'.join(map(str, p))}={h!r}: {type(e).__name__}"
print(json.dumps(out))
"""


def baseline_shapes_attack(repo: str, step: int = 1) -> dict:
    """Item 1: health --baseline with every hostile shape of every fact a reader uses (each path of a saved health
    report's facts set to a string, a number, a list, an object, null...) on a node whose GPU sits at PCIe x8; the
    same facts from a stranger who joined, against node 0's --baseline; bench --baseline with a wrong type. Held:
    no shape raises (a usage error, exit 2, or a verdict that still names gpu.pcie and drains), bench exits 2
    before measuring."""
    tmp = tempfile.mkdtemp(prefix="ncclcheck-r5-baseline-")
    env = _node(repo, tmp, _pcie_x8())
    rc, base, _err, _ = _run(env, tmp, *HEALTH)
    path = os.path.join(tmp, "base.json")
    with open(path, "w") as f:
        json.dump(base, f)
    shapes = {"counters.last.at a string": ("counters", "last", "at"), "rdma ports a string":
              ("rdma", "devices", 0, "ports"), "a GPU's name a list": ("gpu_health", "gpus", 0, "name")}
    cli = {}
    for name, p in shapes.items():
        doc = copy.deepcopy(base)
        d = doc["nodes"][0]["facts"]
        for k in p[:-1]:
            d = d[k]
        d[p[-1]] = ["x"] if "list" in name else "x"
        bad = os.path.join(tmp, "shape.json")
        with open(bad, "w") as f:
            json.dump(doc, f)
        rc, doc, err, _ = _run(env, tmp, *HEALTH, "--baseline", bad)
        cli[name] = f"exit {rc}" + (", drained for gpu.pcie" if _drained_for(doc, "gpu.pcie") else "") + (
            f", {len(err.strip().splitlines())} line(s)" if rc == 2 else "")
    p = subprocess.run([sys.executable, "-c", _FUZZ, path, os.path.join(tmp, "fuzz.json"), str(step)], env=env,
                       cwd=tmp, capture_output=True, text=True, timeout=900)
    fz = (json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip()
          else {"crashes": "?", "crash": p.stderr[-200:]})
    bench = json.load(open(os.path.join(repo, "tests", "render", "examples", "bench-gate-fail.json")))
    bench["bench"][0]["busbw_gbps"] = "fast"
    with open(os.path.join(tmp, "bench.json"), "w") as f:
        json.dump(bench, f)
    brc, _doc, _err, bwall = _run(_env(repo), tmp, "bench", "--sizes", "1K", "--iters", "1", "--warmup", "0",
                                  "--baseline", "bench.json", timeout=300)
    held = (fz.get("crashes") == 0 and fz.get("joined_crashes") == 0 and fz.get("verdicts") == fz.get("named")
            and all(v.startswith("exit 2, 1 line") or "drained" in v for v in cli.values()) and brc == 2)
    line = (f"health --baseline, {fz.get('variants')} hostile shapes: {fz.get('crashes')} raised "
            f"({fz.get('crash') or 'none'}), {fz.get('usage')} usage errors, {fz.get('named')} of "
            f"{fz.get('verdicts')} verdicts drained for gpu.pcie; a joined stranger's {fz.get('joined')} odd facts: "
            f"{fz.get('joined_crashes')} raised ({fz.get('joined_crash') or 'none'}); {cli}; bench --baseline with a "
            f"string busbw: exit {brc} after {bwall:.0f} s")
    return {"held": held, "line": line}


# --------------------------------------------------------------------------------------------------- item 2
_WEDGED_NVML = "class NVMLError(Exception):\n    pass\ndef nvmlInit():\n    import time\n    time.sleep(100000)\n"


def wedged_driver_attack(repo: str, timeout_s: int = 10) -> dict:
    """Item 2: preflight --timeout T and env on a node whose nvmlInit blocks and whose nvidia-smi never answers.
    Held: preflight's verdict within T + 10 s, exit 1, naming the wedged source; env within the same bound."""
    from . import fakehw

    tmp = tempfile.mkdtemp(prefix="ncclcheck-r5-wedged-")
    env = _node(repo, tmp, fakehw.node_spec(gpus=2, nvswitches=0, ib_ports=0))
    root = Path(tmp) / "node"
    (root / "py" / "pynvml.py").write_text(_WEDGED_NVML)
    (root / "bin" / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 100000\n")
    bound = timeout_s + 10
    rc, doc, _err, wall = _run(env, tmp, "preflight", "--timeout", str(timeout_s), timeout=bound + 20)
    named = [c["summary"] for c in doc.get("checks", []) if c.get("status") == "fail" and
             ("nvidia-smi" in c.get("summary", "") or "NVML" in c.get("summary", ""))]
    erc, _edoc, _e, ewall = _run(env, tmp, "env", timeout=bound + 20)
    held = rc == 1 and wall <= bound and bool(named) and erc == 0 and ewall <= bound
    return {"held": held, "line": f"preflight --timeout {timeout_s} with nvmlInit blocking and nvidia-smi silent: "
            f"exit {rc} in {wall:.1f} s (bound {bound} s), named: {(named or ['nothing'])[0][:110]}; env: exit {erc} "
            f"in {ewall:.1f} s"}


# --------------------------------------------------------------------------------------------------- item 3
_ENDLESS = "#!{python}\nimport sys\nline = b'x' * 1023 + b'\\n'\nwhile True:\n    sys.stdout.buffer.write(line)\n"
_LOUD = ("#!{python}\nimport sys\nsys.stderr.write('NVIDIA-SMI has failed: ' + 'E' * (20 << 20) + '\\n')\n"
         "sys.exit(9)\n")


def tool_output_attack(repo: str) -> dict:
    """Item 3: an nvidia-smi that prints without end (health's peak RSS), and one whose error is a 20 MB line (the
    longest reason in the report, health's wall time at --timeout 20). Held: RSS grows by less than 256 MiB over a
    healthy run's, no reason holds more than 4,000 characters, the run ends within its bound."""
    from . import fakehw

    spec = fakehw.node_spec(gpus=2, nvswitches=0, ib_ports=0)
    got = {}
    for name, script in (("healthy", None), ("endless", _ENDLESS), ("loud", _LOUD)):
        tmp = tempfile.mkdtemp(prefix=f"ncclcheck-r5-{name}-")
        env = _node(repo, tmp, spec, with_pynvml=False)
        if script:
            smi = Path(tmp) / "node" / "bin" / "nvidia-smi"
            smi.write_text(script.format(python=sys.executable))
        out = os.path.join(tmp, "h.json")
        t0 = time.monotonic()
        p, rss = peak_rss.run([sys.executable, "-m", "ncclcheck", *HEALTH, "--timeout", "20", "--json", out],
                              os.path.join(tmp, "rss"), timeout=120, env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        doc = json.load(open(out)) if os.path.exists(out) else {}
        longest = max((len(c.get(k) or "") for c in doc.get("checks", []) for k in ("summary", "detail")), default=0)
        got[name] = {"rc": p.returncode, "rss": rss or 0, "wall": time.monotonic() - t0, "longest": longest}
    grew = max(0, got["endless"]["rss"] - got["healthy"]["rss"])
    held = grew < (256 << 20) and got["loud"]["longest"] <= 4000 and got["loud"]["wall"] < 40 and \
        got["endless"]["wall"] < 40
    return {"held": held, "line": f"nvidia-smi printing without end: health peak RSS +{grew >> 20:,} MiB over a "
            f"healthy run, {got['endless']['wall']:.1f} s (exit {got['endless']['rc']}); a 20 MB error line: "
            f"longest reason {got['loud']['longest']:,} characters, {got['loud']['wall']:.1f} s (exit "
            f"{got['loud']['rc']})"}


# --------------------------------------------------------------------------------------------------- item 4
def read_nothing_attack(repo: str) -> dict:
    """Item 4: /dev/kmsg linked to /dev/null (no journal on PATH either), and every IB port's counters reading N/A,
    junk or nothing. Held: gpu.xid never says "no Xid" and ib.counters never "no error counter moved"."""
    from . import fakehw

    tmp = tempfile.mkdtemp(prefix="ncclcheck-r5-nothing-")
    spec = fakehw.node_spec(gpus=2, nvswitches=0, ib_ports=2)
    env = _node(repo, tmp, spec)
    root = Path(tmp) / "node"
    kmsg = root / "dev" / "kmsg"
    kmsg.unlink()
    kmsg.symlink_to("/dev/null")
    for dev in range(2):
        fakehw.ib_counters(root, f"mlx5_{dev}", 1, symbol_error="N/A", link_downed="junk", port_rcv_errors="",
                           link_error_recovery="N/A", port_rcv_remote_physical_errors="N/A",
                           port_xmit_discards="N/A", local_link_integrity_errors="N/A",
                           excessive_buffer_overrun_errors="N/A")
        fakehw.ib_counters(root, f"mlx5_{dev}", 1, hw=True, **{k: "N/A" for k in fakehw.ZERO_HW_COUNTERS})
    env["PATH"] = f"{root / 'bin'}:/nonexistent"  # no journalctl to fall back on: only the kmsg that gives nothing
    _rc, doc, _err, _ = _run(env, tmp, *HEALTH)
    by = {c["id"]: c for c in doc.get("checks", [])}
    xid, ctr = by.get("gpu.xid", {}), by.get("ib.counters", {})
    held = ("no Xid" not in xid.get("summary", "no Xid") and "no error counter moved" not in ctr.get("summary", "")
            and ctr.get("status") != "pass")
    return {"held": held, "line": f"/dev/kmsg -> /dev/null: gpu.xid {xid.get('status')} \"{xid.get('summary', '')[:90]}"
            f"\"; counters reading N/A: ib.counters {ctr.get('status')} \"{ctr.get('summary', '')[:90]}\""}


# --------------------------------------------------------------------------------------------------- item 5
def odd_values_attack(repo: str) -> dict:
    """Item 5 (the nvidia-smi reader, facts/smiq.py and facts/gpu.py): one `inf` and one 400-digit value in
    nvidia-smi's answers (`-q`, and the device list's CSV), a comma in a GPU's name, on a node whose GPU 0 has a row
    remap pending (no NVML: nvidia-smi is the source). Held: both GPUs read and gpu.memory still fails naming the
    pending remap."""
    from . import fakehw

    spec = fakehw.node_spec(gpus=2, nvswitches=0, ib_ports=0)
    spec["gpus"][0]["remapped_rows"] = [0, 0, True, False]
    spec["gpus"][1]["utilization"] = "inf"
    spec["gpus"][1]["memory_used"] = 10 ** 400
    spec["gpus"][1]["name"] = "NVIDIA H100, 80GB HBM3"
    tmp = tempfile.mkdtemp(prefix="ncclcheck-r5-odd-")
    env = _node(repo, tmp, spec, with_pynvml=False)
    rc, doc, _err, _ = _run(env, tmp, *HEALTH)
    gh = (doc.get("nodes") or [{}])[0].get("facts", {}).get("gpu_health") or {}
    mem = next((c for c in doc.get("checks", []) if c["id"] == "gpu.memory"), {})
    gpus = len(gh.get("gpus") or [])
    held = gpus == 2 and mem.get("status") == "fail" and rc == 1
    return {"held": held, "line": f"inf, a 400-digit value and a comma in a GPU's name in nvidia-smi's answers: "
            f"{gpus} of 2 GPUs read, gpu.memory {mem.get('status')} \"{mem.get('summary', '')[:80]}\", exit {rc}"}


# --------------------------------------------------------------------------------------------------- item 7
CONTROLS = "\x1b]0;owned\x07\r\u202e"


def local_controls_attack(repo: str) -> dict:
    """Item 7: ESC, BEL, CR and U+202E in a GPU process's name (/proc/PID/comm: any user sets it) and in a GPU's
    name as the driver gives it, through health --prolog (the process is a leftover, named): do any reach the
    console, the JSON, the HTML or the Markdown? Held: none."""
    from . import fakehw

    spec = fakehw.node_spec(gpus=2, nvswitches=0, ib_ports=0)
    spec["gpus"][0]["name"] = f"NVIDIA H100 80GB HBM3{CONTROLS}"
    spec["gpus"][1]["processes"] = [{"pid": 4242, "used": 1 << 30}]
    tmp = tempfile.mkdtemp(prefix="ncclcheck-r5-controls-")
    env = _node(repo, tmp, spec)
    comm = Path(tmp) / "node" / "proc" / "4242" / "comm"
    comm.parent.mkdir(parents=True, exist_ok=True)
    comm.write_text(f"train{CONTROLS}\n")
    outs = {k: os.path.join(tmp, f"h.{k}") for k in ("html", "md")}
    p = subprocess.run([sys.executable, "-m", "ncclcheck", *HEALTH, "--prolog", "--json", os.path.join(tmp, "h.json"),
                        "--html", outs["html"], "--markdown", outs["md"]], env={**env, "FORCE_COLOR": "0"}, cwd=tmp,
                       capture_output=True, text=True, timeout=300)
    raw = {"console": p.stdout}
    for k, path in outs.items():
        raw[k] = open(path, encoding="utf-8", errors="replace").read() if os.path.exists(path) else ""
    jpath = os.path.join(tmp, "h.json")
    raw["json"] = json.dumps(json.load(open(jpath)), ensure_ascii=False) if os.path.exists(jpath) else ""
    # the console's own colours are ESC sequences (FORCE_COLOR): there, an OSC (ESC ]) and the rest are counted
    count = {k: sum(v.count(c) for c in ("\x1b]" if k == "console" else "\x1b", "\x07", "\r", "\u202e"))
             for k, v in raw.items()}
    named = "4242" in raw["json"]
    return {"held": named and not any(count.values()), "line": f"ESC, BEL, CR and U+202E in a GPU process's name and "
            f"a GPU's name -> characters reaching each output {count} (exit {p.returncode}, the process "
            f"{'named' if named else 'NOT named'})"}


# --------------------------------------------------------------------------------------------------- item 6
def _hello_latency(addr: str, port: int, source: str = "") -> float:
    t0 = time.monotonic()
    with socket.socket() as s:
        if source:
            s.bind((source, 0))
        s.settimeout(10)
        s.connect((addr, port))
        (n,) = struct.unpack("!I", s.recv(4, socket.MSG_WAITALL))
        s.recv(n, socket.MSG_WAITALL)
    return time.monotonic() - t0


STRANGER = "127.0.0.2"  # the flooding stranger's address: on loopback, not the job's


def flood_responder(addr: str, port: int, stop: threading.Event, sent: list) -> None:
    """A stranger without the job's token: unsealed requests from STRANGER to a responder, one a connection, as fast as
    it answers them (each refused before any work), until `stop`; sent[0] counts the answered ones."""
    body = json.dumps({"kind": "progress"}).encode()
    while not stop.is_set():
        try:
            with socket.socket() as s:
                s.bind((STRANGER, 0))
                s.settimeout(2)
                s.connect((addr, port))
                (n,) = struct.unpack("!I", s.recv(4, socket.MSG_WAITALL))
                s.recv(n, socket.MSG_WAITALL)
                s.sendall(struct.pack("!I", len(body)) + body)
                s.recv(4096)
                sent[0] += 1
        except (OSError, struct.error):
            time.sleep(0.01)


def responder_flood_attack(repo: str, seconds: float = 8.0, flooders: int = 6) -> dict:
    """Item 6: with a token, a stranger at 127.0.0.2 floods an armed rank's responder with unsealed requests (each
    refused before any work); meanwhile the job's host (127.0.0.1) connects every 0.2 s and times the responder's
    hello. Held: no more than 1 in 10 of the job host's hellos waits past 0.25 s (the loop's window is 0.5 s: a loop
    throttled for everyone holds them to its end)."""
    from .trust_attacks import _LiveJob

    job = _LiveJob(repo, 1, token="round-five-token")
    addr, port = job.where[0]["addr"], job.where[0]["port"]
    stop = threading.Event()
    sent = [0]

    try:
        quiet = [_hello_latency(addr, port) for _ in range(10)]
        threads = [threading.Thread(target=flood_responder, args=(addr, port, stop, sent), daemon=True)
                   for _ in range(flooders)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        lat = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                lat.append(_hello_latency(addr, port))
            except OSError:
                lat.append(10.0)
            time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join(5)
    finally:
        job.close()
    slow = sum(1 for x in lat if x > 0.25)
    held = slow * 10 <= len(lat)
    lat.sort()
    return {"held": held, "line": f"live responder (token) flooded with unsealed requests from 127.0.0.2 ({sent[0]:,} "
            f"refused): the job host's hello waited > 0.25 s in {slow} of {len(lat)} tries (median "
            f"{lat[len(lat) // 2] * 1000:.0f} ms, worst {lat[-1] * 1000:.0f} ms; unflooded worst "
            f"{max(quiet) * 1000:.0f} ms)"}


_PROBE_FLOOD = r"""
import json, socket, statistics, struct, sys, threading, time
import torch.distributed as dist
from ncclcheck.live import straggle
from ncclcheck.live.auth import Session
from ncclcheck.live.fetch import Asker, read_registry
from ncclcheck.rendezvous.budget import FIXED
from ncclcheck.rendezvous.store import Guard, JsonStore
from ncclcheck_lab import livesim
from ncclcheck_lab.slowsim import Job
from ncclcheck_lab.trust_round5 import flood_responder

TOKEN, probes = b"round-five-token", int(sys.argv[1])
pause = FIXED.live_follow_poll_s  # the probes begin as --follow's looks do
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
st = dist.TCPStore("127.0.0.1", port, None, True)
rs = livesim.start(livesim.laid(Job(world=6, per_host=2, steps=600, step_us=1_000_000.0), 40), list(range(6)), port,
                   token=TOKEN)
assert all(r.registered.wait(30) for r in rs)
reg = read_registry(JsonStore(st, guard=Guard(token=TOKEN)))
h2 = reg.records[2]
stop, sent = threading.Event(), [0]
for _ in range(4):
    threading.Thread(target=flood_responder, args=(h2["addr"], h2["port"], stop, sent), daemon=True).start()
time.sleep(0.3)
asker = Asker(Session("token", TOKEN, port, FIXED), reg.job, reg.run)
turns = len(straggle.schedule(straggle.plan(["h1", "h2", "h3"], set())))
bound = straggle.PROBE_ATTEMPTS * turns * (FIXED.live_rate_wait_s(1) + FIXED.thread_join_s)
out = {"named": 0, "took": [], "bound": bound, "loss": [], "unmeasured": 0}
for i in range(probes):
    if i:
        time.sleep(pause)
    t0 = time.monotonic()
    p = straggle.probe([0, 2, 4], set(), reg.records, asker, FIXED)
    out["took"].append(time.monotonic() - t0)
    out["named"] += "h2" in p["hosts"] or any("h2" in pr for pr in p["pairs"])
    out["unmeasured"] += "h2" in p.get("unmeasured_hosts", [])
    m = p["matrix_mbps"]
    mine = [v for a, row in m.items() for b, v in row.items() if "h2" in (a, b)]
    rest = [v for a, row in m.items() for b, v in row.items() if "h2" not in (a, b)]
    shared = [v for d, v in p.get("contended_mbps", {}).items() if "h2" in d.split(" -> ")]
    if (mine or shared) and rest:  # what h2's transfers read, judged or not, against the others'
        out["loss"].append(1 - statistics.median(mine + shared) / statistics.median(rest))
stop.set()
out["sent"] = sent[0]
print("PROBE-FLOOD " + json.dumps(out))
for r in rs:
    r.close()
"""


def probe_flood_attack(repo: str, probes: int = 12) -> dict:
    """Issue 78: with a token, a stranger at 127.0.0.2 floods one healthy host's responder (h2's, 6 simulated ranks
    on 3 hosts) with unsealed requests during `probes` transfer probes of the job's links, REPO's probe code against
    this checkout's simulated job, the probes begun as --follow's looks are. Held: no probe names h2, and each ends
    within its bound (PROBE_ATTEMPTS rounds of its turns, each within one rate wait); the figure is the worst loss of
    h2's transfers (those the stranger's traffic shared too) against the others'."""
    env = {**_env(repo), "PYTHONPATH": os.pathsep.join([repo, THIS])}
    p = subprocess.run([sys.executable, "-c", _PROBE_FLOOD, str(probes)], env=env, capture_output=True, text=True,
                       timeout=60 + probes * 300)  # a probe's bound on three hosts is ~234 s (printed)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("PROBE-FLOOD ")), None)
    if line is None:
        return {"held": False, "line": f"probe flood: no result (exit {p.returncode}): {p.stderr.strip()[-300:]}"}
    got = json.loads(line.split(" ", 1)[1])
    late = [t for t in got["took"] if t > got["bound"]]
    held = got["named"] == 0 and not late
    worst = f"{100 * max(got['loss']):.0f} %" if got["loss"] else "none read"
    return {"held": held, "line": f"h2's responder flooded without the token ({got['sent']:,} requests refused) "
            f"during {probes} probes: h2 named in {got['named']}, left unmeasured in {got['unmeasured']}; each "
            f"probe {min(got['took']):.1f}-{max(got['took']):.1f} s (bound {got['bound']:.0f} s, {len(late)} past "
            f"it); the worst loss of h2's transfers against the others' {worst}"}


_SILENT = """
import os, sys, threading, time
if os.environ.get("NCCLCHECK_R5_SILENT"):  # this member joins, then says nothing more (its mesh never starts)
    def _patch():
        for _ in range(4000):
            m = sys.modules.get("ncclcheck.preflight.cluster")
            if m is not None and hasattr(m, "_mesh_start"):
                m._mesh_start = lambda *a, **k: time.sleep(10 ** 6)
                return
            time.sleep(0.005)
    threading.Thread(target=_patch, daemon=True).start()
"""


def _two_nodes(repo: str, tmp: str, timeout_s: int, silent: bool) -> tuple:
    """(node 0's exit code, its report, wall seconds from both nodes' start) of a 2-node preflight on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**_env(repo), "PYTHONPATH": os.pathsep.join([os.path.join(tmp, "py"), repo]),
           "NCCLCHECK_LOG_DIR": os.path.join(tmp, "logs")}
    common = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", str(port), "--timeout", str(timeout_s)]
    t0 = time.monotonic()
    member = subprocess.Popen([sys.executable, "-m", "ncclcheck", "preflight", "--node-rank", "1", *common],
                              env={**env, "NCCLCHECK_R5_SILENT": "1" if silent else ""}, cwd=tmp,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        rc, doc, _err, _ = _run(env, tmp, "preflight", "--node-rank", "0", *common, timeout=timeout_s * 4)
    finally:
        member.kill()
        member.wait()
    return rc, doc, time.monotonic() - t0


def silent_member_attack(repo: str, timeout_s: int = 15) -> dict:
    """Item 7: a 2-node preflight on loopback whose node 1 joins and then goes silent (its mesh never starts),
    against the same preflight with node 1 answering (the control: this machine's own start-up and facts). Held:
    the silent member costs node 0 one wait, T, beyond the control (+5 s of slack), not two (the mesh's, then the
    final agreement's 15 s for an acknowledgement that cannot come)."""
    tmp = tempfile.mkdtemp(prefix="ncclcheck-r5-silent-")
    os.makedirs(os.path.join(tmp, "py"))
    with open(os.path.join(tmp, "py", "sitecustomize.py"), "w") as f:
        f.write(_SILENT)
    _crc, _cdoc, control = _two_nodes(repo, tmp, timeout_s, silent=False)
    rc, doc, wall = _two_nodes(repo, tmp, timeout_s, silent=True)
    joined = "never joined" not in json.dumps(doc.get("checks", []))
    held = isinstance(rc, int) and wall - control <= timeout_s + 5
    return {"held": held if joined else None, "line": f"a member that joins and goes silent, --timeout {timeout_s}: "
            f"node 0 exit {rc} after {wall:.1f} s, {wall - control:+.1f} s over the same world with it answering "
            f"(bound T + 5 s over it: {timeout_s + 5} s)" + ("" if joined else "; it never joined: not measured")}


ROUND5 = {"baseline-shapes": baseline_shapes_attack, "wedged-driver": wedged_driver_attack,
          "tool-output": tool_output_attack, "read-nothing": read_nothing_attack, "odd-values": odd_values_attack,
          "responder-flood": responder_flood_attack, "local-controls": local_controls_attack,
          "silent-member": silent_member_attack, "probe-flood": probe_flood_attack}


__all__ = ["ROUND5"]
