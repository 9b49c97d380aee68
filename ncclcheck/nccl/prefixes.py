"""What launchers, log collectors and pastes put before each line of a job's output, peeled off: so one combined
output, pasted however a user had it, splits back into ranks and each line is read by its own words.

Layers, peeled from the start of a line in any order and any number (at most MAX_LAYERS):
- saying the rank (global): torch's own `[rank3]:` (its excepthook and its c10 log lines, torch 2.2+), Open MPI's
  `--tag-output` (`[1,3]<stderr>:`, 5.x `[1,3]<stderr>: ` and `[1,3][host:pid]<stderr>: `, `[3]<stderr>: `, PMIx 4.1
  without the colon, `[1,3]:` once a web page ate `<stderr>`), MPICH/Intel MPI `-prepend-rank` (`[3] `), srun
  `--label` (`3: `, padded to the width of the largest task id; a hetjob's `P1  3: `);
- saying no global rank: torchrun `--tee`'s `[default3]:` (its role and LOCAL rank), Lightning's `[rank: 3] `
  (local), SkyPilot's `(worker1, rank=1, pid=.., ip=..) ` (a NODE rank), Ray's `(RayTrainWorker pid=.., ip=..) `,
  `(raylet, ip=..) `, `(autoscaler +1m2s) `, Kubernetes' `[pod/NAME/CONTAINER] `, docker compose's `trainer-1  | `,
  DeepSpeed's pdsh `host: ` (only where what follows is another prefix, an NCCL header or a traceback), NeMo's
  `[NeMo I .. module:12] `;
- time stamps: ISO 8601 (`docker logs -t`, CRI's `... stdout F `, GitHub Actions, rsyslog RFC 3339), bracketed ones
  (`[2024-04-02 10:21:55,104] `, Slurm's `[2024-04-02T10:21:55.104] `), syslog/journalctl (`Apr  2 10:21:54 host
  prog[pid]: `), dmesg (`[812345.118734] `, `-T`'s `[Tue Apr  2 10:21:54 2024] `), Open MPI's --timestamp-output
  (`Tue Apr  2 10:21:54 2024`), a bare `10:21:55 `;
- a paste's own marks: colour codes whose ESC was lost or quoted (`[36m`, `^[[36m`, `#033[36m`, `\\033[36m`), a mail or
  Markdown quote's `> `.
Where two layers say a rank, torch's `[rankN]:` wins over an MPI tag, and an MPI tag over srun's label (under
`srun -l torchrun`, srun's label is the node's task and torch's prefix the global rank).
Source: the launchers' own formats (Slurm src/common/io_hdr.c and srun's label code, Open MPI/PMIx iof, Hydra,
torch/distributed/elastic and c10/util/Logging.cpp, Ray's log_monitor, kubectl logs --prefix). Pure: a line in, the
rank its prefixes say and the rest out; every pattern anchored and bounded (linear on a hostile line).
"""

from __future__ import annotations

import re
from typing import Optional

MAX_LAYERS = 8

# -- layers that say a global rank, with how much they are believed (the highest wins; on a tie, the innermost) -----
_RANKED = (
    (3, re.compile(r"\[rank(\d{1,7})\]:\s?")),
    (2, re.compile(r"\[\d{1,10},(\d{1,7})\](?:\[[^\]\s]{1,255}\])?(?:<(?:stdout|stderr|stddiag)>:?|:)\s?")),
    (2, re.compile(r"\[(\d{1,7})\]<(?:stdout|stderr|stddiag)>:?\s?")),
    (2, re.compile(r"\[(\d{1,7})\] (?=\S)")),
    (1, re.compile(r"(?:P\d{1,4} {1,8})?\s{0,8}(\d{1,7}): ")),
)

_ISO = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"
_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
# -- layers that say no global rank ------------------------------------------------------------------------------------
_PLAIN = re.compile("|".join((
    # colour codes whose ESC a copy lost or quoted
    r"(?:\^\[|#033|\\033|\\e|\\x1b|\u241b|\ufffd)?\[\d{1,3}(?:;\d{1,3}){0,4}m ?",
    r"> (?=\S)",
    # time stamps
    _ISO + r"(?: (?:stdout|stderr) [FP])? ?(?:\| |- )?",
    r"\[" + _ISO + r"\] ?",
    r"\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2}(?: - )?",
    _MON + r" {1,2}\d{1,2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})? [\w.-]{1,255} [\w./@-]{1,64}(?:\[\d{1,10}\])?: ",
    r"\[ {0,8}\d{1,9}\.\d{1,9}\] ",
    r"\[" + _DAY + " " + _MON + r" {1,2}\d{1,2} \d{2}:\d{2}:\d{2} \d{4}\] ",
    _DAY + " " + _MON + r" {1,2}\d{1,2} \d{2}:\d{2}:\d{2} \d{4}(?=\[)",
    r"\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})? (?=\S)",
    # orchestrators and launchers that name no global rank
    r"\[default\d{1,7}\]:\s?",
    r"\[[A-Za-z_][\w-]{0,31}?\d{1,7}\]:(?=\S| )\s?",
    r"\[rank: \d{1,7}\] ",
    r"\((?:head|worker\d{1,6}), rank=\d{1,6}, pid=\d{1,10}(?:, ip=[\w.:]{1,64})?\) ",
    r"\((?:[\w.:-]{1,64} )?pid=\d{1,10}(?:, ip=[\w.:]{1,64})?\)(?: \[repeated \d{1,9}x across cluster\])? ?",
    r"\((?:raylet|gcs_server|autoscaler|monitor|dashboard|raylet, ip=[\w.:]{1,64})[^)\n]{0,64}\) ",
    r"\[pod/[\w.-]{1,253}/[\w.-]{1,63}\] ",
    r"[\w.-]{1,64}[-_]\d{1,4} {1,40}\| ",
    r"\[NeMo [IWEDC] [^\]\n]{0,120}\] ",
)))
# DeepSpeed's pdsh prefix: a host name, only before what surely follows it (a prefix, an NCCL header, a traceback);
# never an exception's name ("RuntimeError: ...")
_PDSH = re.compile(r"([A-Za-z0-9][\w.-]{0,63}): (?=\[rank\d|\[\d{1,10}[,\]]|\[default\d|"
                   r"[\w.-]{1,255}:\d{1,10}:\d{1,10} \[\d{1,4}\]|Traceback \(|\[\d{4}-\d{2}-\d{2}|\[[IWEF]\d{4} )")
_NOT_A_HOST = ("Error", "Exception", "Warning", "Interrupt", "Failed", "Failure")


# the host a layer names: pdsh's name, a pod's, Ray's or SkyPilot's ip, journald's host, Open MPI 5's [host:pid]
_HOSTS = (re.compile(r"\[pod/([\w.-]{1,253})/"), re.compile(r"\(.{0,80}\bip=([\w.:]{1,64})\)"),
          re.compile(r"\[\d{1,10},\d{1,7}\]\[([^\]:\s]{1,255}):\d{1,10}\]"),
          re.compile(_MON + r" {1,2}\d{1,2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})? ([\w.-]{1,255}) "))


def peel(line: str) -> tuple[Optional[int], str]:
    """(the global rank the line's prefixes say, or None; the line without them)."""
    rank, _, rest = peel_host(line)
    return rank, rest


def peel_host(line: str) -> tuple[Optional[int], Optional[str], str]:
    """(the global rank the line's prefixes say, the host one of them names, each or None; the line without them)."""
    rank, host, pos = peel_spans(line)
    return (int(line[rank[0]:rank[1]]) if rank else None, line[host[0]:host[1]] if host else None,
            line[pos:] if pos else line)


def peel_spans(line: str) -> tuple[Optional[tuple], Optional[tuple], int]:
    """Where peel_host finds them: (the (start, end) of the rank's digits or None, of the host's name or None, where
    the rest starts). Every layer reads a digit as any digit (no pattern holds a digit of its own), so two lines
    equal but for their digits peel the same: postmortem/logscan.py reads a line's prefix from another's spans."""
    rank, host, believed, pos = None, None, 0, 0
    for _ in range(MAX_LAYERS):
        start = pos
        for weight, rx in _RANKED:
            m = rx.match(line, pos)
            if m:
                if weight >= believed:
                    rank, believed = m.span(1), weight
                pos = m.end()
                break
        else:
            m = _PLAIN.match(line, pos)
            if m is None or m.end() == pos:
                m = _PDSH.match(line, pos)
                if m is None or m.group(1).endswith(_NOT_A_HOST):
                    break
                host = host or m.span(1)
            pos = m.end()
        if host is None:
            layer = line[start:pos]
            h = next((h for h in (rx.match(layer) or rx.search(layer) for rx in _HOSTS) if h), None)
            host = (start + h.start(1), start + h.end(1)) if h else None
    return rank, host, pos
