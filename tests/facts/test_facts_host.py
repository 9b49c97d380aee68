"""Host facts: resolution (bounded), /dev/shm, memlock, port range, memory, container hints."""

from __future__ import annotations

import resource
import socket
import threading
import time

import pytest

from ncclcheck.facts import host
from tests.fakesys import container_shm_64mib


def fake_getaddrinfo(table):
    def getaddrinfo(name, port, family=0, type=0, proto=0, flags=0):
        if name not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        fam = {True: socket.AF_INET6, False: socket.AF_INET}
        return [(fam[":" in a], socket.SOCK_STREAM, 6, "", (a, 0)) for a in table[name]]

    return getaddrinfo


@pytest.fixture
def hostname_resolves_to_loopback(monkeypatch):
    """Stock Ubuntu /etc/hosts: `127.0.1.1 h1`; Gloo then falls back to loopback and peers cannot connect."""
    monkeypatch.setattr(socket, "gethostname", lambda: "h1")
    monkeypatch.setattr(socket, "getfqdn", lambda name="": "h1.cluster")
    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo({"h1": ["127.0.1.1"], "h1.cluster": ["127.0.1.1"]}))


def test_hostname_resolving_to_127_0_1_1_is_loopback(hostname_resolves_to_loopback, fs):
    h = host.collect()
    assert (h["hostname"], h["fqdn"], h["resolves_to"], h["loopback"], h["fqdn_loopback"]) == (
        "h1", "h1.cluster", ["127.0.1.1"], True, True)
    assert h["resolve_error"] is None


def test_routable_hostname_is_not_loopback():
    r = host.resolve("h1", getfqdn=lambda: "h1.cluster",
                     getaddrinfo=fake_getaddrinfo({"h1": ["198.18.0.1"], "h1.cluster": ["198.18.0.1", "::1"]}))
    assert (r["resolves_to"], r["loopback"], r["fqdn_resolves_to"], r["fqdn_loopback"]) == (
        ["198.18.0.1"], False, ["198.18.0.1", "::1"], False)


def test_unresolvable_hostname_is_an_error_not_loopback():
    r = host.resolve("h1", getfqdn=lambda: "h1", getaddrinfo=fake_getaddrinfo({}))
    assert (r["resolves_to"], r["loopback"]) == ([], False)
    assert "h1: [Errno -2] Name or service not known" in r["resolve_error"]


def test_hanging_dns_is_bounded():
    release = threading.Event()

    def hang(*a, **k):
        release.wait(10)
        raise socket.gaierror("late")

    t0 = time.monotonic()
    r = host.resolve("h1", getfqdn=hang, getaddrinfo=hang, timeout_s=0.2)
    elapsed = time.monotonic() - t0
    release.set()
    assert elapsed < 1.0
    assert r["fqdn"] is None and r["resolves_to"] == []
    assert "h1: timed out after 0.2s" in r["resolve_error"]
    assert "getfqdn: timed out after 0.2s" in r["resolve_error"]


def test_container_shm_64mib_from_procfs_mounts(fs):
    container_shm_64mib(fs)
    s = host.shm()
    assert (s["path"], s["total_bytes"]) == ("/dev/shm", 67108864)


def test_last_dev_shm_mount_wins(fs):
    fs.mounts(["tmpfs /dev/shm tmpfs rw,size=65536k 0 0", "shm /dev/shm tmpfs rw,size=1g 0 0"])
    assert host.shm()["total_bytes"] == 1 << 30


def test_shm_without_mounts_line_falls_back_to_statvfs(fs, monkeypatch):
    fs.mounts(["proc /proc proc rw 0 0"])

    class St:
        f_blocks, f_frsize, f_bavail = 1000, 4096, 250

    monkeypatch.setattr(host.os, "statvfs", lambda p: St)
    assert host.shm() == {"path": "/dev/shm", "total_bytes": 4096000, "free_bytes": 1024000}


def test_shm_nowhere_is_unavailable(fs, monkeypatch):
    def fail(p):
        raise FileNotFoundError(p)

    monkeypatch.setattr(host.os, "statvfs", fail)
    assert "unavailable" in host.shm()


def test_memlock_unlimited_is_null_and_limits_are_bytes():
    inf = resource.RLIM_INFINITY
    assert host.memlock(lambda r: (inf, inf)) == {"soft": None, "hard": None}
    assert host.memlock(lambda r: (65536, inf)) == {"soft": 65536, "hard": None}


def test_port_range_and_meminfo_from_procfs(fs):
    fs.port_range(40000, 50000)
    fs.meminfo(16 << 30)
    assert host.port_range() == [40000, 50000]
    assert host.mem_total_bytes() == 16 << 30


def test_missing_procfs_files_degrade_to_none(fs):
    assert host.port_range() is None
    assert host.mem_total_bytes() is None  # a fake procfs never mixes in this machine's memory


def test_container_hint_from_cgroup(fs, monkeypatch, tmp_path):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    fs.write("proc/1/cgroup", "0::/kubepods/burstable/pod123/abc\n")
    assert host.container_hint(root=str(tmp_path / "noroot")) == f"{fs.procfs}/1/cgroup mentions kubepods"
    fs.write("proc/1/cgroup", "0::/\n")
    assert host.container_hint(root=str(tmp_path / "noroot")) is None
    fs.write("rootfs/.dockerenv", "")
    assert host.container_hint(root=str(tmp_path / "rootfs")) == "/.dockerenv"


def test_os_pretty_name(tmp_path):
    p = tmp_path / "os-release"
    p.write_text('NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    assert host.os_pretty_name(str(p)) == "Ubuntu 22.04.4 LTS"
    assert host.os_pretty_name(str(tmp_path / "none")) is None
