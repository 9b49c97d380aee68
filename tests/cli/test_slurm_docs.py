"""docs/slurm.md's slurm.conf lines are the ones the Slurm lab runs (scripts/netlab_launchers.docs_slurm_lines reads
them from the docs); here, without root, that block parses and says what the docs promise."""

from __future__ import annotations

import re

from ncclcheck_lab.netlab import launchers as netlab_launchers


def test_docs_slurm_conf_lines_are_the_labs_with_only_the_two_paths_replaced():
    lines = netlab_launchers.docs_slurm_lines("/lab/health", "/lab/prolog")
    conf = dict(line.split("=", 1) for line in lines)
    assert conf["HealthCheckProgram"] == "/lab/health" and conf["Prolog"] == "/lab/prolog"
    assert "CYCLE" in conf["HealthCheckNodeState"].split(",") and conf["PrologFlags"] == "Alloc"
    assert int(conf["HealthCheckInterval"]) > 0 and 0 < int(conf["PrologEpilogTimeout"]) <= 120
    text = netlab_launchers.DOCS_SLURM.read_text()
    for line in lines[1:]:
        if not line.startswith("Prolog="):
            assert line in text


def test_every_ncclcheck_command_in_docs_slurm_md_parses():
    """The health wrapper, the prolog and the nightly sweep script of the docs use flags that exist."""
    import shlex

    from ncclcheck.cli import build_parser

    text = netlab_launchers.DOCS_SLURM.read_text().replace("\\\n", " ")
    commands = [m.group(1) for line in text.splitlines()
                if (m := re.search(r"(?:^|/|srun )ncclcheck ((?:health|sweep) .*)$", line.strip()))]
    assert len(commands) >= 3, commands
    for cmd in commands:
        argv = shlex.split(cmd.replace('"$(date +%j)"', "7").replace('"/var/log/ncclcheck/sweep-$SLURM_JOB_ID.json"',
                                                                       "x.json"))
        args = build_parser().parse_args(argv)
        assert args.command in ("health", "sweep") and (args.drain or args.dry_run), cmd
