"""--shared-dir: the mount table parser, the file operations, the step across threads sharing one store (each a
node; a node given another directory is a node on another filesystem), and the storage checks on fake facts."""

from __future__ import annotations

import os
import threading

from ncclcheck.checks import CrossInput, run_checks
from ncclcheck.checks.storage import path_sharing
from ncclcheck.facts import storage as fs
from ncclcheck.model import Status
from ncclcheck.preflight import shared_dirs
from ncclcheck.preflight.shared_dirs import LocalStore, clean_plan, clean_report, exchange
from ncclcheck.rendezvous.budget import Budget

MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:52 / /mnt/ckpt rw,relatime shared:9 - nfs4 srv:/export/ckpt rw,vers=4.2
31 30 0:60 / /mnt/ckpt rw,relatime - tmpfs tmpfs rw,size=1024k
32 22 254:0 /data /mnt/with\\040space ro,relatime - ext4 /dev/vda rw
"""


def test_mountinfo_topmost_mount_wins_and_escapes_are_decoded():
    mounts = fs.parse_mountinfo(MOUNTINFO)
    m = fs.mount_of("/mnt/ckpt/run1", mounts)
    assert (m["fs_type"], m["source"], m["device"]) == ("tmpfs", "tmpfs", "0:60")  # the tmpfs over the share
    m = fs.mount_of("/mnt/with space/x", mounts)
    assert m["mount_point"] == "/mnt/with space" and m["read_only"] and m["root"] == "/data"
    assert fs.mount_of("/etc", mounts)["fs_type"] == "ext4"


def test_mount_table_read_under_procfs_root(tmp_path, monkeypatch):
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mountinfo").write_text(MOUNTINFO)
    monkeypatch.setenv("NCCLCHECK_PROCFS_ROOT", str(tmp_path))
    assert fs.mount_of("/mnt/ckpt/x")["device"] == "0:60"
    monkeypatch.setenv("NCCLCHECK_PROCFS_ROOT", str(tmp_path / "none"))
    assert "unavailable" in fs.mount_of("/mnt/ckpt/x")


def test_write_complete_names_the_failing_step(tmp_path):
    ok = fs.write_complete(str(tmp_path), "a", b"x")
    assert ok["ok"] and (tmp_path / "a").read_bytes() == b"x" and not (tmp_path / "a.tmp").exists()
    bad = fs.write_complete(str(tmp_path / "missing"), "a", b"x")
    assert not bad["ok"] and bad["step"] == "create" and bad["errno"] == "ENOENT"


def test_names_are_never_followed_through_a_symlink(tmp_path):
    target = tmp_path / "victim"
    target.write_bytes(b"keep")
    os.symlink(target, tmp_path / "n.tmp")
    assert not fs.write_complete(str(tmp_path), "n", b"x")["ok"]
    assert target.read_bytes() == b"keep"
    os.symlink(target, tmp_path / "link")
    assert fs.read_small(str(tmp_path / "link")) is None


def _nodes(views: list, budget: Budget, deadline_s: float = 1.0, die: int = -1) -> dict:
    """Run the step on len(views) threads, thread r seeing views[r] as its --shared-dir; node 0's outcome."""
    store, out = LocalStore(), {}
    lock = threading.Lock()

    class Locked(LocalStore):
        def set(self, k, v):
            with lock:
                store.set(k, v)

        def get_now(self, k):
            with lock:
                return store.get_now(k)

        def add(self, k, n):
            with lock:
                return store.add(k, n)

    def run(r: int) -> None:
        out[r] = exchange(Locked(), r, len(views), (views[r],), deadline_s, budget)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(len(views)) if r != die]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out[0]


FAST = Budget(timeout_s=1.0, shared_poll_s=0.01, shared_poll_max_s=0.05, shared_grace_s=0.5, shared_io_s=1.0)


def _facts(view: str, need=None) -> dict:
    return {"storage": fs.collect([view], need)}


def test_one_shared_directory_passes_and_is_left_empty(tmp_path):
    d = str(tmp_path)
    out = _nodes([d, d, d], FAST)
    assert os.listdir(d) == []
    assert all(rep["dirs"][0]["nonce_seen"] for rep in out["nodes"].values())
    inp = CrossInput([(r, f"h{r}", _facts(d)) for r in range(3)], shared=out)
    res = {c.id: c for c in run_checks("cross", inp, "storage.")}
    assert res["storage.shared"].status is Status.PASS, res["storage.shared"]
    assert res["storage.writable"].status is Status.PASS
    assert res["storage.throughput"].status in (Status.PASS, Status.WARN)  # a figure; noise may name a node


def test_a_node_on_another_filesystem_is_named_and_both_views_left_empty(tmp_path):
    shared, local = tmp_path / "shared", tmp_path / "local"
    shared.mkdir()
    local.mkdir()
    out = _nodes([str(shared), str(shared), str(local)], FAST)
    assert os.listdir(shared) == [] and os.listdir(local) == []
    inp = CrossInput([(0, "h0", _facts(str(shared))), (1, "h1", _facts(str(shared))), (2, "h2", _facts(str(local)))],
                     shared=out)
    c = {c.id: c for c in run_checks("cross", inp, "storage.")}["storage.shared"]
    assert c.status is Status.FAIL and "node 2 (h2)" in c.summary and "node 1 (h1)" not in c.summary, c.summary
    assert c.evidence[str(shared)]["other_filesystem"] == [2]


def test_a_node_that_dies_mid_check_is_named_and_its_files_removed_by_node_0(tmp_path):
    d = str(tmp_path)
    tag = "0123456789ab"
    # What a node killed after writing its marker and probe leaves: node 0 removes it by name.
    for n in shared_dirs.names(tag, 1):
        (tmp_path / n).write_text("x")
        (tmp_path / (n + ".tmp")).write_text("x")
    orig = shared_dirs.secrets.token_hex
    try:
        shared_dirs.secrets.token_hex = lambda k: tag if k == 6 else orig(k)
        out = _nodes([d, d], FAST, die=1)
    finally:
        shared_dirs.secrets.token_hex = orig
    assert os.listdir(d) == []
    inp = CrossInput([(0, "h0", _facts(d)), (1, "h1", _facts(d))], shared=out)
    c = {c.id: c for c in run_checks("cross", inp, "storage.")}["storage.shared"]
    assert c.status is Status.FAIL and "node 1 (h1) never reported" in c.summary


def test_space_need_fails_the_node_with_less():
    def node(r, free):
        return (r, f"h{r}", {"storage": {"need_bytes": 1 << 30, "dirs": [
            {"path": "/ckpt", "exists": True, "is_dir": True, "mount": None,
             "space": {"free_bytes": free, "total_bytes": 1 << 40, "free_inodes": 100, "total_inodes": 1000}}]}})
    inp = CrossInput([node(0, 1 << 40), node(1, 1 << 20), node(2, 1 << 40)])
    c = {c.id: c for c in run_checks("cross", inp, "storage.")}["storage.space"]
    assert c.status is Status.FAIL and "node 1 (h1)" in c.summary and "node 2" not in c.summary


def test_read_only_mount_is_named_read_only():
    facts = {"storage": {"need_bytes": None, "dirs": [{"path": "/ckpt", "exists": True, "is_dir": True,
                                                       "mount": {"fs_type": "nfs4", "source": "s:/x", "read_only": True,
                                                                 "device": "0:50", "mount_point": "/ckpt"}}]}}
    ok = {"node_rank": 0, "dirs": [{"probe": {"ok": True}, "marker": {"ok": True}, "nonce_seen": True}]}
    ro = {"node_rank": 1, "dirs": [{"probe": {"ok": False, "step": "create", "errno": "EROFS",
                                              "error": "read-only filesystem (EROFS)"}, "marker": {"ok": False}}]}
    inp = CrossInput([(0, "h0", {"storage": {"dirs": [{"path": "/ckpt", "exists": True}]}}), (1, "h1", facts)],
                     shared={"tag": "x", "dirs": ["/ckpt"], "nodes": {0: ok, 1: ro}})
    c = {c.id: c for c in run_checks("cross", inp, "storage.")}["storage.writable"]
    assert c.status is Status.FAIL and "read-only mount on node 1 (h1)" in c.summary


def test_a_ten_times_slower_mount_is_named_by_the_links_rule():
    def rep(us):
        return {"dirs": [{"throughput": {"bytes": 8 << 20, "write_us": us, "read_us": 1000}}]}
    facts = {"storage": {"dirs": [{"path": "/ckpt", "exists": True}]}}
    inp = CrossInput([(r, f"h{r}", facts) for r in range(4)],
                     shared={"tag": "x", "dirs": ["/ckpt"], "nodes": {0: rep(10000), 1: rep(11000), 2: rep(100000),
                                                                      3: rep(9000)}})
    c = {c.id: c for c in run_checks("cross", inp, "storage.")}["storage.throughput"]
    assert c.status is Status.WARN and "node 2 (h2) writes" in c.summary and "node 1" not in c.summary


def test_path_on_local_disks_is_told_from_one_shared_filesystem():
    inp = CrossInput([(0, "a", {}), (1, "b", {})])
    local = {r: {"mount": {"fs_type": "ext4", "source": "/dev/sda1", "root": "/"}} for r in (0, 1)}
    assert path_sharing(inp, "/data", local)[0].startswith("same content on local disks")
    nfs = {r: {"mount": {"fs_type": "nfs4", "source": "srv:/d", "root": "/"}} for r in (0, 1)}
    assert path_sharing(inp, "/data", nfs)[0].startswith("one shared filesystem (nfs4 srv:/d")
    mixed = {0: nfs[0], 1: local[1]}
    how, warn = path_sharing(inp, "/data", mixed)
    assert warn and "node 1 (b) has ext4" in warn


def test_hostile_plan_and_report_are_refused_or_trimmed():
    assert clean_plan({"tag": "../../etc", "nonce": "0" * 32, "dirs": ["/x"]}) is None
    assert clean_plan({"tag": "0" * 12, "nonce": "0" * 32, "dirs": [1]}) is None
    rep = clean_report({"dirs": [{"nonce_seen": "yes", "path": "p" * 10000, "throughput": {"bytes": -5},
                                  "evil": object()}] * 5}, 3, 1)
    assert len(rep["dirs"]) == 1 and rep["dirs"][0]["nonce_seen"] is False
    assert len(rep["dirs"][0]["path"]) <= shared_dirs.MAX_TEXT and rep["dirs"][0]["throughput"]["bytes"] == 0


def test_a_directory_missing_on_one_node_is_named_without_waiting_for_the_nonce(tmp_path):
    d, missing = str(tmp_path), str(tmp_path / "not-mounted")
    out = _nodes([d, d, missing], FAST)
    assert out["nodes"][2]["dirs"][0]["looks"] == 0 and not out["nodes"][2]["dirs"][0]["nonce_seen"]
    assert os.listdir(d) == []
    inp = CrossInput([(0, "h0", _facts(d)), (1, "h1", _facts(d)), (2, "h2", _facts(missing))], shared=out)
    res = {c.id: c for c in run_checks("cross", inp, "storage.")}
    assert res["storage.writable"].status is Status.FAIL
    assert "does not exist on node 2 (h2)" in res["storage.writable"].summary
    assert "node 2 (h2)" in res["storage.shared"].summary


def test_two_figures_name_nobody():
    def rep(us):
        return {"dirs": [{"throughput": {"bytes": 8 << 20, "write_us": us}}]}
    facts = {"storage": {"dirs": [{"path": "/ckpt", "exists": True}]}}
    inp = CrossInput([(0, "h0", facts), (1, "h1", facts)],
                     shared={"tag": "x", "dirs": ["/ckpt"], "nodes": {0: rep(10000), 1: rep(100000)}})
    c = {c.id: c for c in run_checks("cross", inp, "storage.")}["storage.throughput"]
    assert c.status is Status.PASS and c.evidence["/ckpt"]["write_mb_s"] == {"0": 838.9, "1": 83.9}


def _tmpfs_scenario(mounts: dict, mb_s: dict, sees: set) -> CrossInput:
    """A --shared-dir outcome on node 0: the nodes in `sees` read node 0's nonce and node 0 saw their markers; the
    others saw nothing of it (another filesystem). mb_s: each node's write and read figure."""
    def fact(r):
        return {"storage": {"dirs": [{"path": "/ckpt", "exists": True, "mount": mounts[r]}]}}

    def rep(r):
        us = int((8 << 20) / mb_s[r])
        return {"node_rank": r, "dirs": [{"probe": {"ok": True}, "marker": {"ok": True}, "nonce_seen": r in sees,
                                          "nonce_after_us": 1000 if r in sees else None, "looks": 5,
                                          "throughput": {"bytes": 8 << 20, "write_us": us, "read_us": us}}]}
    ranks = sorted(mounts)
    shared = {"tag": "0123456789ab", "dirs": ["/ckpt"], "nonce_written": [{"ok": True}],
              "markers": [{r: 500 for r in ranks if r in sees and r != 0}], "cleanup": [[]],
              "nodes": {r: rep(r) for r in ranks}}
    return CrossInput([(r, f"h{r}", fact(r)) for r in ranks], shared=shared)


NFS = {"fs_type": "nfs4", "source": "srv:/ckpt", "root": "/", "device": "0:52", "mount_point": "/ckpt"}
TMPFS = {"fs_type": "tmpfs", "source": "tmpfs", "root": "/", "device": "0:60", "mount_point": "/ckpt"}


def test_a_node_on_tmpfs_is_not_the_reference_for_the_shared_ones():
    """Issue 44 item 6: node 2 on a local tmpfs (RAM: 1778 MB/s) while nodes 0 and 1 share an NFS disk (360 MB/s).
    storage.shared names node 2; storage.throughput must not accuse the healthy pair against it."""
    inp = _tmpfs_scenario({0: NFS, 1: NFS, 2: TMPFS}, {0: 360, 1: 360, 2: 1778}, sees={0, 1})
    res = {c.id: c for c in run_checks("cross", inp, "storage.")}
    assert res["storage.shared"].status is Status.FAIL and "node 2 (h2)" in res["storage.shared"].summary
    t = res["storage.throughput"]
    assert t.status is Status.PASS, t.summary
    assert "node 0 (h0) writes" not in t.summary and "node 1 (h1) writes" not in t.summary
    assert "node 2 (h2) not compared" in t.summary and "storage.shared" in t.summary
    assert t.evidence["/ckpt"]["not_compared"] == [2]
    assert t.evidence["/ckpt"]["write_mb_s"]["2"] == 1778.0  # its figure is kept, only not compared


def test_a_slow_node_is_still_named_among_those_on_the_shared_filesystem():
    inp = _tmpfs_scenario({0: NFS, 1: NFS, 2: NFS, 3: TMPFS}, {0: 360, 1: 350, 2: 30, 3: 1778}, sees={0, 1, 2})
    t = {c.id: c for c in run_checks("cross", inp, "storage.")}["storage.throughput"]
    assert t.status is Status.WARN and "node 2 (h2) writes 30 MB/s against 355 MB/s" in t.summary, t.summary
    assert "node 3 (h3) not compared" in t.summary and "node 0 (h0) writes" not in t.summary


def test_node_0_on_tmpfs_is_the_odd_one_not_the_reference():
    """The same class with node 0 the odd one: nodes 1-3 share one NFS export (their mounts say so), node 0 is on
    tmpfs; the share's nodes are compared with each other, node 0 is left out."""
    inp = _tmpfs_scenario({0: TMPFS, 1: NFS, 2: NFS, 3: NFS}, {0: 1778, 1: 360, 2: 350, 3: 30}, sees={0})
    t = {c.id: c for c in run_checks("cross", inp, "storage.")}["storage.throughput"]
    assert t.status is Status.WARN and "node 3 (h3) writes 30 MB/s against 355 MB/s" in t.summary, t.summary
    assert "node 0 (h0) not compared" in t.summary and "node 1 (h1) writes" not in t.summary
    s = {c.id: c for c in run_checks("cross", inp, "storage.")}["storage.shared"]
    assert s.status is Status.FAIL and s.evidence["/ckpt"]["other_filesystem"] == [0]
    assert s.summary.startswith("/ckpt: node 0 (h0) is on another filesystem than the 3 others: it has tmpfs"), \
        s.summary
