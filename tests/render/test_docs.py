"""The troubleshooting table covers every stable check id, so a user who meets one in a report finds it there."""

from __future__ import annotations

import pathlib
import re

from ncclcheck.checks.registry import check_ids

DOCS = pathlib.Path(__file__).parents[2] / "docs"

# Every check id a report can hold: the registry's (checks/registry.py), the one list.
CHECK_IDS = check_ids()


def test_troubleshooting_has_a_row_per_check_id():
    text = (DOCS / "troubleshooting.md").read_text()
    rows = re.findall(r"^\| `([a-z_.]+)` \|(.*)\|$", text, re.M)
    ids = [r[0] for r in rows]
    assert sorted(ids) == sorted(CHECK_IDS)
    for _id, rest in rows:
        assert len([c for c in rest.split(" | ") if c.strip()]) == 3, _id  # symptom, cause, fix all filled


def test_deploy_uses_the_documented_flags():
    text = (DOCS / "deploy.md").read_text()
    for flag in ("--nnodes", "--node-rank", "--nproc-per-node", "--master-addr", "--master-port", "--timeout",
                 "--json", "--junit", "--env-out", "--min-busbw", "--sizes 64M-1G", "JOB_COMPLETION_INDEX"):
        assert flag in text, flag
