"""Every pattern diagnose runs on what a job printed, fed long and adversarial lines: seconds per MiB (issue 45 item 1).

A pattern that backtracks is slow only on the lines made for it: its own pieces repeated. So each pattern's lines are
built from its parse (its literals, a character of each of its classes): each piece repeated to MAX_LINE_CHARS, each
pair of neighbouring pieces, every piece but the last (a match that never completes), a long run of each class after
its first literal; then hypothesis writes more from the same pieces, steered toward the slowest it finds
(hypothesis.target). Each line runs through the pattern as diagnose runs it (a cut line, the production function).
The issue's own line (`shm ` x 32,768) and the patterns as they were on 214d3a0 are timed the same way beside them.

    python3 scripts/pattern_fuzz.py [--examples 200] [--bound 1.0]

Last line: patterns=K/K (each exercised) over_bound=0 (none slower than --bound seconds per MiB of its worst line)
prefilter_misses=0 (classify, which runs a class only on a line holding its literals, named every line as trying
every class on the cut line does) then_equal=J/J (each Then matched as its `A.*B` regex does, on the short lines)
diagnose=S s/MiB (the whole reader on a file of every pattern's worst lines) diagnose_worst=W s/MiB (on the lines
the reader pays most for itself: 1-character lines, every line an NCCL WARN).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import time

from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from ncclcheck.nccl import debuglog, failures, prefixes
from ncclcheck.nccl.linear import MAX_LINE_CHARS, Either, Then, _parse, _sre
from ncclcheck.postmortem import analyze, flight, launcher, logscan, stacks, watchlines
from ncclcheck.postmortem.bound import clip

MiB = 1 << 20

# The patterns as they were on 214d3a0 (issue 45): timed beside today's to show what the cut and the rewrite bought.
BEFORE = {
    "shm_exhausted": r"(?:/dev/shm|shm_open|posix_fallocate|shm\w*).*(?:No space left|failed|Cannot allocate)|"
                     r"No space left on device",
    "memlock": r"ibv_(?:create_qp|reg_mr|create_cq)\w*.*(?:failed|Cannot allocate memory)|RLIMIT_MEMLOCK|memlock",
    "ib_completion_error": r"NET/IB\s*:\s*Got completion .*error|IBV_WC_RETRY_EXC_ERR|transport retry counter "
                           r"exceeded|NET/IB.*\bstatus\s*=?\s*12\b",
    "init_timeout": r"Socket Timeout|DistStoreError|wait timeout after \d+\s*ms|client socket has timed out after|"
                    r"Timed out (?:after|waiting) .*(?:clients|workers|store|rendezvous|join)|"
                    r"bootstrap.*time(?:d)? ?out",
    "peer_closed": r"Connection closed by (?:remote )?peer|Connection reset by peer|remote process exited or there "
                   r"was a network error|socketProgress.*closed",
    "ROUTINE": r"\bwaitForInput: (?:poll for socket .* returned 0, likely a timeout|socket .* timed out after "
               r"\d+\s*ms)|Environment variable \w+ is deprecated; use \w+ instead",
}
BEFORE_PARSER = {
    "debuglog._IF_ITEM": r"\[(\d+)\]([^:\s\[]+):(\S+?)<\d+>",
    "debuglog._VIA": r"Channel (\d+)(?:/(\d+))?\s*:\s*(\d+)\[[^\]]*\]\s*->\s*(\d+)\[[^\]]*\](?:\s*\[(send|receive)\])?"
                     r"\s*via\s+(\S+)",
    "debuglog._COLL_CHANNELS": r"(\d+) coll channels",
    "debuglog._ENV": r"(NCCL_\w+) set by environment to (\S*)",
    "debuglog._INIT_COMPLETE": r"rank (\d+) nranks (\d+) .*Init COMPLETE",
    "launcher._FIELD": r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*?)\s*$",
}


def _class_chars(av) -> list:
    out = []
    for op, a in av:
        if op is _sre.LITERAL:
            out.append(chr(a))
        elif op is _sre.RANGE:
            out.append(chr(a[0]))
        elif op is _sre.CATEGORY:
            out.append({"CATEGORY_DIGIT": "7", "CATEGORY_SPACE": " ", "CATEGORY_WORD": "w", "CATEGORY_NOT_WORD": "-",
                        "CATEGORY_NOT_DIGIT": "x", "CATEGORY_NOT_SPACE": "x"}.get(str(a), "x"))
    return out


def pieces(pattern) -> tuple:
    """(literal runs in order, characters of its classes) of a regex, a Then or an Either."""
    if isinstance(pattern, Then):
        a, b = pieces(pattern.first), pieces(pattern.then)
        return a[0] + b[0], a[1] + b[1]
    if isinstance(pattern, Either):
        runs, chars = [], []
        for alt in pattern.alternatives:
            r, c = pieces(alt)
            runs += r
            chars += c
        return runs, chars
    runs, chars = [], []

    def walk(items):
        run = []
        for op, av in items:
            if op is _sre.LITERAL:
                run.append(chr(av))
                continue
            if run:
                runs.append("".join(run))
                run = []
            if op is _sre.SUBPATTERN:
                walk(av[-1])
            elif op is _sre.BRANCH:
                for b in av[1]:
                    walk(b)
            elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
                walk(av[2])
            elif op is _sre.IN:
                chars.extend(_class_chars(av))
            elif op is _sre.NOT_LITERAL:
                chars.append("x" if chr(av) != "x" else "y")
            elif op is _sre.ANY:
                chars.append("x")
        if run:
            runs.append("".join(run))

    walk(_parse.parse(pattern.pattern, pattern.flags))
    return runs or ["x"], sorted(set(chars)) or ["x"]


def _fill(unit: str, length: int) -> str:
    return (unit * (length // max(1, len(unit)) + 1))[:length] if unit else ""


def lines_for(pattern, length: int = MAX_LINE_CHARS) -> list:
    """The adversarial lines of one pattern: its pieces repeated, paired, almost matched, followed by long runs."""
    runs, chars = pieces(pattern)
    out = [_fill(p, length) for p in runs + chars]
    out += [_fill(p + " ", length) for p in runs]
    out += [_fill(a + b, length) for a, b in zip(runs, runs[1:])]
    out += [_fill("".join(runs[:-1]) or runs[0], length), _fill(" ".join(runs[:-1]) or runs[0], length)]
    out += [runs[0] + c * (length - len(runs[0])) for c in chars + [" ", "7"]]
    out += [_fill("".join(runs[:k]) + c, length) for k in range(1, len(runs)) for c in chars[:3]]
    return [ln for ln in dict.fromkeys(out) if ln]


def _per_mib(run, line: str, repeat: int = 3) -> float:
    """Seconds per MiB of `run(line)`: the best of `repeat` (the machine's noise is not the pattern's)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(line)
        best = min(best, time.perf_counter() - t0)
    return best * MiB / max(1, len(line.encode()))


def _own_report(line: str) -> None:
    """The line as each line of a report after its header and table (rows, wraps, sections)."""
    own = logscan.OwnOutput()
    own.own("ncclcheck diagnose 2 nodes, 4 ranks, torchrun")
    own.own("status  check  node  result")
    own.own(line)
    own.own(line)


def entries() -> list:
    """(name, pattern for its pieces, how diagnose runs it on a line): every pattern on a job's text."""
    cut = MAX_LINE_CHARS
    out = [(f"failures.{c.id}", c.pattern, lambda ln, p=c.pattern: p.search(ln[:cut])) for c in failures.TABLE]
    out += [("failures.ROUTINE", failures.ROUTINE, lambda ln: failures.ROUTINE.search(ln[:cut])),
            ("failures.classify", failures.Either(*[c.pattern for c in failures.TABLE]), failures.classify),
            ("failures.seq_of", failures._SEQ, failures.seq_of), ("failures.optype_of", failures._OPTYPE,
                                                                   failures.optype_of),
            ("failures.warn_text", failures._WARN_TEXT, failures.warn_text)]
    state = debuglog.NcclDebugState
    for name in ("_VERSION", "_BOOTSTRAP", "_SOCKET_LINE", "_IF_ITEM", "_IB_LINE", "_IB_ITEM", "_OOB", "_IB_NONE",
                 "_NETWORK", "_VIA", "_COLL_CHANNELS", "_ENV", "_WARN", "_INIT_COMPLETE", "_NCCL_HEADER",
                 "_INIT_RANK", "_LINE_HOST"):
        pat = getattr(debuglog, name)
        out.append((f"debuglog.{name}", pat, lambda ln, p=pat: (p.findall(ln[:cut]) if isinstance(p, re.Pattern)
                                                                 else p.search(ln[:cut]))))
    out += [("debuglog.NcclDebugState.feed", Either(*[getattr(debuglog, n) for n in (
                "_VERSION", "_BOOTSTRAP", "_SOCKET_LINE", "_IF_ITEM", "_IB_LINE", "_IB_ITEM", "_OOB", "_VIA",
                "_COLL_CHANNELS", "_ENV", "_WARN")]), lambda ln: state().feed(ln)),
            ("debuglog.env_of", debuglog._ENV, debuglog.env_of),
            ("prefixes.peel", Either(*(rx for _, rx in prefixes._RANKED), prefixes._PLAIN, prefixes._PDSH),
             prefixes.peel),
            ("debuglog.nccl_header", debuglog._NCCL_HEADER, debuglog.nccl_header),
            ("debuglog.capture_host", debuglog._LINE_HOST, lambda ln: debuglog.capture_host("x", ln))]
    for name in ("_BLOCK", "_FIELD", "_RANK", "_EXIT", "_SRUN", "_MPI_SIGNAL", "_MPI_EXIT"):
        pat = getattr(launcher, name)
        out.append((f"launcher.{name}", pat, lambda ln, p=pat: p.search(ln)))
    out += [("launcher.parse_launcher_failures", Either(launcher._FIELD, launcher._BLOCK, launcher._SRUN,
                                                         launcher._MPI_SIGNAL, launcher._MPI_EXIT),
             lambda ln: launcher.parse_launcher_failures("Failures:\n[0]:\n" + ln + "\n" + ln)),
            ("stacks.parse", Either(stacks._HEAD, stacks._THREAD, stacks._FRAME),
             lambda ln: stacks.parse(f"{stacks.HEADER} rank 1 pid 2\n{ln}\n{ln}", "x")),
            ("logscan.own_output", Either(logscan._OWN_HEAD, logscan._OWN_END, logscan._OWN_LINE, logscan._OWN_TAIL,
                                          logscan._OWN_TABLE, logscan._OWN_ROW), _own_report),
            ("failures.message_starts", Either(failures._LEAD_PHRASES, failures._LEAD_WORD),
             lambda ln: failures.message_starts(ln[:cut])),
            ("debuglog._ERROR_RETURN", debuglog._ERROR_RETURN, lambda ln: debuglog._ERROR_RETURN.search(ln[:cut])),
            ("logscan.TRACEBACK", logscan.TRACEBACK, lambda ln: logscan.TRACEBACK.match(ln[:cut])),
            ("logscan.RAISED", logscan.RAISED, lambda ln: logscan.RAISED.match(ln[:cut])),
            ("logscan._FAST_HEAD", logscan._FAST_HEAD, lambda ln: logscan._FAST_HEAD.fullmatch(ln[:logscan.MAX_HEAD])),
            ("logscan.literals", logscan._ANY, lambda ln: logscan._ANY.search(ln[:cut].lower())),
            ("analyze._GUARD_RANK", analyze._GUARD_RANK, lambda ln: analyze._GUARD_RANK.search(clip(ln, 400))),
            ("analyze._GLOO_ABORT", analyze._GLOO_ABORT, lambda ln: analyze._GLOO_ABORT.search(clip(ln, 400))),
            ("flight._RANK_IN_NAME", flight._RANK_IN_NAME, lambda ln: flight._RANK_IN_NAME.search(ln[:255])),
            ("failures.said_rank", failures._SAID_RANK, failures.said_rank),
            ("failures.telling", failures._HEADERS, failures.telling),
            ("failures.as_nccl_warn", failures._OLD_WARN, failures.as_nccl_warn),
            ("failures.store_missing", failures._JOINED, failures.store_missing),
            ("failures.loopback_peer", failures._LOOPBACK_ADDRESS, failures.loopback_peer),
            ("launcher.world_stated", Either(launcher._LAUNCH, launcher._NPROC, launcher._NNODES, launcher._NP,
                                             launcher._PG_SIZE), launcher.world_stated),
            ("watchlines.reports", Either(watchlines._WORK, watchlines._AT, watchlines._LAST, watchlines._PG),
             lambda ln: watchlines.reports([{"class": "watchdog_timeout", "rank": 0, "line": ln}])),
            ("logscan._TESTS_ROW", logscan._TESTS_ROW, lambda ln: logscan._TESTS_ROW.match(ln[:cut])),
            ("logscan.unwrapped", logscan._STARTS_ITS_OWN,
             lambda ln: logscan.unwrapped((None, ln[:cut]), ln[:cut], None))]
    return out


def worst(name: str, pattern, run, examples: int, repeat: int = 3) -> tuple:
    """(seconds per MiB of the slowest line found, that line's first 60 characters)."""
    found = [(_per_mib(run, ln, repeat), ln) for ln in lines_for(pattern)]
    runs, chars = pieces(pattern)
    alphabet = st.sampled_from(runs + chars + [" ", "\t", "0", ":", "[", "]"])

    @settings(max_examples=max(1, examples), deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(alphabet, min_size=1, max_size=40))
    def search(parts):
        line = _fill("".join(parts), MAX_LINE_CHARS)
        s = _per_mib(run, line, repeat)
        target(s, label=name)
        found.append((s, line))

    if examples > 0:
        search()
    s, line = max(found, key=lambda f: f[0])
    return s, line[:60]


def prefilter_misses(lines: list) -> int:
    """Lines classify names otherwise than trying ROUTINE then every class on the cut line would."""
    misses = 0
    for line in lines:
        misses += failures.classify(line) is not failures.classify_every_row(line)
    return misses


def thens() -> list:
    """Every Then on a job's text, with the regex it stands for."""
    pats = [failures.ROUTINE, debuglog._INIT_COMPLETE, *(c.pattern for c in failures.TABLE)]
    out = []
    for p in pats:
        for alt in (p.alternatives if isinstance(p, Either) else (p,)):
            if isinstance(alt, Then):
                out.append(alt)
    return out


def then_equal(short: list) -> tuple:
    """(Thens that matched every short line as their regex does, Thens)."""
    ts = thens()
    same = 0
    for t in ts:
        rx = re.compile(t.pattern, t.first.flags)
        same += all(bool(t.search(ln)) == bool(rx.search(ln)) for ln in short)
    return same, len(ts)


READER_CASES = {  # the lines the reader itself pays most for: one line per few bytes, or every line a failure
    "1-character lines": [":"],
    "short NCCL WARN lines": ["h:1:1 [0] NCCL WARN x"],
    "short prefixed lines": ["[rank1]: x"],
}


def end_to_end(lines: list, mib: float) -> float:
    """Seconds per MiB of the whole reader (read_inputs, then analyze) on a file of these lines."""
    from ncclcheck.postmortem.analyze import analyse
    from ncclcheck.postmortem.inputs import read_inputs

    d = tempfile.mkdtemp(prefix="pattern_fuzz.")
    try:
        path = os.path.join(d, "rank0.log")
        size = 0
        with open(path, "w") as f:
            while size < mib * MiB:
                for ln in lines:
                    f.write(ln + "\n")
                    size += len(ln) + 1
        t0 = time.perf_counter()
        analyse(read_inputs([path]))
        return (time.perf_counter() - t0) / (size / MiB)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=200, help="hypothesis lines per pattern past the built ones")
    ap.add_argument("--bound", type=float, default=1.0, help="seconds per MiB a pattern's worst line may take")
    ap.add_argument("--mib", type=float, default=8, help="MiB of worst lines the whole reader is timed on")
    ap.add_argument("--repeat", type=int, default=3, help="times each line is run, its best time kept (1: each line "
                    "once, for a run that checks the fields, not the figures)")
    ap.add_argument("--before", action="store_true", help="also time the patterns as they were on 214d3a0")
    args = ap.parse_args(argv)
    rows, worst_lines, short = [], [], []
    for name, pattern, run in entries():
        s, head = worst(name, pattern, run, args.examples, max(1, args.repeat))
        rows.append((name, s, head))
        worst_lines += [ln for ln in lines_for(pattern)][:4]
        short += [ln[:160] for ln in lines_for(pattern, 400)]
    width = max(len(r[0]) for r in rows)
    print(f"{'pattern':<{width}}  s/MiB (worst line)  its start")
    for name, s, head in sorted(rows, key=lambda r: -r[1]):
        print(f"{name:<{width}}  {s:10.4f}          {head!r}")
    issue = "shm " * 32_768
    print(f"the issue's line (shm x 32,768, 128 KiB): classify {_per_mib(failures.classify, issue):.4f} s/MiB")
    if args.before:
        for name, text in {**BEFORE, **BEFORE_PARSER}.items():
            rx = re.compile(text, re.IGNORECASE if name in BEFORE else 0)
            s = max(_per_mib(rx.search, ln, 1) for ln in lines_for(rx)[:16])
            print(f"  before (214d3a0) {name}: {s:.2f} s/MiB on its worst {MAX_LINE_CHARS:,}-character line",
                  flush=True)
    over = [r for r in rows if r[1] > args.bound]
    misses = prefilter_misses(worst_lines + short)
    same, total = then_equal(short)
    per_mib = end_to_end(worst_lines, args.mib)
    print(f"diagnose on {args.mib} MiB of every pattern's worst lines: {per_mib:.2f} s/MiB")
    reader = {name: end_to_end(ls, args.mib) for name, ls in READER_CASES.items()}
    for name, s in reader.items():
        print(f"diagnose on {args.mib} MiB of {name}: {s:.2f} s/MiB")
    print(f"patterns={len(rows)}/{len(entries())} over_bound={len(over)} prefilter_misses={misses} "
          f"then_equal={same}/{total} diagnose={per_mib:.2f} s/MiB diagnose_worst={max(reader.values()):.2f} s/MiB")
    return 0 if not over and not misses and same == total else 1
