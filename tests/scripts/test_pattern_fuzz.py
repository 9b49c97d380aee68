"""scripts/pattern_fuzz.py run small (no hypothesis lines past the built ones, each line run once, the reader timed
on 0.02 MiB): its own correctness fields on its last line, `patterns=K/K` (every pattern on a job's text
exercised), `prefilter_misses=0` (classify names every line as trying every class does), `then_equal=J/J` (each
Then matches as its regex), and `over_bound=0` against a bound of 100 s/MiB: no timing target (docs quote those, on
a quiet machine), but a pattern that backtracks takes seconds on one 4,096-character line, hundreds of s/MiB, and
still counts."""

from __future__ import annotations

import pytest

from ncclcheck_lab import pattern_fuzz

pytestmark = pytest.mark.slow  # every pattern's adversarial lines, once each: ~35 s of CPU


def test_every_pattern_exercised_prefilter_and_thens_agree_and_none_backtracks(capsys):
    rc = pattern_fuzz.main(["--examples", "0", "--mib", "0.02", "--bound", "100", "--repeat", "1"])
    out = capsys.readouterr().out
    fields = dict(kv.split("=", 1) for kv in out.strip().splitlines()[-1].split() if "=" in kv)
    got, total = fields["patterns"].split("/")
    assert got == total and int(total) >= 60, out
    assert fields["over_bound"] == "0" and fields["prefilter_misses"] == "0", out
    same, thens = fields["then_equal"].split("/")
    assert same == thens and int(thens) > 0, out
    assert rc == 0
