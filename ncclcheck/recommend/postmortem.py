"""Arming a job so that its failure can be diagnosed (`recommend --postmortem DIR`): torch's flight recorder with a
dump on timeout, and NCCL's debug log, all written under DIR, which `ncclcheck diagnose DIR` then reads.

One table: (name, value template, reason). {dir} is the directory, {host} the node's hostname where the report knows
its nodes (torch appends the rank to the dump's prefix; NCCL expands %h and %p itself). Both torch's current names
and the older TORCH_NCCL_* ones are set, so the same file arms torch 2.1 to 2.13.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model import Recommendation

FR_ENTRIES = 2000  # torch's documented example size: the last 2,000 collectives per process, a few MB per dump
_DUMP = "nccl_trace{host}_rank_"

TABLE = (
    ("TORCH_FR_BUFFER_SIZE", str(FR_ENTRIES), "the flight recorder keeps each process's last collectives (NCCL and, "
     "since torch 2.13, gloo): what `ncclcheck diagnose` compares across ranks"),
    ("TORCH_NCCL_TRACE_BUFFER_SIZE", str(FR_ENTRIES), "the same for torch before 2.6"),
    ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1", "NCCL's watchdog writes every rank's flight recorder when a collective "
     "times out (a hang leaves its dumps)"),
    ("TORCH_FR_DUMP_TEMP_FILE", "{dir}/" + _DUMP, "where the dumps go: torch appends the rank (mkdir -p the "
     "directory on every node first; a shared filesystem keeps them together)"),
    ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "{dir}/" + _DUMP, "the same for torch before 2.6"),
    ("NCCL_DEBUG", "INFO", "NCCL logs its interface and transport choices and its warnings (a postmortem setting: "
     "drop it once the job is healthy)"),
    ("NCCL_DEBUG_SUBSYS", "INIT,NET", "only initialisation and network lines: small logs, enough to name the cause"),
    ("NCCL_DEBUG_FILE", "{dir}/nccl.%h.%p.log", "one log per process, named by host and pid (NCCL expands %h, %p)"),
)


def recommend_postmortem(directory: str, nodes: Iterable = ()) -> list[Recommendation]:
    """The variables that arm a job; per-node dump names (with the host) when the report knows its nodes."""
    directory = directory.rstrip("/") or "/"
    hosts = {n.node_rank: n.hostname.split(".")[0] for n in nodes if getattr(n, "hostname", None)}
    out = []
    for name, template, reason in TABLE:
        if "{host}" in template and len(hosts) > 1:
            for rank, host in sorted(hosts.items()):
                out.append(Recommendation(name, template.format(dir=directory, host=f"_{host}"), reason, node=rank))
        else:
            out.append(Recommendation(name, template.format(dir=directory, host=""), reason))
    return out

