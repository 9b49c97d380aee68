"""An Xid line that states its own severity (Blackwell's NVLink5 Xids 144-150, in the lines operators posted:
leptonai/gpud#1160 and #1174, NVIDIA/nccl#2241) is read with its words (unit, severity, link) and judged by them, as
NVIDIA's Xid catalogue ("XID 144-150 Decode") judges its rows; a line that states nothing keeps the table's action."""

from __future__ import annotations

import pytest

from ncclcheck.checks import xid as xids
from ncclcheck.checks.hwaction import MONITOR, RESET_GPU
from ncclcheck.facts import kernlog

POSTED = [
    ("NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 "
     "0x00000000 0x00100000 0x00000004)", 145, "RLW_RXPIPE", "Nonfatal", 13),
    ("NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 "
     "0x00000000 0x00000000)", 144, "SAW_MVB", "Nonfatal", 0),
    ("NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 "
     "0x00000000 0x00000000 0x00000000)", 149, "NETIR_LINK_EVT", "Fatal", 0),
    ("NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 "
     "0x00000000 0x00000000)", 149, "NETIR", "Fatal", None),
]


@pytest.mark.parametrize("line,code,unit,severity,link", POSTED)
def test_the_line_s_own_words_are_read(line, code, unit, severity, link):
    ev = kernlog.match(line)
    assert (ev["kind"], ev["code"], ev["unit"], ev["severity"], ev.get("link")) == ("Xid", code, unit, severity, link)


def test_lines_that_state_nothing_read_as_before():
    assert "severity" not in kernlog.match("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen "
                                           "off the bus.")
    # an Xid 137 naming the unit of the Xid 145 beside it (NVIDIA/nccl#2241) states no severity
    assert "severity" not in kernlog.match("NVRM: Xid (PCI:0000:1b:00): 137, RLW_RXPIPE interrupt hit on link 11 on "
                                           "GPU0: PRIV Error")


@pytest.mark.parametrize("code", range(144, 151))
def test_nonfatal_is_watched_and_fatal_is_at_least_a_reset(code):
    assert xids.xid_action(code, 1, "", "Nonfatal")[0] == MONITOR
    assert xids.xid_action(code, 1, "", "Non-fatal")[0] == MONITOR
    assert xids.xid_action(code, 1, "", "Fatal")[0] == RESET_GPU
    assert xids.xid_action(code, 1, "")[0] == RESET_GPU  # no word: the table's action, never a quieter one


def test_a_stated_fatal_never_lowers_the_table_and_lifts_an_unknown_code():
    assert xids.xid_action(79, 1, "", "Fatal")[0] == xids.XID[79][0]  # reboot stays a reboot
    assert xids.xid_action(999, 1, "", "Fatal")[0] == RESET_GPU
    assert xids.xid_action(999, 1, "")[0] == MONITOR


def test_an_event_keeps_its_worst_word_with_the_line_that_said_it():
    events = kernlog._Events(0.0)
    bus = "0018:01:00"
    events.add(1.0, f"NVRM: Xid (PCI:{bus}): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0)")
    events.add(2.0, f"NVRM: Xid (PCI:{bus}): 145, RLW_REMAP Fatal XC0 i0 Link 07 (0x0)")
    events.add(3.0, f"NVRM: Xid (PCI:{bus}): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0)")
    [ev] = events.out()
    assert (ev["count"], ev["severity"], ev["unit"], ev["links"]) == (3, "Fatal", "RLW_REMAP", [13, 7])
    assert ev["by_severity"] == {"Nonfatal": 2, "Fatal": 1} and "RLW_REMAP Fatal" in ev["severity_text"]
