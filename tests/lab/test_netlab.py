"""Self-tests of the multi-host lab: each scenario does to real kernel TCP what it claims; nothing is left behind."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck_lab.netlab.harness import REPO_ROOT, Lab, nl

pytestmark = pytest.mark.lab

PY = sys.executable
TCPTOOL = str(Path(__file__).with_name("tcptool.py"))
NETLAB = str(REPO_ROOT / "scripts" / "netlab")
PORT = 29500
BULK = 4 << 20  # 4 MiB: ~0.7 s at 50mbit, a few ms unshaped
# SIOCGIFFLAGS, as NCCL's getifaddrs() sees them (sysfs `flags` lacks IFF_RUNNING, which the kernel computes).
IFF_FLAGS = ("import fcntl, socket, struct, sys; s = socket.socket(); "
             "print(struct.unpack('16sH', fcntl.ioctl(s, 0x8913, struct.pack('16sH', sys.argv[1].encode(), 0)))[1])")


def serve(lab: Lab, host: str, port: int = PORT) -> subprocess.Popen:
    proc = lab.spawn(host, [PY, TCPTOOL, "serve", str(port)])
    line = proc.stdout.readline().strip()
    assert line == "listening", proc.stderr.read() if proc.poll() is not None else line
    return proc


def send(lab: Lab, host: str, addr: str, port: int = PORT, nbytes: int = 0, timeout: float = 1.0) -> dict:
    """From host, connect to addr:port and send nbytes; {'ok', 'error', 'seconds', 'bits_per_s'}."""
    done = lab.exec(host, [PY, TCPTOOL, "send", addr, str(port), str(nbytes), str(timeout)], timeout=timeout + 60)
    return json.loads(done.stdout)


def sh(lab: Lab, host: str, cmd: str) -> str:
    return lab.exec(host, ["sh", "-c", cmd], check=True).stdout


def test_hosts_reach_each_other_over_eth0_and_nothing_else(lab):
    lab3 = lab(3)
    assert lab3.hosts == ["h1", "h2", "h3"]
    for host in lab3.hosts:
        serve(lab3, host)
    for a, b in (("h1", "h2"), ("h2", "h3"), ("h3", "h1")):
        got = send(lab3, a, lab3.ip(b), nbytes=1 << 20)
        assert got["ok"], (a, b, got)
    assert lab3.ip("h2") == f"198.18.{lab3.state.slot}.2"
    # Contained: no way out of the lab, and the root namespace holds no lab address.
    for host in lab3.hosts:
        assert "default" not in sh(lab3, host, "ip route; ip -6 route")
    sw = ["ip", "-n", lab3.state.sw]
    assert "inet" not in subprocess.run([*sw, "addr"], capture_output=True, text=True).stdout
    assert not [p for p in Path("/sys/class/net").iterdir() if p.name.startswith(f"{lab3.name}-")]


def test_bridged_traffic_ignores_the_machine_firewall(lab):
    lab2 = lab(2)
    serve(lab2, "h2")
    table = f"netlabtest{lab2.name}"
    subnet = f"198.18.{lab2.state.slot}.0/24"
    drop_all = " ".join(f"chain {hook}x {{ type filter hook {hook} priority 0; ip saddr {subnet} drop; }};"
                        for hook in ("prerouting", "forward", "input"))
    subprocess.run(["nft", "-f", "-"], input=f"table ip {table} {{ {drop_all} }}", text=True, check=True)
    try:
        assert send(lab2, "h1", lab2.ip("h2"))["ok"], "the machine's firewall reached bridged lab traffic"
    finally:
        subprocess.run(["nft", "delete", "table", "ip", table], check=False)
    if Path("/proc/sys/net/bridge").is_dir():
        got = subprocess.run(["ip", "netns", "exec", lab2.state.sw, "sysctl", "-n",
                              "net.bridge.bridge-nf-call-iptables"], capture_output=True, text=True).stdout
        assert got.strip() == "0"


def test_dead_nic_drops_eth1_while_eth0_works(lab):
    lab2 = lab(2, scenario="dead-nic")
    serve(lab2, "h2")
    assert "UP" in sh(lab2, "h1", "ip -br link show eth1")
    assert sh(lab2, "h1", "cat /sys/class/net/eth1/carrier").strip() == "1"
    assert f"{lab2.ip('h1', 'eth1')}/24" in sh(lab2, "h1", "ip -br addr show eth1")
    assert send(lab2, "h1", lab2.ip("h2", "eth1"), timeout=0.5)["error"] == "timeout"
    assert send(lab2, "h1", lab2.ip("h2"))["ok"]
    lab2.healthy()
    lab2.second_nic()
    assert send(lab2, "h1", lab2.ip("h2", "eth1"))["ok"], "second-nic eth1 should carry traffic"


def test_docker_decoy_same_address_running_and_isolated(lab):
    lab2 = lab(2, scenario="docker-decoy")
    for host in lab2.hosts:
        assert "172.17.0.1/16" in sh(lab2, host, "ip -br addr show docker0")
        assert sh(lab2, host, "cat /sys/class/net/docker0/operstate").strip() == "up"
        assert sh(lab2, host, "cat /sys/class/net/docker0/carrier").strip() == "1"
        assert int(lab2.exec(host, [PY, "-c", IFF_FLAGS, "docker0"], check=True).stdout) & 0x40, "not RUNNING"
    serve(lab2, "h2")
    # 172.17.0.1 on h1 is h1 itself: h2's server is never reached through docker0.
    assert send(lab2, "h1", "172.17.0.1")["error"] == "refused"
    assert not send(lab2, "h1", "172.17.0.2", timeout=0.5)["ok"]
    assert send(lab2, "h1", lab2.ip("h2"))["ok"]


def test_blocked_port_drop_times_out_reject_refuses_other_ports_work(lab):
    lab2 = lab(2, scenario=f"blocked-port h2 {PORT}")
    serve(lab2, "h2", PORT)
    serve(lab2, "h2", PORT + 1)
    assert send(lab2, "h1", lab2.ip("h2"), PORT, timeout=0.5)["error"] == "timeout"
    assert send(lab2, "h1", lab2.ip("h2"), PORT + 1)["ok"]
    lab2.block_port("h2", PORT, "reject")
    assert send(lab2, "h1", lab2.ip("h2"), PORT)["error"] == "refused"
    assert send(lab2, "h2", "127.0.0.1", PORT)["ok"], "loopback is not firewalled"
    lab2.healthy()
    assert send(lab2, "h1", lab2.ip("h2"), PORT)["ok"]


def test_dropped_link_cuts_that_pair_both_ways_and_nothing_else(lab):
    lab3 = lab(3, scenario="dropped-link h3 h2")
    for host in lab3.hosts:
        serve(lab3, host)
    assert lab3.state.scenarios.dropped_link == [["h2", "h3"]]  # one link, whichever end was named first
    for a, b in (("h2", "h3"), ("h3", "h2")):
        assert send(lab3, a, lab3.ip(b), timeout=0.5)["error"] == "timeout", (a, b)
    for a, b in (("h1", "h2"), ("h2", "h1"), ("h1", "h3"), ("h3", "h1")):
        assert send(lab3, a, lab3.ip(b))["ok"], (a, b)
    lab3.healthy()
    assert send(lab3, "h2", lab3.ip("h3"))["ok"]


def _rate(lab_: Lab, src: str, dst: str) -> float:
    got = send(lab_, src, lab_.ip(dst), nbytes=BULK, timeout=2.0)
    assert got["ok"], got
    return got["bits_per_s"]


def test_slow_link_limits_both_directions(lab):
    lab2 = lab(2)
    serve(lab2, "h1")
    serve(lab2, "h2")
    unshaped = _rate(lab2, "h1", "h2")
    lab2.slow_link("h1", "50mbit")
    out_rate, in_rate = _rate(lab2, "h1", "h2"), _rate(lab2, "h2", "h1")
    for r in (out_rate, in_rate):
        assert r < unshaped / 4
        assert 25e6 < r < 75e6, f"{r / 1e6:.1f} Mbit/s through a 50mbit link"
    lab2.slow_link("h1", "50mbit", "egress")
    assert _rate(lab2, "h2", "h1") > 200e6, "egress-only shaping limited ingress"


def test_slow_pair_limits_only_that_direction_and_destination(lab):
    lab3 = lab(3, scenario="slow-pair h1 h2 50mbit")
    for host in lab3.hosts:
        serve(lab3, host)
    limited = _rate(lab3, "h1", "h2")
    assert 25e6 < limited < 75e6, f"{limited / 1e6:.1f} Mbit/s h1->h2 through a 50mbit pair limit"
    assert _rate(lab3, "h1", "h3") > 4 * limited
    assert _rate(lab3, "h2", "h1") > 4 * limited


def test_hostnames_differ_and_resolve_to_lab_addresses(lab):
    lab3 = lab(3)
    for host in lab3.hosts:
        assert sh(lab3, host, "hostname").strip() == host
        own = sh(lab3, host, f"{PY} -c 'import socket; print(socket.gethostbyname(socket.gethostname()))'")
        assert own.strip() == lab3.ip(host)
        for other in lab3.hosts:
            assert sh(lab3, host, f"getent hosts {other}").split()[0] == lab3.ip(other)
    assert subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip() not in lab3.hosts


def test_hostname_loopback_resolves_own_name_to_127_0_1_1(lab):
    lab2 = lab(2, scenario="hostname-loopback h2")
    own = sh(lab2, "h2", f"{PY} -c 'import socket; print(socket.gethostbyname(socket.gethostname()))'")
    assert own.strip() == "127.0.1.1"
    assert sh(lab2, "h1", "getent hosts h2").split()[0] == lab2.ip("h2")


def test_mtu_and_healthy_resets_every_switch(lab):
    lab2 = lab(2, scenario=["mtu h2 9000", "docker-decoy", "dead-nic", "slow-link h1 10mbit", "blocked-port h1 22",
                            ("slow-pair", "h2", "h1", "20mbit")])
    assert sh(lab2, "h2", "cat /sys/class/net/eth0/mtu").strip() == "9000"
    assert sh(lab2, "h1", "cat /sys/class/net/eth0/mtu").strip() == "1500"
    lab2.healthy()
    for host in lab2.hosts:
        assert sh(lab2, host, "cat /sys/class/net/eth0/mtu").strip() == "1500"
        links = sh(lab2, host, "ip -br link")
        assert "docker0" not in links and "eth1" not in links
        assert "drop" not in sh(lab2, host, "nft list table inet netlab")
        assert "tbf" not in sh(lab2, host, "tc qdisc show") and "htb" not in sh(lab2, host, "tc qdisc show")


def _netlab(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([NETLAB, "--name", name, *args], capture_output=True, text=True, timeout=60)


def test_cli_down_leaves_nothing_even_with_processes_inside_and_lost_state():
    name = "c" + secrets.token_hex(3)
    try:
        up = _netlab(name, "up", "2", "--scenario", "docker-decoy", "--scenario", "dead-nic",
                     "--scenario", "slow-pair h1 h2 10mbit")
        assert up.returncode == 0, up.stderr
        assert json.loads(up.stdout)[name]["hosts"]["h2"]["eth1"].startswith("198.19.")
        assert _netlab(name, "exec", "h2", "--", "hostname").stdout.strip() == "h2"
        assert _netlab(name, "scenario", "blocked-port", "h1", "29500", "reject").returncode == 0
        assert json.loads(_netlab(name, "status").stdout)[name]["scenarios"]["blocked"][0]["port"] == 29500
        assert _netlab(name, "up", "2").returncode == 0  # idempotent: same lab, scenarios reset
        sleeper = subprocess.Popen([NETLAB, "--name", name, "exec", "h1", "--", "sleep", "600"])
        nl.state_path(name).unlink()  # as if a crash lost the state: down sweeps by prefix
        assert _netlab(name, "down").returncode == 0
        assert sleeper.wait(timeout=10) != 0
        assert nl.leftovers(name) == []
        assert _netlab(name, "down").returncode == 0
        assert _netlab(name, "exec", "h1", "--", "true").returncode == 1
    finally:
        nl.down(name)


@pytest.mark.long  # every lab test's teardown and test_cli_down_leaves_nothing... clean up in CI
def test_repeated_up_down_cycles_leave_the_machine_clean(lab):
    for _ in range(3):
        lab3 = lab(3, scenario=["docker-decoy", "dead-nic"])
        name = lab3.name
        assert nl.leftovers(name)
        lab3.down()
        lab3.down()
        assert nl.leftovers(name) == []


def test_two_labs_coexist_without_colliding(lab):
    a, b = lab(2), lab(2)
    assert a.state.slot != b.state.slot and a.ip("h1") != b.ip("h1")
    serve(a, "h2")
    serve(b, "h2")
    assert send(a, "h1", a.ip("h2"))["ok"] and send(b, "h1", b.ip("h2"))["ok"]
    assert not send(a, "h1", b.ip("h2"), timeout=0.5)["ok"], "one lab reached another"
    a.down()
    assert send(b, "h1", b.ip("h2"))["ok"], "tearing one lab down broke the other"


def test_run_all_kills_at_deadline_and_ncclcheck_parses_reports(lab, tmp_path):
    lab2 = lab(2)
    runs = lab2.run_all({"h1": ["sh", "-c", "hostname; sleep 30"], "h2": ["hostname"]}, deadline=1.0, grace=0.2)
    assert runs["h1"].timed_out and runs["h1"].rc is not None and runs["h1"].rc < 0
    assert runs["h1"].stdout.strip() == "h1" and 0.9 < runs["h1"].elapsed < 5
    assert not runs["h2"].timed_out and runs["h2"].rc == 0 and runs["h2"].stdout.strip() == "h2"
    # A stand-in ncclcheck proves the plumbing: PYTHONPATH, --json appended, one report per host, None if none.
    fake = tmp_path / "ncclcheck"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(
        "import json, socket, sys\n"
        "if 'nojson' in sys.argv: sys.exit(3)\n"
        "path = sys.argv[sys.argv.index('--json') + 1].replace('%h', socket.gethostname())\n"
        "json.dump({'schema': 'ncclcheck.report/1', 'argv': sys.argv[1:-2], 'host': socket.gethostname()},"
        " open(path, 'w'))\n")
    got = lab2.ncclcheck({"h1": ["preflight", "--nnodes", 2], "h2": ["nojson"]}, deadline=20, pythonpath=tmp_path)
    assert got["h1"].rc == 0 and got["h1"].report == {"schema": "ncclcheck.report/1",
                                                       "argv": ["preflight", "--nnodes", "2"], "host": "h1"}
    assert got["h2"].rc == 3 and got["h2"].report is None


def test_a_lab_whose_test_session_was_killed_is_reaped():
    code = ("import sys, time; from ncclcheck_lab.netlab.harness import Lab; lab = Lab(2); "
            "print(lab.name, flush=True); time.sleep(600)")
    owner = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    name = owner.stdout.readline().strip()
    try:
        assert name and nl.load_state(name).owner_pid == owner.pid
        assert name not in nl.reap_orphans(), "a live session's lab was reaped"
        owner.kill()
        owner.wait()
        assert name in nl.reap_orphans()
        assert nl.leftovers(name) == []
    finally:
        owner.kill()
        if name:
            nl.down(name)
