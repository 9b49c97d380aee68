"""Master probe and full-mesh probe over loopback (127.0.0.0/8: 127.0.0.2, .3 stand in for other hosts)."""

from __future__ import annotations

import contextlib
import copy
import socket
import time

import pytest

from ncclcheck.nccl.reachability import build_matrix, candidate_addresses, usable_everywhere
from ncclcheck.preflight.probe import MeshListener, bind_test, check_bind, probe_master, probe_peers
from tests.conftest import free_port


@contextlib.contextmanager
def dropping_port():
    """A loopback port whose listener's accept queue is full: the kernel drops new SYNs, so connects time out,
    like a firewall that drops. Yields the port."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(0)
        port = srv.getsockname()[1]
        fillers = []
        try:
            for _ in range(3):
                c = socket.socket()
                c.settimeout(0.3)
                try:
                    c.connect(("127.0.0.1", port))
                except OSError:
                    pass
                fillers.append(c)
            yield port
        finally:
            for c in fillers:
                c.close()


def test_master_ok_when_listening():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        r = probe_master("127.0.0.1", srv.getsockname()[1], time.monotonic() + 2)
    assert r.ok and r.attempts == 1 and r.connected_to == "127.0.0.1"


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_master_refused_is_retried_until_the_deadline():
    t = time.monotonic()
    r = probe_master("127.0.0.1", free_port(), time.monotonic() + 1.0, interval_s=0.2)
    assert r.status == "refused" and r.attempts >= 3
    assert 0.9 < time.monotonic() - t < 3
    assert "refused" in r.last_error.lower()


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_master_that_starts_late_is_found():
    port = free_port()
    import threading

    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def late():
        time.sleep(0.6)
        srv.bind(("127.0.0.1", port))
        srv.listen(8)

    th = threading.Thread(target=late)
    th.start()
    try:
        r = probe_master("127.0.0.1", port, time.monotonic() + 5, interval_s=0.1)
    finally:
        th.join()
        srv.close()
    assert r.ok and r.attempts > 1


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_master_timeout_when_nothing_accepts():
    with dropping_port() as port:
        t = time.monotonic()
        r = probe_master("127.0.0.1", port, time.monotonic() + 1.0, connect_timeout_s=0.4)
    assert r.status == "timeout"
    assert time.monotonic() - t < 3


def _no_such_name(name: str) -> list:
    """An injected resolver: the name does not exist, and no query leaves the machine (issue 13)."""
    raise socket.gaierror(socket.EAI_NONAME, f"Name or service not known: {name}")


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_master_unresolvable_gives_up_after_grace():
    t = time.monotonic()
    r = probe_master("no-such-host.invalid", 29500, time.monotonic() + 30, resolve_grace_s=0.5, interval_s=0.1,
                     resolve=_no_such_name)
    assert r.status == "unresolvable" and time.monotonic() - t < 5
    assert r.attempts >= 2  # retried within the grace: a name may start resolving once DNS catches up


def test_check_bind_names_a_port_in_use():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))  # loopback only: a listener on every address is not needed to hold the port
        srv.listen(1)
        port = srv.getsockname()[1]
        b = check_bind(port)
    assert not b.bindable and b.in_use
    assert check_bind(free_port()).bindable


def test_bind_test_feeds_the_master_check():
    from ncclcheck.checks.local import LocalInput, check_master_reachable
    from tests.fakefacts import facts

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        d = bind_test("127.0.0.1", port)
        res = check_master_reachable(LocalInput.of(facts(), node_rank=0, multi_node=True, master=d))
    assert res.status.value == "fail" and "already in use" in res.summary
    ok = bind_test("127.0.0.1", free_port())
    assert ok["ok"] and ok["local"] is True
    refused = probe_master("127.0.0.1", free_port(), time.monotonic() + 0.3).to_json()
    res = check_master_reachable(LocalInput.of(facts(), node_rank=1, multi_node=True, master=refused))
    assert res.status.value == "fail" and "start node 0 first" in res.fix


def test_candidate_addresses_from_facts():
    ifaces = [
        {"name": "lo", "kind": "loopback", "up": True, "ipv4": [{"address": "127.0.0.1"}]},
        {"name": "eth0", "kind": "physical", "up": True, "ipv4": [{"address": "198.18.0.1"}]},
        {"name": "eth1", "kind": "physical", "up": False, "ipv4": [{"address": "198.18.100.1"}]},
        {"name": "docker0", "kind": "docker", "up": True, "ipv4": [{"address": "198.19.17.1"}]},
        {"name": "ib0", "kind": "ipoib", "up": True, "ipv4": []},
    ]
    assert candidate_addresses(ifaces) == {"eth0": ["198.18.0.1"], "docker0": ["198.19.17.1"]}
    assert candidate_addresses({"unavailable": "x"}) == {}


def _mesh(addresses_by_rank, deadline=5.0, tamper=None):
    listeners = {r: MeshListener(r, f"id{r}", a) for r, a in addresses_by_rank.items()}
    for li in listeners.values():
        li.start()
    try:
        eps = {r: li.endpoints for r, li in listeners.items()}
        published = {r: {"id": f"id{r}", "endpoints": copy.deepcopy(e)} for r, e in eps.items()}
        if tamper:
            tamper(published)
        attempts = {r: probe_peers(r, published, timeout_s=1.0, deadline_s=deadline) for r in listeners}
    finally:
        for li in listeners.values():
            li.close()
    return build_matrix(sorted(listeners), eps, attempts), attempts


def test_mesh_all_reachable():
    m, attempts = _mesh({0: {"eth0": ["127.0.0.1"]}, 1: {"eth0": ["127.0.0.2"]}, 2: {"eth0": ["127.0.0.3"]}})
    assert m["eth0"]["matrix"] == [[None, True, True], [True, None, True], [True, True, None]]
    assert usable_everywhere(m["eth0"], [0, 1, 2])
    assert all(a["offset_s"] is not None and abs(a["offset_s"]) < 0.5 for rows in attempts.values() for a in rows)


def test_mesh_one_address_unreachable():
    def close_node2_eth1(published):
        # node 2's eth1 endpoint points at a port nobody listens on (a firewalled NIC answers nothing)
        published[2]["endpoints"]["eth1"] = [["127.0.0.3", free_port("127.0.0.3")]]

    m, _ = _mesh(
        {0: {"eth0": ["127.0.0.1"], "eth1": ["127.0.1.1"]}, 1: {"eth0": ["127.0.0.2"], "eth1": ["127.0.1.2"]},
         2: {"eth0": ["127.0.0.3"], "eth1": ["127.0.1.3"]}},
        tamper=close_node2_eth1,
    )
    assert usable_everywhere(m["eth0"], [0, 1, 2])
    eth1 = m["eth1"]["matrix"]
    assert eth1[0][2] is False and eth1[1][2] is False and eth1[0][1] is True
    assert "refused" in m["eth1"]["errors"]["0->2"]
    assert not usable_everywhere(m["eth1"], [0, 1, 2])


def test_mesh_same_address_on_every_node_is_unusable():
    m, _ = _mesh({r: {"eth0": [f"127.0.0.{r + 1}"], "docker0": ["127.0.0.9"]} for r in range(3)})
    d = m["docker0"]
    assert d["duplicates"] == {"127.0.0.9": [0, 1, 2]}
    assert all(d["matrix"][i][j] is False for i in range(3) for j in range(3) if i != j)
    assert "same address on nodes 0,1,2" in d["errors"]["0->1"]
    assert usable_everywhere(m["eth0"], [0, 1, 2])


def test_mesh_answer_from_the_wrong_node_is_detected():
    def swap(published):
        # node 1 advertises node 2's listener: reaching it proves nothing about node 1
        published[1]["endpoints"]["eth0"] = published[2]["endpoints"]["eth0"]

    m, _ = _mesh({0: {"eth0": ["127.0.0.1"]}, 1: {"eth0": ["127.0.0.2"]}, 2: {"eth0": ["127.0.0.3"]}}, tamper=swap)
    assert m["eth0"]["matrix"][0][1] is False
    assert "answered by node 2, not node 1" in m["eth0"]["errors"]["0->1"]


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_mesh_is_bounded_by_its_deadline():
    with dropping_port() as port:  # every connect hangs until its own timeout
        peers = {1: {"id": "x", "endpoints": {"eth0": [["127.0.0.1", port]] * 20}}}
        t = time.monotonic()
        rows = probe_peers(0, peers, timeout_s=5.0, deadline_s=0.5, max_workers=4)
    assert time.monotonic() - t < 2.0
    assert len(rows) == 20 and not any(r["ok"] for r in rows)


def test_the_traffic_rule_guard_refuses_a_lookup_through_the_machines_resolver(monkeypatch):
    from tests import conftest

    asked = []  # stands in for the resolver: even a broken guard sends no query from this test
    monkeypatch.setitem(conftest.REAL_RESOLVE, "getaddrinfo", lambda host, *a, **kw: asked.append(host) or [])
    with pytest.raises(AssertionError, match="traffic rule"):
        socket.getaddrinfo("no-such-host.invalid", 29500)
    socket.getaddrinfo("127.0.0.1", 29500)  # a literal address: handed on (here to the recorder)
    assert asked == ["127.0.0.1"]


def test_the_traffic_rule_guard_refuses_an_outside_address(monkeypatch):
    from tests import conftest

    reached = []  # stands in for the kernel's connect: even a broken guard sends nothing from this test
    monkeypatch.setitem(conftest.REAL_CONNECT, "connect", lambda sock, address: reached.append(address))
    with socket.socket() as s, pytest.raises(AssertionError, match="traffic rule"):
        s.connect(("192.0.2.1", 9))  # TEST-NET-1
    assert reached == []
    with socket.socket() as s:
        s.connect(("127.0.0.1", 9))  # allowed: handed on (here to the recorder)
    assert reached == [("127.0.0.1", 9)]
