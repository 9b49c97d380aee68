"""Storage checks: pure judgement of every node's view of the --shared-dir directories (facts: mount, space) and of
what the --shared-dir step saw (preflight/shared_dirs.py: nonce and markers, the write probe, a throughput figure).

Node 0 runs them on `CrossInput.shared` (the step's outcome on node 0) and every node's `storage` facts. Each
returns one result for all directories, naming the nodes and the cause; evidence is keyed by directory, then node.
"""

from __future__ import annotations

from typing import Optional

from ..model import CheckResult, failed, passed, skipped, warned
from ..units import format_bytes
from .outliers import RELATIVE, low_outliers

SHARED, WRITABLE, SPACE, THROUGHPUT = "storage.shared", "storage.writable", "storage.space", "storage.throughput"
MIN_FIGURES = 3  # a node is named as slow only against at least two others
# Filesystems one server or cluster serves to many clients: a path on one of them, from the same source on every
# node, is one shared filesystem; a path on anything else is a node's own disk (or memory).
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "fuse.glusterfs",
              "fuse.ceph", "fuse.juicefs", "fuse.s3fs", "fuse.gcsfuse", "fuse.sshfs", "wekafs", "panfs", "orangefs",
              "pvfs2", "ocfs2", "gfs2", "9p", "virtiofs", "fuse.weka", "davfs", "afs")


def _dirs(inp) -> Optional[list]:
    shared = inp.shared or {}
    dirs = shared.get("dirs")
    if dirs:
        return list(dirs)
    for _, _, f in inp.nodes:
        ds = ((f or {}).get("storage") or {}).get("dirs")
        if isinstance(ds, list) and ds:
            return [d.get("path") for d in ds if isinstance(d, dict)]
    return None


def _fact(inp, rank: int, i: int) -> dict:
    for r, _, f in inp.nodes:
        if r == rank:
            ds = ((f or {}).get("storage") or {}).get("dirs") or []
            return ds[i] if i < len(ds) and isinstance(ds[i], dict) else {}
    return {}


def _report(inp, rank: int, i: int) -> Optional[dict]:
    nodes = (inp.shared or {}).get("nodes") or {}
    rep = nodes.get(rank, nodes.get(str(rank)))
    if not isinstance(rep, dict):
        return None
    ds = rep.get("dirs") or []
    return ds[i] if i < len(ds) and isinstance(ds[i], dict) else None


def _who(inp, r: int) -> str:
    return f"node {r} ({inp.host(r)})"


def fs_label(mount: Optional[dict]) -> str:
    """'nfs4 srv:/export (dev 0:52, /mnt/ckpt)': a mount as a user recognises it."""
    if not isinstance(mount, dict) or "fs_type" not in mount:
        return "an unknown filesystem" + (f" ({mount['unavailable']})" if isinstance(mount, dict) and
                                          mount.get("unavailable") else "")
    ro = ", read-only" if mount.get("read_only") else ""
    return f"{mount.get('fs_type')} {mount.get('source')} (dev {mount.get('device')}, {mount.get('mount_point')}{ro})"


def _fs_key(mount: Optional[dict]) -> tuple:
    # Device numbers of network filesystems are per client: compare what the mount is, not its local number.
    m = mount if isinstance(mount, dict) else {}
    return (m.get("fs_type"), m.get("source"), m.get("root"))


def _none(inp, cid: str) -> Optional[CheckResult]:
    if not _dirs(inp):
        return skipped(cid, "no --shared-dir given")
    return None


def _sec(us: Optional[int]) -> str:
    return f"{(us or 0) / 1e6:.1f} s"


# ---------------------------------------------------------------------------------------------------------------


def check_writable(inp) -> CheckResult:
    """storage.writable: on every node the job's user can create, fsync, rename, read and delete a file in each
    --shared-dir (the write-then-COMPLETE pattern of a checkpoint); a read-only mount is named as such."""
    if (s := _none(inp, WRITABLE)) is not None:
        return s
    problems, ev, unreported = [], {}, set()
    fix = set()
    for i, d in enumerate(_dirs(inp)):
        ev[d] = {}
        for r in inp.ranks:
            fact, rep = _fact(inp, r, i), _report(inp, r, i)
            probe = (rep or {}).get("probe") or {}
            ev[d][str(r)] = {"probe": probe or None, "mount": fact.get("mount"), "access": fact.get("access")}
            if fact and not fact.get("exists"):
                problems.append(f"{d} does not exist on {_who(inp, r)}")
                fix.add("create or mount the directory on the named node(s)")
                continue
            if rep is None:
                unreported.add(r)
                continue
            if probe.get("ok"):
                continue
            mount = fact.get("mount") or {}
            ro = probe.get("errno") == "EROFS" or mount.get("read_only") or (fact.get("space") or {}).get("read_only")
            if ro:
                problems.append(f"{d} is a read-only mount on {_who(inp, r)} ({fs_label(mount)})")
                fix.add("remount it read-write on the named node(s) (check /etc/fstab or the volume's readOnly: "
                        "true, and a bind mount's own ro flag)")
            else:
                problems.append(f"{d}: {probe.get('step') or 'write'} failed on {_who(inp, r)}: "
                                f"{probe.get('error') or 'no reason given'}")
                fix.add("give the job's user write permission there (owner, mode, ACLs, root_squash on NFS), or "
                        "free space / quota")
    if problems:
        return failed(WRITABLE, "; ".join(problems), evidence=ev, fix="; ".join(sorted(fix)).capitalize() + ".",
                      detail="A checkpoint is written as files, fsync'd, renamed into place and marked COMPLETE; a "
                             "node that cannot do this loses its shard of every checkpoint.")
    if unreported and len(unreported) == len(inp.ranks):
        return skipped(WRITABLE, "no node reported its write probe", evidence=ev)
    extra = f" (no report from {', '.join(_who(inp, r) for r in sorted(unreported))})" if unreported else ""
    n = len(inp.ranks) - len(unreported)
    res = warned if unreported else passed
    return res(WRITABLE, f"{len(ev)} dir(s): create, fsync, rename, read and delete work on {n} node(s){extra}",
               evidence=ev, fix="See storage.shared for the nodes that did not report." if unreported else "")


def check_space(inp) -> CheckResult:
    """storage.space: free bytes and inodes of each --shared-dir as every node sees it; --need SIZE fails a node
    whose view has less."""
    if (s := _none(inp, SPACE)) is not None:
        return s
    problems, ev, lows = [], {}, []
    need = None
    for _, _, f in inp.nodes:
        need = ((f or {}).get("storage") or {}).get("need_bytes") if need is None else need
    for i, d in enumerate(_dirs(inp)):
        ev[d] = {}
        for r in inp.ranks:
            sp = _fact(inp, r, i).get("space")
            ev[d][str(r)] = sp
            if not isinstance(sp, dict) or "free_bytes" not in sp:
                continue
            lows.append((sp["free_bytes"], r, d))
            if need is not None and sp["free_bytes"] < need:
                problems.append(f"{d} has {format_bytes(sp['free_bytes'])} free on {_who(inp, r)}, "
                                f"--need {format_bytes(need)}")
            if sp.get("free_inodes") == 0 and sp.get("total_inodes"):
                problems.append(f"{d} has no free inodes on {_who(inp, r)} (no new file can be created)")
    ev["need_bytes"] = need
    if problems:
        return failed(SPACE, "; ".join(problems), evidence=ev,
                      fix="Free space (old checkpoints) or raise the quota on the named node(s); a node whose view "
                          "is much smaller than the others' may not be on the shared filesystem at all (see "
                          "storage.shared).")
    if not lows:
        return skipped(SPACE, "free space unknown on every node", evidence=ev)
    least, r, d = min(lows)
    need_txt = f", --need {format_bytes(need)}" if need is not None else " (no --need given)"
    return passed(SPACE, f"least free: {format_bytes(least)} in {d} on {_who(inp, r)}{need_txt}", evidence=ev)


def check_shared(inp) -> CheckResult:
    """storage.shared: each --shared-dir is ONE filesystem: every node read node 0's nonce file, node 0 saw every
    node's marker; a node that sees another filesystem is named with its mount (type, source, device)."""
    if (s := _none(inp, SHARED)) is not None:
        return s
    shared = inp.shared or {}
    if len(inp.nodes) < 2:
        return skipped(SHARED, "one node: sharing needs a second node to prove it")
    if not shared.get("tag"):
        return failed(SHARED, "the --shared-dir step did not run: " + str(shared.get("error") or "no outcome"),
                      fix="See rendezvous.world and node 0's log.")
    fails, warns, ev, slowest = [], [], {}, 0
    for i, d in enumerate(_dirs(inp)):
        mounts = {r: _fact(inp, r, i).get("mount") for r in inp.ranks}
        markers = (shared.get("markers") or [{}])[i] if i < len(shared.get("markers") or []) else {}
        written = (shared.get("nonce_written") or [{}])[i] if i < len(shared.get("nonce_written") or []) else {}
        ev[d] = {"nonce_written": written, "nodes": {}}
        if not written.get("ok"):
            fails.append(f"{d}: node 0 ({inp.host(0)}) could not write its nonce file "
                         f"({written.get('step')}: {written.get('error')}), so sharing cannot be proven")
            continue
        other, ref = [], _fs_key(mounts.get(0))
        for r in inp.ranks:
            if r == 0:
                continue
            rep = _report(inp, r, i)
            seen = markers.get(r, markers.get(str(r)))
            ev[d]["nodes"][str(r)] = {"report": rep, "marker_seen_after_us": seen, "mount": mounts.get(r)}
            if rep is None:
                fails.append(f"{d}: {_who(inp, r)} never reported (it died or stalled mid-check; node 0 removed "
                             "its files)")
                continue
            if rep.get("nonce_seen"):
                slowest = max(slowest, rep.get("nonce_after_us") or 0)
            if rep.get("nonce_seen") and seen is not None:
                continue
            wrote = (rep.get("marker") or {}).get("ok")
            if not rep.get("nonce_seen") and seen is None:
                other.append(r)
            elif rep.get("nonce_seen") and not wrote:
                warns.append(f"{d}: {_who(inp, r)} reads node 0's file but could not write its own marker "
                             f"({(rep.get('marker') or {}).get('error')}): see storage.writable")
            elif rep.get("nonce_seen"):
                fails.append(f"{d}: {_who(inp, r)} saw node 0's file after {_sec(rep.get('nonce_after_us'))}, but "
                             f"node 0 never saw its marker: one-way visibility (a client cache longer than the "
                             "bound, or a write-back cache that has not flushed)")
            else:
                fails.append(f"{d}: node 0 saw {_who(inp, r)}'s marker, but that node never saw node 0's file "
                             f"within the bound ({rep.get('looks')} looks): a stale attribute cache on that node")
        same, odd = same_filesystem(inp, i)
        if other and 0 not in same:  # node 0 is the odd one out: the others share one export, by their mounts
            m = mounts.get(min(same))
            fails.append(f"{d}: {_who(inp, 0)} is on another filesystem than the {len(same)} others: it has "
                         f"{fs_label(mounts.get(0))} where {', '.join(_who(inp, r) for r in sorted(same))} have "
                         f"{fs_label(m)} (one export, by their mounts); they never saw node 0's nonce file and node "
                         "0 never saw their markers" + (f"; {', '.join(_who(inp, r) for r in sorted(odd - {0}))} "
                                                       "on yet other filesystems" if odd - {0} else ""))
            ev[d]["other_filesystem"] = sorted(odd)
        elif other:
            differs = [r for r in other if _fs_key(mounts.get(r)) != ref]
            named = "; ".join(f"{_who(inp, r)} has " + (fs_label(mounts.get(r)) if _fact(inp, r, i).get("exists",
                              True) else "no such directory") for r in other)
            why = (" where node 0 has " + fs_label(mounts.get(0))) if differs else \
                " (the same kind of mount as node 0's, but not the same files: a node-local copy of the share)"
            fails.append(f"{d}: {len(other)} node(s) see another filesystem: {named}{why}; they never saw node "
                         "0's nonce file and node 0 never saw their markers")
            ev[d]["other_filesystem"] = other
    ev["slowest_nonce_us"] = slowest
    for d, errs in zip(_dirs(inp), shared.get("cleanup") or []):
        if errs:
            warns.append(f"{d}: node 0 could not remove {', '.join(map(str, errs[:4]))}")
    ev["cleanup"] = shared.get("cleanup")
    if fails:
        return failed(SHARED, "; ".join(fails + warns), evidence=ev,
                      detail="On a node where the shared mount did not come up, the path exists but is the local "
                             "disk: writes succeed, the checkpoint is split across machines and the load fails "
                             "hours later.",
                      fix="Mount the shared filesystem at this path on the named node(s) (`findmnt -T DIR` there "
                          "should show the same source as on node 0), or wait for the automounter; for one-way "
                          "visibility lower the NFS attribute cache (actimeo) or raise --timeout.")
    if warns:
        return warned(SHARED, "; ".join(warns), evidence=ev,
                      fix="See storage.writable for a node that cannot write; remove any file named above by hand.")
    n = len(inp.ranks)
    fs0 = "; ".join(f"{d}: {fs_label(_fact(inp, 0, i).get('mount'))}" for i, d in enumerate(_dirs(inp)))
    return passed(SHARED, f"{len(_dirs(inp))} dir(s) are one filesystem on {n} nodes ({fs0}); every node read node "
                          f"0's nonce within {_sec(slowest)} and node 0 saw every node's marker", evidence=ev)


def _rates(inp, i: int, key: str) -> dict:
    out = {}
    for r in inp.ranks:
        t = (_report(inp, r, i) or {}).get("throughput") or {}
        if isinstance(t.get(key), int) and t[key] > 0 and t.get("bytes"):
            out[r] = t["bytes"] / t[key]  # bytes per microsecond = MB/s
    return out


def check_throughput(inp) -> CheckResult:
    """storage.throughput: a small bounded write (fsync'd) and read figure per node per --shared-dir; a node whose
    figure is a clear low outlier (the links rule, checks/outliers.py) among the nodes on the SAME filesystem is
    named. A node on another filesystem (storage.shared names it) is left out of the comparison and said so: its
    local disk or tmpfs is no reference for the share, nor the share for it (issue 44 item 6)."""
    if (s := _none(inp, THROUGHPUT)) is not None:
        return s
    slow, ev, figures, measured, apart = [], {}, [], set(), []
    for i, d in enumerate(_dirs(inp)):
        ev[d] = {}
        for r in inp.ranks:
            ev[d][str(r)] = (_report(inp, r, i) or {}).get("throughput")
        same, other = same_filesystem(inp, i)
        if other:
            ev[d]["not_compared"] = sorted(other)
            whose = "the filesystem the others share" if len(same) > 1 else f"{_who(inp, min(same))}'s filesystem"
            apart.append(f"{d}: {', '.join(_who(inp, r) for r in sorted(other))} not compared (not on {whose}: "
                         "see storage.shared)")
        for key, what in (("write_us", "write"), ("read_us", "read")):
            every = _rates(inp, i, key)
            rates = {r: v for r, v in every.items() if r in same}
            if not every:
                continue
            ev[d][f"{what}_mb_s"] = {str(r): round(v, 1) for r, v in every.items()}
            if not rates:
                continue
            measured |= set(rates)
            ref, low = low_outliers(rates, RELATIVE)
            if len(rates) < MIN_FIGURES:
                low = []  # with two figures nobody can tell which one is normal (links says the same of 2 nodes)
            figures.append(f"{d} {what} {ref:.0f} MB/s typical")
            for r in low:
                slow.append(f"{d}: {_who(inp, r)} {what}s {rates[r]:.0f} MB/s against {ref:.0f} MB/s on the others")
    note = ("; " + "; ".join(apart)) if apart else ""
    if slow:
        return warned(THROUGHPUT, "; ".join(slow) + note, evidence=ev,
                      fix="Look at the named node's mount (`findmnt -T DIR`: another server, NFS version or "
                          "options such as sync/rsize/wsize), its network path to the storage, and its load.")
    if not figures:
        return skipped(THROUGHPUT, "no node measured a figure on the shared filesystem (see the evidence for why)"
                       + note, evidence=ev)
    return passed(THROUGHPUT, "; ".join(figures) + f" ({len(measured)} of {len(inp.ranks)} node(s) measured, a few "
                  "MiB each, writes fsync'd)" + note, evidence=ev)


def same_filesystem(inp, i: int) -> tuple[set, set]:
    """(the ranks on the majority's filesystem, the others) for --shared-dir number i, from what storage.shared
    proved: node 0 and every node that saw its nonce or whose marker it saw are one filesystem; a node that did
    neither is on another one. Those others are one filesystem among themselves only where their mounts say so (the
    same network share: type, source, root); two local disks or tmpfs are two filesystems. The largest group is the
    reference (node 0's on a tie), so an odd node 0 is not taken for the norm. Where the step did not run or
    recorded no markers (one node, an outcome without them) nothing tells the filesystems apart: every node is
    compared, as before."""
    shared = inp.shared or {}
    ranks = list(inp.ranks)
    markers = shared.get("markers") or []
    if not shared.get("tag") or len(ranks) < 2 or not markers:
        return set(ranks), set()
    seen = markers[i] if i < len(markers) and isinstance(markers[i], dict) else {}
    with0, apart = {0}, []
    for r in ranks:
        rep = _report(inp, r, i)
        if r == 0 or rep is None:
            continue
        if rep.get("nonce_seen") or seen.get(r, seen.get(str(r))) is not None:
            with0.add(r)
        else:
            apart.append(r)
    groups: dict = {}
    for r in apart:
        m = _fact(inp, r, i).get("mount")
        key = _fs_key(m) if isinstance(m, dict) and m.get("fs_type") in NETWORK_FS else ("local", r)
        groups.setdefault(key, set()).add(r)
    best = max(groups.values(), key=len, default=set())
    same = best if len(best) > len(with0) else with0
    return same, {r for r in ranks if r not in same and (r in with0 or r in apart)}


# ---------------------------------------------------------------------------------------------------------------
# --path: one shared filesystem or copies on local disks


def path_sharing(inp, path: str, per: dict) -> tuple[str, Optional[str]]:
    """(how the path is held, a warning or None) from every node's mount of it: "one shared filesystem (...)" or
    "same content on local disks (...)"; a --shared-dir above it that the step proved shared is the strongest
    evidence. per = {rank: the node's --path record}."""
    for i, d in enumerate(_dirs(inp) or []):
        if _proven(inp, i) and (path == d or path.startswith(d.rstrip("/") + "/")):
            return f"one shared filesystem (proven by --shared-dir {d})", None
    mounts = {r: (p or {}).get("mount") for r, p in per.items()}
    if not mounts or not all(isinstance(m, dict) and m.get("fs_type") for m in mounts.values()):
        return "filesystem unknown on some node", None
    network = {r for r, m in mounts.items() if m["fs_type"] in NETWORK_FS}
    sources = {_fs_key(m) for m in mounts.values()}
    if len(network) == len(mounts) and len(sources) == 1:
        return f"one shared filesystem ({mounts[min(mounts)]['fs_type']} {mounts[min(mounts)]['source']} on every " \
               "node)", None
    if not network:
        types = sorted({m["fs_type"] for m in mounts.values()})
        return f"same content on local disks ({', '.join(types)}: each node reads its own copy)", None
    local = sorted(set(mounts) - network)
    return "mixed", (f"{path}: {', '.join(_who(inp, r) + ' has ' + fs_label(mounts[r]) for r in local)} where "
                     f"{_who(inp, min(network))} has {fs_label(mounts[min(network)])}: a local copy where the "
                     "others read the shared one")


def _proven(inp, i: int) -> bool:
    shared = inp.shared or {}
    if not shared.get("tag") or len(inp.ranks) < 2:
        return False
    markers = (shared.get("markers") or [])
    if i >= len(markers):
        return False
    for r in inp.ranks:
        rep = _report(inp, r, i)
        if r != 0 and (rep is None or not rep.get("nonce_seen") or markers[i].get(r, markers[i].get(str(r))) is None):
            return False
    return True
