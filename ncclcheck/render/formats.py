"""The one table of output formats: name -> (flag, renderer, may it go to stdout, help, read on its own node).
Every subcommand's output flags (`report` and `env` included), the CLI's path checks, %-expansion and who writes
which file, and render.files.write_outputs read it, so a new format is a row here plus its renderer module."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..model import Report


@dataclass(frozen=True)
class Format:
    flag: str  # the command-line flag, e.g. "--html"
    renderer: str  # "module:function" under ncclcheck.render, imported only when this format is written
    stdout: bool  # "-" as the path writes it to stdout (otherwise "-" is refused)
    help: str
    # Read on the node that wrote it (a container sources its nccl.env; node_exporter reads a local directory): every
    # node's first rank writes it, whatever the path. The others are the job's report, written once per job.
    node_local: bool = False
    # Offered only by the commands whose report can hold what it writes (commands.Command.recommends): --env-out on a
    # command that never recommends a variable would write a file that sets nothing, every time.
    needs_recommendations: bool = False

    @property
    def dest(self) -> str:
        """The flag's keyword name (argparse dest, Python API keyword): "--env-out" -> "env_out"."""
        return self.flag[2:].replace("-", "_")

    def render(self, report: Report) -> str:
        module, _, fn = self.renderer.partition(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), fn)(report)


FORMATS: dict[str, Format] = {
    "json": Format("--json", "json:render_json", True,
                   "write the JSON report (schema ncclcheck.report/1); '-' = stdout"),
    "html": Format("--html", "html:render_html", False, "write a self-contained HTML report (with plots)"),
    "junit": Format("--junit", "junit:render_junit", False, "write JUnit XML (one testcase per check)"),
    "markdown": Format("--markdown", "markdown:render_markdown", False,
                       "write Markdown (e.g. $GITHUB_STEP_SUMMARY)"),
    "env_out": Format("--env-out", "envfile:render_envfile", False,
                      "write the recommended variables as a sourceable file (a run without recommendations writes "
                      "one that sets nothing)", node_local=True, needs_recommendations=True),
    "prometheus": Format("--prometheus", "prometheus:render_prometheus", False,
                         "write Prometheus text metrics (ncclcheck_*) atomically, e.g. for node_exporter's textfile "
                         "collector", node_local=True),
}

PATH_HELP = ("Paths expand %j (job id), %n (node rank), %h (hostname), %r (rank: every rank writes). One report per "
             "job: a path the same on every node is written by node 0 only; %n or %h gives each node its own (so do "
             "--env-out and --prometheus, always: they are read on the node).")
