"""The kernel log reader on what a container or a hostile writer gives it (issue 63): a /dev/kmsg that yields no
record is "not readable", never "no Xid since boot"; a line without end costs its first bytes, not a copy per read."""

from __future__ import annotations

from ncclcheck.facts import kernlog
from ncclcheck_lab.fakehw import kmsg_line, xid_line

BUS = "0000:3b:00.0"


def test_a_kmsg_linked_to_dev_null_is_not_readable_never_no_xid():
    got = kernlog.collect(kmsg_path="/dev/null", which=lambda _name: None)
    assert got["readable"] is False and "no kernel log record" in got["reason"]


def test_a_kmsg_of_text_that_is_no_record_is_not_readable(tmp_path):
    p = tmp_path / "kmsg"
    p.write_text("console output\nlogin: \n")
    assert kernlog.collect(kmsg_path=str(p), which=lambda _name: None)["readable"] is False


def test_a_line_without_end_is_cut_and_the_records_after_it_read(tmp_path):
    p = tmp_path / "kmsg"
    with open(p, "w") as f:
        f.write(kmsg_line(0, 0.0, "Linux version 6.8"))
        f.write("6,1,500000,-;" + "x" * (4 << 20) + "\n")
        f.write(kmsg_line(2, 100.0, xid_line(BUS, 79, "GPU has fallen off the bus.")))
    got = kernlog.collect(kmsg_path=str(p), which=lambda _name: None)
    assert got["readable"] and [(e["code"], e["bus_id"]) for e in got["events"]] == [(79, BUS)]
