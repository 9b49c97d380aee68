"""scripts/diagnose_fuzz.py run small (seed 1, 40 mutated dumps): its own correctness fields, `escaped=0` on its last
line (no exception left diagnose or a renderer on a hostile flight-recorder dump) and exit 0; never its timings."""

from __future__ import annotations

from ncclcheck_lab import diagnose_fuzz


def test_forty_mutated_dumps_let_no_exception_escape(capsys):
    rc = diagnose_fuzz.main(["1", "40"])
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last == "dumps=40 escaped=0", out
    assert "no exception escaped" in out and rc == 0
