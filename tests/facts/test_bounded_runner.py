"""facts/util.py, the one bounded runner for local tools and blocking reads (issue 63): output capped and cut with a
note, an error's first line cut, a source that does not answer named once and not asked again in its collection,
every call under the collection's bound."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from ncclcheck.facts import util


def test_output_past_the_cap_is_cut_the_tool_stopped_and_the_cut_said():
    with util.collection(30) as c:
        out = util.run_cmd(["yes"], limit=1 << 20)
    assert len(out) == 1 << 20 and out.cut > 0
    assert [x["source"] for x in c.said()["cut"]] == ["yes"] and "first 1 MiB read" in c.said()["cut"][0]["why"]


def test_an_errors_first_line_only_cut_at_its_bound():
    prog = "import sys; sys.stderr.write('E' * 5_000_000 + '\\nsecond line\\n'); sys.exit(3)"
    with pytest.raises(RuntimeError) as e:
        util.run_cmd([sys.executable, "-c", prog])
    msg = str(e.value)
    assert msg.startswith(f"{sys.executable} exited 3: EEE") and "second" not in msg
    assert len(msg) < util.ERROR_CHARS + len(sys.executable) + 40


def test_a_tool_that_does_not_answer_is_named_once_then_not_asked_again():
    t0 = time.monotonic()
    with util.collection(1.0) as c:
        for _ in range(3):
            with pytest.raises(util.Unanswered, match="sleep did not answer in 1 s"):
                util.run_cmd(["sleep", "30"], timeout_s=5)
    assert time.monotonic() - t0 < 3  # one bound (the collection's, not the call's 5 s), not three
    assert [u["source"] for u in c.said()["unanswered"]] == ["sleep"]


def test_nvidia_smi_that_hangs_says_the_driver_may_be_wedged(tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexec sleep 30\n")
    smi.chmod(0o755)
    with util.collection(0.6), pytest.raises(util.Unanswered) as e:
        util.run_cmd([str(smi), "-q"])
    assert str(e.value) == "nvidia-smi did not answer in 0.6 s: the driver may be wedged"


def test_a_call_that_blocks_is_left_behind_and_named():
    stuck = threading.Event()
    with util.collection(0.5) as c:
        with pytest.raises(util.Unanswered, match="NVML did not answer"):
            util.call_bounded("NVML", stuck.wait)
        with pytest.raises(util.Unanswered):  # the same source: at once
            util.call_bounded("NVML", lambda: 1)
        assert util.call_bounded("other", lambda: 7) == 7
    stuck.set()
    assert c.said()["unanswered"][0]["why"].endswith("the driver may be wedged")


def test_a_collector_whose_read_blocks_costs_its_group_only(monkeypatch):
    from ncclcheck import facts
    from ncclcheck.facts import rdma

    release = threading.Event()
    monkeypatch.setattr(rdma, "collect", lambda: release.wait() and {})
    t0 = time.monotonic()
    try:
        got = facts.collect_node_facts(bound_s=0.5)
    finally:
        release.set()
    assert "RDMA devices" in got["rdma"]["unavailable"] and "did not answer" in got["rdma"]["unavailable"]
    assert isinstance(got["interfaces"], list) and "unavailable" not in got["packages"]
    assert any("RDMA" in u["source"] for u in got["sources"]["unanswered"])
    assert time.monotonic() - t0 < 30


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie waits for its reaper: it runs nothing
    except OSError:
        return False


def test_a_tool_whose_caller_was_left_behind_does_not_outlive_the_process(tmp_path):
    """A collector left behind in a daemon thread dies with the process; its tool (a session of its own) must not
    go on running after it (a wedged nvidia-smi's `sleep` outlived preflight by hours). The program exits once the
    tool is running and the runner holds it (the pid file alone can come first on a loaded machine)."""
    import subprocess

    pidfile = tmp_path / "pid"
    prog = ("import threading, time\nfrom ncclcheck.facts import util\n"
            f"threading.Thread(target=util.run_cmd, args=(['sh', '-c', 'echo $$ > {pidfile}; exec sleep 600'], 60),"
            " daemon=True).start()\n"
            f"while not __import__('os').path.exists('{pidfile}') or not util._RUNNING:\n    time.sleep(0.01)\n")
    subprocess.run([sys.executable, "-c", prog], check=True, timeout=60)
    pid = int(pidfile.read_text())
    for _ in range(100):
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)
