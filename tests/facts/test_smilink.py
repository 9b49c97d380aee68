"""NVLink read from `nvidia-smi nvlink -s` / `-e` (facts/smilink.py): every driver's wording found in public threads
(tests/data/hwnodes/FORMATS.md lists them with their addresses) gives the links, speeds and counters NVML gives,
a GPU in error or with every link inactive says so, and a hostile answer is bounded.

Fixtures are rewritten in this project's own identifiers (UUIDs, indices); the tool's fixed labels ("Link N:",
"GB/s", "<inactive>", "Replay Errors", the NVML messages) are kept as the drivers print them."""

from __future__ import annotations

import pytest

from ncclcheck.facts import links, smilink
from ncclcheck_lab import fakehw

TAB = "\t "  # what the driver prints before "Link"
NINE = " " * 9  # the same pasted into a thread with tabs expanded


def uuid(i: int) -> str:
    return f"GPU-{i:08x}-0c5e-4a11-8b2d-5eed{i:08x}"


def status_text(name: str, per_gpu: list, indent: str = TAB) -> str:
    """`nvidia-smi nvlink -s` for GPUs named `name`, each a list of link values ("25 GB/s", "<inactive>")."""
    out = []
    for i, values in enumerate(per_gpu):
        out.append(f"GPU {i}: {name} (UUID: {uuid(i)})")
        out += [f"{indent}Link {n}: {v}" for n, v in enumerate(values)]
    return "\n".join(out) + "\n"


def errors_text(name: str, per_gpu: list, indent: str = TAB) -> str:
    """`nvidia-smi nvlink -e` (pre-Blackwell): per GPU, per link {label: value}, a blank line between links."""
    out = []
    for i, per_link in enumerate(per_gpu):
        out.append(f"GPU {i}: {name} (UUID: {uuid(i)})")
        for n, counters in enumerate(per_link):
            out += [f"{indent}Link {n}: {label}: {v}" for label, v in counters.items()] + [""]
    return "\n".join(out) + "\n"


HEALTHY_3 = {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}


def runner(answers: dict, asked: list = None):
    def run(argv, timeout_s):
        if asked is not None:
            asked.append((tuple(argv), timeout_s))
        a = answers[tuple(argv)]
        if isinstance(a, Exception):
            raise a
        return a
    return run


# ------------------------------------------------------------------------------------------------ nvlink -s
def test_a100_hgx_twelve_links_at_25_gb_s_are_all_up():
    """8 x A100 SXM4 80GB, driver 535: `Link N: 25 GB/s` (no decimals), tab-indented (leptonai/gpud
    pkg/nvidia-query/testdata/nvidia-smi.nvlink.status.a100, github.com/leptonai/gpud)."""
    text = status_text("NVIDIA A100-SXM4-80GB", [["25 GB/s"] * 12] * 8)
    gpus = smilink.parse_status(text)
    assert [g["index"] for g in gpus] == list(range(8))
    for i, g in enumerate(gpus):
        assert (g["name"], g["uuid"], g["link_count"], g["state"]) == ("NVIDIA A100-SXM4-80GB", uuid(i), 12, "links")
        assert g["links"][11] == {"link": 11, "up": True, "speed_mbytes_per_s": 25000}
    s = smilink.read_status(runner({smilink.STATUS_ARGV: text}), 5.0)["gpus"][3]
    assert {k: s[k] for k in ("index", "bus_id", "link_count", "up", "down", "speed_mbytes_per_s")} == {
        "index": 3, "bus_id": None, "link_count": 12, "up": 12, "down": [], "speed_mbytes_per_s": 25000}


def test_h100_hgx_eighteen_links_pasted_with_spaces_read_as_nvml_gives_them():
    """8 x H100 80GB HBM3, `Link N: 26.562 GB/s` as pasted with tabs expanded to 9 spaces
    (github.com/stas00/ml-engineering network/README.md; github.com/bottlerocket-os/bottlerocket/pull/4418)."""
    gpus = smilink.parse_status(status_text("NVIDIA H100 80GB HBM3", [["26.562 GB/s"] * 18] * 8, NINE))
    assert len(gpus) == 8 and all(g["link_count"] == 18 and g["state"] == "links" for g in gpus)
    assert {x["speed_mbytes_per_s"] for g in gpus for x in g["links"]} == {fakehw.H100_LINK_MBPS}


def test_v100_with_two_links_inactive_names_them_down():
    """DGX-1 V100 SXM2, R4xx: links 3 and 5 `<inactive>` among `25.781 GB/s` (github.com/Azure/azhpc-diagnostics/
    issues/73)."""
    values = ["25.781 GB/s", "25.781 GB/s", "25.781 GB/s", "<inactive>", "25.781 GB/s", "<inactive>"]
    [g] = smilink.parse_status(status_text("Tesla V100-SXM2-32GB", [values], NINE).replace("GPU 0:", "GPU 3:"))
    assert (g["index"], g["link_count"], g["state"]) == (3, 6, "links")
    assert [x["link"] for x in g["links"] if not x["up"]] == [3, 5]
    assert g["links"][3] == {"link": 3, "up": False, "speed_mbytes_per_s": None}
    [s] = smilink.read_status(runner({smilink.STATUS_ARGV: status_text("Tesla V100-SXM2-32GB", [values])}), 5)["gpus"]
    assert (s["up"], s["down"], s["speed_mbytes_per_s"]) == (4, [3, 5], 25781)


def test_gb200_and_b300_at_53_125_gb_s():
    """GB200, 18 links at `53.125 GB/s` (github.com/NVIDIA/k8s-test-infra/issues/371); B300 the same on 595.91.07."""
    gpus = smilink.parse_status(status_text("NVIDIA GB200", [["53.125 GB/s"] * 18] * 4, NINE))
    assert [g["link_count"] for g in gpus] == [18] * 4
    assert {x["speed_mbytes_per_s"] for g in gpus for x in g["links"]} == {53125}


@pytest.mark.parametrize("printed, mbytes", [
    ("25.781 GB/s", 25781), ("25 GB/s", 25000), ("25.000 GB/s", 25000), ("26.562 GB/s", 26562),
    ("53.125 GB/s", 53125), ("26562 MB/s", 26562), ("<inactive>", None), ("0 GB/s", None), ("N/A", None),
    ("[Unknown Error]", None), ("1 TB/s", None), ("26.562GB/s", 26562), ("", None)])
def test_a_speed_is_read_back_as_nvmls_megabytes_per_second(printed, mbytes):
    assert smilink.speed_mbytes_per_s(printed) == mbytes


def test_a_pcie_gpu_without_nvlink_is_no_nvlink_never_links_down():
    """A10/L4/L40S: `nvlink -s` prints nothing (leptonai/gpud testdata nvidia-smi.nvlink.status.a10, an empty file);
    some builds print the header alone, others NVML's "Not Supported" (RTX 4090, indented) or "Device does not have
    or support Nvlink" (RTX A4000) under it or on the header line."""
    r = smilink.read(runner({smilink.STATUS_ARGV: ""}), 5.0)
    assert r["gpus"] == [] and "no GPU here has NVLink" in r["reason"] and "errors" not in r
    text = (f"GPU 0: NVIDIA L40S (UUID: {uuid(0)})\n"
            f"GPU 1: NVIDIA GeForce RTX 4090 (UUID: {uuid(1)})\n"
            f"{TAB}NVML: Unable to retrieve NVLink information: Not Supported\n"
            f"GPU 2: NVIDIA RTX A4000 (UUID: {uuid(2)})\nDevice does not have or support Nvlink\n"
            f"GPU 3: NVIDIA RTX A4000 (UUID: {uuid(3)}) Device does not have or support Nvlink\n")
    gpus = smilink.parse_status(text)
    assert [(g["state"], g["link_count"], g["links"]) for g in gpus] == [("no_nvlink", 0, [])] * 4
    assert "Not Supported" in gpus[1]["reason"] and gpus[3]["uuid"] == uuid(3)


def test_every_link_inactive_is_its_own_state_with_an_unknown_link_count():
    """One NVML line at column 0 in place of all the GPU's links: a B200 in production (github.com/leptonai/gpud/
    issues/1085), after Xid 149 on 590.48.01 spelled `Nvlink` (github.com/NVIDIA/open-gpu-kernel-modules/issues/1150);
    some builds print it on the header line."""
    text = (status_text("NVIDIA B200", [["53.125 GB/s"] * 18] * 2)
            + f"GPU 2: NVIDIA B200 (UUID: {uuid(2)})\nNVML: Unable to retrieve NVLink information as all links are "
              "inActive\n"
            + f"GPU 3: NVIDIA B200 (UUID: {uuid(3)}) NVML: Unable to retrieve Nvlink information as all links are "
              "inActive\n")
    gpus = smilink.parse_status(text)
    assert [g["state"] for g in gpus] == ["links", "links", "all_inactive", "all_inactive"]
    assert (gpus[2]["link_count"], gpus[2]["links"]) == (None, [])
    assert "all links are inActive" in gpus[3]["reason"]
    s = smilink.read_status(runner({smilink.STATUS_ARGV: text}), 5.0)["gpus"][2]
    assert (s["state"], s["link_count"], s["up"], s["uuid"]) == ("all_inactive", None, 0, uuid(2))


def test_a_gpu_in_error_says_so_and_a_lost_gpu_is_named_by_its_bus_id():
    """NVML's own error words (nvmlErrorString: "GPU requires reset", "Unknown Error", "GPU is lost") where the links
    or a link's speed would be, as nvidia-smi prints them in brackets in every field of a GPU in `ERR!`, and its
    "Unable to determine the device handle for GPU ...: Unknown Error" for a GPU the driver lost (FORMATS.md, default
    table). Built from those words, not a verbatim capture."""
    text = (f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid(0)})\n"
            + "".join(f"{TAB}Link {n}: 26.562 GB/s\n" for n in range(17)) + f"{TAB}Link 17: [GPU requires reset]\n"
            + f"GPU 1: NVIDIA H100 80GB HBM3 (UUID: {uuid(1)})\n"
            + f"{TAB}NVML: Unable to retrieve NVLink information: GPU requires reset\n"
            + "GPU 2: [Unknown Error] (UUID: [Unknown Error])\n"
            + "Unable to determine the device handle for GPU00000000:9A:00.0: Unknown Error\n")
    g0, g1, g2, lost = smilink.parse_status(text)
    assert (g0["state"], g0["link_count"], g0["links"][17]["up"]) == ("error", 18, False)
    assert g0["links"][17]["error"] == "[GPU requires reset]" and "link 17" in g0["reason"]
    assert (g1["state"], g1["link_count"], g1["links"]) == ("error", None, [])
    assert "GPU requires reset" in g1["reason"]
    assert (g2["state"], g2["name"], g2["uuid"]) == ("error", None, None)
    assert (lost["index"], lost["bus_id"], lost["state"]) == (None, "0000:9a:00.0", "error")
    s = smilink.read_status(runner({smilink.STATUS_ARGV: text}), 5.0)["gpus"]
    assert (s[0]["up"], s[0]["down"]) == (17, [17])
    assert s[3]["bus_id"] == "0000:9a:00.0"


def test_a_header_without_uuid_and_an_unknown_extra_line_are_read():
    """Older drivers print `GPU 0: Tesla V100-SXM2-32GB` with no UUID (FORMATS.md, DGX-1 docs excerpt); a line a
    future driver adds is not read as a fault."""
    [g] = smilink.parse_status("GPU 0: Tesla V100-SXM2-32GB\n" + NINE + "Link 0: 25.781 GB/s\n"
                               + NINE + "NVSwitch connected: No\n")
    assert (g["name"], g["uuid"], g["state"], g["link_count"]) == ("Tesla V100-SXM2-32GB", None, "links", 1)


def test_nvidia_smi_and_nvml_read_the_same_links_alike():
    """One reading, two sources: the links NVML gives for a node (facts/links.nvlink_gpu over the fake binding) are
    the links nvidia-smi's text of the same node parses to, and their summaries agree but for the bus id."""
    spec = fakehw.faulty(fakehw.node_spec(), gpu=2, nvlink={"count": 18, "down": [5, 11],
                                                             "speed": fakehw.H100_LINK_MBPS, "errors": {}})
    nv = fakehw.FakeNvml(spec)
    speed = f"{fakehw.H100_LINK_MBPS / 1000:.3f} GB/s"
    text = status_text("NVIDIA H100 80GB HBM3", [
        ["<inactive>" if n in g["nvlink"]["down"] else speed for n in range(g["nvlink"]["count"])]
        for g in spec["gpus"]])
    by_smi = smilink.parse_status(text)
    by_smi_summary = smilink.read_status(runner({smilink.STATUS_ARGV: text}), 5.0)["gpus"]
    for i in range(len(spec["gpus"])):
        by_nvml = links.nvlink_gpu(nv, nv.nvmlDeviceGetHandleByIndex(i), i)
        assert by_smi[i]["links"] == by_nvml["links"]
        assert by_smi[i]["link_count"] == by_nvml["link_count"] and by_smi[i]["name"] == by_nvml["name"]
        nvml_summary = smilink.nvlink_summary(by_nvml)
        assert {k: v for k, v in by_smi_summary[i].items() if k in nvml_summary and k != "bus_id"} == {
            k: v for k, v in nvml_summary.items() if k != "bus_id"}
    assert by_smi_summary[2]["down"] == [5, 11]


# ------------------------------------------------------------------------------------------------ nvlink -e
def test_pre_blackwell_counters_per_link_with_blank_lines_between_links():
    """H100: `Link N: Replay Errors / Recovery Errors / CRC Errors`, a blank line between links
    (github.com/stas00/ml-engineering network/README.md); an A100 SXM4 8-GPU dump prints the same with tabs."""
    per_link = [dict(HEALTHY_3) for _ in range(18)]
    per_link[7] = {"Replay Errors": 12, "Recovery Errors": 1, "CRC Errors": 340}
    errs = smilink.parse_errors(errors_text("NVIDIA H100 80GB HBM3", [[dict(HEALTHY_3)] * 18, per_link], NINE))
    assert sorted(errs) == [0, 1] and sorted(errs[1]) == list(range(18))
    assert errs[1][7] == {"replay": 12, "recovery": 1, "crc_flit": None, "crc_data": None, "crc": 340}
    assert errs[0][0] == {"replay": 0, "recovery": 0, "crc_flit": None, "crc_data": None, "crc": 0}


def test_a_counter_not_answered_is_none_never_zero():
    text = (f"GPU 0: NVIDIA A100-SXM4-40GB (UUID: {uuid(0)})\n"
            f"{TAB}Link 0: Replay Errors: N/A\n{TAB}Link 0: Recovery Errors: [N/A]\n"
            f"{TAB}Link 0: CRC Errors: [GPU requires reset]\n\n"
            f"{TAB}Link 1: Replay Errors: 0\n")
    errs = smilink.parse_errors(text)
    assert errs[0][0] == {"replay": None, "recovery": None, "crc_flit": None, "crc_data": None, "crc": None}
    assert errs[0][1] == {"replay": 0, "recovery": None, "crc_flit": None, "crc_data": None}


def test_flit_and_data_crc_printed_apart_keep_nvmls_names():
    """Drivers that print the flit and data CRC counts apart (`CRC Flit Errors`, `CRC Data Errors`; seen in a
    third-party parser's test data in the code index, not in a thread)."""
    text = (f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid(0)})\n{NINE}Link 0: Replay Errors: 1\n"
            f"{NINE}Link 0: Recovery Errors: 0\n{NINE}Link 0: CRC Flit Errors: 5\n{NINE}Link 0: CRC Data Errors: 2\n")
    assert smilink.parse_errors(text)[0][0] == {"replay": 1, "recovery": 0, "crc_flit": 5, "crc_data": 2}


def test_blackwell_counters_keep_their_own_keys_and_fec_buckets_are_not_errors():
    """B300 SXM6 on 595.91.07 (AWS p6-b300 capture notes, FORMATS.md): no Replay/Recovery/CRC lines; its own
    counters, FEC histogram buckets (bucket 0 in the billions on a healthy link) and BER figures. DCGM names the same
    counters on GB200 (github.com/NVIDIA/dcgm-exporter/issues/581)."""
    labels = ["Tx packets: 918273645", "Malformed packet Errors: 0", "Buffer overrun Errors: 0", "Rx Errors: 0",
              "Rx remote Errors: 0", "Rx General Errors: 0", "Local link integrity Errors: 0", "Tx discards: 0",
              "Link recovery successful events: 3", "Link recovery failed events: 1", "Total link recovery events: 4",
              "Effective Errors: 0", "Effective BER: 15e-255", "Symbol Errors: 0", "Symbol BER: 15e-255",
              "FEC Errors - 0: 36140749276", "FEC Errors - 1: 17", "Raw BER Lane 0: 2.1e-9"]
    text = f"GPU 0: NVIDIA B300 SXM6 AC (UUID: {uuid(0)})\n" + "".join(f"{TAB}Link 14: {x}\n" for x in labels)
    c = smilink.parse_errors(text)[0][14]
    assert {k: c[k] for k in ("replay", "recovery", "crc_flit", "crc_data")} == dict.fromkeys(
        ("replay", "recovery", "crc_flit", "crc_data"))
    assert (c["recovery_successful"], c["recovery_failed"], c["recovery_total"]) == (3, 1, 4)
    assert c["symbol"] == 0 and c["malformed_packet"] == 0 and c["tx_discards"] == 0
    assert set(c) == {"replay", "recovery", "crc_flit", "crc_data", "malformed_packet", "buffer_overrun", "rx",
                      "rx_remote", "rx_general", "local_link_integrity", "tx_discards", "recovery_successful",
                      "recovery_failed", "recovery_total", "effective", "symbol"}


def test_counters_on_one_line_are_read_too():
    errs = smilink.parse_errors(f"GPU 0: x\n{TAB}Link 1: Replay Errors: 2, Recovery Errors: 0, CRC Errors: 9\n")
    assert errs[0][1] == {"replay": 2, "recovery": 0, "crc_flit": None, "crc_data": None, "crc": 9}


# -------------------------------------------------------------------------------------------------- readers
def test_read_asks_status_then_errors_within_one_time_budget():
    asked: list = []
    text = status_text("NVIDIA H100 80GB HBM3", [["26.562 GB/s"] * 18] * 2)
    errs = errors_text("NVIDIA H100 80GB HBM3", [[dict(HEALTHY_3)] * 18] * 2)
    r = smilink.read(runner({smilink.STATUS_ARGV: text, smilink.ERRORS_ARGV: errs}, asked), 4.0)
    assert [a for a, _t in asked] == [smilink.STATUS_ARGV, smilink.ERRORS_ARGV]
    assert all(0 < t <= 4.0 for _a, t in asked)
    assert len(r["gpus"]) == 2 and sorted(r["errors"]["links"]) == [0, 1] and r["errors"]["said"] == {}
    clock = iter([0.0, 4.5])
    late = smilink.read(runner({smilink.STATUS_ARGV: text, smilink.ERRORS_ARGV: errs}), 4.0, clock=lambda: next(clock))
    assert "no time left" in late["errors"]["unavailable"] and len(late["gpus"]) == 2


def test_a_tool_that_fails_is_unavailable_in_its_own_words_never_an_empty_pass():
    driver_gone = RuntimeError("nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate with "
                               "the NVIDIA driver.")
    r = smilink.read(runner({smilink.STATUS_ARGV: driver_gone}), 5.0)
    assert "couldn't communicate with the NVIDIA driver" in r["unavailable"] and "nvlink -s" in r["unavailable"]
    r = smilink.read(runner({smilink.STATUS_ARGV: "Invalid combination of input arguments.\n"}), 5.0)
    assert "printed no GPU" in r["unavailable"] and "Invalid combination" in r["unavailable"]
    text = status_text("NVIDIA A100-SXM4-80GB", [["25 GB/s"] * 12])
    r = smilink.read(runner({smilink.STATUS_ARGV: text, smilink.ERRORS_ARGV: RuntimeError("timed out after 5s")}), 5)
    assert len(r["gpus"]) == 1 and "timed out" in r["errors"]["unavailable"]
    r = smilink.read_errors(runner({smilink.ERRORS_ARGV: "garbage\n"}), 5.0)
    assert "printed no GPU" in r["unavailable"]


def test_what_nvidia_smi_says_in_place_of_a_gpus_counters_is_kept():
    text = (errors_text("NVIDIA H100 80GB HBM3", [[dict(HEALTHY_3)] * 18])
            + f"GPU 1: NVIDIA H100 80GB HBM3 (UUID: {uuid(1)})\n"
            + f"{TAB}NVML: Unable to retrieve NVLink error counters: GPU requires reset\n")
    r = smilink.read_errors(runner({smilink.ERRORS_ARGV: text}), 5.0)
    assert r["links"][1] == {} and "GPU requires reset" in r["said"][1] and 0 not in r["said"]


# ------------------------------------------------------------------------------------------------- hostile
def test_a_hostile_answer_is_bounded():
    many_links = f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid(0)})\n" + "".join(
        f"{TAB}Link {n}: 26.562 GB/s\n" for n in range(10_000))
    [g] = smilink.parse_status(many_links)
    assert g["state"] == "error" and len(g["links"]) == smilink.MAX_LINKS == links.MAX_ITEMS
    assert "more than" in g["reason"]
    assert len(smilink.parse_status(status_text("x", [["25 GB/s"]] * 100))) == smilink.MAX_GPUS
    e = smilink.parse_errors("GPU 0: x\n" + "".join(f"{TAB}Link {n}: Replay Errors: 1\n" for n in range(10_000)))
    assert len(e[0]) == smilink.MAX_LINKS
    junk = ("\x00\x1b[31m" + "A" * 200_000 + "\n" + "Link 0: 25 GB/s\n" + "GPU x: y\n" + "GPU 99999999: z\n"
            + "\n".join(f"GPU {i}: \x07junk\x1b (UUID: not-a-uuid)\n{TAB}Link 0: 9" * 3 for i in range(3)))
    gpus = smilink.parse_status(junk)
    assert [g["index"] for g in gpus] == [0, 1, 2]
    assert all(g["uuid"] is None and "\x07" not in (g["name"] or "") and g["state"] == "error" for g in gpus)
    huge = status_text("NVIDIA A100-SXM4-80GB", [["25 GB/s"] * 12] * 8) + "Link 0: 1 GB/s\n" * 2_000_000
    assert len(huge) > smilink.MAX_BYTES and len(smilink.parse_status(huge)) == 8


def test_links_printed_are_judged_whatever_else_is_said_beside_them():
    text = f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid(0)})\n{TAB}Link 0: <inactive>\n{TAB}Feature Not Supported\n"
    [g] = smilink.parse_status(text)
    assert (g["state"], g["link_count"], g["links"][0]["up"]) == ("links", 1, False)


def test_a_gpu_or_link_printed_twice_is_read_once():
    text = (f"GPU 0: A (UUID: {uuid(0)})\n{TAB}Link 0: 25 GB/s\n{TAB}Link 0: <inactive>\n"
            f"GPU 0: B (UUID: {uuid(9)})\n{TAB}Link 1: <inactive>\n")
    [g] = smilink.parse_status(text)
    assert (g["name"], g["links"]) == ("A", [{"link": 0, "up": True, "speed_mbytes_per_s": 25000}])
