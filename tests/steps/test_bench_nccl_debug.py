# ruff: noqa: E501  (log samples stay one line each, as NCCL writes them)
"""parse_nccl_debug on NCCL INFO lines as real clusters print them (shapes taken from public NVIDIA/nccl issue
threads; host names and addresses changed), and the nccl.transport verdicts built on it."""

from __future__ import annotations

from ncclcheck.model import Recommendation, Status
from ncclcheck.nccl.debuglog import parse_nccl_debug
from ncclcheck.steps.nccl_debug import compare_with_recommendation, ifname_matches, nccl_debug_env

IB_MULTINODE = """\
node-a:511:511 [0] NCCL INFO cudaDriverVersion 12040
node-a:511:511 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0
node-a:511:511 [0] NCCL INFO Bootstrap : Using eth0:10.10.6.118<0>
node-a:511:511 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
node-a:511:511 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB eth0:10.10.6.118<0>
node-a:511:511 [0] NCCL INFO Using network IB
NCCL version 2.21.5+cuda12.4
node-a:511:540 [0] NCCL INFO comm 0x55d0c5c0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
node-a:511:540 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
node-a:511:540 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC/read
node-a:515:545 [3] NCCL INFO Channel 00/0 : 3[3] -> 10[2] [send] via NET/IB/0/GDRDMA
node-a:515:545 [3] NCCL INFO Channel 01/0 : 3[3] -> 10[2] [send] via NET/IB/0/GDRDMA
node-a:511:540 [0] NCCL INFO Connected all rings
node-a:511:540 [0] NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer
node-a:511:540 [0] NCCL INFO comm 0x55d0c5c0 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0x5b1f - Init COMPLETE
"""

SOCKET_FALLBACK = """\
node-b:924:924 [5] NCCL INFO Bootstrap : Using ibp12s0:10.149.0.32<0>
node-b:924:1152 [5] NCCL INFO NET/IB : No device found.
node-b:924:1152 [5] NCCL INFO NET/Socket : Using [0]ibp12s0:10.149.0.32<0> [1]enp75s0f1:10.120.0.32<0>
node-b:924:1152 [5] NCCL INFO Using network Socket
node-b:924:1152 [5] NCCL INFO NCCL version 2.18.3+cuda12.1
node-b:926:1151 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3
node-b:926:1151 [7] NCCL INFO Channel 07/0 : 15[7] -> 6[6] [send] via NET/Socket/3
node-b:921:1146 [2] NCCL INFO Channel 00/0 : 10[2] -> 9[1] via P2P/IPC/read

node-b:921:1146 [2] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.120.0.31<45321> failed : No route to host
"""

DOCKER_SINGLE_NODE = """\
678c7278cb2d:26023:26023 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>
678c7278cb2d:26023:26023 [0] NCCL INFO NET/Plugin: Using internal network plugin.
NCCL version 2.21.5+cuda12.4
678c7278cb2d:26023:26070 [0] NCCL INFO NET/IB : No device found.
678c7278cb2d:26023:26070 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0> [1]eth0:172.17.2.7<0>
678c7278cb2d:26023:26070 [0] NCCL INFO Using network Socket
678c7278cb2d:26023:26070 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
678c7278cb2d:26023:26070 [0] NCCL INFO Channel 01 : 0[0] -> 1[1] via SHM/direct/direct
"""

ROCE_IPV6_BOOT = """\
gh1:180172:180172 [0] NCCL INFO Bootstrap : Using ib0:fe80::a288:c203:d2:aaf2%ib0<0>
dgx-4:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB enp220s0np0:11.1.128.136<0>
"""


def test_parse_ib_multinode():
    p = parse_nccl_debug(IB_MULTINODE)
    assert p["version"] == "2.21.5" and p["cuda"] == "cuda12.4"
    assert p["bootstrap"] == [{"ifname": "eth0", "addr": "10.10.6.118"}]
    assert [d["device"] for d in p["ib_devices"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert p["ib_devices"][0] == {"device": "mlx5_0", "port": 1, "link_layer": "IB"}
    assert p["ib_oob"] == {"ifname": "eth0", "addr": "10.10.6.118"}
    assert p["network"] == "IB" and p["net_transport"] == "IB" and p["gdrdma"]
    assert p["transports"] == {"P2P": 2, "NET/IB": 2}
    assert p["via"]["NET/IB/0/GDRDMA"] == 2
    assert p["channels"] == 2 and p["coll_channels"] == 24
    assert p["env"] == {"NCCL_SOCKET_IFNAME": "eth0"}
    assert p["nranks"] == 16
    assert not p["ib_no_device"]


def test_parse_socket_fallback():
    p = parse_nccl_debug(SOCKET_FALLBACK)
    assert p["ib_no_device"] and p["ib_devices"] == []
    assert p["version"] == "2.18.3"
    assert [i["ifname"] for i in p["socket_interfaces"]] == ["ibp12s0", "enp75s0f1"]
    assert p["net_transport"] == "Socket" and p["network"] == "Socket"
    assert p["warnings"] and "No route to host" in p["warnings"][0]


def test_parse_single_node_shm_and_ipv6_roce():
    p = parse_nccl_debug(DOCKER_SINGLE_NODE)
    assert p["transports"] == {"SHM": 2} and p["net_transport"] is None and p["channels"] == 2
    q = parse_nccl_debug(ROCE_IPV6_BOOT)
    assert q["bootstrap"] == [{"ifname": "ib0", "addr": "fe80::a288:c203:d2:aaf2%ib0"}]
    assert q["ib_devices"][1] == {"device": "mlx5_11", "port": 1, "link_layer": "RoCE"}
    assert q["ib_oob"]["ifname"] == "enp220s0np0"


def test_parse_nothing():
    p = parse_nccl_debug("")
    assert p["version"] is None and p["transports"] == {}


def test_ifname_matching_follows_nccl_syntax():
    assert ifname_matches("eth", "eth10")
    assert not ifname_matches("=eth1", "eth10")
    assert ifname_matches("=eth1,eth2", "eth1")
    assert not ifname_matches("^docker,lo", "docker0")
    assert ifname_matches("^docker,lo", "eth0")
    assert not ifname_matches("^=docker0", "docker0") and ifname_matches("^=docker0", "docker01")


def test_transport_pass_when_nccl_took_the_recommended_path():
    recs = [Recommendation("NCCL_SOCKET_IFNAME", "=eth0", "fastest reachable"),
            Recommendation("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1", "active ports")]
    r = compare_with_recommendation(parse_nccl_debug(IB_MULTINODE), recs)
    assert r.id == "nccl.transport" and r.status is Status.PASS
    assert "NET/IB with GPUDirect RDMA" in r.summary


def test_transport_warns_on_wrong_interface():
    recs = [{"name": "NCCL_SOCKET_IFNAME", "value": "=eth0", "node": None, "reason": "x"}]
    r = compare_with_recommendation(parse_nccl_debug(DOCKER_SINGLE_NODE), recs)
    assert r.status is Status.WARN
    assert "docker0" in r.summary and "=eth0" in r.summary
    assert r.fix.startswith("export NCCL_SOCKET_IFNAME='=eth0'")


def test_transport_warns_on_sockets_while_ib_is_active():
    recs = [Recommendation("NCCL_SOCKET_IFNAME", "=ibp12s0,enp75s0f1", "x")]
    r = compare_with_recommendation(parse_nccl_debug(SOCKET_FALLBACK), recs, ib_active=True)
    assert r.status is Status.WARN and "sockets although an RDMA port is active" in r.summary
    # with no active RDMA port, sockets are simply the transport; NCCL's own WARN is still a finding
    quiet = SOCKET_FALLBACK.split("\n\n")[0] + "\n"
    assert compare_with_recommendation(parse_nccl_debug(quiet), recs, ib_active=False).status is Status.PASS
    r = compare_with_recommendation(parse_nccl_debug(SOCKET_FALLBACK), recs, ib_active=False)
    assert r.status is Status.WARN and "RDMA" not in r.summary and "No route to host" in r.summary


def test_transport_warns_on_hca_outside_recommendation():
    recs = [Recommendation("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1", "x")]
    r = compare_with_recommendation(parse_nccl_debug(IB_MULTINODE), recs)
    assert r.status is Status.WARN and "mlx5_2:1" in r.summary


def test_transport_skip_without_output():
    assert compare_with_recommendation(parse_nccl_debug(""), []).status is Status.SKIP


def test_debug_env_names_the_file_pattern(tmp_path):
    env = nccl_debug_env(str(tmp_path))
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,BOOTSTRAP,NET,ENV"
    assert env["NCCL_DEBUG_FILE"].endswith("nccl.%h.%p")
