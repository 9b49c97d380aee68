"""The kernel log's reader (facts/kernlog.py): Xid, SXid and the driver's other fault lines in each driver's wording,
/dev/kmsg records, the journal when the ring buffer lost the boot's start or cannot be read, the window it covers
said, and "could not read" never taken for "no Xid".

The lines below are written in the drivers' formats (NVIDIA/open-gpu-kernel-modules: kernel_rc.c, osapi.c, osinit.c,
nv.c, nvassert.c with nvstatus.c, kernel_gsp.c, common_nvswitch.h, error_nvswitch.c; the kernel's drivers/base/dd.c)
with this project's own bus ids, PCI ids, pids and numbers; their shapes were checked against operators' posted logs:
NVIDIA/NVSentinel#155 and leptonai/gpud#1209 (the three-line "fallen off the bus"), NVIDIA/gpu-operator#649 and #1146
and NVIDIA/open-gpu-kernel-modules#789 (RmInitAdapter), NVIDIA/open-gpu-kernel-modules#1150 (Xid 45 "caused by
previous Xid"), leptonai/gpud#338 and NVIDIA/NVSentinel's SXid tests (an SXid's Severity and Data lines)."""

from __future__ import annotations

import errno
import os

import pytest

from ncclcheck.facts import kernlog
from ncclcheck_lab.fakehw import kmsg_line, xid_line

from ..fakesys import FakeSys

BUS = "0000:3b:00.0"


def kmsg(fs: FakeSys, records, first_seq=0):
    return fs.write("dev/kmsg", "".join(kmsg_line(first_seq + i, t, m) for i, (t, m) in enumerate(records)))


def test_lines_forms_of_xid_and_sxid():
    assert kernlog.match("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.") == {
        "kind": "Xid", "bus_id": BUS, "code": 79}
    assert kernlog.match("NVRM: Xid (0000:3B:00): 48, An uncorrectable double bit error")["bus_id"] == BUS
    sx = kernlog.match("nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 24007, Fatal, Link 12 sourcetrack timeout")
    assert (sx["kind"], sx["code"], sx["severity"], sx["switch"]) == ("SXid", 24007, "fatal", "nvidia-nvswitch3")
    assert kernlog.match("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 44")["severity"] == (
        "non-fatal")
    assert kernlog.match("NVRM: GPU at PCI:0000:3b:00: GPU-1234") is None


def test_kmsg_counts_each_code_per_gpu_with_its_first_and_last_time(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.write("proc/uptime", "7200.00 100.00\n")
    kmsg(fs, [(0.0, "Linux version 6.8"), (100.0, xid_line(BUS, 13)), (200.0, xid_line(BUS, 13)),
              (300.0, "usb 1-1: new device"), (400.0, xid_line("0000:5e:00.0", 79))])
    got = kernlog.collect(which=lambda n: None)
    assert got["readable"] and got["source"] == "/dev/kmsg" and got["covers_from_s"] == 0.0
    ev = {(e["bus_id"], e["code"]): e for e in got["events"]}
    assert (ev[(BUS, 13)]["count"], ev[(BUS, 13)]["first_s"], ev[(BUS, 13)]["last_s"]) == (2, 100.0, 200.0)
    assert ev[("0000:5e:00.0", 79)]["count"] == 1 and got["lines"] == 3


def test_a_window_keeps_only_the_last_hours(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.write("proc/uptime", "10000.00 1.00\n")
    kmsg(fs, [(0.0, "Linux version"), (100.0, xid_line(BUS, 79)), (9000.0, xid_line(BUS, 31))])
    got = kernlog.collect(window_s=3600, which=lambda n: None)
    assert [e["code"] for e in got["events"]] == [31]
    assert got["window"]["hours"] == 1 and got["window"]["from_s"] == 6400.0


def test_a_wrapped_ring_buffer_reads_the_journal_for_the_whole_boot(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.write("proc/uptime", "90000.00 1.00\n")
    kmsg(fs, [(80000.0, "late message")], first_seq=123456)
    journal = (f"[    0.000000] h kernel: Linux version 6.8\n[  500.250000] h kernel: {xid_line(BUS, 79)}\n")
    asked = []

    def run(argv, t):
        asked.append(argv)
        return journal

    got = kernlog.collect(run=run, which=lambda n: "/usr/bin/journalctl")
    assert got["source"] == "journalctl -k" and asked[0][:4] == ["journalctl", "-k", "-b", "0"]
    assert [(e["code"], e["first_s"]) for e in got["events"]] == [(79, 500.25)] and got["reason"] is None


def test_a_wrapped_ring_without_a_journal_says_the_window_it_covers(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.write("proc/uptime", "90000.00 1.00\n")
    kmsg(fs, [(80000.0, xid_line(BUS, 13))], first_seq=99)
    got = kernlog.collect(which=lambda n: None)
    assert got["readable"] and got["covers_from_s"] == 80000.0 and "overwritten" in got["reason"]


def test_dmesg_restrict_without_root_is_said_and_the_journal_tried(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.write("proc/sys/kernel/dmesg_restrict", "1\n")
    kmsg(fs, [(0.0, xid_line(BUS, 79))])
    real_open = os.open

    def refuse(path, flags, *a):
        if str(path).endswith("kmsg"):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real_open(path, flags, *a)

    monkeypatch.setattr(kernlog.os, "open", refuse)
    no_journal_access = kernlog.collect(run=lambda argv, t: "", which=lambda n: "/usr/bin/journalctl")
    assert not no_journal_access["readable"] and no_journal_access["events"] == []
    why = no_journal_access["reason"]
    assert "dmesg_restrict = 1" in why and "CAP_SYSLOG" in why and "systemd-journal" in why
    journal = kernlog.collect(run=lambda argv, t: f"[  9.0] h kernel: {xid_line(BUS, 94)}\n",
                              which=lambda n: "/usr/bin/journalctl")
    assert journal["readable"] and [e["code"] for e in journal["events"]] == [94]


def test_a_flood_of_xids_is_bounded_in_the_facts(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    recs = [(0.0, "Linux version")] + [(1.0 + i, xid_line(f"0000:{i % 200:02x}:00.0", 13 + i % 7))
                                      for i in range(5000)]
    kmsg(fs, recs)
    got = kernlog.collect(which=lambda n: None)
    assert len(got["events"]) == kernlog.MAX_EVENTS and got["lines"] + got["dropped"] >= kernlog.MAX_EVENTS
    assert all(len(e["text"]) <= kernlog.MAX_TEXT for e in got["events"])


# ------------------------------------------------------------------------------- the driver's lines beyond Xid
@pytest.mark.parametrize("line,kind,code,bus", [
    # Xid with a MIG GPU instance (and compute instance) attribution: kernel_rc.c XID_PRINT_WITH_ATTR
    ("NVRM: Xid (PCI:0000:3b:00 GPU-I:03): 94, pid=2222, name=train, Contained: SM (0x1). RST: No, D-RST: No",
     "Xid", 94, BUS),
    ("NVRM: Xid (PCI:0000:3b:00 GPU-I:03 GPU-CI:01): 13, pid=2222, name=train, Graphics Exception", "Xid", 13, BUS),
    # the per-device line that follows Xid 79: NV_DEV_PRINTF's prefix "NVRM: GPU <domain:bus:dev.fn>: "
    ("NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", "NVRM", "fallen_off_bus", BUS),
    ("NVRM: GPU at 0000:3b:00.0 has fallen off the bus.", "NVRM", "fallen_off_bus", BUS),  # before R515
    # a probe that failed: the driver's count (no bus id), the kernel's per-device line in both wordings
    ("NVRM: The NVIDIA probe routine failed for 1 device(s).", "NVRM", "probe_failed", None),
    ("nvidia 0000:3b:00.0: probe with driver nvidia failed with error -1", "NVRM", "probe_failed", BUS),
    ("nvidia: probe of 0000:3b:00.0 failed with error -1", "NVRM", "probe_failed", BUS),
    # RmInitAdapter: with the device prefix (R515 and later), without it (older drivers)
    ("NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x62:0x40:1999)", "NVRM", "init_failed", BUS),
    ("NVRM: RmInitAdapter failed! (0x25:0xffff:1401)", "NVRM", "init_failed", None),
    # a status returned through an assertion or a check, with and without the driver's "GPU<n> " instance prefix
    ("NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned "
     "from pRmApi->Control(pRmApi, h, h2, 0x1, p, 8) @ kernel_channel.c:1000", "NVRM", "reset_required", None),
    ("NVRM: GPU2 nvCheckOkFailedNoLog: Check failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F) "
     "returned from rpcRecvPoll(pGpu, pRpc, 10) @ kernel_gsp.c:2000", "NVRM", "gpu_lost", None),
    ("NVRM: Rate limiting GSP RPC error prints for GPU at PCI:0000:3b:00 (printing 1 of every 30).  The GPU likely "
     "needs to be reset.", "NVRM", "gsp_rpc_errors", BUS),
])
def test_each_drivers_wording_is_matched_to_its_gpu(line, kind, code, bus):
    ev = kernlog.match(line)
    assert ev is not None and (ev["kind"], ev["code"], ev["bus_id"]) == (kind, code, bus), ev


def test_an_asserted_expression_naming_a_status_is_not_that_status():
    """`(status == NV_OK) || (status == NV_ERR_GPU_IS_LOST)` is the assertion's text, not a status the driver got."""
    assert kernlog.match("NVRM: GPU0 nvAssertFailedNoLog: Assertion failed: (status == NV_OK) || (status == "
                         "NV_ERR_GPU_IS_LOST) @ rs_client.c:800") is None


def test_xid_45_keeps_the_cause_the_driver_names():
    assert kernlog.match("NVRM: Xid (PCI:0000:3b:00): 45, pid=7001, name=python3, Ch 00000008 caused by previous "
                         "Xid 149")["caused_by"] == 149
    assert "caused_by" not in kernlog.match("NVRM: Xid (PCI:0000:3b:00): 45, pid=7001, name=python3, Ch 00000008")


HEALTHY_BOOT = [
    (3.1, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 22:42:15 UTC 2024"),
    (3.2, "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.133.20  Release Build  (builder@host)  "
          "Fri Apr 11 01:02:03 UTC 2025"),
    (3.3, "nvidia-nvlink: Nvlink Core is being initialized, major device number 511"),
    (3.4, "nvidia 0000:3b:00.0: enabling device (0000 -> 0002)"),
    (9.0, "NVRM: GPU at PCI:0000:3b:00: GPU-5f0e3c1a-0000-1111-2222-333344445555"),
    (9.1, "NVRM: GPU Board Serial Number: 1320000000001"),
    (9.2, "NVRM: Persistence mode is deprecated and will be removed in a future release. Please use "
          "nvidia-persistenced instead."),
    (9.3, "nvidia-persistenced[2145]: device 0000:3b:00.0 - registered"),
    (9.4, "nvidia: module license 'NVIDIA' taints kernel."),
]


def test_a_healthy_boots_driver_lines_are_no_event(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    kmsg(fs, [(0.0, "Linux version 6.8")] + HEALTHY_BOOT)
    got = kernlog.collect(which=lambda n: None)
    assert got["readable"] and got["events"] == [] and got["lines"] == 0


# osapi.c prints "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\n" "NVRM: (PCI ID: %04x:%04x) installed in this system has\n"
# "NVRM: fallen off the bus and is not responding to commands.\n" in one printk: one /dev/kmsg record whose newlines
# the kernel escapes as \x0a; the journal prints it as three lines, the last two indented and unstamped.
LOST_AT_PROBE = ["NVRM: The NVIDIA GPU 0000:3b:00.0", "NVRM: (PCI ID: 10de:2330) installed in this system has",
                 "NVRM: fallen off the bus and is not responding to commands."]


def test_the_three_line_fallen_off_the_bus_record_names_its_gpu_in_kmsg(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    kmsg(fs, [(0.0, "Linux version 6.8"), (12.5, "\\x0a".join(LOST_AT_PROBE)),
              (12.6, "nvidia: probe of 0000:3b:00.0 failed with error -1"),
              (12.7, "NVRM: The NVIDIA probe routine failed for 1 device(s).")])
    got = kernlog.collect(which=lambda n: None)
    ev = {(e["code"], e["bus_id"]): e for e in got["events"]}
    assert ev[("fallen_off_bus_at_probe", BUS)]["first_s"] == 12.5
    assert ev[("fallen_off_bus_at_probe", BUS)]["text"].startswith("NVRM: The NVIDIA GPU 0000:3b:00.0 / ")
    assert ev[("probe_failed", BUS)]["count"] == 1 and ev[("probe_failed", None)]["devices"] == 1
    assert len(got["events"]) == 3


def test_the_three_line_record_as_the_journal_prints_it(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    fs.write("proc/uptime", "5000.00 1.00\n")
    pad = " " * 33
    journal = (f"[   12.500000] node kernel: {LOST_AT_PROBE[0]}\n{pad}{LOST_AT_PROBE[1]}\n{pad}{LOST_AT_PROBE[2]}\n"
               "[   12.700000] node kernel: NVRM: The NVIDIA probe routine failed for 1 device(s).\n")
    got = kernlog.collect(run=lambda argv, t: journal, which=lambda n: "/usr/bin/journalctl",
                          kmsg_path=str(tmp_path / "no-kmsg"))
    ev = {(e["code"], e["bus_id"]): e for e in got["events"]}
    assert got["source"] == "journalctl -k" and ev[("fallen_off_bus_at_probe", BUS)]["first_s"] == 12.5


def test_a_fallen_off_line_with_no_first_line_before_it_names_no_gpu(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    kmsg(fs, [(0.0, "Linux version 6.8"), (5.0, LOST_AT_PROBE[0]), (5.1, "NVRM: GPU Board Serial Number: 1"),
              (5.2, "NVRM: GPU Board Serial Number: 2"), (5.3, "NVRM: GPU Board Serial Number: 3"),
              (6.0, LOST_AT_PROBE[2])])
    [ev] = kernlog.collect(which=lambda n: None)["events"]
    assert (ev["code"], ev["bus_id"]) == ("fallen_off_bus_at_probe", None)


def test_an_sxids_severity_and_data_lines_are_the_same_event(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    sw = "nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 20034, "
    one = [sw + "Fatal, Link 30 LTSSM Fault Up", sw + "Severity 1 Engine instance 30 Sub-engine instance 00",
           sw + "Data {0x00000000, 0x1e000001, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, "
                "0x00000000, 0x00000000}"]
    kmsg(fs, [(0.0, "Linux version 6.8")] + [(100.0 + k, line) for k in range(3) for line in one])
    got = kernlog.collect(which=lambda n: None)
    [ev] = got["events"]
    assert (ev["count"], ev["severity"], ev["severity_field"]) == (3, "fatal", 1) and got["lines"] == 3


def test_an_sxid_whose_lines_state_no_severity_says_none(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    kmsg(fs, [(0.0, "Linux version 6.8"),
              (7.0, "nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 26006, SOE HALT data[0] = 0x1"),
              (7.1, "nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 26006, Severity 5 Engine instance 00 Sub-engine "
                    "instance 00"),
              # follow-on lines whose first line the ring buffer no longer holds: one event, counted once
              (8.0, "nvidia-nvswitch1: SXid (PCI:0000:c3:00.0): 12028, Severity 0 Engine instance 04 Sub-engine "
                    "instance 00"),
              (8.1, "nvidia-nvswitch1: SXid (PCI:0000:c3:00.0): 12028, Data {0x00000001, 0x00000002}")])
    ev = {e["code"]: e for e in kernlog.collect(which=lambda n: None)["events"]}
    assert ev[26006]["severity"] is None and ev[26006]["count"] == 1 and ev[26006]["severity_field"] == 5
    assert ev[12028]["severity"] is None and ev[12028]["count"] == 1


def test_a_flood_of_one_driver_line_is_one_event(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    line = ("NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) "
            "returned from status @ kernel_channel.c:1000")
    kmsg(fs, [(0.0, "Linux version 6.8")] + [(1.0 + i / 100, line) for i in range(20000)])
    [ev] = kernlog.collect(which=lambda n: None)["events"]
    assert ev["count"] == 20000 and ev["first_s"] == 1.0 and len(ev["text"]) <= kernlog.MAX_TEXT


def test_only_a_lines_first_part_is_matched():
    """A line longer than any kernel record is matched on its first MAX_MATCH characters only, so a huge line costs
    the patterns no more than a record does."""
    pad = "x" * kernlog.MAX_MATCH
    assert kernlog.match(pad + "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.") is None
    assert kernlog.match("NVRM: Xid (PCI:0000:3b:00): 79, " + pad)["code"] == 79


def test_xid_45s_causes_are_kept_distinct_and_bounded(tmp_path, monkeypatch):
    fs = FakeSys(tmp_path, monkeypatch)
    base = "NVRM: Xid (PCI:0000:3b:00): 45, pid=7001, name=python3, Ch 0000000{} caused by previous Xid {}"
    kmsg(fs, [(0.0, "Linux version 6.8")] + [(10.0 + i, base.format(i % 10, 100 + i % 20)) for i in range(200)])
    [ev] = kernlog.collect(which=lambda n: None)["events"]
    assert ev["count"] == 200 and ev["caused_by"] == list(range(100, 100 + kernlog.MAX_CAUSES))
