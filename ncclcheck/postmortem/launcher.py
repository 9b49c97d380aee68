"""What launchers leave after a failure: torchrun's failure table (per failed rank: host, rank, local rank, exit code
or signal, error file, and whether the agent itself stopped it), srun's and mpirun's reports, which launcher wrote an
output, and torchelastic's error files (TORCHELASTIC_ERROR_FILE: a worker's exception as JSON)."""

from __future__ import annotations

import re
import signal
from typing import Any, Optional

from ..nccl.debuglog import split_prefix
from ..nccl.linear import MAX_LINE_CHARS
from .bound import MAX_FIELD_CHARS, clip
from .flight import MAX_WORLD

_BLOCK = re.compile(r"^\s*\[(\d+)\]:\s*$")
# the value is stripped in Python: "(.*?)\s*$" tried the end of the line from every character of a run of spaces
_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_RANK = re.compile(r"^(\d+)(?:\s*\(local_rank:\s*(\d+)\))?")
_EXIT = re.compile(r"^(-?\d+)(?:\s*\(pid:\s*(\d+)\))?(?:\s*\((SIG\w+)\))?")
ROOT_CAUSE = "Root Cause (first observed failure)"
# an exception's line, as it ends a traceback (logscan.RAISED's shape)
_RAISED = re.compile(r"^[A-Za-z_][\w.]{0,200}(?:Error|Exception|Failed|Interrupt)(?::|$)")
MAX_EXITCODE = 1 << 31  # exit codes and pids are C ints: a larger number on the table is not one


def _rank(v: int) -> Optional[int]:
    """A rank number read from a launcher's output, or None: rank 10^22 is not a rank (it made a world of a
    million ranks, one line of text becoming an 18 MiB report), neither is one past any job's MAX_WORLD."""
    return v if 0 <= v < MAX_WORLD else None


def _int(v: int) -> Optional[int]:
    return v if -MAX_EXITCODE <= v < MAX_EXITCODE else None


def signal_name(exitcode: Optional[int]) -> Optional[str]:
    """-9 -> SIGKILL (torchrun's exit code of a worker killed by a signal); None for a plain exit."""
    if exitcode is None or exitcode >= 0:
        return None
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


def parse_failure_table(text: str) -> list[dict]:
    """torchrun's "Failures:" / "Root Cause (first observed failure):" table: one record per failed rank
    {rank, local_rank, host, exitcode, signal, pid, error_file, time, first} (first: torchrun's root cause)."""
    out: dict = {}
    cur: Optional[dict] = None
    first = False
    for raw in (text or "").splitlines():
        if len(raw) < 3:  # shorter than anything below reads ("===", "[0]:", "rank: 0"): no state changes
            continue
        _, line = split_prefix(clip(raw, MAX_LINE_CHARS))
        if ROOT_CAUSE in line:
            first, cur = True, None
            continue
        if line.startswith("===") or line.startswith("---"):
            cur = None
            continue
        if _BLOCK.match(line):
            cur = {"first": first}
            continue
        m = _FIELD.match(line) if cur is not None else None
        if not m:
            # the traceback field's next lines: its last exception line is the rank's own end (its error file)
            if cur is not None and cur.get("_tb") and "rank" in cur and (x := _RAISED.match(line.strip())):
                out[cur["rank"]]["raised"] = clip(line.strip(), MAX_FIELD_CHARS)
            continue
        if cur is not None:
            cur["_tb"] = m.group(1) == "traceback"
        key, value = m.group(1), m.group(2).rstrip()
        if key == "rank" and (r := _RANK.match(value)) and _rank(int(r.group(1))) is not None:
            cur["rank"] = int(r.group(1))
            cur["local_rank"] = _rank(int(r.group(2))) if r.group(2) else None
        elif key == "exitcode" and (x := _EXIT.match(value)):
            code = _int(int(x.group(1)))
            cur["exitcode"] = code
            cur["pid"] = _int(int(x.group(2))) if x.group(2) else None
            cur["signal"] = clip(x.group(3), MAX_FIELD_CHARS) if x.group(3) else signal_name(code)
        elif key in ("host", "time"):
            cur[key] = clip(value, MAX_FIELD_CHARS)
        elif key == "error_file":
            cur["error_file"] = None if value.strip() in ("<N/A>", "") else clip(value)
        if "rank" in cur:
            rec = out.setdefault(cur["rank"], {"rank": cur["rank"], "first": False})
            rec.update({k: v for k, v in cur.items() if k not in ("first", "_tb")})
            rec["first"] = rec["first"] or cur["first"]
    return [out[r] for r in sorted(out)]


# srun's own report of a task that ended badly: "srun: error: h2: task 3: Killed", "...: tasks 0-1: Exited with exit
# code 1" (Slurm's words for the signal: Killed = SIGKILL, Aborted = SIGABRT, Terminated = SIGTERM ...)
# "Out Of Memory": the cgroup's OOM killer took the task (a SIGKILL the record marks as such)
_SRUN = re.compile(r"srun: error: ([\w.-]+): tasks? ([\d,\-]+): (Killed|Aborted|Terminated|Segmentation fault|"
                   r"Bus error|Out Of Memory|Exited with exit code (\d+))")
_SRUN_SIGNAL = {"Killed": "SIGKILL", "Aborted": "SIGABRT", "Terminated": "SIGTERM", "Segmentation fault": "SIGSEGV",
                "Bus error": "SIGBUS", "Out Of Memory": "SIGKILL"}


def _task_ids(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.extend(range(int(lo), min(int(hi or lo), int(lo) + 100_000, MAX_WORLD - 1) + 1))
    return out


def parse_srun_errors(text: str) -> list[dict]:
    """srun's "task N: Killed" lines as failure records (the first one srun printed is marked first)."""
    out: dict = {}
    for m in _SRUN.finditer(text or ""):
        host, tasks, what, code = m.groups()
        sig = _SRUN_SIGNAL.get(what)
        for r in _task_ids(tasks):
            out.setdefault(r, {"rank": r, "local_rank": None, "host": clip(host, MAX_FIELD_CHARS), "signal": sig,
                               "exitcode": _int(int(code)) if code else (-signal.Signals[sig].value if sig else None),
                               "first": not out, "launcher": "slurm", **({"oom": True} if what == "Out Of Memory"
                                                                         else {})})
    return [out[r] for r in sorted(out)]


# Open MPI's own report of the first process that failed (orte/ompi help texts, as mpirun 4.1 prints them):
# "mpirun noticed that process rank 1 with PID 0 on node h2 exited on signal 9 (Killed)." and
# "mpirun detected that one or more processes exited with non-zero status, ... The first process to do so was:
#  Process name: [[6526,1],1]  Exit code: 1"
# the signal's name in parentheses stays on its line and is short: "[^)]*" ran to the next ")" of the whole output
_MPI_SIGNAL = re.compile(r"mpirun noticed that process rank (\d+) with PID (\d+) on node (\S+) exited on signal "
                         r"(\d+)(?: \(([^)\n]{0,64})\))?")
_MPI_EXIT = re.compile(r"The first process to do so was:\s*Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*"
                       r"Exit code:\s*(-?\d+)")
MPI_MARKS = ("mpirun noticed that process rank", "mpirun detected that one or more processes exited")


def parse_mpirun_errors(text: str) -> list[dict]:
    """Open MPI's report of the first failed process as a failure record (first: it is the one mpirun names)."""
    out = []
    for m in _MPI_SIGNAL.finditer(text or ""):
        rank, pid, host, num, _ = m.groups()
        code = _int(-int(num))
        if _rank(int(rank)) is None:
            continue
        out.append({"rank": int(rank), "local_rank": None, "host": clip(host, MAX_FIELD_CHARS), "exitcode": code,
                    "signal": signal_name(code), "pid": _int(int(pid)) or None, "first": not out, "launcher": "mpi"})
    for m in _MPI_EXIT.finditer(text or ""):
        rank, code = int(m.group(1)), _int(int(m.group(2)))
        if _rank(rank) is not None and all(r["rank"] != rank for r in out):
            out.append({"rank": rank, "local_rank": None, "host": None, "exitcode": code,
                        "signal": signal_name(code), "first": not out, "launcher": "mpi"})
    return out


# torchrun's agent stopping its workers once one failed (torch/distributed/elastic/multiprocessing/api.py, _close):
# "Sending process %s closing signal %s" to each worker still running, and past its grace "Unable to shutdown process
# %s via %s, forcefully exiting via %s" (the kill signal, a Signals member: "Signals.SIGKILL")
STOP_MARKS = ("Sending process ", "Unable to shutdown process ")  # literals of the two lines below
_CLOSING = re.compile(r"Sending process (\d{1,10}) closing signal (SIG[A-Z]{2,8})")
_FORCED = re.compile(r"Unable to shutdown process (\d{1,10}) via \S{1,40}, forcefully exiting via (?:Signals\.)?"
                     r"(SIG[A-Z]{2,8})")


def launcher_stops(text: str) -> dict:
    """pid -> the signal torchrun's agent itself sent that worker to stop it (the SIGKILL past its grace wins over
    the SIGTERM before it): a worker the launcher stopped after another failed, whatever its exit code says."""
    out: dict = {}
    for m in _CLOSING.finditer(text or ""):
        out.setdefault(int(m.group(1)), m.group(2))
    for m in _FORCED.finditer(text or ""):
        out[int(m.group(1))] = m.group(2)
    return out


def parse_launcher_failures(text: str) -> list[dict]:
    """Every launcher's failure report in one output: torchrun's table, srun's errors, mpirun's report. A record
    whose process the agent stopped itself (launcher_stops) says so: `stopped` is the signal it sent."""
    records = parse_failure_table(text) + parse_srun_errors(text) + parse_mpirun_errors(text)
    stops = launcher_stops(text) if records else {}
    for r in records:
        if r.get("pid") in stops:
            r["stopped"] = stops[r["pid"]]
    return records


# Which launcher wrote an output, by its own lines (never a worker's, which carry a rank prefix or none of these):
# torchrun's agent logs through glog-style lines from torch/distributed/run.py and torch/distributed/elastic/ and
# ends in its ChildFailedError / SignalException; srun and mpirun name themselves.
_TORCHRUN = re.compile(r"^[IWEF]\d{4} [\d:.]{8,20} \d{1,10} \S{0,300}torch/distributed/(?:elastic/|run\.py)|"
                       r"^torch\.distributed\.elastic\.multiprocessing\.(?:errors\.ChildFailedError|api\.SignalException)")
_SRUN_OWN = re.compile(r"^srun: ")
_MPIRUN = re.compile(r"^(?:mpirun|prterun)\b")


# literals every line own_line could name holds (lower case): the log reader never passes such a line over
OWN_LITERALS = ("torch/distributed", "childfailederror", "signalexception", "srun: ", "mpirun", "prterun")


def own_line(raw: str) -> Optional[str]:
    """'torchrun', 'slurm' or 'mpi' when a line without a rank prefix is that launcher's own, else None."""
    if _TORCHRUN.search(raw):
        return "torchrun"
    if _SRUN_OWN.match(raw):
        return "slurm"
    if _MPIRUN.match(raw) or any(m in raw for m in MPI_MARKS):
        return "mpi"
    return None


def is_table_row(line: str) -> bool:
    """Could this line (its launcher prefix removed) change what parse_failure_table reads?"""
    return (ROOT_CAUSE in line or line.startswith(("===", "---")) or _BLOCK.match(line) is not None
            or _FIELD.match(line) is not None)


# A launch command pasted with the log states the job's size: torchrun's (and torch.distributed.run/launch's)
# --nproc-per-node times --nnodes (1 when absent or --standalone), mpirun's -np; so does ProcessGroupNCCL's echo of
# its options at init ("ProcessGroupNCCL initialization options: size: %d, global rank: %d", torch 2.2+)
_LAUNCH = re.compile(r"\b(?:torchrun|torch\.distributed\.run|torch\.distributed\.launch|mpirun|mpiexec|prterun)\b")
_NPROC = re.compile(r"--nproc[-_]per[-_]node[= ](\d{1,5})\b")
_NNODES = re.compile(r"--nnodes[= ](\d{1,6})(?![:\d])")
_NP = re.compile(r"(?:^|\s)-(?:np|n) (\d{1,7})\b")
_PG_SIZE = re.compile(r"ProcessGroupNCCL initialization options: size: (\d{1,7}),")
STATES_WORLD = ("nproc", "-np ", "-n ", "initialization options")  # what a line stating the world holds (lower case)


def world_stated(line: str) -> Optional[int]:
    """The number of ranks a launch command or torch's init echo on this line states, or None."""
    s = _PG_SIZE.search(line)
    if s is not None and ("PG 0 " in line or "(default_pg)" in line):  # the default group's size is the job's
        return int(s.group(1))
    if not _LAUNCH.search(line):
        return None
    if (p := _NPROC.search(line)) is not None:
        n = _NNODES.search(line)
        return int(p.group(1)) * (int(n.group(1)) if n and "--standalone" not in line else 1)
    m = _NP.search(line) if re.search(r"\b(?:mpirun|mpiexec|prterun)\b", line) else None
    return int(m.group(1)) if m else None


# Ray Train's table of its workers ("Started distributed worker processes:" then "- (node_id=.., ip=198.18.0.7,
# pid=4410) world_rank=0, local_rank=0, node_rank=0"), and the pid a Ray prefix names ("(RayTrainWorker pid=4410)")
_RAY_WORKER = re.compile(r"\bip=([\w.:]{1,64}), pid=(\d{1,10})\) world_rank=(\d{1,7})")
_RAY_PID = re.compile(r"\((?:[\w.:-]{1,64} )?pid=(\d{1,10})[,)]")
STATES_RAY = "world_rank="


def ray_worker(line: str) -> Optional[tuple]:
    """(pid, rank, ip) of a row of Ray Train's worker table, or None."""
    m = _RAY_WORKER.search(line)
    return (int(m.group(2)), int(m.group(3)), m.group(1)) if m and _rank(int(m.group(3))) is not None else None


_PID_NAMED = re.compile(r"\bpid[=:] ?(\d{1,10})\b")


def pid_named(line: str) -> Optional[int]:
    """A pid a line names anywhere ("(pid=2406, ip=...)", "pid: 2406"), or None."""
    m = _PID_NAMED.search(line)
    return int(m.group(1)) if m else None


def ray_pid(line: str) -> Optional[int]:
    """The worker pid a Ray prefix at the line's start names, or None."""
    m = _RAY_PID.match(line)
    return int(m.group(1)) if m else None


def record_line(line: str) -> bool:
    """Is this line (its launcher prefix removed) one a launcher's failure record is read from (torchrun's table,
    srun's task report, mpirun's notice, the agent's stop)? Its words are that record's, not a log event of their own:
    read as both, one SIGKILL was two causes. The agent's SIGHUP to its workers is also its own word that it got one
    (it passes on the signal it received): that line is classified too (nccl/failures_jobs.py "hangup")."""
    closing = _CLOSING.search(line)
    return (is_table_row(line) or _SRUN.search(line) is not None or _MPI_SIGNAL.search(line) is not None
            or (closing is not None and closing.group(2) != "SIGHUP") or _FORCED.search(line) is not None)


def is_failure_table(text: str) -> bool:
    return (("Failures:" in text and "exitcode" in text) or ROOT_CAUSE in text or "srun: error:" in text
            or any(m in text for m in MPI_MARKS))


def is_error_file(doc: Any) -> bool:
    """torchelastic's error file: {"message": {"message": "...", "extraInfo": {...}}} (or a plain message)."""
    if not isinstance(doc, dict) or "message" not in doc:
        return False
    msg = doc["message"]
    return isinstance(msg, str) or (isinstance(msg, dict) and isinstance(msg.get("message"), str))


def error_file_record(doc: dict) -> dict:
    """{message, timestamp} from an error file (the first line of the message is the exception)."""
    msg = doc["message"]
    text = msg if isinstance(msg, str) else msg["message"]
    extra = msg.get("extraInfo") if isinstance(msg, dict) else None
    stamp = extra.get("timestamp") if isinstance(extra, dict) else None
    return {"message": clip(text), "timestamp": clip(str(stamp), 40) if stamp is not None else None}
