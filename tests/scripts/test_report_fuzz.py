"""scripts/report_fuzz.py run small (one example report, its first 12 fields, each set to every wrong-typed value):
its own correctness fields, `K crashed` = 0 on its last line with reports really rendered, and exit 0; never its
timings. (tests/render/test_report_validation.py samples the same space with hypothesis; this runs the script.)"""

from __future__ import annotations

import re

import pytest

from ncclcheck_lab import report_fuzz


def test_one_examples_first_fields_with_wrong_types_render_without_a_crash(capsys):
    rc = report_fuzz.main(["--only", "preflight-fail", "--paths", "12"])
    out = capsys.readouterr().out
    m = re.fullmatch(r"(\d+) reports rendered \(text\), (\d+) crashed, \d+ s", out.strip().splitlines()[-1])
    assert m, out
    assert int(m.group(1)) > 0 and m.group(2) == "0" and rc == 0, out


def test_an_example_name_that_matches_nothing_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        report_fuzz.main(["--only", "no-such-example"])
    assert e.value.code == 2
    assert "no example matches" in capsys.readouterr().err
