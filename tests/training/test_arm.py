"""ncclcheck.arm(DIR) in real Python processes (no launcher): what an armed rank writes when it raises, exits failing,
is told to stop while stuck in torch's C++ (SIGTERM) or is asked (SIGUSR1); that a healthy exit writes nothing; that
exit codes are the ones the unarmed script has; that a forked child stays silent; and the bounds (a flight recorder
past diagnose's JSON bound is cut and says so)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ncclcheck.postmortem import flight, stacks
from ncclcheck.postmortem.inputs import read_inputs
from ncclcheck.recommend.postmortem import recommend_postmortem
from ncclcheck.training import arm as armmod
from tests.conftest import REPO, cli_env

CLEAN = ("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_", "TORCH", "NCCL", "SLURM", "OMPI", "PMI_")


def _env(**extra) -> dict:
    env = {k: v for k, v in cli_env().items() if not k.startswith(CLEAN)}
    env.update(RANK="3", **extra)
    return env


def _script(tmp_path, body: str, armed: bool = True, torch_import: bool = False) -> str:
    head = "import os, sys, signal, time\n"
    if torch_import:
        head += "import torch, torch.distributed\n"
    if armed:
        head += "import ncclcheck\nARMED = ncclcheck.arm(os.environ['PM'])\n"
    path = tmp_path / ("armed.py" if armed else "plain.py")
    path.write_text(head + textwrap.dedent(body))
    return str(path)


def _run(tmp_path, body: str, armed: bool = True, torch_import: bool = False, timeout: float = 120):
    pm = tmp_path / ("pm" if armed else "pm-plain")
    p = subprocess.run([sys.executable, _script(tmp_path, body, armed, torch_import)], capture_output=True,
                       text=True, env=_env(PM=str(pm)), cwd=REPO, timeout=timeout)
    return p, pm


def _files(pm) -> list:
    return sorted(os.listdir(pm)) if pm.exists() else []


def test_arm_sets_the_one_table_is_idempotent_and_a_healthy_exit_writes_nothing(tmp_path):
    body = """
        again = ncclcheck.arm(os.environ['PM'])
        import json
        print(json.dumps({"same": again is ARMED, "env": ARMED.env, "hooks": list(ARMED.hooks),
                          "seen": {k: os.environ.get(k) for k in ARMED.env}, "notes": list(ARMED.notes),
                          "torch": "torch" in sys.modules}))
    """
    p, pm = _run(tmp_path, body)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["same"] is True and got["torch"] is False  # called twice = once; torch is not imported by it
    want = {r.name: r.value for r in recommend_postmortem(str(pm))}
    assert got["env"] == want and got["seen"] == want  # recommend --postmortem's table, set in os.environ
    assert {"excepthook", "atexit", "SIGTERM", "SIGUSR1", "watcher"} <= set(got["hooks"])
    assert _files(pm) == []  # a healthy rank writes nothing


def test_a_rank_that_raises_leaves_its_flight_recorder_and_stacks_with_the_exit_code_unchanged(tmp_path):
    body = """
        def train_step():
            raise ValueError("boom")
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://" + os.environ['PM'] + ".store", rank=0, world_size=1)
        dist.all_reduce(torch.ones(4))
        train_step()
    """
    p, pm = _run(tmp_path, body, torch_import=True)
    assert p.returncode == 1 and "ValueError: boom" in p.stderr  # what Python gives an uncaught exception
    assert _files(pm) == ["nccl_trace_rank_0.json", "stacks_rank_0.txt"]  # torch's rank (0), not RANK=3
    dump = json.loads((pm / "nccl_trace_rank_0.json").read_text())
    assert flight.is_dump(dump) and dump["entries"][0]["profiling_name"] == "gloo:all_reduce"
    seen = stacks.parse((pm / "stacks_rank_0.txt").read_text(), "s")
    assert seen["rank"] == 0 and seen["reason"] == "raised ValueError: boom"
    assert seen["where"].endswith("armed.py:7 in train_step")  # where the main thread was, not the dump's frames
    inp = read_inputs([str(pm)])  # diagnose reads both: the dump as rank 0's, the stacks as stacks
    assert list(inp.dumps) == [0] and inp.stacks[0]["where"] == seen["where"] and not inp.logs


@pytest.mark.parametrize("code,writes", [(3, True), (0, False)])
def test_sys_exit_keeps_its_code_and_a_failing_one_leaves_evidence(tmp_path, code, writes):
    p, pm = _run(tmp_path, f"sys.exit({code})\n")
    assert p.returncode == code
    assert _files(pm) == (["stacks_rank_3.txt"] if writes else [])  # torch never imported: stacks only
    if writes:
        text = (pm / "stacks_rank_3.txt").read_text()
        assert "reason: sys.exit(3)" in text and "note: no flight recorder" in text


HANG = """
    import datetime, socket
    from torch.distributed import TCPStore
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    store = TCPStore("127.0.0.1", port, 1, True, timeout=datetime.timedelta(seconds=90))
    open(os.environ['PM'] + '.ready', 'w').close()
    store.wait(["never"])  # inside c10d's C++ for 90 s: Python's own handler cannot run before it returns
"""


def _start_hung(tmp_path, armed: bool):
    pm = tmp_path / ("pm" if armed else "pm-plain")
    path = _script(tmp_path, HANG, armed, torch_import=True)
    p = subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=_env(PM=str(pm)), cwd=REPO)
    ready = f"{pm}.ready"
    end = time.monotonic() + 90
    while not os.path.exists(ready) and p.poll() is None and time.monotonic() < end:
        time.sleep(0.1)
    assert os.path.exists(ready), p.communicate(timeout=10)
    return p, pm


def test_sigterm_while_stuck_in_cpp_writes_evidence_at_once_and_still_dies_by_sigterm(tmp_path):
    p, pm = _start_hung(tmp_path, armed=True)
    p.send_signal(signal.SIGUSR1)  # asked: the job goes on
    end = time.monotonic() + 30
    while not (pm / "stacks_rank_3.txt").exists() and time.monotonic() < end:
        time.sleep(0.1)
    assert (pm / "stacks_rank_3.txt").exists() and p.poll() is None
    assert "reason: asked (SIGUSR1)" in (pm / "stacks_rank_3.txt").read_text()
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)  # long before the store's 90 s wait returns
    assert p.returncode == -signal.SIGTERM, err  # killed by SIGTERM, as the unarmed process is
    text = (pm / "stacks_rank_3.txt").read_text()
    assert "reason: told to stop (SIGTERM)" in text
    assert stacks.parse(text, "s")["where"].endswith("armed.py:12 in <module>")  # the store.wait line
    assert "ncclcheck-evidence" not in text  # the dump's own threads are left out
    assert "note: flight recorder empty" in text  # no process group: nothing a diagnosis could misread


def test_the_scripts_own_sigterm_handler_still_runs_after_the_evidence(tmp_path):
    body = """
        import ncclcheck
        def mine(signum, frame):
            print("MINE", flush=True)
            sys.exit(7)
        signal.signal(signal.SIGTERM, mine)
        ncclcheck.arm(os.environ['PM'])  # after the script's own handler: arm() chains to it
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    """
    p, pm = _run(tmp_path, body, armed=False)
    assert p.returncode == 7 and "MINE" in p.stdout, p.stderr
    assert "reason: told to stop (SIGTERM)" in (pm / "stacks_rank_3.txt").read_text()


def test_a_forked_child_never_writes_its_parents_files(tmp_path):
    body = """
        pid = os.fork()
        if pid == 0:
            raise ValueError("in the child")  # a DataLoader worker that fails: the parent decides
        _, status = os.waitpid(pid, 0)
        print("CHILD", os.waitstatus_to_exitcode(status), flush=True)
    """
    p, pm = _run(tmp_path, body)
    assert p.returncode == 0 and "CHILD 1" in p.stdout, p.stderr
    assert _files(pm) == []


def test_a_flight_recorder_past_diagnoses_bound_keeps_its_newest_entries_and_says_so(monkeypatch):
    import ncclcheck.postmortem.inputs as inputs

    doc = {"version": "2.10", "pg_config": {}, "entries": [{"record_id": i, "pad": "x" * 100} for i in range(1000)]}
    text = json.dumps(doc)
    monkeypatch.setattr(inputs, "MAX_JSON_BYTES", len(text) // 3)
    notes: list = []
    out = armmod.cut_flight_recorder(text, notes)
    got = json.loads(out)
    assert len(out) <= inputs.MAX_JSON_BYTES and flight.is_dump(got)
    assert got["entries"] and got["entries"][-1]["record_id"] == 999  # the newest kept
    assert "cut to its newest" in got["ncclcheck_cut"] and notes == [got["ncclcheck_cut"]]
    monkeypatch.setattr(inputs, "MAX_JSON_BYTES", len(text))
    assert armmod.cut_flight_recorder(text, []) == text  # within the bound: as torch wrote it


def _fifo_reader_open(fifo: str) -> bool:
    """A process has the FIFO open for reading (opening its write end without blocking succeeds): it waits there."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        return True
    except OSError:
        return False


# the script's end blocks reading a FIFO: a raise from a frame whose source file is the FIFO (Python's traceback
# formatting, the excepthook's and the default hook's, reads it through linecache/tokenize, as it reads a job's sources
# under load), or sys.exit(3) with an atexit handler of a library's reading it
ENDINGS = {
    "raise": """
        fifo = os.environ['PM'] + '.fifo'
        os.mkfifo(fifo)
        job = "x = 1\\nraise RuntimeError('DataLoader worker (pid(s) 9) is killed by signal: Terminated.')\\n"
        exec(compile(job, fifo, "exec"))
    """,
    "exit": """
        import atexit, pathlib
        fifo = os.environ['PM'] + '.fifo'
        os.mkfifo(fifo)
        atexit.register(pathlib.Path(fifo).read_text)  # a library's, after arm(): runs before arm's own atexit
        sys.exit(3)
    """}
SAID = {"raise": ("{fifo}:2 in <module>", "reason: raised RuntimeError: DataLoader worker (pid(s) 9) is killed"),
        "exit": ("{script}:9 in <module>", "reason: sys.exit(3)\n")}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_sigterm_while_the_script_is_ending_says_where_it_ended(tmp_path, ending):
    """A SIGTERM dump taken while the main thread is past the script (its excepthook formatting the traceback through
    linecache, or its atexit handlers: the script's frames are gone from the stack) says the script's own frame that
    raised or called sys.exit, not a library's innermost frame (diag-torchrun-loader once said
    `linecache.py:136 in updatecache`), and the script's end stays its reason, the stop what came after (a stop
    erased the rank's own word: it read as "told to stop")."""
    pm = tmp_path / "pm"
    script = _script(tmp_path, ENDINGS[ending])
    p = subprocess.Popen([sys.executable, script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=_env(PM=str(pm)), cwd=REPO)
    fifo = f"{pm}.fifo"
    try:
        end = time.monotonic() + 60
        while not _fifo_reader_open(fifo) and p.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        assert p.poll() is None and _fifo_reader_open(fifo), p.communicate(timeout=10)
        w = os.open(fifo, os.O_WRONLY)  # the reader's open returns; it now waits in its first read
        try:
            time.sleep(0.2)
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=30)
        finally:
            os.close(w)
    finally:
        _reap(p)
    text = _stopped_stacks(p, pm, err)
    where, reason = SAID[ending]
    said = stacks.parse(text, "s")
    assert said["where"] == where.format(fifo=fifo, script=script), text  # the script's own frame
    assert reason in text and said["then"] == "told to stop (SIGTERM)", text  # its end, then the launcher's stop
    assert "note: the script had" not in text  # the reason says it: no note restating it


def test_an_end_that_came_after_the_snapshot_leaves_the_stack_its_say(tmp_path, monkeypatch):
    """The threads are read first, the end in flight after (the flight recorder's dump between): a snapshot whose
    main thread still held the job's frame (the DataLoader wait a stop found) keeps it, with the library frame it was
    inside, though the rank raised a moment later; one that held only library frames takes the line it raised at."""
    import threading

    try:
        raise RuntimeError("DataLoader worker (pid(s) 9) is killed by signal: Terminated.")
    except RuntimeError as e:
        exc, line = e, e.__traceback__.tb_lineno
    ev = armmod._Evidence(str(tmp_path), {"RANK": "3"})  # armed before it raised: an end of this run
    monkeypatch.setattr(sys, "last_value", None, raising=False)

    def snapshot(body: str) -> tuple:  # the threads as they were, then the rank raised (the stop's consequence)
        monkeypatch.setattr(sys, "last_value", exc, raising=False)
        monkeypatch.setattr(sys, "last_traceback", exc.__traceback__, raising=False)
        return {main: "MainThread"}, body.encode()

    main = threading.main_thread().ident
    head = f"Thread 0x{main:016x} (most recent call first):\n"
    select = '  File "/usr/lib/python3.11/selectors.py", line 415 in select\n'
    running = head + select + '  File "/home/me/train.py", line 42 in main\n'
    ended = head + '  File "/usr/lib/python3.11/linecache.py", line 136 in updatecache\n' \
                   '  File "/usr/lib/python3.11/traceback.py", line 74 in extract_tb\n'
    said = {running: "/home/me/train.py:42 in main (inside selectors.py:415 in select)",
            ended: f"{__file__}:{line} in test_an_end_that_came_after_the_snapshot_leaves_the_stack_its_say"}
    for body, where in said.items():
        monkeypatch.setattr(sys, "last_value", None, raising=False)
        monkeypatch.setattr(armmod, "threads_now", lambda b=body: snapshot(b))
        got = ev.write("told to stop (SIGTERM)")
        text = open(got["stacks"]).read()
        said = stacks.parse(text, "s")
        assert said["where"] == where, text
        assert said["reason"] == "told to stop (SIGTERM)" and said["then"] is None, text  # the stop came first
        assert ("note: the script had raised RuntimeError" in text) == (body == ended)
    # an exception Python printed before arm() (an interactive session's) is no end of this run: the stack as read
    late = armmod._Evidence(str(tmp_path), {"RANK": "3"})
    text = open(late.write("told to stop (SIGTERM)")["stacks"]).read()
    assert stacks.parse(text, "s")["where"] == "/usr/lib/python3.11/linecache.py:136 in updatecache", text


def _raise_in(path: str, msg: str) -> BaseException:
    """An exception raised from a frame whose file is `path` (a torch.distributed one: a collective that failed)."""
    space: dict = {}
    exec(compile(f"def collective():\n    raise RuntimeError({msg!r})\n", path, "exec"), space)
    try:
        space["collective"]()
    except RuntimeError as e:
        return e
    raise AssertionError("did not raise")


def test_a_stop_after_the_scripts_own_end_keeps_the_end_as_the_reason(tmp_path, monkeypatch):
    """torchrun stops every rank once one failed; a rank that had raised, or asked sys.exit for a failing code, and
    was still exiting (slow atexit handlers, a DataLoader's workers, the process group's teardown) got its stacks
    rewritten as "told to stop", its own end gone. The end stays the reason (its line, its traceback), the stop is
    said as what came after; an ask (SIGUSR1) after the end is said the same way. A stop before any end, and an end
    after the stop, stay as they were: the stop the reason, the exception (the stop's consequence) never put first."""
    monkeypatch.setattr(sys, "last_value", None, raising=False)
    path = lambda got: open(got["stacks"]).read()  # noqa: E731

    # the excepthook's own write, then the stop: the file keeps the exception, its line and its traceback
    ev = armmod._Evidence(str(tmp_path / "a"), {"RANK": "3"})
    os.makedirs(ev.directory)
    ev.write("raised ValueError: loss is NaN", "train.py:12 in main", "Traceback (most recent call last):\n"
             '  File "train.py", line 12, in main\nValueError: loss is NaN\n')
    text = path(ev.write("told to stop (SIGTERM)"))
    said = stacks.parse(text, "s")
    assert (said["reason"], said["where"], said["then"]) == \
           ("raised ValueError: loss is NaN", "train.py:12 in main", "told to stop (SIGTERM)"), text
    assert said["chain"] == ["ValueError: loss is NaN"] and "note: the script had" not in text
    said = stacks.parse(path(ev.write("asked (SIGUSR1)")), "s")
    assert (said["reason"], said["then"]) == ("raised ValueError: loss is NaN", "asked (SIGUSR1)")

    # the exception reached the top but the excepthook had not written yet (it reads sources through linecache):
    # the stop writes the exception from sys.last_value, its chain read off the frames (no source file opened), so
    # an exception out of torch.distributed is still known as a collective's (a peer gone: not the rank's own end)
    ev = armmod._Evidence(str(tmp_path / "b"), {"RANK": "3"})  # armed before it raised: an end of this run
    os.makedirs(ev.directory)
    exc = _raise_in("/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", "peer gone")
    monkeypatch.setattr(sys, "last_value", exc, raising=False)
    monkeypatch.setattr(sys, "last_traceback", exc.__traceback__, raising=False)
    text = path(ev.write("told to stop (SIGTERM)"))
    said = stacks.parse(text, "s")
    assert (said["reason"], said["then"]) == ("raised RuntimeError: peer gone", "told to stop (SIGTERM)"), text
    assert said["from_collective"] and said["chain"] == ["RuntimeError: peer gone"], text
    monkeypatch.setattr(sys, "last_value", None, raising=False)

    # sys.exit(3) past the script (its own atexit handlers running before arm's): the exit, then the stop
    ev = armmod._Evidence(str(tmp_path / "c"), {"RANK": "3"})
    os.makedirs(ev.directory)
    ev.exit_code, ev.exit_at = 3, "train.py:20 in main"
    monkeypatch.setattr(armmod.threading, "main_thread", lambda: type("T", (), {"is_alive": lambda self: False})())
    said = stacks.parse(path(ev.write("told to stop (SIGTERM)")), "s")
    assert (said["reason"], said["where"], said["then"]) == ("sys.exit(3)", "train.py:20 in main",
                                                               "told to stop (SIGTERM)")
    monkeypatch.undo()
    monkeypatch.setattr(sys, "last_value", None, raising=False)

    # a stop before any end stays the reason; the excepthook's write after it (the stop's consequence) has no `then`
    ev = armmod._Evidence(str(tmp_path / "d"), {"RANK": "3"})
    os.makedirs(ev.directory)
    said = stacks.parse(path(ev.write("told to stop (SIGTERM)")), "s")
    assert (said["reason"], said["then"]) == ("told to stop (SIGTERM)", None)
    said = stacks.parse(path(ev.write("raised KeyboardInterrupt", "train.py:5 in main")), "s")
    assert (said["reason"], said["then"]) == ("raised KeyboardInterrupt", None)


def test_a_failing_exit_after_an_ask_is_still_written(tmp_path):
    """A rank asked for its evidence while it ran (SIGUSR1: kill -USR1, watch) that later calls sys.exit(3) leaves
    the exit, not the ask: an ask is no end (a stop before it is: a script's own SIGTERM handler calling sys.exit)."""
    body = """
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(1)
        assert 'asked' in open(os.path.join(os.environ['PM'], 'stacks_rank_3.txt')).read()
        sys.exit(3)
    """
    p, pm = _run(tmp_path, body)
    assert p.returncode == 3, p.stderr
    said = stacks.parse((pm / "stacks_rank_3.txt").read_text(), "s")
    assert said["reason"] == "sys.exit(3)" and said["then"] is None, said
    assert said["where"].endswith("armed.py:8 in <module>"), said


def test_a_ranks_word_carries_what_came_after_its_end_and_bounds_it():
    """The end record a rank leaves in the job's store (watch reads it) carries `then`, bounded like the rest; a
    record of an older writer without it still reads."""
    said = {"reason": "raised ValueError: x", "where": "t.py:1 in m", "time": None, "launcher": "torchrun",
            "from_collective": False, "chain": ["ValueError: x"], "then": "told to stop (SIGTERM)"}
    rec = stacks.to_record(said)
    assert stacks.from_record(1, rec, "p")["then"] == "told to stop (SIGTERM)"
    assert stacks.from_record(1, {k: v for k, v in rec.items() if k != "then"}, "p")["then"] is None
    assert stacks.from_record(1, {**rec, "then": "x" * 65}, "p") is None
    assert stacks.from_record(1, {**rec, "then": 7}, "p") is None


def test_a_stop_during_the_cleanup_after_a_raise_says_the_exception_in_a_note(tmp_path):
    """A rank stopped in a `finally` that runs after a raise (a slow process-group teardown) had not ended: its
    exception had not reached the top and might yet have been handled, so the stop stays the reason (the verdict as
    for any rank stopped while it ran), and a note keeps the rank's own word on what it was doing."""
    body = """
        try:
            raise RuntimeError("simulated bug")
        finally:
            open(os.environ['PM'] + '.ready', 'w').close()
            time.sleep(60)
    """
    pm = tmp_path / "pm"
    p = subprocess.Popen([sys.executable, _script(tmp_path, body)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=_env(PM=str(pm)), cwd=REPO)
    try:
        end = time.monotonic() + 60
        while not os.path.exists(f"{pm}.ready") and p.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        _reap(p)
    text = _stopped_stacks(p, pm, err)
    said = stacks.parse(text, "s")
    assert (said["reason"], said["then"]) == ("told to stop (SIGTERM)", None), text
    assert "note: its main thread was handling RuntimeError: simulated bug (raised at " in text, text
    assert "armed.py:6 in <module>) when told to stop" in text, text


def _reap(p) -> None:
    """A script the test could not stop as planned is killed, never left running."""
    if p.poll() is None:
        p.kill()
        p.communicate(timeout=10)


def _stopped_stacks(p, pm, err: str) -> str:
    """The stacks file of rank 3 of a script that SIGTERM ended (its own stop, not a crash)."""
    assert p.returncode == -signal.SIGTERM, err
    return (pm / "stacks_rank_3.txt").read_text()
