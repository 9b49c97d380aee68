"""The one table of words the renderers share: status words, what a bench row's placement is called, the column
names, the efficiency caption and its "bound unknown" / "bound wrong" phrasing, the header's counts and who launched
the run, and the unit labels.

Console, Markdown, HTML, JUnit, Prometheus' help text and the kubectl labels script all take these words from here,
so a run reads the same in every format (issue 34: the same all_reduce row was "one" on the terminal, "single form
(in place)" in HTML and "out" in Markdown). JSON field names and values, Prometheus metric names and label values
are contracts and are not words of this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..model import Status

# ---------------------------------------------------------------------------------------------------------------
# Status

STATUS_WORD = {Status.PASS: "PASS", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "SKIP"}
# Nothing to act on: the terminal writes these words in lower case so FAIL and WARN stand out in a column.
QUIET = frozenset({Status.PASS, Status.SKIP})


# Under a first screen that counted the passes and folded the skips by reason: where every row is.
FOLDED_NOTE = "passes and skips folded; every check's row: --verbose"


def status_mark(status: Status) -> str:
    """The status word in the terminal's checks column: 'FAIL', 'WARN', 'pass', 'skip'."""
    word = STATUS_WORD[status]
    return word.lower() if status in QUIET else word


# ---------------------------------------------------------------------------------------------------------------
# Placement of a bench row


@dataclass(frozen=True)
class Placement:
    key: str  # "out", "in", "single"
    word: str  # in a narrow column (the terminal's table, streamed rows)
    label: str  # where there is room (HTML, Markdown, notes)


OUT_OF_PLACE = Placement("out", "out", "out-of-place")
IN_PLACE = Placement("in", "in", "in-place")
# An op torch has in one (in-place) form only (all_reduce, broadcast, reduce): its one row is that call, whatever
# --in-place said. Its row is neither "out" (it wrote its input) nor a second "in" row.
SINGLE_FORM = Placement("single", "single", "single form (in place)")
PLACEMENTS = {p.key: p for p in (OUT_OF_PLACE, IN_PLACE, SINGLE_FORM)}

_SINGLE_FORM_WHY = ("torch has this op in one form only, in place (its result overwrites its input): one row, not "
                    "two timings of the same call")
SINGLE_FORM_NOTE = f"{SINGLE_FORM.label}: {_SINGLE_FORM_WHY}"


def placement(row: Any) -> Placement:
    """How a bench row (model.BenchRow) was placed."""
    if row.extra.get("in_place_call") and not row.in_place:
        return SINGLE_FORM
    return IN_PLACE if row.in_place else OUT_OF_PLACE


# ---------------------------------------------------------------------------------------------------------------
# How a row's time was taken (its `timing` field, bench/timing.py) and rows that move no data

GRAPH_CAPTION = ("time: the timed calls replayed as one CUDA graph, per call (nccl-tests -G): NCCL and the fabric; "
                 "eager: the same calls one torch call at a time, what a training step pays, and eager - time is "
                 "torch's cost per call; p99 and var are of the eager calls")
EAGER_TIMING = "time: one torch call at a time (eager)"
NO_DATA_NOTE = ("- under algbw and busbw: one rank and an in-place call, so nothing moves and time is the call's "
                "cost alone; run on 2+ GPUs or nodes to measure a link")


def moves_no_data(row: Any) -> bool:
    """A row whose timed call moved nothing (bench rows say moves_data false): it has no bandwidth to show."""
    return row.extra.get("moves_data") is False


def graph_timed(row: Any) -> bool:
    return row.extra.get("timing") == "graph"


def table_notes(rows: list) -> list[str]:
    """The captions every format puts under a bench table whose rows were graph-timed or moved no data."""
    notes = []
    if any(graph_timed(r) for r in rows):
        notes.append(GRAPH_CAPTION)
    if any(moves_no_data(r) for r in rows):
        notes.append(NO_DATA_NOTE)
    return notes


def timing_note(timing: Any) -> Optional[str]:
    """The summary's one sentence on how times were taken and, where a graph could not be timed, why (said once,
    not per row); None for runs saved before bench said it."""
    if not isinstance(timing, dict):
        return None
    if timing.get("requested") == "eager":
        return f"{EAGER_TIMING}, as --timing eager asked"
    if timing.get("eager_why"):
        return f"{EAGER_TIMING}: {timing['eager_why']}"
    text = "time: CUDA-graph replays (nccl-tests -G), eager calls beside them"
    misses = [m for m in timing.get("no_graph") or [] if isinstance(m, dict)]
    if misses:
        text += "; eager instead for " + "; ".join(f"{m.get('op')} ({m.get('reason')})" for m in misses)
    return text


# ---------------------------------------------------------------------------------------------------------------
# Columns and units

GBPS = "GB/s"
US = "us"
BYTES = "B"
ELEMENTS = "elts"

COLUMN = {
    "op": "op",
    "size": "size",
    "count": "count",
    "dtype": "dtype",
    "placement": "placement",
    "placement_short": "place",  # the terminal's 80-column table
    "time": "time",
    "p99": "p99",
    "variation": "var",
    "algbw": "algbw",
    "busbw": "busbw",
    "wrong": "#wrong",
    "bound": "bound",
    "efficiency": "eff",
    "bound_by": "bound by",
    "latency": "latency",
    "eager": "eager",  # the eager figure beside a graph-timed time (bench/timing.py)
}

# The marks a bench table's cells may carry, each explained by one line under the table the first time it appears
# (render/bench.py's legend): a new user met `74%!`, `single` and `N/A` with nothing saying what they meant.
ROUNDED_MARK = "*"  # after a size
UNSTEADY_MARK = "!"  # after a var figure
NOT_CHECKED = "N/A"  # a #wrong cell of a row whose results were not checked (nccl-tests' word for it)
ROUNDED_NOTE = (f"{ROUNDED_MARK} after a size: rounded down from the requested size as nccl-tests does (per-rank "
                "chunks of 16 bytes)")
UNSTEADY_NOTE = (f"{UNSTEADY_MARK} after var (the spread of the timed iterations, their standard deviation / mean): "
                 "they vary so much that the mean time hides a slow tail (p99); look for other jobs, CPU contention or "
                 "a flapping link")
NOT_CHECKED_NOTE = (f"{NOT_CHECKED} under {COLUMN['wrong']}: results not checked; --check compares every element with "
                    "the exact answer and counts the wrong ones")
SINGLE_FORM_LEGEND = f"{SINGLE_FORM.word} under {COLUMN['placement_short']}: {_SINGLE_FORM_WHY}"

# ---------------------------------------------------------------------------------------------------------------
# Efficiency and bounds: an efficiency above 1 is a wrong bound, never a figure; an unknown bound is said, not "?".

EFF_DEFINITION = f"{COLUMN['efficiency']} = {COLUMN['busbw']} / {COLUMN['bound']}"
BOUND_WRONG = "bound wrong"
UNKNOWN = "unknown"  # a bound cell under the "bound" column
BOUND_UNKNOWN = f"{COLUMN['bound']} {UNKNOWN}"
NO_FIGURE = "-"  # a cell with no figure: not measured, or no bound to divide by


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def bound_phrase(gbps: object) -> str:
    """'bound 25 GB/s', 'bound 0.025 GB/s' (3 significant digits: a 200 Mb/s shaper is not '0.03'), or
    'bound unknown'."""
    return f"{COLUMN['bound']} {gbps:.3g} {GBPS}" if _number(gbps) else BOUND_UNKNOWN


def efficiency_caption(bound_gbps: object = None, bound_by: Optional[str] = None) -> str:
    """The line under a bench table: 'eff = busbw / bound; bound 25 GB/s (NIC mlx5_0 ...)' or
    'eff = busbw / bound; bound unknown (CPU ranks on one host ...)'."""
    text = f"{EFF_DEFINITION}; {bound_phrase(bound_gbps)}"
    return text + (f" ({bound_by})" if bound_by else "")


def efficiency_span_text(lo: str, hi: str) -> str:
    """A links run's trusted efficiencies, already as percentages: 'measured directions reached 61% to 93% of their
    bound' (each direction against the sender's egress and the receiver's ingress)."""
    return f"measured directions reached {lo} to {hi} of their {COLUMN['bound']}"


# ---------------------------------------------------------------------------------------------------------------
# Header: how many nodes and ranks, who launched the run


def count(n: object, noun: str) -> str:
    """'1 node', '16 ranks', '1,024 nodes'; a count a saved report lacks reads '? nodes'."""
    if not _number(n):
        return f"? {noun}s"
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


LAUNCHED_BY = "launched by"
NO_LAUNCHER = "no launcher named"  # the world's launcher "none" (JSON): unknown, or nothing launched it
# A console report's first line as it appears in a job's output, in these words and in the ones before them ("1
# node(s), 2 rank(s), torchrun"): diagnose skips ncclcheck's own reports by it (postmortem/analyze.py).
HEADER_LINE = r"^ncclcheck \w+ (?:[\d,]+|\?) (?:nodes?|node\(s\)),"


def world_phrase(world: Any) -> str:
    """'2 nodes, 16 ranks, launched by slurm': the same words at the top of every format. A command that started
    no ranks and was launched by nobody (env, health) reads '1 node, no ranks started'; "none" is no launcher's name,
    so a run with ranks and no launcher named says so in words."""
    who = world.launcher if world.launcher and world.launcher != "none" else None
    if world.world_size == 0 and who is None:
        return f"{count(world.nnodes, 'node')}, no ranks started"
    return (f"{count(world.nnodes, 'node')}, {count(world.world_size, 'rank')}, "
            + (f"{LAUNCHED_BY} {who}" if who else NO_LAUNCHER))


# ---------------------------------------------------------------------------------------------------------------
# diagnose: what a cause's evidence says (postmortem/precedence.py and postmortem/context.py decide, these say it)

TIED_BY_PID = "the launcher's failure table: the rank whose pid NCCL's line header names"


def nccl_said(text: str) -> str:
    """NCCL's own words for a failure, quoted after the class's: ' (NCCL: "Duplicate GPU detected : ...")'."""
    return f' (NCCL: "{text}")'


# -- what torch's watchdog lines say across ranks (postmortem/watchlines.py) --------------------------------------
def diverged(parts: str, major: str, coll: str, group: str, both: bool) -> str:
    """Ranks whose watchdogs fired in different collectives of one group."""
    if both:
        return f"the ranks diverged in {group}: {parts} (their watchdog lines: a collective mismatch)"
    return (f"{parts}, where {major} wait in {coll} (their watchdog lines): the ranks diverged, a collective "
            f"mismatch")


def sizes_differ(coll: str, sizes: str) -> str:
    return f"the ranks called {coll} with other element counts ({sizes}; their watchdog lines): a size mismatch"


def never_entered_by_lines(who: str, coll: str, waiting: str, why: str) -> str:
    return f"{who} never entered {coll}: {waiting} timed out waiting in it (their watchdog lines); {why}"


def enqueued_below(n: int) -> str:
    return f"its own last enqueued work is #{n}"


def no_timeout_of_its_own(alive: list) -> str:
    if alive:
        return "it reported no timeout, and its own lines go on: it was elsewhere, not in the collective"
    return "it reported no timeout of its own"


def ends_retrying(count: int) -> str:
    return f", retried {count} times where the text ends: the connect never succeeded"


def last_target(target: str) -> str:
    return f" (the address its lines last said they would connect to: {target})"


def timeout_too_short(ranks: str, coll: str, ms: int) -> str:
    return (f"{ranks} timed out in {coll} after the process group's timeout of {ms:,} ms (the watchdog lines): a "
            f"timeout that short fires before a collective can finish; the setting is the cause, not a hang")


TIMEOUT_TOO_SHORT_FIX = ("set the process group's timeout to minutes: init_process_group(timeout=timedelta("
                         "minutes=10)) (torch's default for NCCL), or the framework's own setting of it (accelerate's "
                         "InitProcessGroupKwargs, Lightning's DDPStrategy(timeout=...), DeepSpeed's timeout); an "
                         "environment or config value given in seconds where milliseconds were meant does this")


def all_entered_stalled(ranks: str, coll: str) -> str:
    if ranks.startswith("rank "):  # one rank's lines: what stands beside it is not known
        return (f"{ranks} timed out in {coll}, which it had enqueued, and no other rank's line is here (its "
                f"watchdog lines)")
    return (f"{ranks} all entered {coll} and none finished it (their watchdog lines): no rank skipped it; it "
            f"stalled inside (the network, GPU peer-to-peer, a GPU)")


def alone_stalled(who: str, coll: str) -> str:
    return (f"{who} timed out in {coll} in a job of one rank (its launch command): no peer could hold it; its own "
            f"GPU work queued before it never finished (a kernel that never ended)")


def the_peer(peer: str) -> str:
    return f" (the peer: {peer})"


def failed_elsewhere(where: str) -> str:
    """Other hosts' ranks the launcher reports ended badly too (not its own stop)."""
    return f"; the launcher reports {where} failed too"


# a rank that died of SIGABRT where the text shows a process aborting as it exited
ABORTED_AT_EXIT = (" (it aborted as it exited: std::terminate with no exception in flight; if its work had finished, "
                   "its results stand)")


# a rank that died of SIGABRT after its watchdog fired
WATCHDOG_ABORT = " (NCCL's watchdog takes the process down with SIGABRT once a collective timed out: a consequence)"


# a connection failure at a loopback address, in a text that does not show the job's hosts
LOOPBACK_PEER = ("; the peer's address is a loopback one: if the ranks run on more than one host, their hostname "
                 "resolves to 127.x (/etc/hosts) and GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME must name the interface "
                 "the hosts share")


def interfaces_chosen(host: str, names: list) -> str:
    return f"; NCCL on {host} chose {', '.join(names[:8])}"


def ib_ports_used(host: str, ports: list) -> str:
    """The ports an IB fault's host used, from its own NCCL lines."""
    return f"; NCCL on {host} used {', '.join(ports[:8])}" + (f" and {len(ports) - 8} more" if len(ports) > 8 else "")


# the middle verdict of diagnose: a failure shown, its cause not (postmortem/analyze.py not_in_text)
NOT_IN_TEXT = "the job failed; the cause is not in this text: "


def suspects_fix(found: list) -> str:
    """What to suspect, most likely first, each with how to test it (nccl/hypotheses.py's Suspects)."""
    return "most likely first: " + "; ".join(f"({i}) {s.what}: {s.test}" for i, s in enumerate(found, 1))


def line_said(text: str) -> str:
    """A line's own words quoted after its class's: ' ("Unable to find address for: ib0")'."""
    return f' ("{text}")'


# torch's wrapper of an NCCL error, when its own words name no class ("NCCL error in: ..., invalid usage")
WRAPPER = "NCCL returned an error"


def peer_ended(who: str) -> str:
    """The lead of an early exit read from a survivor's closed connection and the launcher's table."""
    return (f"{who} lost its connection to a peer on its own host and the launcher, which watches every rank there, "
            "lists no other failure: ")


def launcher_said(line: str) -> str:
    """After a cause read from a line of no rank: the launcher's line on the process that failed."""
    return f'; the launcher reports: "{line}"'


def after_node_lost(node: str) -> str:
    """A step Slurm cancelled on a node that survived, demoted: the node it lost is the cause."""
    return f" (Slurm cancelled it because it lost node {node})"


def wrapper_of(rank: Optional[int], what: str) -> str:
    """A wrapper line demoted: what torch's text reports is said better by NCCL's own line."""
    whose = f"rank {rank}'s" if rank is not None else "NCCL's own"
    return f" (torch's report of an NCCL error; {whose} NCCL line says what happened: {what})"


def stopped_before_it(first: int, signal: str, n: int = 1) -> str:
    """A "never entered" that is a consequence: the launcher stopped the rank before it got there."""
    it, its = ("it", "its dump was") if n == 1 else ("them", "their dumps were")
    return (f" (the launcher stopped {it} after rank {first} died of {signal}, its first observed failure: {its} "
            f"written when stopped, mid-step, before the collective; stopped, not skipped)")


def stopped_after_silent(silent: int, n: int = 1) -> str:
    """The same read from an armed job's files alone: a rank that left nothing died first."""
    it = "its stacks say it was" if n == 1 else "their stacks say they were"
    return (f" ({it} told to stop, mid-step, before the collective; rank {silent} left neither dump nor stacks, "
            f"which an armed rank writes on every end it can catch: it died first, of what it could not catch "
            f"(SIGKILL, the OOM killer, a crash, its host); stopped, not skipped)")


OOM_KILL = "SIGKILL (out of memory)"  # a death the launcher itself says the OOM killer dealt (srun's "Out Of Memory")


def own_end(who: str, kind: str, what: str, at: Optional[str]) -> str:
    """What a rank said of itself, the cause: 'rank 1 (host h, local rank 1) raised RuntimeError: boom at
    train.py:12 in main'; 'rank 1 called sys.exit(3) at ...'; 'rank 1 was killed (SIGKILL: ...)'."""
    if kind == "died":
        how = (f"was killed ({what}: the OOM killer, an operator or the scheduler; nobody in the job sends it)"
               if what == "SIGKILL" else "was killed by the out-of-memory killer (SIGKILL; the launcher says: Out "
               "Of Memory)" if what == OOM_KILL else f"crashed ({what}{CRASH_SAYS.get(what, '')})")
        return f"{who} {how}"
    return f"{who} {what}" + (f" at {at}" if at else "")


def stopped_after_its_end(how: str) -> str:
    """The stop that reached a rank after its own end (it was still exiting): what came after, never the cause.
    how: '(SIGTERM)'."""
    return f"; then, still exiting, it was told to stop {how}: the launcher stops every rank once one failed (a " \
           "consequence)"


def waited_for_it(ranks: str, coll: str) -> str:
    """What the others' flight recorders show once the rank that ended on its own is named: they waited."""
    return f"; {ranks} waited for it in {coll} (a consequence)"


# an armed job's rank that left neither its flight recorder nor its stacks while its peers wrote theirs
LEFT_NOTHING_ARMED = (" left neither its flight recorder nor its stacks, which an armed rank writes on every end it "
                      "can catch: it was killed (SIGKILL: the OOM killer, an operator, the scheduler), crashed, or "
                      "its host went down")


def recorder_view(who: str, coll: str, what: str) -> str:
    """The flight recorder's view of a rank that ended on its own: where it stopped, and why (its own word)."""
    return f"{who} never entered {coll}, the collective the others waited in: it {what} first (the root cause)"


# what a crash signal most often is, said beside it (the kernel's: a bus error on a mapped file past its end, which
# /dev/shm's segments are when it is full: the DataLoader's workers, NCCL's SHM transport)
CRASH_SAYS = {"SIGBUS": ": a bus error; in a container most often /dev/shm too small, 64 MB by default",
              "SIGSEGV": ": a fault in native code"}
CRASH_FIX = {"SIGBUS": "`df -h /dev/shm` where it ran: in a container give it room (docker --shm-size=8g or "
                       "--ipc=host; Kubernetes: an emptyDir of medium Memory at /dev/shm), or fewer DataLoader workers",
             "SIGSEGV": "get its native stack: rerun with `python -X faulthandler` and `ulimit -c unlimited`; check "
                        "that the library versions agree across nodes (`ncclcheck preflight` compares packages)"}


OWN_END_FIX = {
    "exception": "fix the exception at that line (its traceback is in {where}); the other ranks only waited for that "
                 "rank",
    "exited": "find why the script asked for a failing exit code there ({where}); the other ranks only waited for "
              "that rank",
    "died": "find why it died: `dmesg -T | grep -i -e oom -e killed` on its host (the OOM killer sends SIGKILL), the "
            "scheduler's log (preemption, time limit), a core dump or its stderr for a crash",
}


def own_gpu_hang(who: str, coll: str, state: str, timed: bool) -> str:
    """A rank alone in its group whose collective never completed: its own GPU work held it."""
    how = "timing on" if timed else "no peer to wait for"
    return (f"{who} called {coll} but its GPU never ran it: the group has no other rank, so no peer could hold it; "
            f"its own GPU work queued before it (a kernel that never ended) did (flight recorder: state {state}, "
            f"{how})")


OWN_GPU_FIX = ("look at that rank's GPU, not the network: the work queued before the collective did not end (a hung or "
               "very long kernel, a spin on device memory, a GPU fault): `py-spy dump --native --pid` on a live hang, "
               "`nvidia-smi` (100 % utilisation on that GPU), `dmesg -T | grep -i xid` on its host")


def socket_setting(setting: Optional[str], host: str) -> str:
    """' NCCL_SOCKET_IFNAME=eth9 (as NCCL echoed it) matches no interface on vm'."""
    if setting is None:
        return f"; NCCL_SOCKET_IFNAME is not echoed in {host}'s NCCL lines"
    return f"; NCCL_SOCKET_IFNAME={setting} (as NCCL echoed it) matches no interface on {host}"


IFACES_FROM = {"nccl": "its own NCCL lines", "preflight": "the preflight report", "here": "this machine (diagnose "
               "runs on it)"}


def interfaces_there(host: str, names: list, source: Optional[str]) -> str:
    """'; the interfaces vm has: eth0, lo (from this machine)' or how to list them when nothing says."""
    if not names:
        return f"; nothing among the inputs lists {host}'s interfaces: run `ip -br addr` on {host} to see them"
    return f"; the interfaces {host} has: {', '.join(names)} (from {IFACES_FROM.get(source or '', source)})"


def socket_fix(host: str, names: list) -> str:
    pick = f" (one of {', '.join(names)})" if names else f" (`ip -br addr` on {host} lists them)"
    return (f"set NCCL_SOCKET_IFNAME to an interface that is up on every node{pick}, or unset it and let NCCL pick; "
            "`ncclcheck recommend --format env` names the one every node routes over")


def net_plugins_tried(tried: dict, loaded: list) -> str:
    """'; NCCL tried only IB (NET/IB : No device found) and loaded none: NCCL_NET forced IB ...'."""
    if not tried:
        return ""
    parts = ", ".join(f"{name} ({why})" if why else name for name, why in tried.items())
    if loaded:
        return f"; NCCL tried {parts}; it loaded {', '.join(loaded)}"
    only = "only " if len(tried) == 1 else ""
    forced = (f": NCCL_NET={next(iter(tried))} (or NCCL_NET_PLUGIN) forced it on a host without it, so the socket "
              "transport was never tried" if "Socket" not in tried else "")
    return f"; NCCL tried {only}{parts} and loaded none{forced}"


STOPPED = "no line shows a failure and none shows the job's end: "


def stopped(said: list, ranks_text) -> str:
    """Where a text that neither fails nor ends leaves each rank: [(phase, ranks)], the earliest phase first."""
    if len(said) == 1 and not said[0][1]:
        return STOPPED + f"the text stops at {said[0][0]} (a hang there, or a text cut short)"
    parts = [f"{ranks_text(rs) if rs else 'lines of no rank'} at {phase}" for phase, rs in said]
    return (STOPPED + "the text stops with " + (" and ".join(parts) if len(parts) < 3 else
                                                 ", ".join(parts[:-1]) + " and " + parts[-1]) +
            " (a hang there, or a text cut short)")


def ended(what: str, line: str) -> str:
    """A text that shows the job ending well, and no failure."""
    return f"the job ended well: {what} (\"{line}\"); no rank failed and no failure message"


def hosts_differ(what: str, said: str, failure: str) -> str:
    """The hosts' inventory differs in something that decides whether they can talk, beside the failure it explains."""
    return f"the hosts run different {what}s ({said}): ranks of different {what}s cannot connect; then: {failure}"


def virtual_interface(said: str, failure: str) -> str:
    return (f"NCCL used a container bridge or virtual interface ({said}), which the other hosts cannot reach; "
            f"then: {failure}")


def survived(n: int, first: str) -> str:
    """Failure lines a job went on past, to its own end."""
    return f"; {n} line(s) before its end look like failures and did not stop it, the first: {first}"


def else_suspects(found: list) -> str:
    """What a lone line may also be (nccl/hypotheses.ONE_LINE), after the class's own fix."""
    return "; this one line is printed in other situations too, so test: " + "; ".join(
        f"({i}) {s.what}: {s.test}" for i, s in enumerate(found, 1))


# ---------------------------------------------------------------------------------------------------------------
# A run stopped by Ctrl-C or SIGTERM: what it measured, never a hang's words


def interrupted_run(by: str, measured: int, total: int, noun: str = "row") -> str:
    """'interrupted (Ctrl-C): 3 rows measured of 22 requested; rerun to finish'."""
    return f"interrupted ({by}): {count(measured, noun)} measured of {total:,} requested; rerun to finish"


def interrupted_fix(by: str) -> str:
    return (f"Nothing failed: the run was stopped ({by}) before it finished; run the same command again to measure "
            "what is listed as not measured")
