"""--shared-dir across namespace hosts: one directory every host shares (the host's disk), and hosts whose own mount
namespace puts something else there (a tmpfs: the share did not come up; a read-only bind mount; a nearly full
tmpfs). Each scenario names the right node and cause, and the directory is left as it was (nothing of ours in it),
also when a node is killed mid-check."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ncclcheck_lab.netlab.harness import Lab
from tests.lab.test_preflight_lab import OK_TIMEOUT, SLACK, check, explain, run_all_ranks, world

pytestmark = pytest.mark.lab
# The world must form in every scenario (the fault is the storage, not the rendezvous), and --timeout also bounds
# the wait for a file another node wrote: long enough for torch's import on a loaded 2-core machine, short enough
# that a host on another filesystem costs one wait of this.
T = 20


def _share(lab_: Lab) -> str:
    share = lab_.tmp / "share"
    (share / "data").mkdir(parents=True)
    (share / "data" / "part-0").write_bytes(b"x" * 4096)
    return str(share)


def _left(share: str) -> list:
    return sorted(n for n in os.listdir(share) if n != "data")


def _run(lab_: Lab, share: str, timeout: int, *extra: str):
    args = ["--shared-dir", share, "--path", f"{share}/data", *extra]
    return run_all_ranks(lab_, timeout, extra={h: args for h in lab_.hosts})


def test_shared_directory_on_every_host_passes_and_is_left_empty(lab):
    lab3 = lab(3)
    share = _share(lab3)
    runs = _run(lab3, share, OK_TIMEOUT, "--need", "1M")
    assert all(r.rc == 0 for r in runs.values()), explain(runs)
    node0 = runs["h1"]
    for cid in ("storage.shared", "storage.writable", "storage.space"):
        assert check(node0, cid)["status"] == "pass", (cid, check(node0, cid))
    # A figure per node; on a loaded 2-core machine one host may be a clear outlier now and then (a warning).
    tput = check(node0, "storage.throughput")
    assert tput["status"] in ("pass", "warn") and len(tput["evidence"][share]["write_mb_s"]) == 3, tput
    shared = check(node0, "storage.shared")
    assert "one filesystem on 3 nodes" in shared["summary"], shared
    paths = check(node0, "paths.consistent")
    assert "proven by --shared-dir" in paths["summary"], paths
    assert _left(share) == [], _left(share)


@pytest.mark.long  # tests/preflight/test_cluster_preflight.py's shared-dir case runs the class in CI
def test_tmpfs_over_the_share_on_one_host_is_named_as_another_filesystem(lab):
    lab3 = lab(3)
    share = _share(lab3)
    lab3.mount("h3", f"mount -t tmpfs -o size=16m ncclcheck-lab-local {share}")
    runs = _run(lab3, share, T)
    assert all(r.rc == 1 for r in runs.values()), explain(runs)
    shared = check(runs["h1"], "storage.shared")
    assert shared["status"] == "fail", shared
    assert "node 2 (h3)" in shared["summary"] and "tmpfs ncclcheck-lab-local" in shared["summary"], shared
    assert "node 1 (h2)" not in shared["summary"], shared
    assert check(runs["h1"], "storage.writable")["status"] == "pass"  # a local disk takes writes: the danger
    assert _left(share) == [], _left(share)


def test_read_only_bind_mount_on_one_host_is_named_read_only(lab):
    lab3 = lab(3)
    share = _share(lab3)
    lab3.mount("h2", f"mount --bind {share} {share}", f"mount -o remount,bind,ro {share}")
    runs = _run(lab3, share, T)
    assert all(r.rc == 1 for r in runs.values()), explain(runs)
    writable = check(runs["h1"], "storage.writable")
    assert writable["status"] == "fail", writable
    assert "read-only mount on node 1 (h2)" in writable["summary"], writable
    assert "node 2" not in writable["summary"] and "node 0" not in writable["summary"], writable
    # It still reads node 0's nonce: the same filesystem, which it cannot write.
    assert check(runs["h1"], "storage.shared")["status"] in ("warn", "fail")
    assert _left(share) == [], _left(share)


@pytest.mark.long  # the need rule is unit-tested in tests/preflight/test_storage.py
def test_nearly_full_view_on_one_host_fails_need(lab):
    lab3 = lab(3)
    share = _share(lab3)
    lab3.mount("h2", f"mount -t tmpfs -o size=1m ncclcheck-lab-small {share}")
    runs = _run(lab3, share, T, "--need", "64M")
    assert all(r.rc == 1 for r in runs.values()), explain(runs)
    space = check(runs["h1"], "storage.space")
    assert space["status"] == "fail", space
    assert "on node 1 (h2), --need 64 MiB" in space["summary"], space
    assert "node 0" not in space["summary"] and "node 2" not in space["summary"], space
    assert "node 1 (h2)" in check(runs["h1"], "storage.shared")["summary"]
    assert _left(share) == [], _left(share)


@pytest.mark.long  # 70 s of waiting for a killed node's bound: scripts/long_tests.py
def test_a_node_killed_mid_check_leaves_nothing_behind(lab):
    lab3 = lab(3)
    share = _share(lab3)
    procs = {}
    for i, h in enumerate(lab3.hosts):
        argv = [sys.executable, "-m", "ncclcheck", *world(lab3, 3, T), "--node-rank", str(i),
                "--shared-dir", share, "--json", str(lab3.tmp / f"kill-{h}.json")]
        log = open(lab3.tmp / f"kill-{h}.log", "w")
        procs[h] = lab3.spawn(h, argv, cwd=str(lab3.tmp), stdout=log, stderr=subprocess.STDOUT)
    end = time.monotonic() + OK_TIMEOUT + SLACK
    killed = False
    while time.monotonic() < end and not killed:
        if any(n.endswith("-node1") for n in os.listdir(share)):  # node 1 wrote its marker: it is mid-check
            os.killpg(procs["h2"].pid, signal.SIGKILL)
            killed = True
        time.sleep(0.005)
    assert killed, f"node 1 never wrote its marker: {os.listdir(share)}"
    # Node 0 waits out the dead node's report, then its mesh endpoint, then its reading of the exit code: 3 bounds.
    for h in ("h1", "h3"):
        procs[h].wait(timeout=6 * T + SLACK)
    logs = "\n".join(f"--- {h}\n" + (lab3.tmp / f"kill-{h}.log").read_text()[-3000:] for h in ("h1", "h3"))
    report = json.loads((lab3.tmp / "kill-h1.json").read_text())
    shared = [c for c in report["checks"] if c["id"] == "storage.shared"]
    assert shared and shared[0]["status"] == "fail" and "node 1 (h2) never reported" in shared[0]["summary"], \
        (shared, logs)
    assert _left(share) == [], _left(share)
