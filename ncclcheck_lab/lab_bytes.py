#!/usr/bin/env python3
"""Where node 0's interface bytes go in a lab preflight: per-category counters on h1's eth0, per node, for each N.

Makes a namespace lab of N hosts (tests/lab/harness.py, torn down at the end), puts nftables counters on h1's eth0
(netdev ingress + egress, so every frame is seen once: the c10d store port, the mesh probes (every other TCP), ARP,
anything else), runs `ncclcheck preflight` on every host at once (node rank = host index, h1 is node 0), and prints
each category's bytes per node, next to eth0's own rx+tx counters. Ingress counts exclude the 14-byte Ethernet
header (the kernel has pulled it), so it is added back per packet. Needs root, like the lab tests.

    python3 scripts/lab_bytes.py --hosts 4,16 [--repeat 3]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile

from .netlab.harness import REPO_ROOT, Lab, NcclcheckRun

PORT = 29500  # the master port of every run


def world(lab: Lab, nnodes: int, timeout: int) -> list:
    """preflight's world flags with h1 as node 0 (tests/lab/test_preflight_lab.py's runs, without pytest)."""
    return ["preflight", "--nnodes", str(nnodes), "--master-addr", lab.ip("h1"), "--master-port", str(PORT),
            "--timeout", str(timeout)]


def explain(runs: dict[str, NcclcheckRun]) -> str:
    return "\n".join(f"--- {h} rc={r.rc} {r.elapsed:.1f}s timed_out={r.timed_out}\n{r.stdout[-2000:]}\n"
                     f"{r.stderr[-2000:]}" for h, r in runs.items())

CATEGORIES = ("store", "mesh", "arp", "other")
ETH_HEADER = 14

RULES = """
table netdev ncclcheck_bytes {{
{counters}
    chain rx {{
        type filter hook ingress device "eth0" priority -500; policy accept;
        tcp dport {port} tcp flags & (syn | ack) == syn counter name syn_rx
        tcp dport {port} counter name store_rx return
        tcp sport {port} counter name store_rx return
        meta l4proto tcp counter name mesh_rx return
        ether type arp counter name arp_rx return
        counter name other_rx
    }}
    chain tx {{
        type filter hook egress device "eth0" priority -500; policy accept;
        tcp sport {port} tcp flags & rst == rst counter name rst_tx
        tcp sport {port} counter name store_tx return
        tcp dport {port} counter name store_tx return
        meta l4proto tcp counter name mesh_tx return
        ether type arp counter name arp_tx return
        counter name other_tx
    }}
}}
"""


# --by-key: a sitecustomize on each host's PYTHONPATH wraps every store client that node 0 does not own (node 0's own
# client talks to its server over loopback, not eth0) and counts each request's TCPStore wire bytes (1-byte command,
# 8-byte length before every string, the reply) by key family; each process writes its counts to a file at exit.
SITECUSTOMIZE = r"""
import atexit, collections, json, os, re
from ncclcheck.rendezvous import store as _store
_counts = collections.Counter()
_reqs = collections.Counter()
def _family(key):
    parts = key.split("/")[2:]
    return re.sub(r"/?\d+$", "", "/".join(parts)) or key
class _Counting:
    def __init__(self, raw):
        self._raw = raw
    def _n(self, keys, n, op):
        fam = _family(keys[0]) if keys else "?"
        _counts[f"{op} {fam}"] += n
        _reqs[f"{op} {fam}"] += 1
    def set(self, k, v):
        self._n([k], 1 + 8 + len(k) + 8 + len(v), "set"); return self._raw.set(k, v)
    def get(self, k):
        v = self._raw.get(k); self._n([k], 1 + 8 + len(k) + 8 + len(v), "get"); return v
    def add(self, k, n):
        self._n([k], 1 + 8 + len(k) + 8 + 8, "add"); return self._raw.add(k, n)
    def check(self, ks):
        self._n(list(ks), 1 + 8 + sum(8 + len(k) for k in ks) + 1, "check"); return self._raw.check(ks)
    def multi_get(self, ks):
        vs = self._raw.multi_get(ks)
        self._n(list(ks), 1 + 8 + sum(8 + len(k) for k in ks) + sum(8 + len(v) for v in vs), "multi_get"); return vs
    def multi_set(self, ks, vs):
        self._n(list(ks), 1 + 8 + sum(8 + len(k) for k in ks) + sum(8 + len(v) for v in vs), "multi_set")
        return self._raw.multi_set(ks, vs)
    def wait(self, ks, *a):
        self._n(list(ks), 1 + 8 + sum(8 + len(k) for k in ks) + 1, "wait"); return self._raw.wait(ks, *a)
    def __getattr__(self, name):
        return getattr(self._raw, name)
_init = _store.JsonStore.__init__
def _wrapped(self, raw, prefix="", server=False, guard=None):
    _init(self, raw if server or isinstance(raw, _Counting) else _Counting(raw), prefix, server, guard)
_store.JsonStore.__init__ = _wrapped
@atexit.register
def _dump():
    if _counts:
        with open(os.path.join(os.environ["NCCLCHECK_BYTES_DIR"], f"{os.getpid()}.json"), "w") as fh:
            json.dump({"bytes": _counts, "requests": _reqs}, fh)
"""


def _eth0(lab: Lab) -> int:
    out = lab.exec("h1", ["cat", "/sys/class/net/eth0/statistics/rx_bytes", "/sys/class/net/eth0/statistics/tx_bytes"],
                   check=True).stdout.split()
    return sum(int(x) for x in out)


def _counters(lab: Lab) -> dict:
    out = lab.exec("h1", ["nft", "-j", "list", "counters", "table", "netdev", "ncclcheck_bytes"], check=True).stdout
    got = {}
    for item in json.loads(out)["nftables"]:
        c = item.get("counter")
        if c:
            extra = ETH_HEADER * c["packets"] if c["name"].endswith("_rx") else 0
            got[c["name"]] = (c["bytes"] + extra, c["packets"])
    return got


def measure(n: int, timeout: int, by_key: bool = False) -> dict:
    lab = Lab(n)
    kw: dict = {}
    try:
        if by_key:
            site = tempfile.mkdtemp(dir=lab.tmp)
            with open(os.path.join(site, "sitecustomize.py"), "w") as fh:
                fh.write(SITECUSTOMIZE)
            kw = {"pythonpath": f"{site}:{REPO_ROOT}", "env": {"NCCLCHECK_BYTES_DIR": site}}
        names = [f"{c}_{d}" for c in CATEGORIES for d in ("rx", "tx")] + ["syn_rx", "rst_tx"]
        rules = RULES.format(counters="\n".join(f"    counter {x} {{}}" for x in names), port=PORT)
        lab.exec("h1", ["nft", "-f", "-"], input=rules, check=True)
        before_total, before = _eth0(lab), _counters(lab)
        args = {h: [*world(lab, n, timeout), "--node-rank", str(i)] for i, h in enumerate(lab.hosts)}
        runs = lab.ncclcheck(args, deadline=timeout * 3, **kw)
        if not all(r.rc == 0 for r in runs.values()):
            raise SystemExit(f"not every node exited 0 at N={n}:\n{explain(runs)}")
        total, after = _eth0(lab) - before_total, _counters(lab)
        out = {"total": total / n}
        for c in CATEGORIES:
            b = sum(after[f"{c}_{d}"][0] - before[f"{c}_{d}"][0] for d in ("rx", "tx"))
            p = sum(after[f"{c}_{d}"][1] - before[f"{c}_{d}"][1] for d in ("rx", "tx"))
            out[c] = b / n
            out[c + "_pkts"] = p / n
        # Connects to the store port and those refused (node 0 not listening yet): retries cost ~130 B each.
        out["connects"], out["refused"] = ((after[k][1] - before[k][1]) / n for k in ("syn_rx", "rst_tx"))
        if by_key:
            keys: collections.Counter = collections.Counter()
            reqs: collections.Counter = collections.Counter()
            for name in os.listdir(site):
                if name.endswith(".json"):
                    with open(os.path.join(site, name)) as fh:
                        d = json.load(fh)
                    keys.update(d["bytes"])
                    reqs.update(d["requests"])
            out["keys"] = {k: (v / n, reqs[k] / n) for k, v in keys.items()}
        return out
    finally:
        lab.down()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default="4,16", help="comma-separated host counts (the first is the reference)")
    ap.add_argument("--repeat", type=int, default=1, help="measure every host count this many times")
    ap.add_argument("--timeout", type=int, default=120, help="preflight --timeout")
    ap.add_argument("--by-key", action="store_true",
                    help="also count the store's wire bytes by request and key family (other nodes' clients)")
    a = ap.parse_args(argv)
    sizes = [int(x) for x in a.hosts.split(",") if x.strip()]
    for rep in range(a.repeat):
        ref = None
        for n in sizes:
            m = measure(n, a.timeout, a.by_key)
            ref = ref or m["total"]
            cats = ", ".join(f"{c} {m[c]:,.0f} B ({m[c + '_pkts']:.1f} pkts)" for c in CATEGORIES)
            print(f"run {rep + 1} N={n}: eth0 {m['total']:,.0f} B/node (ratio to N={sizes[0]}: "
                  f"{m['total'] / ref:.2f}) | {cats} | store connects {m['connects']:.1f}/node, "
                  f"{m['refused']:.1f} refused", flush=True)
            if a.by_key:
                print("  store payload by request (B/node, requests/node): " + ", ".join(
                    f"{k} {b:,.0f} ({r:.1f})" for k, (b, r) in sorted(m["keys"].items(), key=lambda kv: -kv[1][0])),
                    flush=True)
    return 0


if __name__ == "__main__":
    main()
