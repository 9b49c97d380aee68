"""`watch --follow` may be started with the job (the README's hang example does): before the job's store listens it
retries the master until --timeout, saying what it met, and then waits for the first armed rank, saying so; when none
registers by then the look says "no armed rank registered", never a silent --timeout. One look without --follow
wants a running job and says at once that nothing answers."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from ncclcheck_lab.loopstore import loopback_store
from tests.conftest import cli_env, free_port


def _watch(port: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ncclcheck", "watch", "--master-addr", "127.0.0.1",
                             "--master-port", str(port), "--timeout", "4", "--json", "-", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())


def test_follow_started_before_the_job_waits_for_its_store_and_its_ranks_saying_so():
    port = free_port()
    p = _watch(port, "--follow")
    time.sleep(2.0)  # watch meets a refused master first
    store = loopback_store(port, timeout_s=30)
    try:
        out, err = p.communicate(timeout=60)
    finally:
        del store
    assert p.returncode == 1, err
    assert f"master 127.0.0.1:{port} refused the connection" in err, err
    assert "waiting for its first armed rank to register" in err, err
    doc = json.loads(out)
    said = {c["id"]: c for c in doc["checks"]}
    assert "rendezvous.master_reachable" not in said or said["rendezvous.master_reachable"]["status"] != "fail", said
    assert any("no armed rank registered" in (c.get("summary") or "") for c in doc["checks"]), doc["checks"]


def test_one_look_at_a_port_where_nothing_listens_says_so_within_a_connect():
    port = free_port()
    t0 = time.monotonic()
    p = _watch(port)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1 and time.monotonic() - t0 < 30, err
    (master,) = [c for c in json.loads(out)["checks"] if c["id"] == "rendezvous.master_reachable"]
    assert master["status"] == "fail" and "does not answer" in master["summary"], master
