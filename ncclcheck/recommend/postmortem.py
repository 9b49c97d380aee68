"""Arming a job so that its failure can be diagnosed (`recommend --postmortem DIR`): torch's flight recorder with a
dump on timeout, and NCCL's debug log, all written under DIR, which `ncclcheck diagnose DIR` then reads.

One table: (name, value template, reason). {dir} is the directory, {host} the node's hostname where the report knows
its nodes (torch appends the rank to the dump's prefix; NCCL expands %h and %p itself). The flight recorder's two
variables are set under the one name the installed torch reads (facts.versions.flight_recorder_names: torch 2.13
warns on every rank for the old TORCH_NCCL_* spellings); with no torch here to ask, both names are set.
Only NCCL's watchdog dumps on its own: ncclcheck.arm (training/arm.py) makes every rank dump, and sets this table.
TORCH_NCCL_ENABLE_TIMING=1 makes the recorder tell "called, never started on its GPU" (state scheduled) from
"started, never finished" (state started): without it NCCL entries never say started.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from ..model import Recommendation

FR_ENTRIES = 2000  # torch's documented example size: the last 2,000 collectives per process, a few MB per dump
_DUMP = "nccl_trace{host}_rank_"

TABLE = (
    ("TORCH_FR_BUFFER_SIZE", str(FR_ENTRIES), "the flight recorder keeps each process's last collectives (NCCL and, "
     "since torch 2.13, gloo): what `ncclcheck diagnose` compares across ranks"),
    ("TORCH_NCCL_TRACE_BUFFER_SIZE", str(FR_ENTRIES), "the same for torch before the TORCH_FR_* names"),
    ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1", "NCCL's watchdog writes every rank's flight recorder when a collective "
     "times out (a hang leaves its dumps). Nothing else dumps it: a gloo job, a rank that raises or times out in "
     "gloo, one stopped by SIGTERM (torchrun when a peer died, Slurm's time limit) leaves its flight recorder and "
     "stacks only if the script calls `ncclcheck.arm({dir!r})` before init_process_group (or "
     "`ncclcheck.guard(postmortem_dir={dir!r})`)"),
    ("TORCH_NCCL_ENABLE_TIMING", "1", "the recorder also marks when the GPU started each collective: a hang then "
     "says whether a rank's GPU never started it (its stream stuck in a kernel) or it started and never finished "
     "(a peer or a link); costs two CUDA events per collective"),
    ("TORCH_FR_DUMP_TEMP_FILE", "{dir}/" + _DUMP, "where the dumps go: torch appends the rank (mkdir -p the "
     "directory on every node first; a shared filesystem keeps them together)"),
    ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "{dir}/" + _DUMP, "the same for torch before the TORCH_FR_* names"),
    ("NCCL_DEBUG", "INFO", "NCCL logs its interface and transport choices and its warnings (a postmortem setting: "
     "drop it once the job is healthy)"),
    ("NCCL_DEBUG_SUBSYS", "INIT,NET", "only initialisation and network lines: small logs, enough to name the cause"),
    ("NCCL_DEBUG_FILE", "{dir}/nccl.%h.%p.log", "one log per process, named by host and pid (NCCL expands %h, %p)"),
)
# a name -> the flight_recorder_names() key whose choice decides whether it is set
_FR_KEY = {"TORCH_FR_BUFFER_SIZE": "buffer", "TORCH_NCCL_TRACE_BUFFER_SIZE": "buffer",
           "TORCH_FR_DUMP_TEMP_FILE": "dump", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "dump"}


def recommend_postmortem(directory: str, nodes: Iterable = (), fr_names: Optional[dict] = None,
                         ask_torch: bool = True) -> list[Recommendation]:
    """The variables that arm a job; per-node dump names (with the host) when the report knows its nodes.
    fr_names: {"buffer": name, "dump": name} torch reads (default: asked of the installed torch when ask_torch;
    None after asking: both spellings)."""
    if fr_names is None and ask_torch:
        from ..facts.versions import flight_recorder_names

        fr_names = flight_recorder_names()
    directory = directory.rstrip("/") or "/"
    hosts = {n.node_rank: n.hostname.split(".")[0] for n in nodes if getattr(n, "hostname", None)}
    out = []
    for name, template, reason in TABLE:
        key = _FR_KEY.get(name)
        if key and fr_names and fr_names.get(key) != name:
            continue
        if "{host}" in template and len(hosts) > 1:
            for rank, host in sorted(hosts.items()):
                out.append(Recommendation(name, template.format(dir=directory, host=f"_{host}"),
                                          reason.replace("{dir!r}", repr(directory)), node=rank))
        else:
            out.append(Recommendation(name, template.format(dir=directory, host=""),
                                      reason.replace("{dir!r}", repr(directory))))
    return out

