"""A usage error's hint names the --help of the subcommand that was typed (whose flags the user needs), not the
top-level one."""

from __future__ import annotations

import pytest

from ncclcheck import cli


@pytest.mark.parametrize("argv, hint", [
    (["bench", "--env-outx", "f"], "ncclcheck bench --help"),
    (["links", "--sizes", "1M"], "ncclcheck links --help"),
    (["env", "--strict"], "ncclcheck env --help"),
    (["links", "--rounds", "x"], "ncclcheck links --help"),
    (["nosuch"], "ncclcheck --help"),
])
def test_usage_errors_point_at_the_subcommands_help(argv, hint, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ncclcheck: error:") and err.endswith(f"(see '{hint}')"), err
