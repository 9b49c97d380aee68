"""Every check id the package can report has a registry row for the commands that report it: none is made by hand
in a place the registry does not name (a new id without a row fails here, and then the docs test wants its row in
docs/troubleshooting.md)."""

from __future__ import annotations

import pathlib
import re

from ncclcheck.checks.registry import REGISTRY, STEP, check_ids, unregistered
from ncclcheck.model import CheckResult, Status

PACKAGE = pathlib.Path(__file__).parents[2] / "ncclcheck"
PREFIXES = sorted({i.split(".")[0] for i in check_ids()})
# A check id where the package writes one: any string literal that starts with a registered id's prefix (the
# package writes no other strings of that shape, so none can slip past the registry under another spelling).
ID_RE = re.compile(r'"((?:' + "|".join(PREFIXES) + r')\.[a-z_]+)"')


def ids_in_source() -> dict:
    found: dict = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "registry.py":
            continue  # the rows themselves
        for m in ID_RE.finditer(path.read_text(encoding="utf-8")):
            found.setdefault(m.group(1), set()).add(str(path.relative_to(PACKAGE)))
    return found


def test_every_id_the_package_writes_is_registered():
    found = ids_in_source()
    assert set(check_ids()) - set(found) == set()  # the scan sees every registered id (the pattern is not blind)
    missing = {i: sorted(where) for i, where in found.items() if i not in check_ids()}
    assert missing == {}


def test_every_registered_id_is_written_somewhere():
    found = ids_in_source()
    for spec in REGISTRY:
        if spec.scope == STEP:
            assert spec.id in found, spec.id
            modules = [m.strip().split(" ")[0] for m in spec.made_by.split(",")]
            assert any(m in found[spec.id] for m in modules), (spec.id, spec.made_by, sorted(found[spec.id]))
        else:
            assert spec.fn is not None, spec.id


def test_unregistered_names_ids_outside_a_commands_rows():
    assert unregistered("bench", ["bench.coverage", "links.slow", "nosuch.id"]) == ["links.slow", "nosuch.id"]
    assert unregistered("recommend", ["rendezvous.world", "env.nccl"]) == []
    assert CheckResult("bench.world", Status.FAIL, "x").id in check_ids("bench")
