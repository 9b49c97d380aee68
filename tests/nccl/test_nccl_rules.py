"""NCCL's variable syntax and default interface order, as NCCL-FACTS.md states them."""

from ncclcheck.nccl import rules as ncclenv
from tests.fakefacts import iface


def test_spec_forms():
    assert ncclenv.parse_spec("eth").matches("eth0")
    assert ncclenv.parse_spec("eth1").matches("eth10")  # a prefix: the trap the '=' form avoids
    assert not ncclenv.parse_spec("=eth1").matches("eth10")
    assert ncclenv.parse_spec("bond0").matches("bond0.2093")
    assert not ncclenv.parse_spec("^docker").matches("docker0")
    assert ncclenv.parse_spec("^docker").matches("eth0")
    assert not ncclenv.parse_spec("^=docker0").matches("docker0")
    assert ncclenv.parse_spec("^=docker0").matches("docker01")
    assert ncclenv.parse_spec("") is None and ncclenv.parse_spec(None) is None


def test_hca_ports():
    spec = ncclenv.parse_spec("=mlx5_0:1,mlx5_1:1")
    assert spec.matches("mlx5_0", 1) and not spec.matches("mlx5_0", 2) and not spec.matches("mlx5_10", 1)
    assert ncclenv.parse_spec("mlx5_1").matches("mlx5_10", 1)


def test_default_order_prefers_ib_then_not_docker_lo_virbr():
    ifs = [iface("lo", "loopback", "127.0.0.1"), iface("docker0", "docker", "172.17.0.1"),
           iface("eth0", ipv4="10.0.0.1"), iface("ib0", "ipoib", "192.168.0.1"), iface("virbr0", "bridge", "1.1.1.1")]
    assert ncclenv.nccl_default_order(ifs, "2.28.3") == ["ib0", "eth0", "docker0", "lo", "virbr0"]


def test_default_order_running_only_since_2_28_3():
    ifs = [iface("eth9", ipv4="10.9.0.1", running=False), iface("eth0", ipv4="10.0.0.1")]
    assert ncclenv.nccl_default_order(ifs, "2.28.3") == ["eth0"]
    assert ncclenv.nccl_default_order(ifs, "2.21.5") == ["eth9", "eth0"]


def test_old_nccl_does_not_demote_virbr():
    ifs = [iface("virbr0", "bridge", "192.168.122.1"), iface("eth0", ipv4="10.0.0.1")]
    assert ncclenv.nccl_default_order(ifs, "2.18.1")[0] == "virbr0"
    assert ncclenv.nccl_default_order(ifs, "2.28.3")[0] == "eth0"


def test_an_exact_form_value_is_rendered_once_and_sources_to_itself(tmp_path):
    """`NCCL_SOCKET_IFNAME==lo` read as a typo and was 'fixed' by hand: the exact form is quoted, once, everywhere."""
    import subprocess

    from ncclcheck.nccl.rules import assignment, exports

    assert assignment("NCCL_SOCKET_IFNAME", "=lo") == "NCCL_SOCKET_IFNAME='=lo'"
    assert assignment("NCCL_IB_HCA", "^=mlx5_1") == "NCCL_IB_HCA='^=mlx5_1'"
    assert assignment("GLOO_SOCKET_IFNAME", "eth0") == "GLOO_SOCKET_IFNAME=eth0"
    line = exports([("NCCL_SOCKET_IFNAME", "=lo"), ("NCCL_IB_HCA", "^=mlx5_1"), ("X_Y", "a b;c")])
    assert "==" not in line
    out = subprocess.run(["sh", "-c", f'{line}; printf "%s|%s|%s" "$NCCL_SOCKET_IFNAME" "$NCCL_IB_HCA" "$X_Y"'],
                         capture_output=True, text=True, check=True).stdout
    assert out == "=lo|^=mlx5_1|a b;c"


def test_no_check_fix_writes_a_doubled_equals_sign():
    """The bug class: a fix text built by hand as NAME={value} with an exact-form value (checks/local.py wrote
    `export NCCL_SOCKET_IFNAME==lo`). Every check's fix goes through nccl.rules.assignment."""
    from ncclcheck.checks.local import LocalInput, check_interfaces
    from tests.fakefacts import facts, iface

    f = facts()
    f["interfaces"] = [iface("lo", "loopback", "127.0.0.1"), iface("eth0", ipv4="10.0.0.1", speed=100000)]
    f["interfaces"].append(iface("eth1", ipv4="10.1.0.1", speed=10000))
    f["route"] = {"target": "10.1.0.9", "interface": "eth1", "source": "10.1.0.1"}
    r = check_interfaces(LocalInput.of(f, node_rank=1, multi_node=True))
    assert r.status.value == "warn" and "==" not in r.fix and "NCCL_SOCKET_IFNAME='=eth1'" in r.fix, r


def test_a_loopback_master_is_never_answered_with_loopback_advice():
    """Issue 32: `export NCCL_SOCKET_IFNAME==lo` was the fix, and following it failed net.socket_ifname."""
    from ncclcheck.checks.local import LocalInput, check_interfaces, check_socket_ifname
    from tests.fakefacts import facts, iface

    f = facts()
    f["interfaces"] = [iface("lo", "loopback", "127.0.0.1"), iface("eth0", ipv4="10.0.0.1", speed=100000)]
    f["route"] = {"target": "127.0.0.1", "interface": "lo", "source": "127.0.0.1"}
    r = check_interfaces(LocalInput.of(f, node_rank=1, multi_node=True))
    assert r.status.value == "warn" and "lo" not in r.fix.split() and "MASTER_ADDR" in r.fix, r
    f["env"] = {"vars": {"NCCL_SOCKET_IFNAME": "=lo", "GLOO_SOCKET_IFNAME": "lo"}, "redacted": []}
    assert {c.status.value for c in check_socket_ifname(LocalInput.of(f, node_rank=1, multi_node=True))} == {"fail"}
    one = LocalInput.of(f, node_rank=1, multi_node=True, one_host=True)
    assert check_interfaces(one).status.value == "pass"
    assert {c.status.value for c in check_socket_ifname(one)} == {"pass"}
