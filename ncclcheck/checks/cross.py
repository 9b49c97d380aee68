"""Cross-node checks: pure functions of every node's facts (and the mesh probe) -> CheckResults with node=None.

Input is a `CrossInput`: `nodes` = [(node_rank, hostname, facts)] in node-rank order, plus the per-interface
reachability matrix (nccl.reachability.build_matrix) and the probe attempts (for clock offsets). Every node of a
formed world runs these on the same data, so every node writes the same verdicts. "The" value of anything is the
majority's; the odd nodes are named by rank and hostname.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Optional

from .. import hostranges
from ..model import CheckResult, failed, passed, skipped, warned
from ..nccl import reachability, rules
from . import storage

log = logging.getLogger(__name__)

CLOCK_SKEW_WARN_S = 1.0
# Interface selectors are legitimately different per node when interface names differ (net.socket_ifname checks
# each against the node's own interfaces), so they are listed, not required equal.
PER_NODE_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA")
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_")


@dataclass(frozen=True)
class CrossInput:
    nodes: list  # [(node_rank, hostname, facts)]
    mesh: Optional[dict] = None  # reachability.build_matrix output; None when the probe did not run
    attempts: dict = field(default_factory=dict)  # {node_rank: [probe attempt records]}
    shared: Optional[dict] = None  # the --shared-dir step's outcome on node 0 (preflight/shared_dirs.py)
    load: dict = field(default_factory=dict)  # {node_rank: {"lag_ms", "loaded", ...}}: its prober's own lateness
    # nodes that share one network stack (nccl.reachability.host_groups: claimed and proven by the probe)
    same_host: list = field(default_factory=list)

    @property
    def ranks(self) -> list:
        return [r for r, _, _ in self.nodes]

    def host(self, rank: int) -> str:
        for r, h, _ in self.nodes:
            if r == rank:
                return h
        return "?"

    def group(self, name: str) -> dict:
        """{rank: facts[name]} for nodes where the group is present and available."""
        out = {}
        for r, _, f in self.nodes:
            g = (f or {}).get(name)
            if g is not None and not (isinstance(g, dict) and "unavailable" in g):
                out[r] = g
        return out


def _who(inp: CrossInput, ranks) -> str:
    """A few nodes one by one, many as host ranges and a count (hostranges.who)."""
    hosts = {r: h for r, h, _ in inp.nodes}
    return hostranges.who((r, hosts.get(r, "?")) for r in ranks)


def _by_value(values: dict) -> list:
    """[(value, [ranks])] most common first; ties broken by the lowest rank (node 0's value wins a tie)."""
    groups: dict = {}
    for r, v in sorted(values.items()):
        groups.setdefault(_key(v), (v, []))[1].append(r)
    return sorted(groups.values(), key=lambda g: (-len(g[1]), g[1][0]))


def _key(v: Any) -> str:
    return repr(v)


def _describe_split(inp: CrossInput, what: str, values: dict) -> str:
    return "; ".join(f"{what} {v} on {_who(inp, rs)}" for v, rs in _by_value(values))


def _single(inp: CrossInput, cid: str) -> Optional[CheckResult]:
    if len(inp.nodes) < 2:
        return skipped(cid, "only one node: nothing to compare")
    return None


# ---------------------------------------------------------------------------------------------------------------


VERSION_KEYS = (("python", "versions", "python"), ("torch", "versions", "torch"), ("CUDA", "versions", "cuda"),
                ("NCCL", "versions", "nccl"), ("driver", "versions", "driver"))
# A different driver usually works (same CUDA runtime); a different torch/NCCL/CUDA/python does not.
WARN_ONLY_VERSIONS = ("driver",)


def compare(inp: CrossInput, items: list) -> tuple[list, dict, dict]:
    """The one comparison of a value across nodes (versions, HCA firmware, GPU VBIOS...): items = [(label, key,
    {rank: value})] -> (one phrase per item that differs, "<label> <majority> on most nodes but <other> on <nodes>";
    evidence {key: {rank: value}}; {key: [ranks not on the majority's value]}). The majority is the most common
    value, a tie going to the lowest rank's (node 0's)."""
    phrases, evidence, odd = [], {}, {}
    for label, key, values in items:
        evidence[key] = {str(r): v for r, v in values.items()}
        if len({_key(v) for v in values.values()}) > 1:
            split = _by_value(values)
            majority = split[0][0]
            odd[key] = [r for r, v in values.items() if _key(v) != _key(majority)]
            phrases.append(f"{label} {majority} on most nodes but " + "; ".join(
                f"{v} on {_who(inp, rs)}" for v, rs in split[1:]))
    return phrases, evidence, odd


def check_versions(inp: CrossInput) -> CheckResult:
    """versions.consistent: python, torch, CUDA, NCCL and driver are the same on every node."""
    cid = "versions.consistent"
    if (s := _single(inp, cid)) is not None:
        return s
    vs = inp.group("versions")
    if len(vs) < 2:
        return skipped(cid, "versions unavailable on all but one node")
    diffs, evidence, odd = compare(inp, [(label, key, {r: v.get(key) for r, v in vs.items()})
                                         for label, _, key in VERSION_KEYS])
    if not diffs:
        t = vs[min(vs)]
        return passed(cid, f"same versions on {len(vs)} nodes (python {t.get('python')}, torch {t.get('torch')}, "
                           f"NCCL {t.get('nccl') or 'n/a'})", evidence=evidence)
    evidence["odd_nodes"] = odd
    labels = {key: label for label, _, key in VERSION_KEYS}
    res = warned if all(labels[k] in WARN_ONLY_VERSIONS for k in odd) else failed
    return res(cid, "; ".join(diffs), evidence=evidence,
               detail="Different NCCL/torch builds across ranks give \"Mismatched NCCL version\" errors or silent "
                      "hangs in the first collective.",
               fix="Run every node from the same image/environment (same torch wheel, same NCCL, same CUDA); "
                   "reinstall on the odd node(s) named above.")


def check_packages(inp: CrossInput) -> CheckResult:
    """packages.consistent: installed distributions are the same on every node. A distribution at another version,
    or missing, on some nodes fails, naming those nodes, its version there and the majority's; one that only a
    minority has and the majority lacks is a warning (see `_package_split`)."""
    cid = "packages.consistent"
    if (s := _single(inp, cid)) is not None:
        return s
    pk = inp.group("packages")
    if len(pk) < 2:
        return skipped(cid, "package lists unavailable on all but one node")
    hashes = {r: p.get("hash") for r, p in pk.items()}
    if len({_key(h) for h in hashes.values()}) == 1 and hashes[min(hashes)] is not None:
        return passed(cid, f"same {pk[min(pk)].get('count', '?')} distributions on {len(pk)} nodes",
                      evidence={"hash": hashes[min(hashes)]})
    items = {r: p.get("items") for r, p in pk.items()}
    unlisted = sorted(r for r, it in items.items() if not isinstance(it, dict))
    if unlisted:  # hashes differ and some node sent no list: the difference is real but cannot be named
        return warned(cid, f"package lists differ (hashes) but {_who(inp, unlisted)} sent no list to compare",
                      evidence={"hashes": {str(r): h for r, h in hashes.items()}, "unlisted": unlisted},
                      fix="Compare `pip freeze` on the named node(s) with another node's.")
    names = sorted({n for it in items.values() for n in it})
    differ, odd, extra, lines = {}, {}, {}, []
    for n in names:
        values = {r: it.get(n) for r, it in items.items()}
        if len({_key(v) for v in values.values()}) == 1:
            continue
        split = _by_value(values)
        differ[n] = {("missing" if v is None else v): rs for v, rs in split}
        line, bad, harmless = _package_split(inp, n, split)
        lines.append(line)
        (extra if harmless else odd)[n] = bad
    if not differ:
        return passed(cid, f"same distributions on {len(pk)} nodes (list hashes differ only in order)",
                      evidence={"hashes": {str(r): h for r, h in hashes.items()}})
    ev = {"differ": differ, "majority": {n: _majority_version(differ[n]) for n in differ},
          "odd_nodes": {n: rs for n, rs in {**odd, **extra}.items()}}
    shown = "; ".join(lines[:8]) + (f"; and {len(lines) - 8} more" if len(lines) > 8 else "")
    nodes = sorted({r for rs in odd.values() for r in rs}) or sorted({r for rs in extra.values() for r in rs})
    res = failed if odd else warned
    return res(cid, f"{len(differ)} distribution(s) differ on {_who(inp, nodes)}: {shown}", evidence=ev,
               detail="A distribution at another version (or missing) on some nodes runs other code there: ranks "
                      "that diverge in numerics, pickled objects one side cannot read, or an import error on one "
                      "node only. A distribution that only a minority of nodes has (the majority lacks it) is a "
                      "warning: the job's code, which runs on the majority, does not import it.",
               fix="Install the same package set everywhere (one image, or `pip freeze` from the majority node "
                   "installed with `pip install -r` on the others); the odd node(s) are named above.")


def _package_split(inp: CrossInput, name: str, split: list) -> tuple[str, list, bool]:
    """(what to say, the odd ranks, harmless) for one distribution that differs: split is _by_value's
    [(version or None, ranks)], the majority first. The majority's version is the reference: every node elsewhere
    is odd. Harmless only when the majority does not have it at all (an extra tool on a few nodes)."""
    (major, _), rest = split[0], split[1:]
    odd = sorted(r for _, rs in rest for r in rs)
    where = ", ".join(f"{'missing' if v is None else v} on {_who(inp, rs)}" for v, rs in rest)
    if major is None:
        return f"{name} {where} (not on the others)", odd, True
    return f"{name} {where} ({major} on the others)", odd, False


def _majority_version(split: dict) -> Optional[str]:
    v = next(iter(split))
    return None if v == "missing" else v


def check_code(inp: CrossInput) -> CheckResult:
    """code.consistent: the code directory hashes the same on every node; the majority's hash is "the" code."""
    cid = "code.consistent"
    if (s := _single(inp, cid)) is not None:
        return s
    code = inp.group("code")
    if len(code) < 2:
        return skipped(cid, "code fingerprint unavailable on all but one node")
    missing = [r for r, c in code.items() if c.get("kind") == "missing" or not c.get("hash")]
    hashes = {r: c.get("hash") for r, c in code.items() if r not in missing}
    ev = {"hashes": {str(r): c.get("hash") for r, c in code.items()},
          "git_head": {str(r): c.get("git_head") for r, c in code.items()},
          "dirty": {str(r): c.get("dirty") for r, c in code.items()},
          "path": {str(r): c.get("path") for r, c in code.items()}}
    if missing and not hashes:
        return skipped(cid, "no node could fingerprint its code path", evidence=ev)
    groups = _by_value(hashes)
    if not missing and len(groups) == 1:
        c = code[min(code)]
        head = f" (git {str(c.get('git_head'))[:12]}{', dirty' if c.get('dirty') else ''})" if c.get("git_head") else ""
        return passed(cid, f"same code on {len(code)} nodes{head}", evidence=ev)
    the_hash, majority = groups[0]
    odd = sorted([r for r, h in hashes.items() if h != the_hash] + missing)
    why = []
    for r in odd:
        c = code[r]
        if r in missing:
            why.append(f"node {r} ({inp.host(r)}): {c.get('path')} {c.get('reason') or 'is missing'}")
        else:
            head, mhead = c.get("git_head"), code[majority[0]].get("git_head")
            if head and mhead and head != mhead:
                why.append(f"node {r} ({inp.host(r)}) is at git {head[:12]}, the others at {mhead[:12]}")
            elif c.get("dirty"):
                why.append(f"node {r} ({inp.host(r)}) has uncommitted changes")
            else:
                why.append(f"node {r} ({inp.host(r)}) has different files ({c.get('files')} files, {c.get('bytes')} B)")
    ev["odd_nodes"] = odd
    return failed(cid, f"code differs on {_who(inp, odd)}", detail="; ".join(why), evidence=ev,
                  fix="Sync the code to the odd node(s) (same git commit, no local edits), or run from a shared "
                      "filesystem / one image.")


def check_paths(inp: CrossInput) -> CheckResult:
    """paths.consistent: each --path exists, is readable and has the same fingerprint on every node."""
    cid = "paths.consistent"
    if (s := _single(inp, cid)) is not None:
        return s
    groups = inp.group("paths")
    wanted = sorted({p.get("path") for ps in groups.values() if isinstance(ps, list) for p in ps if p.get("path")})
    if not wanted:
        return skipped(cid, "no --path given")
    problems, warn_only, ev, held = [], [], {}, []
    for path in wanted:
        per = {r: next((p for p in ps if p.get("path") == path), None) for r, ps in groups.items()}
        ev[path] = {str(r): p for r, p in per.items()}
        bad = [r for r, p in per.items() if p is None or not p.get("exists") or not p.get("readable")]
        if bad:
            problems.append(f"{path} missing or unreadable on {_who(inp, bad)}")
            continue
        how, mixed = storage.path_sharing(inp, path, per)
        ev.setdefault("sharing", {})[path] = how
        if mixed:
            warn_only.append(mixed)
        else:
            held.append(f"{path}: {how}")
        fps = {r: p.get("fingerprint") for r, p in per.items()}
        if len({_key(v) for v in fps.values()}) > 1:
            the, _ = _by_value(fps)[0]
            odd = [r for r, v in fps.items() if v != the]
            desc = ", ".join(f"node {r}: {per[r].get('files')} files, {per[r].get('bytes')} B" for r in odd)
            warn_only.append(f"{path} differs on {_who(inp, odd)} ({desc})")
    if problems:
        return failed(cid, "; ".join(problems + warn_only), evidence=ev,
                      fix="Mount or copy the path on the named node(s), with read permission for the job's user.")
    if warn_only:
        return warned(cid, "; ".join(warn_only), evidence=ev,
                      fix="Sync the data (rsync from a majority node) or point every node at the same shared copy.")
    return passed(cid, f"{len(wanted)} path(s) identical on {len(groups)} nodes ({'; '.join(held)})", evidence=ev)


def check_gpu_count(inp: CrossInput) -> CheckResult:
    """gpu.count (cross-node): GPUs per node; heterogeneous nodes are reported as a warning, not a failure."""
    cid = "gpu.count"
    if (s := _single(inp, cid)) is not None:
        return s
    gpus = {r: g.get("count") for r, g in inp.group("gpu").items() if isinstance(g.get("count"), int)}
    if len(gpus) < 2:
        return skipped(cid, "GPU counts unavailable on all but one node")
    ev = {"count": {str(r): c for r, c in gpus.items()}}
    if len(set(gpus.values())) == 1:
        n = next(iter(gpus.values()))
        return passed(cid, f"{n} GPU(s) on each of {len(gpus)} nodes" if n else f"no GPUs on any of {len(gpus)} "
                      "nodes (CPU/gloo run)", evidence=ev)
    return warned(cid, "heterogeneous nodes: " + _describe_split(inp, "GPUs:", gpus), evidence=ev,
                  detail="With one rank per GPU, nodes contribute different rank counts; collectives still work "
                         "but the slowest/smallest node sets the pace.",
                  fix="Use the same --nproc-per-node on every node (torchrun needs it equal), or check the nodes "
                      "with fewer GPUs (nvidia-smi; a GPU may have fallen off the bus).")


def chosen_interface(facts: dict, usable: Optional[list] = None) -> Optional[str]:
    """The interface this node's traffic goes over: NCCL_SOCKET_IFNAME's first match, else the first usable
    interface from the mesh, else the route to the master."""
    ifs = facts.get("interfaces") if isinstance(facts.get("interfaces"), list) else []
    env = (facts.get("env") or {}).get("vars") or {}
    spec = rules.parse_spec(env.get("NCCL_SOCKET_IFNAME"))
    if spec is not None:
        hits = rules.socket_ifname_matches(spec, ifs)
        if hits:
            return hits[0]["name"]
    if usable:
        return usable[0]
    route = facts.get("route")
    if isinstance(route, dict) and route.get("interface"):
        return route["interface"]
    return None


def check_mtu(inp: CrossInput) -> CheckResult:
    """net.mtu_consistent: the MTU of the interface the job uses is equal on every node."""
    cid = "net.mtu_consistent"
    if (s := _single(inp, cid)) is not None:
        return s
    usable = reachability.reachable_by_node(inp.mesh, inp.ranks) if inp.mesh else {}
    mtus, names = {}, {}
    for r, _, f in inp.nodes:
        name = chosen_interface(f or {}, [u for u in usable.get(r, []) if _kind(f, u) not in _NEVER])
        itf = next((i for i in (f or {}).get("interfaces") or [] if isinstance(i, dict) and i.get("name") == name),
                   None)
        if itf and isinstance(itf.get("mtu"), int):
            mtus[r], names[r] = itf["mtu"], name
    if len(mtus) < 2:
        return skipped(cid, "no common interface with a known MTU to compare")
    ev = {"mtu": {str(r): m for r, m in mtus.items()}, "interface": {str(r): n for r, n in names.items()}}
    if len(set(mtus.values())) == 1:
        return passed(cid, f"MTU {next(iter(mtus.values()))} on every node's {'/'.join(sorted(set(names.values())))}",
                      evidence=ev)
    the, _ = _by_value(mtus)[0]
    odd = [r for r, m in mtus.items() if m != the]
    return failed(cid, "MTU differs: " + "; ".join(f"{m} on {_who(inp, rs)}" for m, rs in _by_value(mtus)),
                  evidence=ev,
                  detail="Frames larger than a peer's MTU are dropped: large messages hang or RoCE reports "
                         "\"Got completion with error 12\" while small ones work.",
                  fix="; ".join(f"node {r}: ip link set dev {names[r]} mtu {the}" for r in odd)
                  + " (and match the switch ports).")


def clock_offsets(inp: CrossInput) -> dict:
    """{node rank: its clock minus the reference node's (seconds)} from probe handshakes, reference = lowest rank."""
    if not inp.ranks:
        return {}
    ref = min(inp.ranks)
    best: dict = {ref: (0.0, 0.0)}  # rank -> (offset, rtt) keeping the lowest-rtt sample
    for src, rows in (inp.attempts or {}).items():
        for a in rows or []:
            off, rtt = a.get("offset_s"), a.get("rtt_us") or 0.0
            if not a.get("ok") or off is None or a.get("reached") != a.get("peer"):
                continue
            if src == ref:
                r, o = a["peer"], off
            elif a.get("peer") == ref:
                r, o = src, -off
            else:
                continue
            if r not in best or rtt < best[r][1]:
                best[r] = (o, rtt)
    return {r: o for r, (o, _) in best.items()}


def check_clock_skew(inp: CrossInput) -> CheckResult:
    """time.clock_skew: wall clocks agree within a second (measured in the probe handshake, NTP-style)."""
    cid = "time.clock_skew"
    if (s := _single(inp, cid)) is not None:
        return s
    offs = clock_offsets(inp)
    ref = min(inp.ranks)
    if len(offs) < 2:
        return skipped(cid, "no probe handshake with the reference node succeeded: skew not measured")
    ev = {"reference": ref, "offset_s": {str(r): round(o, 4) for r, o in sorted(offs.items())},
          "unmeasured": [r for r in inp.ranks if r not in offs]}
    worst = max(offs, key=lambda r: abs(offs[r]))
    spread = max(offs.values()) - min(offs.values())
    if spread <= CLOCK_SKEW_WARN_S:
        return passed(cid, f"clocks agree within {spread * 1000:.0f} ms", evidence=ev)
    skewed = sorted(r for r, o in offs.items() if abs(o) > CLOCK_SKEW_WARN_S / 2) or [worst]
    return warned(cid, f"clock skew {spread:.1f} s: {_who(inp, skewed)} off by "
                       + ", ".join(f"{offs[r]:+.1f} s" for r in skewed) + f" vs node {ref}",
                  evidence=ev,
                  detail="Skewed clocks make logs and profiles from different nodes impossible to line up, and "
                         "break TLS/Kerberos-backed storage.",
                  fix="Run NTP/chrony on every node (chronyc tracking; timedatectl status).")


def check_env(inp: CrossInput) -> CheckResult:
    """env.nccl (cross-node): NCCL_/TORCH_NCCL_/GLOO_ variables are the same on every node."""
    cid = "env.nccl"
    if (s := _single(inp, cid)) is not None:
        return s
    envs = {r: e for r, e in inp.group("env").items() if isinstance(e, dict)}
    if len(envs) < 2:
        return skipped(cid, "environment unavailable on all but one node")
    vars_ = {r: {k: v for k, v in (e.get("vars") or {}).items() if k.startswith(ENV_PREFIXES)} for r, e in envs.items()}
    for r, e in envs.items():  # secret-looking names: compare presence only, never values
        for k in e.get("redacted") or []:
            if k.startswith(ENV_PREFIXES):
                vars_[r][k] = "<redacted>"
    names = sorted({k for v in vars_.values() for k in v})
    differ, per_node = {}, {}
    for k in names:
        values = {r: v.get(k) for r, v in vars_.items()}
        if len({_key(x) for x in values.values()}) > 1:
            (per_node if k in PER_NODE_VARS else differ)[k] = {str(r): x for r, x in values.items()}
    ev = {"differ": differ, "per_node": per_node}
    if not differ:
        extra = f" ({', '.join(per_node)} set per node)" if per_node else ""
        return passed(cid, f"{len(names)} NCCL/Gloo variable(s), same on {len(envs)} nodes{extra}", evidence=ev)
    parts = []
    for k, values in differ.items():
        split = _by_value({int(r): v for r, v in values.items()})
        parts.append(f"{k}: " + ", ".join(f"{'unset' if v is None else v} on {hostranges.rank_ranges(rs)}"
                                          for v, rs in split))
    return warned(cid, f"{len(differ)} variable(s) differ between nodes: " + "; ".join(parts), evidence=ev,
                  detail="NCCL reads its settings per process: different protocol/algorithm/transport switches on "
                         "different ranks give hangs or mismatched-config errors.",
                  fix="Set NCCL_*/GLOO_* the same way on every node (export them in the job script that srun/"
                      "torchrun propagates, not in one node's shell profile).")


def _active_set(rdma: dict) -> list:
    return sorted(f"{d}:{p}" for d, p, _ in rules.active_ib_ports(rdma))


def check_ib(inp: CrossInput) -> CheckResult:
    """ib.devices (cross-node): the same set of ACTIVE RDMA ports on every node."""
    cid = "ib.devices"
    if (s := _single(inp, cid)) is not None:
        return s
    rd = {r: g for r, g in inp.group("rdma").items() if isinstance(g, dict)}
    if len(rd) < 2:
        return skipped(cid, "RDMA facts unavailable on all but one node")
    sets = {r: _active_set(g) for r, g in rd.items()}
    ev = {"active": {str(r): s for r, s in sets.items()}}
    if all(not s for s in sets.values()):
        return passed(cid, "no active RDMA ports on any node (sockets only)", evidence=ev)
    if len({tuple(s) for s in sets.values()}) == 1:
        return passed(cid, f"{len(next(iter(sets.values())))} active RDMA port(s) on every node: "
                           + ", ".join(next(iter(sets.values()))), evidence=ev)
    the, _ = _by_value({r: tuple(s) for r, s in sets.items()})[0]
    odd = [r for r, s in sets.items() if tuple(s) != the]
    none = [r for r in odd if not sets[r]]
    desc = "; ".join(f"node {r} ({inp.host(r)}): {', '.join(sets[r]) or 'none'}" for r in odd)
    res = failed if none else warned
    return res(cid, f"active RDMA ports differ: the others have {', '.join(the) or 'none'}; {desc}", evidence=ev,
               detail="NCCL uses IB only where every rank has it; a node without active ports makes the job fall "
                      "back to sockets (NET/IB : No device found) or fail when NCCL_NET=IB.",
               fix="Check the odd node's ports (cat /sys/class/infiniband/*/ports/*/state; cable, switch port, "
                   "subnet manager), or pin NCCL_IB_HCA to ports present everywhere.")


_NEVER = rules.NEVER_FOR_MULTI_NODE


def _kind(facts: dict, name: str) -> Optional[str]:
    for i in (facts or {}).get("interfaces") or []:
        if isinstance(i, dict) and i.get("name") == name:
            return i.get("kind")
    return None


def check_peer_reachability(inp: CrossInput) -> CheckResult:
    """net.peer_reachability: which interfaces connect every pair of nodes (full-mesh TCP probe)."""
    cid = "net.peer_reachability"
    if (s := _single(inp, cid)) is not None:
        return s
    if not inp.mesh:
        return skipped(cid, "the mesh probe did not run (no candidate interface addresses were published)")
    ranks = inp.ranks
    facts = {r: f for r, _, f in inp.nodes}
    usable = reachability.reachable_by_node(inp.mesh, ranks)
    good_ifaces = [i for i, e in sorted(inp.mesh.items()) if reachability.usable_everywhere(e, ranks)]
    unusable = {i: e for i, e in inp.mesh.items() if i not in good_ifaces}
    why_unusable = {}
    for i, e in sorted(unusable.items()):
        if e.get("duplicates"):
            a, rs = next(iter(e["duplicates"].items()))
            why_unusable[i] = f"same address {a} on nodes {hostranges.rank_ranges(rs)}"
        elif e.get("errors"):
            pair, err = next(iter(sorted(e["errors"].items())))
            why_unusable[i] = f"{pair}: {err}" + (f" (+{len(e['errors']) - 1} more)" if len(e["errors"]) > 1 else "")
        else:
            missing = [r for r in ranks if r not in (e.get("nodes") or [])]
            why_unusable[i] = f"not present on node(s) {hostranges.rank_ranges(missing)}"
    ev = {"ranks": ranks, "interfaces": inp.mesh, "usable_by_node": {str(r): u for r, u in usable.items()},
          "unusable": why_unusable}
    if inp.same_host:
        ev["same_host"] = inp.same_host
    one = reachability.one_host(ranks, inp.same_host)
    one_text = (f"all {len(ranks)} nodes share one host's network stack (same boot and network namespace, and each "
                "pair reached on an address local to the prober): loopback connects them")
    if one and all(usable[r] for r in ranks):
        # One network stack: an address local to one node is local to all, so every interface (loopback first)
        # connects them whatever a NIC or a firewall towards other hosts would do, and the probe showed it does.
        return passed(cid, one_text, evidence=ev)
    # Per node, interfaces every other node reached that a job may use (never docker/lo/veth/bridge, except on one
    # host, where loopback is what connects them). On one host a node its peers did not reach (or that reached none
    # of them: a local firewall, a broken prober) is judged like any other: one shared stack proves no pair.
    job_usable = {r: [i for i in usable[r] if one or _kind(facts[r], i) not in _NEVER] for r in ranks}
    stranded = [r for r in ranks if not job_usable[r]]
    # Busy is not unreachable: a node that answered only late (its kernel accepted, its prober replied after the
    # bound) and a node whose own prober was starved and reached none of its targets are loaded, not cut off.
    late = sorted({r for e in inp.mesh.values() for r in e.get("late_nodes") or []})
    members = _MeshSets(inp.mesh)

    def only_outbound(r: int) -> bool:
        return _only_outbound(members, facts, r, usable[r])

    # ... when what failed is what load does (its probes ran out of time): a refused connect is definite, whatever
    # the prober's lag (bench_scale at 16,384 nodes excused a node whose every probe was refused as loaded).
    starved = [r for r in stranded if (inp.load.get(r) or {}).get("loaded") and only_outbound(r)
               and all(reachability.timed_out(a) for a in inp.attempts.get(r) or [] if not a.get("ok"))]
    loaded = sorted(set(late) | set(starved))
    # Unmeasured is not unreachable either: a node whose probe results never reached node 0 (its agent stalled or
    # was starved after it joined; 1,630 of 16,384 simulated nodes on 2 cores) counts as failing its planned pairs,
    # which read as "its outgoing connections fail: a firewall". When the others reached it, it is alive and
    # listening; what it reaches itself is unknown, and said so.
    unreported = {r for e in inp.mesh.values() for r in e.get("unreported") or []}
    silent = [r for r in stranded if r in unreported and r not in starved and only_outbound(r)]
    # ... and a node no reported probe failed against (its own row and those of every peer that probes it missed
    # node 0's bound, reachability's "unmeasured") on every job interface it lacks: nothing shows it cut off.
    unseen = [r for r in stranded if r not in starved and r not in silent and _unmeasured(members, facts, r, usable[r])]
    stranded = [r for r in stranded if r not in starved and r not in silent and r not in unseen]
    for r in [*starved, *silent]:  # the others reached it there: only its own prober failed, or never reported
        job_usable[r] = [i for i, e in sorted(inp.mesh.items()) if r in (e.get("cannot_reach") or [])]
    for r in unseen:  # where it went unmeasured: unknown, so NCCL's choice of it is not called unusable
        job_usable[r] = [i for i in sorted(members.unmeasured) if r in members.unmeasured[i]]
    if silent:
        ev["unreported"] = silent[:MAX_NAMED]
        ev["unreported_total"] = len(silent)
    if unseen:
        ev["unmeasured"] = unseen[:MAX_NAMED]
        ev["unmeasured_total"] = len(unseen)
    if loaded:
        ev["loaded"] = {str(r): dict(inp.load.get(r) or {}, answered_late=r in late) for r in loaded[:MAX_NAMED]}
        ev["loaded_total"] = len(loaded)
    at = {r: j for j, r in enumerate(ranks)}
    walled = [r for r in stranded if _drops_inbound(inp.mesh, ranks, r, at)]
    if walled:
        return _inbound_filtered(inp, walled, ev, why_unusable)
    if stranded and (links := _dead_links(inp, members, facts, stranded, usable)):
        return _links_cut(inp, links, ev)
    if stranded:
        return failed(cid, f"no interface of {_who(inp, stranded)} is reachable from every other node",
                      detail="; ".join(f"{i}: {w}" for i, w in why_unusable.items()), evidence=ev,
                      fix="Open TCP between the nodes on the cluster network (NCCL, Gloo and the rendezvous use "
                          "ephemeral ports, not only MASTER_PORT), or give the node an address on the shared "
                          "network; the matrix in the evidence shows which pairs fail.")
    # Would NCCL, as configured (or by its default order), bootstrap over an interface the others cannot reach?
    # (Not on one host: every local address connects them there; only a loaded node got this far.)
    bad_choice = []
    for r, _, f in ([] if one else inp.nodes):
        ifs = f.get("interfaces") if isinstance(f.get("interfaces"), list) else []
        env = (f.get("env") or {}).get("vars") or {}
        spec = rules.parse_spec(env.get("NCCL_SOCKET_IFNAME"))
        picked = ([i["name"] for i in rules.socket_ifname_matches(spec, ifs) if rules.has_ipv4(i)]
                  if spec else rules.nccl_default_order(ifs, (f.get("versions") or {}).get("nccl")))
        if picked and picked[0] not in job_usable[r]:
            bad_choice.append((r, picked[0], spec is not None))
    good_desc = ", ".join(good_ifaces) if good_ifaces else "per node: " + "; ".join(
        f"{r}: {','.join(job_usable[r])}" for r in ranks)
    if bad_choice:
        explicit = any(e for _, _, e in bad_choice)
        text = "; ".join(f"node {r} would use {i} ({'NCCL_SOCKET_IFNAME' if e else 'NCCL default order'}: "
                         f"{why_unusable.get(i, 'not reached by every node')})" for r, i, e in bad_choice)
        res = failed if explicit else warned
        return res(cid, f"NCCL would pick an unusable interface: {text}", evidence=ev,
                   detail=f"Interfaces that connect every pair: {good_desc}.",
                   fix="Set NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME as recommended below.")
    summary = one_text if one else f"{good_desc} connect(s) all {len(ranks)} nodes"
    if inp.same_host and not one:
        summary += " (" + "; ".join(f"{_who(inp, g)} share one host" for g in inp.same_host[:4]) + (
            f"; +{len(inp.same_host) - 4} more groups" if len(inp.same_host) > 4 else "") + ")"
    if why_unusable:
        summary += "; unusable: " + "; ".join(f"{i} ({w})" for i, w in why_unusable.items())
    if silent or loaded or unseen:  # busy or unmeasured: said, never passed, never blamed on the network
        said = [f"{_who(inp, silent)} never reported its own probe results within the mesh bound (the others reached "
                "it: alive, not cut off; what it reaches itself was not measured)"] if silent else []
        if unseen:
            said.append(f"{_who(inp, unseen)} went unmeasured: no probe result about it (its own, or of the peers "
                        "that probe it) reached node 0 within the mesh bound; nothing shows it cut off")
        if loaded:
            said.append(f"{_who(inp, loaded)} answered the mesh probe late or probed late: loaded, not cut off (TCP "
                        "accepted, reply after the bound, even on a retry)")
        detail = [_loaded_detail(inp, loaded, late)] if loaded else []
        if silent:
            detail.append(f"no row of probe results from {_who(inp, silent)} reached node 0 before it decided")
        if unseen:
            detail.append(f"every failed pair of {_who(inp, unseen)} is one whose prober's row never reached node 0")
        fix = ("Nothing is wrong with the network: the node was busy (CPU starved). If it stays loaded when the job "
               "starts, NCCL's bootstrap may time out on it too: look at what else runs there.")
        if silent or unseen:
            fix = ("Read the silent node's ncclcheck log: its agent stalled (CPU starved, swapping) or stopped after "
                   "it joined. Run the preflight again to measure its paths. " + fix)
        return warned(cid, "; ".join([*said, summary]), evidence=ev, detail="; ".join(detail), fix=fix)
    return passed(cid, summary, evidence=ev)


MAX_NAMED = 50  # loaded nodes whose own figures the evidence keeps (the count is always exact)


class _MeshSets:
    """Per interface, the nodes on it and those that reached none of their targets there, as sets: the per-node
    questions below are asked of thousands of stranded nodes at scale (16,384 simulated nodes on 2 cores left 6,491
    of them asking, and list scans made that 18 s of node 0's CPU)."""

    def __init__(self, mesh: dict):
        self.on = {i: set(e.get("nodes") or []) for i, e in mesh.items()}
        self.cannot = {i: set(e.get("cannot_reach") or []) for i, e in mesh.items()}
        self.unmeasured = {i: set(e.get("unmeasured") or []) for i, e in mesh.items()}


def _only_outbound(sets: _MeshSets, facts: dict, r: int, usable: list) -> bool:
    """Is every job interface r lacks one on which r itself reached none of its targets (the others reached it)?"""
    bad = _lacks(sets, facts, r, usable)
    return bool(bad) and all(r in sets.cannot[i] for i in bad)


def _unmeasured(sets: _MeshSets, facts: dict, r: int, usable: list) -> bool:
    """Is every job interface r lacks one on which no reported probe failed against r (reachability's
    "unmeasured")?"""
    bad = _lacks(sets, facts, r, usable)
    return bool(bad) and all(r in sets.unmeasured[i] for i in bad)


def _lacks(sets: _MeshSets, facts: dict, r: int, usable: list) -> list:
    """The job interfaces (never docker/lo/veth/bridge) r has but is not usable on, in the mesh's order."""
    mine = facts.get(r) or {}
    return [i for i, on in sets.on.items() if r in on and i not in usable and _kind(mine, i) not in _NEVER]


def _dead_links(inp: CrossInput, sets: _MeshSets, facts: dict, stranded: list, usable: dict) -> dict:
    """{iface: [[a, b], ...]} when what strands every stranded node is dead links between pairs of nodes (each end
    reached, and was reached by, other nodes: reachability's "cut_links"), on every job interface it lacks; else {}."""
    out: dict = {}
    for r in stranded:
        bad = sorted(_lacks(sets, facts, r, usable[r]))
        for i in bad:
            links = inp.mesh[i].get("cut_links") or []
            if not any(r in link for link in links):
                return {}
            out[i] = links
    return out


def _links_cut(inp: CrossInput, links: dict, ev: dict) -> CheckResult:
    parts = []
    for iface, pairs in sorted(links.items()):
        total = (inp.mesh[iface].get("cut_links_total") or len(pairs))
        shown = ", ".join(f"{_who(inp, [a])} and {_who(inp, [b])}" for a, b in pairs[:hostranges.NAMED_ONE_BY_ONE])
        more = f" and {total - hostranges.NAMED_ONE_BY_ONE} more pair(s)" if total > hostranges.NAMED_ONE_BY_ONE \
            else ""
        parts.append(f"{iface} carries no TCP between {shown}{more}")
    errors = "; ".join(f"{i}: " + "; ".join(f"{k}: {v}" for k, v in sorted((inp.mesh[i].get("errors") or {}).items())
                                            [:hostranges.NAMED_ONE_BY_ONE]) for i in sorted(links))
    return failed("net.peer_reachability", "; ".join(parts) + ": a dead link (each node reaches the others)",
                  detail=f"Each of these nodes reached, and was reached by, other nodes; only the paths between the "
                         f"pairs named fail. {errors}",
                  evidence=dict(ev, cut_links=links),
                  fix="Something between exactly these nodes drops their traffic: a firewall or security-group rule "
                      "naming the other node's address, a switch ACL or VLAN, a route, or a bad path in the fabric. "
                      "NCCL and Gloo connect node pairs directly, so a job placed on both nodes hangs at start-up or "
                      "at its first collective until it is fixed (or one of the nodes is left out).")


def _loaded_detail(inp: CrossInput, loaded: list, late: list) -> str:
    parts = []
    for r in loaded[:8]:
        ld = inp.load.get(r) or {}
        bits = (["its probe server answered late"] if r in late else []) + (
            [f"its own prober woke {ld['lag_ms']} ms late"] if ld.get("lag_ms") else [])
        parts.append(f"node {r} ({inp.host(r)}): " + (", ".join(bits) or "late"))
    more = f"; and {len(loaded) - 8} more" if len(loaded) > 8 else ""
    return "; ".join(parts) + more


def _drops_inbound(mesh: dict, ranks: list, r: int, at: Optional[dict] = None) -> bool:
    """Node r reached other nodes (outbound works; it also joined the rendezvous) but no peer reached it on any
    interface: inbound TCP is filtered on r, which a firewall does, rather than a network fault between nodes."""
    j, n = (ranks.index(r) if at is None else at[r]), len(ranks)  # `at`: rank -> index, O(1) per node at scale
    out_ok = in_tried = False
    for entry in mesh.values():
        m = entry.get("matrix") or []
        if len(m) != n:
            continue
        if any(m[j][k] is True for k in range(n) if k != j):
            out_ok = True
        col = [m[i][j] for i in range(n) if i != j]
        if any(v is True for v in col):
            return False
        in_tried = in_tried or any(v is False for v in col)
    return out_ok and in_tried


def _inbound_filtered(inp: CrossInput, walled: list, ev: dict, why_unusable: dict) -> CheckResult:
    facts = {r: f for r, _, f in inp.nodes}
    parts, fixes = [], []
    for r in walled:
        pr = (facts.get(r, {}).get("host") or {}).get("port_range")
        ports = f"{pr[0]}-{pr[1]}" if isinstance(pr, list) and len(pr) == 2 else "its ephemeral range " \
            "(sysctl net.ipv4.ip_local_port_range)"
        parts.append(f"node {r} ({inp.host(r)}) drops inbound TCP: a firewall")
        master = "MASTER_PORT and " if r == 0 else ""
        fixes.append(f"on node {r} ({inp.host(r)}) accept TCP from the other nodes on {master}ports {ports} "
                     f"(e.g. iptables -I INPUT -p tcp -s <other nodes' subnet> --dport {ports.replace('-', ':')} "
                     "-j ACCEPT, or the equivalent ufw/firewalld/security-group rule)")
    return failed("net.peer_reachability", "; ".join(parts),
                  detail="It reached the other nodes and joined the rendezvous (its outbound connections work), but "
                         "no peer reached it on any interface: inbound connections are filtered on that node. "
                         + "; ".join(f"{i}: {w}" for i, w in why_unusable.items()),
                  evidence=dict(ev, inbound_filtered=walled),
                  fix="Open node-to-node TCP, including the ephemeral range NCCL and Gloo listen on: "
                      + "; ".join(fixes) + ".")
