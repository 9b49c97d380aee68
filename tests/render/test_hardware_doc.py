"""docs/hardware.md's table has a row per hardware fault class naming ncclcheck's check ids: those ids are exactly the
registry's hardware checks (a new hardware check needs its row; a row cannot name a check that does not exist)."""

from __future__ import annotations

import pathlib
import re

from ncclcheck.checks import hwaction
from ncclcheck.checks.registry import check_ids, hardware_ids

DOC = pathlib.Path(__file__).parents[2] / "docs" / "hardware.md"


def table_rows() -> list:
    text = DOC.read_text()
    head = text.index("| # | fault class |")
    rows = []
    for line in text[head:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


def test_the_tables_check_ids_are_the_registrys_hardware_checks():
    rows = table_rows()
    assert all(len(r) == 8 for r in rows), [r[0] for r in rows if len(r) != 8]
    named = [i for r in rows for i in re.findall(r"`([a-z_]+\.[a-z_]+)`", r[-1])]
    assert set(named) <= set(check_ids()), set(named) - set(check_ids())
    assert {i for i in named if i in hardware_ids()} == set(hardware_ids())


def test_the_vocabulary_table_is_the_modules():
    text = DOC.read_text()
    for action in hwaction.ACTIONS:
        assert f"| {action} | {hwaction.STATUS[action].value} |" in text, action
