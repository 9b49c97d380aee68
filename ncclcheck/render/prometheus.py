"""Prometheus text exposition of a Report, for node_exporter's textfile collector (`--prometheus FILE`).

Metric names start with `ncclcheck_` and use base units (seconds, bytes per second: nccl-tests' GB/s are 1e9 B/s).
A check's status is an enum: one sample per possible status, 1 for the current one, so `== 1` alerts need no
mapping table. Every metric of one run carries `command`, so a bench file and a preflight file can sit side by side
in the collector's directory without clashing. Formats only: every number comes from the Report.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from typing import Optional

from ..model import Report, Status, clean_text
from .common import hostnames as _hostnames
from .words import COLUMN, IN_PLACE, OUT_OF_PLACE, SINGLE_FORM, graph_timed, moves_no_data

PREFIX = "ncclcheck_"
_STATUSES = [s.value for s in (Status.PASS, Status.SKIP, Status.WARN, Status.FAIL)]
_GB = 1e9  # nccl-tests' GB/s


def _escape(value: object) -> str:
    return clean_text(str(value)).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _num(x: float) -> str:
    return repr(float(x)) if x == x else "NaN"


class _Family:
    def __init__(self, name: str, kind: str, help_text: str):
        self.name, self.kind, self.help, self.samples = PREFIX + name, kind, help_text, []

    def add(self, value: float, **labels) -> None:
        self.samples.append((labels, value))

    def lines(self) -> list[str]:
        if not self.samples:
            return []
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        out += [f"{self.name}{_labels(lb)} {_num(v)}" for lb, v in self.samples]
        return out


def _epoch(started: str) -> Optional[float]:
    try:
        return _dt.datetime.fromisoformat(started).timestamp()
    except (TypeError, ValueError):
        return None


def _run(report: Report) -> list[_Family]:
    cmd = report.command
    info = _Family("info", "gauge", "ncclcheck version and the world of this run (value is always 1)")
    info.add(1, command=cmd, version=report.version, backend=report.world.backend, launcher=report.world.launcher,
             nnodes=report.world.nnodes, world_size=report.world.world_size)
    status = _Family("run_status", "gauge", "overall verdict of the run: 1 for the current status")
    for s in _STATUSES:
        status.add(1 if report.status.value == s else 0, command=cmd, status=s)
    code = _Family("run_exit_code", "gauge", "exit code of the run (0 ok, 1 failed, 2 usage, 3 internal)")
    code.add(report.exit_code, command=cmd)
    dur = _Family("run_duration_seconds", "gauge", "wall time of the run")
    dur.add(report.duration_s, command=cmd)
    ts = _Family("run_timestamp_seconds", "gauge", "when the run started (Unix time)")
    t = _epoch(report.started)
    if t is not None:
        ts.add(t, command=cmd)
    partial = _Family("run_partial", "gauge", "1 when the run was cut short and holds only what it gathered")
    partial.add(1 if report.partial else 0, command=cmd)
    return [info, status, code, dur, ts, partial]


def _checks(report: Report) -> list[_Family]:
    hosts = _hostnames(report)
    fam = _Family("check_status", "gauge", "status of one check on one node (node=all: cross-node); 1 for the "
                  "current status")
    for c in report.checks:
        node = "all" if c.node is None else str(c.node)
        host = hosts.get(c.node, "") if c.node is not None else ""
        for s in _STATUSES:
            fam.add(1 if c.status.value == s else 0, command=report.command, check=c.id, node=node, hostname=host,
                    status=s)
    return [fam]


def _bench(report: Report) -> list[_Family]:
    # The in_place label keeps the JSON's value; the help says what each value means in the renderers' words.
    placed = (f'; in_place="true": {IN_PLACE.label}, "false": {OUT_OF_PLACE.label} or the {SINGLE_FORM.label} '
              "of an op torch has in one form only")
    busbw = _Family("bench_busbw_bytes_per_second", "gauge",
                    f"bus bandwidth (nccl-tests {COLUMN['busbw']}) per op, dtype, size{placed}")
    algbw = _Family("bench_algbw_bytes_per_second", "gauge", f"algorithm bandwidth (nccl-tests {COLUMN['algbw']})")
    mean = _Family("bench_time_seconds", "gauge", "mean time per operation, slowest rank (nccl-tests time)")
    p99 = _Family("bench_time_p99_seconds", "gauge", "99th percentile of the per-iteration time (slowest rank)")
    cv = _Family("bench_time_cv_ratio", "gauge", "coefficient of variation of the per-iteration time")
    wrong = _Family("bench_wrong_elements", "gauge", "elements that differ from the exact result (--check)")
    eager = _Family("bench_eager_time_seconds", "gauge", "mean time per operation called one torch call at a time, "
                    "slowest rank, where bench_time_seconds is a CUDA-graph replay's (the difference is torch's cost "
                    "per call)")
    for r in report.bench or []:
        lb = {"op": r.op, "dtype": r.dtype, "bytes": r.bytes, "in_place": "true" if r.in_place else "false"}
        if not moves_no_data(r):  # a call that moved nothing has no bandwidth: no sample, rather than a false one
            busbw.add(r.busbw_gbps * _GB, **lb)
            algbw.add(r.algbw_gbps * _GB, **lb)
        mean.add(r.time_us * 1e-6, **lb)
        if graph_timed(r):
            eager.add(r.extra["eager_time_us"] * 1e-6, **lb)
        st = r.extra.get("iter_stats") or {}
        if "p99_us" in st:
            p99.add(st["p99_us"] * 1e-6, **lb)
            cv.add(st["cv"], **lb)
        if r.wrong is not None:
            wrong.add(r.wrong, **lb)
    return [busbw, algbw, mean, eager, p99, cv, wrong]


def _links(report: Report) -> list[_Family]:
    links = report.links or {}
    hosts = _hostnames(report)
    if isinstance(links.get("hosts"), list):  # the matrix's own names, index by index
        hosts = dict(enumerate(str(h) for h in links["hosts"]))
    bw = _Family("link_bandwidth_bytes_per_second", "gauge", "measured bandwidth from node a to node b")
    for a, row in enumerate(links.get("matrix_gbps") or []):
        for b, gbps in enumerate(row or []):
            if gbps is not None and a != b:
                bw.add(gbps * _GB, a=a, b=b, a_hostname=hosts.get(a, ""), b_hostname=hosts.get(b, ""),
                       size=links.get("size", ""))
    slow = _Family("link_slow_node", "gauge", "1 for each node the links run named slow")
    for n in links.get("slow_nodes") or []:
        slow.add(1, node=n, hostname=hosts.get(n, ""))
    slow_links = _Family("link_slow", "gauge", "1 for each link (node pair) the links run named slow")
    for s in links.get("slow") or []:
        slow_links.add(1, a=s.get("a"), b=s.get("b"))
    return [bw, slow, slow_links]


def _slow(report: Report) -> list[_Family]:
    """watch's live.slow and diagnose's postmortem.slow (postmortem/slow.py's section): each named rank, host or link
    (1 per finding, its share and cost per step beside), and each rank's NVRx scores, so an alert can say who."""
    extra = report.extra or {}
    section = (extra.get("live") or {}).get("slow") or (extra.get("postmortem") or {}).get("slow")
    if not isinstance(section, dict):
        return []
    cmd = report.command
    named = _Family("slow", "gauge", "1 for each rank, host or link named as slowing the job (kind: compute or "
                    "communication)")
    share = _Family("slow_share_ratio", "gauge", "share of each step the job loses to the named rank, host or link")
    cost = _Family("slow_cost_seconds", "gauge", "time the job loses per step to the named rank or host")
    for f in [*(section.get("named") or []), *(section.get("links") or [])]:
        if not isinstance(f, dict):
            continue
        lb = {"command": cmd, "kind": f.get("kind", ""), "unit": f.get("unit", ""),
              "rank": "" if f.get("rank") is None else f["rank"],
              "host": f.get("host") or ",".join(str(h) for h in f.get("hosts") or [])}
        named.add(1, **lb)
        if isinstance(f.get("share"), (int, float)):
            share.add(f["share"], **lb)
        if isinstance(f.get("cost_us"), (int, float)):
            cost.add(f["cost_us"] * 1e-6, **lb)
    rel = _Family("rank_relative_score", "gauge", "a rank's time per step against the best rank's (NVRx's relative "
                  "score: 1 as fast as the best, lower slower)")
    ind = _Family("rank_individual_score", "gauge", "a rank's recent time per step against its own best stretch "
                  "(NVRx's individual score)")
    lost = _Family("rank_slow_share_ratio", "gauge", "share of the recent steps the job lost to this rank arriving "
                   "last")
    for r in section.get("ranks") or []:
        if not isinstance(r, dict):
            continue
        lb = {"command": cmd, "rank": r.get("rank"), "host": r.get("host") or ""}
        for fam, key in ((rel, "relative"), (ind, "individual"), (lost, "share")):
            if isinstance(r.get(key), (int, float)):
                fam.add(r[key], **lb)
    job = section.get("job") if isinstance(section.get("job"), dict) else {}
    step = _Family("job_step_seconds", "gauge", "the job's recent step time (steps found in its own rhythm)")
    best = _Family("job_best_step_seconds", "gauge", "the job's best stretch of steps (its own best)")
    if isinstance(job.get("step_us"), (int, float)):
        step.add(job["step_us"] * 1e-6, command=cmd, pg=section.get("pg") or "")
    if isinstance(job.get("best_step_us"), (int, float)):
        best.add(job["best_step_us"] * 1e-6, command=cmd, pg=section.get("pg") or "")
    return [named, share, cost, rel, ind, lost, step, best]


def render_prometheus(report: Report) -> str:
    """The whole exposition, one family per metric name, ending in a newline (as the text format requires)."""
    families: Iterable[_Family] = (_run(report) + _checks(report) + _bench(report) + _links(report) +
                                   _slow(report))
    lines = [ln for f in families for ln in f.lines()]
    return "\n".join(lines) + "\n"


__all__ = ["render_prometheus", "PREFIX"]
