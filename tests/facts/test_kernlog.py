"""The kernel log's Xid/SXid reader (facts/kernlog.py): /dev/kmsg records, the journal when the ring buffer lost the
boot's start or cannot be read, the window it covers said, and "could not read" never taken for "no Xid"."""

from __future__ import annotations

import errno
import os

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
    assert (sx["kind"], sx["code"], sx["fatal"], sx["switch"]) == ("SXid", 24007, True, "nvidia-nvswitch3")
    assert kernlog.match("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 44")["fatal"] is False
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
