"""facts/links.py on fake sysfs trees, captured `tc -j` output and a fake NVML: every way a link's rate is read."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from ncclcheck.facts import links
from tests.fakesys import FakeSys, bond, gpu_pci, vlan

TC = Path(__file__).resolve().parents[1] / "data" / "tc"  # made by tests/data/tc/capture.sh in a netlab lab


def tc_runner(qdisc: str, cls: str = ""):
    """A `tc` that answers with captured output (file names under tests/data/tc)."""
    def run(argv, timeout_s):
        assert argv[:2] == ["tc", "-j"] and timeout_s <= links.TC_TIMEOUT_S
        return (TC / (qdisc if argv[2] == "qdisc" else cls)).read_text()
    return run


@pytest.mark.parametrize("text", ["-1", "0", "65535", "4294967295"])
def test_every_unknown_speed_encoding_is_unknown(tmp_path, monkeypatch, text):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.net("eth0", speed=100000)
    fs.write("sys/class/net/eth0/speed", text + "\n")
    got = links.read_speed("eth0")
    assert got["speed_mbps"] is None and text in got["speed_unknown"]


@pytest.mark.parametrize("code,word", [(errno.EINVAL, "link down"), (errno.EOPNOTSUPP, "EOPNOTSUPP")])
def test_a_speed_read_that_fails_says_why(tmp_path, monkeypatch, code, word):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.net("eth0", speed=25000)

    def fail(path):  # what the kernel does: the read() itself fails with this errno
        raise OSError(code, "x")
    monkeypatch.setattr(links, "_read_attr", fail)
    got = links.read_speed("eth0")
    assert got["speed_mbps"] is None and word in got["speed_unknown"]


def test_physical_nic_speed_is_its_line_rate_and_not_virtual(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.net("ens1f0", speed=25000)
    d = links.read_netdev("ens1f0", run=tc_runner("unshaped_veth.qdisc.json"))
    assert (d["speed_mbps"], d["virtual"], d["driver"]) == (25000, None, "ice")


def test_veth_and_tun_say_10000_and_are_flagged_virtual(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.net("eth0", "veth", speed=10000)
    fs.net("tun0", "vpn", speed=10000)
    v, t = links.read_netdev("eth0", shaper=False), links.read_netdev("tun0", shaper=False)
    assert v["speed_mbps"] == t["speed_mbps"] == 10000
    assert v["virtual"].startswith("veth") and t["virtual"].startswith("tun/tap")


def test_bond_reports_its_slaves_and_their_sum(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    bond(fs, "bond0", {"ens1": 25000, "ens2": 25000})
    d = links.read_netdev("bond0", shaper=False)
    assert d["speed_mbps"] == 50000 and d["virtual"] is None
    assert d["bond"]["mode"] == "802.3ad"
    assert [(s["name"], s["speed_mbps"]) for s in d["bond"]["slaves"]] == [("ens1", 25000), ("ens2", 25000)]


def test_vlan_is_not_virtual_and_names_its_lower_device(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.net("ens1", speed=100000)
    vlan(fs, "ens1.100", "ens1", 100000)
    d = links.read_netdev("ens1.100", shaper=False)
    assert (d["virtual"], d["lower"], d["speed_mbps"]) == (None, "ens1", 100000)


def test_tbf_rate_from_captured_tc_json_is_bytes_per_second():
    s = links.read_shaper("eth0", run=tc_runner("tbf_100mbit.qdisc.json"))
    [q] = s["qdiscs"]
    assert (q["kind"], q["rate_bytes_per_s"]) == ("tbf", 100e6 / 8)


def test_htb_default_class_and_class_rates_from_captured_tc():
    s = links.read_shaper("eth0", run=tc_runner("htb_link_and_pair.qdisc.json", "htb_link_and_pair.class.json"))
    assert s["qdiscs"][0]["default_class"] == "1:10"  # tc prints the default as hex "0x10"
    rates = {c["classid"]: (c["parent"], c["ceil_bytes_per_s"]) for c in s["classes"]}
    assert rates == {"1:1": (None, 125e6), "1:10": ("1:1", 125e6), "1:20": ("1:1", 25e6)}


def test_htb_default_0_has_no_default_class():
    s = links.read_shaper("eth0", run=tc_runner("htb_pair_default0.qdisc.json", "htb_pair_default0.class.json"))
    assert s["qdiscs"][0]["default_class"] is None and s["classes"][0]["ceil_bytes_per_s"] == 50e6 / 8


def test_tc_missing_or_failing_is_unavailable_not_an_error():
    def boom(argv, timeout_s):
        raise RuntimeError("tc: No such file or directory")
    assert "tc qdisc" in links.read_shaper("eth0", run=boom)["unavailable"]
    assert "unavailable" in links.read_shaper("eth0", run=lambda a, t: "{not json")


@pytest.mark.parametrize("text,gbit", [("400 Gb/sec (4X NDR)", 400.0), ("200 Gb/sec (4X HDR)", 200.0),
                                       ("100 Gb/sec (4X EDR)", 100.0), ("25 Gb/sec (1X EDR)", 25.0)])
def test_ib_port_rate_state_and_link_layer(tmp_path, monkeypatch, text, gbit):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.ib_device("mlx5_0", netdevs=["ib0"])
    fs.ib_port("mlx5_0", rate=text)
    [p] = links.read_ib_ports()
    assert (p["rate_gbps"], p["state"], p["phys_state"], p["link_layer"], p["netdevs"]) == \
        (gbit, "ACTIVE", "LinkUp", "InfiniBand", ["ib0"])


def test_roce_port_names_its_ethernet_netdev(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.ib_device("mlx5_0")
    fs.ib_port("mlx5_0", rate="100 Gb/sec (4X EDR)", link_layer="Ethernet",
               gids={0: ("fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1", "ens1f0"),
                     1: ("fe80:0000:0000:0000:0000:0000:0000:0001", "RoCE v2", "ens1f0")})
    [p] = links.read_ib_ports()
    assert (p["link_layer"], p["netdevs"]) == ("Ethernet", ["ens1f0"])


def test_down_ib_port(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.ib_device("mlx5_1")
    fs.ib_port("mlx5_1", state="1: DOWN", phys_state="3: Disabled", rate="10 Gb/sec (4X SDR)")
    [p] = links.read_ib_ports()
    assert (p["state"], p["phys_state"]) == ("DOWN", "Disabled")


@pytest.mark.parametrize("text,gts", [("16.0 GT/s PCIe", 16.0), ("16 GT/s", 16.0), ("8.0 GT/s PCIe", 8.0),
                                      ("2.5 GT/s", 2.5), ("32.0 GT/s PCIe", 32.0), ("Unknown", None)])
def test_pcie_link_speed_in_both_kernel_formats(text, gts):
    assert links.parse_link_speed(text) == gts


def test_pcie_gpus_are_nvidia_display_devices_only(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    gpu_pci(fs, "0000:19:00.0", "16 GT/s", 16)
    gpu_pci(fs, "0000:3b:00.0", "8.0 GT/s PCIe", 8, max_speed="16.0 GT/s PCIe", max_width=16)
    gpu_pci(fs, "0000:19:00.1", cls="0x040300")  # the GPU's audio function: not a GPU
    fs.write("sys/bus/pci/devices/0000:5e:00.0/vendor", "0x15b3\n")  # a NIC
    got = {g["bus_id"]: (g["gts"], g["width"], g["max_gts"], g["max_width"]) for g in links.read_pcie_gpus()}
    assert got == {"0000:19:00.0": (16.0, 16, 16.0, 16), "0000:3b:00.0": (8.0, 8, 16.0, 16)}


class FakeNvml:
    """pynvml's surface that read_nvlink uses, for a GPU with `speeds` (MB/s per link; None = link down)."""

    NVML_FI_DEV_NVLINK_LINK_COUNT = 91
    NVML_FI_DEV_NVLINK_GET_SPEED = 164
    NVML_FEATURE_ENABLED = 1
    NVML_SUCCESS = 0
    NVML_NVLINK_MAX_LINKS = 36

    def __init__(self, gpus):
        self.gpus = gpus
        self.asked_links: list = []

    class _V:
        def __init__(self, ret, val):
            self.nvmlReturn = ret
            self.value = type("U", (), {"uiVal": val})()

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetPciInfo(self, h):
        return type("P", (), {"busId": f"00000000:{0x19 + h:02x}:00.0".encode()})()

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        raise AssertionError("the NvLink version enum is not a generation and must not be read")

    def nvmlDeviceGetNvLinkState(self, h, link):
        self.asked_links.append(link)
        assert link < len(self.gpus[h]), "asked past the link count"
        return int(self.gpus[h][link] is not None)

    def nvmlDeviceGetFieldValues(self, h, fields):
        [f] = fields
        if f == self.NVML_FI_DEV_NVLINK_LINK_COUNT:
            return [self._V(0, len(self.gpus[h]))]
        fid, link = f
        assert fid == self.NVML_FI_DEV_NVLINK_GET_SPEED
        return [self._V(0, self.gpus[h][link])]


def test_nvlink_counts_links_from_the_field_and_never_loops_to_the_maximum():
    h100 = [26562] * 18  # what an H100 reports per link (raw MB/s)
    nv = FakeNvml([h100, h100[:17] + [None]])
    got = links.read_nvlink(nv)
    g0, g1 = got["gpus"]
    assert (g0["link_count"], sum(x["speed_mbytes_per_s"] for x in g0["links"])) == (18, 18 * 26562)
    assert (g0["name"], g0["bus_id"]) == ("NVIDIA H100 80GB HBM3", "00000000:19:00.0")
    assert [x["up"] for x in g1["links"]].count(False) == 1
    assert max(nv.asked_links) == 17 < nv.NVML_NVLINK_MAX_LINKS - 1


class RecordedNvml(FakeNvml):
    """The answers NVML gave on a real one-GPU H100 VM (tests/data/nvml/h100-vm-1gpu.json): the link count field
    returns NVML_ERROR_NOT_SUPPORTED, and asking a link's state raises NotSupported."""

    def __init__(self, recorded):
        super().__init__([[]])
        self.recorded = recorded

    def nvmlDeviceGetFieldValues(self, h, fields):
        assert fields == [self.NVML_FI_DEV_NVLINK_LINK_COUNT]
        got = self.recorded["nvlink_link_count"]
        return [self._V(got["ret"], got["value"])]

    def nvmlDeviceGetNvLinkState(self, h, link):
        raise RuntimeError(self.recorded["nvlink_links"][0]["error"])


def test_a_real_gpu_without_nvlink_reads_no_links_and_its_pcie_link_as_nvml_said(tmp_path, monkeypatch):
    import json
    import os

    with open(os.path.join(os.path.dirname(__file__), "..", "data", "nvml", "h100-vm-1gpu.json")) as f:
        rec = json.load(f)
    [gpu] = rec["nvml"]
    assert gpu["nvlink_link_count"]["ret"] == 3  # NVML_ERROR_NOT_SUPPORTED
    [g] = links.read_nvlink(RecordedNvml(gpu))["gpus"]
    assert (g["link_count"], g["links"]) == (None, []) == (rec["ncclcheck"]["nvlink"]["gpus"][0]["link_count"],
                                                          rec["ncclcheck"]["nvlink"]["gpus"][0]["links"])
    fs = FakeSys(tmp_path, monkeypatch)
    (bus, attrs), = rec["sysfs"].items()
    gpu_pci(fs, bus, attrs["current_link_speed"], int(attrs["current_link_width"]),
            max_speed=attrs["max_link_speed"], max_width=int(attrs["max_link_width"]))
    assert links.read_pcie_gpus() == rec["ncclcheck"]["pcie"]
    p = rec["ncclcheck"]["pcie"][0]
    assert (gpu["pcie_gen"], gpu["pcie_width"]) == (5, p["width"]) and p["gts"] == 32.0  # Gen5: 32 GT/s


def test_nvlink_without_nvidia_ml_py_is_unavailable(monkeypatch):
    def missing():
        raise ImportError("No module named 'pynvml'")
    monkeypatch.setattr(links, "_import_nvml", missing)
    assert "nvidia-ml-py" in links.read_nvlink()["unavailable"]


def test_collect_for_job_names_the_interfaces_and_the_variables(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.net("lo", "loopback")
    fs.net("eth0", speed=100000)
    monkeypatch.setenv("NCCL_IB_HCA", "=mlx5_0:1")
    monkeypatch.setattr(links, "default_interface", lambda: "eth0")
    monkeypatch.setattr(links, "_default_run", tc_runner("tbf_100mbit.qdisc.json"))
    got = links.collect_for_job(with_gpus=False)
    assert [d["name"] for d in got["netdevs"]] == ["eth0"]  # never loopback
    assert got["default_interface"] == "eth0" and got["env"] == {"NCCL_IB_HCA": "=mlx5_0:1"}
    assert got["netdevs"][0]["shaper"]["qdiscs"][0]["rate_bytes_per_s"] == 12.5e6


def ingress_runner():
    """`tc` answering as netlab's h1 did with "slow-link h1 100mbit ingress" (tests/data/tc/capture_ingress.sh)."""
    files = {("qdisc", "eth0"): "ingress_ifb_100mbit.qdisc.json",
             ("filter", "eth0"): "ingress_ifb_100mbit.filter.json",
             ("qdisc", "ifb0"): "ingress_ifb_100mbit.ifb0.qdisc.json"}
    seen = []

    def run(argv, timeout_s):
        assert argv[:2] == ["tc", "-j"] and timeout_s <= links.TC_TIMEOUT_S
        seen.append(argv)
        return (TC / files[(argv[2], argv[5])]).read_text()
    return run, seen


def test_an_ingress_redirected_to_a_shaped_ifb_bounds_what_the_host_receives_not_what_it_sends(tmp_path,
                                                                                               monkeypatch):
    from ncclcheck.nccl import bounds as B

    fs = FakeSys(tmp_path, monkeypatch)
    fs.net("eth0", "veth", speed=10000)
    run, seen = ingress_runner()
    d = links.read_netdev("eth0", run=run)
    assert ["tc", "-j", "filter", "show", "dev", "eth0", "ingress"] in seen
    assert d["ingress"]["redirects"][0]["dev"] == "ifb0" and d["ingress"]["police_bytes_per_s"] == []
    rx, tx = B.netdev_ingress_bound(d), B.netdev_bound(d)
    assert (rx.gbps, rx.by) == (0.0125, "eth0: ingress via ifb0: tbf") and not rx.virtual
    assert tx.gbps is None and tx.virtual  # its egress is the unshaped veth: no limit of its own
    # direction a -> this host: the receiver's ingress limit, whatever the sender can do
    d_other = {"name": "eth0", "speed_mbps": 10000, "virtual": "veth", "shaper": {"qdiscs": []}}
    b = B.direction_bound(B.netdev_bound(d_other), rx)
    assert (b.gbps, b.by) == (0.0125, "eth0: ingress via ifb0: tbf (receiver)")


def test_hostile_ingress_filters_are_bounded_and_never_followed_outside_interface_names():
    bad = ('[{"options": {"actions": [{"kind": "mirred", "mirred_action": "redirect", "to_dev": "../../etc"},'
           '{"kind": "mirred", "mirred_action": "redirect", "to_dev": "ifb0"},'
           '{"kind": "police", "index": 1}, {"kind": "police", "rate": "50Mbit"}, {"kind": "police", "rate": 1e6}]}},'
           '"x", 5]')
    got = links.parse_ingress_filters(bad)
    assert got == {"police_bytes_per_s": [50e6 / 8, 1e6], "police_rate_unknown": True, "redirect_devs": ["ifb0"]}
    with pytest.raises(ValueError):
        links.parse_ingress_filters('{"not": "a list"}')
