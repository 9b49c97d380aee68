"""Through the real CLI (issue 53, item 4): `recommend --postmortem DIR` prints reasons longer than a terminal line
and values built from a path the user typed; what it prints for a shell pastes into bash and zsh and sources in
them, in a job log (a pipe, 80 or 160 columns) and as `--format env` / `--env-out`."""

from __future__ import annotations

import shutil

import pytest

from ncclcheck.render.console import RECOMMENDED_HEAD, WHY_HEAD
from tests.conftest import run_cli
from tests.shells import SOURCING, paste, paste_errors, source, syntax_ok

# A directory a user could name: spaces, parentheses, an apostrophe, `$(...)` and backticks (created by nobody).
NAMES = ["TORCH_FR_DUMP_TEMP_FILE", "NCCL_DEBUG_FILE", "NCCL_DEBUG", "TORCH_NCCL_DUMP_ON_TIMEOUT", "GLOO_SOCKET_IFNAME"]


def _dir(tmp_path) -> str:
    return f"{tmp_path}/pm dir(1) it's $(touch {tmp_path}/pwned) `touch {tmp_path}/pwned`"


def _exports(stdout: str) -> list:
    lines = stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(RECOMMENDED_HEAD.split(" (")[0]))
    block = [ln for ln in lines[start + 1:lines.index(WHY_HEAD, start)] if ln.startswith(" ")]  # not the heading
    assert block and all(ln.startswith("  export ") for ln in block), block
    return block


@pytest.mark.parametrize("columns", ["80", "160"])
def test_recommend_postmortem_block_pastes_and_sources(tmp_path, columns):
    pm = _dir(tmp_path)
    res = run_cli("recommend", "--postmortem", pm, env={"COLUMNS": columns}, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    block = "\n".join(_exports(res.stdout)) + "\n"
    path = tmp_path / "block.sh"
    path.write_text(block)
    want = {"TORCH_FR_DUMP_TEMP_FILE": f"{pm}/nccl_trace_rank_", "NCCL_DEBUG_FILE": f"{pm}/nccl.%h.%p.log",
            "NCCL_DEBUG": "INFO", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}
    for shell in SOURCING:
        if shell in ("bash", "zsh"):
            assert syntax_ok(shell, str(path)).returncode == 0, shell
        got, err = source(shell, str(path), NAMES, str(tmp_path))
        assert {k: got[k] for k in want} == want and err == "", shell
    for shell in ("bash", "zsh"):
        if shutil.which(shell):
            got, transcript = paste(shell, block, NAMES, str(tmp_path))
            assert paste_errors(transcript) == [] and {k: got.get(k) for k in want} == want, transcript[-2000:]
    assert not (tmp_path / "pwned").exists()


def test_recommend_format_env_and_env_out_source_in_bash_and_zsh(tmp_path):
    pm = _dir(tmp_path)
    env_out = tmp_path / "out.env"
    res = run_cli("recommend", "--postmortem", pm, "--format", "env", "--env-out", str(env_out), timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    printed = tmp_path / "printed.env"
    printed.write_text(res.stdout)
    for path in (printed, env_out):
        for shell in SOURCING:
            if shell in ("bash", "zsh"):
                assert syntax_ok(shell, str(path)).returncode == 0, (shell, path)
            for how in ("source", "eval"):
                got, err = source(shell, str(path), NAMES, str(tmp_path), how=how)
                assert got["TORCH_FR_DUMP_TEMP_FILE"] == f"{pm}/nccl_trace_rank_" and err == "", (shell, how)
    assert not (tmp_path / "pwned").exists()
