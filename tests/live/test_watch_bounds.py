"""watch against responders that send anything (issue 45 item 4): a stranger registers records pointing at his own
listeners (no token: anyone writes the store) and replies with what costs watch the most. 63 MiB of `{},{},...` from
one fake rank took watch to 3.4 GB; four to 5.4 GB, then memory errors reported as "ranks 0-3 did not answer".
watch now asks each rank for at most its share of one look's allowance, refuses a reply over it before a byte is
decoded, and names that rank as answering with garbage, never as not answering."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading

import pytest

from ncclcheck.live import wire
from ncclcheck.rendezvous.store import Guard, JsonStore
from ncclcheck_lab import peak_rss
from ncclcheck_lab.loopstore import loopback_store
from tests.conftest import cli_env

RUN = "cd" * 16
ENTRY = {"collective_seq_id": 7, "pg_id": 0, "process_group": ["0", "default_pg"], "record_id": 7,
         "profiling_name": "gloo:all_reduce", "state": "completed", "is_p2p": False}
ISSUE_REPLY = b"[" + b"{}," * ((63 << 20) // 3) + b"{}]"  # the review's reply: 63 MiB, under the old 64 MiB cap


class Fake:
    """A stranger's listener speaking the live protocol as rank r: a hello of this job's run, then `reply(request)`
    (bytes, sent as one frame); counts the bytes it got out."""

    def __init__(self, rank: int, reply) -> None:
        self.rank, self.reply = rank, reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sent = 0
        self.asked: list = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c: socket.socket) -> None:
        with c:
            try:
                c.settimeout(30)
                wire.send_frame(c, json.dumps({"v": wire.VERSION, "rank": self.rank, "challenge": "a" * 32,
                                               "auth": "none", "job": "nojob", "run": RUN}).encode())
                (n,) = wire.HEADER.unpack(c.recv(4, socket.MSG_WAITALL))
                req = json.loads(c.recv(n, socket.MSG_WAITALL))
                self.asked.append(req)
                data = self.reply(req)
                c.sendall(wire.HEADER.pack(len(data)))
                view = memoryview(data)
                while view:
                    k = c.send(view[:1 << 16])
                    self.sent += k
                    view = view[k:]
            except (OSError, ValueError):
                return

    def record(self) -> dict:
        return {"v": wire.VERSION, "rank": self.rank, "world_size": 5, "local_rank": 0, "host": f"h{self.rank}",
                "addr": "127.0.0.1", "port": self.port, "pid": 1, "auth": "none", "attempt": 0, "job": "nojob",
                "run": RUN}

    def close(self) -> None:
        self.sock.close()


def _honest(rank: int):
    def reply(req: dict) -> bytes:
        return json.dumps({"v": wire.VERSION, "rank": rank, "job": "nojob", "run": RUN, "host": f"h{rank}",
                           "pid": 1, "progress": {"0": {"enqueued": 7, "started": -1, "completed": 7}},
                           "flight": {"entries": [ENTRY], "pg_status": {}}}).encode()
    return reply


def _most(rank: int):
    """The worst reply a stranger may send within what watch asked: as many JSON values as it may hold, of the
    shape that costs the most memory per value watch counts (a new two-character string each: ~60 bytes of Python
    per 5 bytes of JSON), in the flight recorder's entries (where the analysis reads them)."""
    def reply(req: dict) -> bytes:
        if req["kind"] == "progress":
            return _honest(rank)(req)
        head = json.dumps({"v": wire.VERSION, "rank": rank, "job": "nojob", "run": RUN, "host": f"h{rank}",
                           "pid": 1, "flight": {"entries": [{"x": []}]}}).encode()[:-6]
        n = min((req["max_bytes"] - len(head) - 16) // 5, req["max_items"] - wire.count_items(head) - 8)
        return head + b"[" + b'"ab",' * n + b'"ab"]}]}}'
    return reply


@pytest.fixture
def store():
    server = loopback_store(timeout_s=10)
    st = JsonStore(server, guard=Guard())
    st.set(wire.WORLD_KEY, {"world_size": 5, "attempt": 0, "job": "nojob", "run": RUN})
    fakes: list = []
    yield server.port, st, fakes
    for f in fakes:
        f.close()


def _register(st: JsonStore, fakes: list, replies: dict) -> None:
    for r, reply in replies.items():
        f = Fake(r, reply)
        fakes.append(f)
        st.set(wire.rank_key(r), f.record())


def _watch(port: int, tmp_path) -> tuple[subprocess.CompletedProcess, int, dict]:
    """`ncclcheck watch` in its own process: (its run, its peak RSS in bytes, its report). The peak is measured by
    ncclcheck_lab.peak_rss's small launcher: forked from this worker, watch's own ru_maxrss would include the
    worker's (1.7 GB late in the full suite)."""
    out = tmp_path / "watch.json"
    env = cli_env()
    for k in ("SLURM_JOB_ID", "SLURM_JOBID"):  # no munge: the fakes answer without authentication
        env.pop(k, None)
    argv = [sys.executable, "-m", "ncclcheck", "watch", "--master-addr", "127.0.0.1", "--master-port", str(port),
            "--timeout", "20", "--json", str(out)]
    p, peak = peak_rss.run(argv, str(tmp_path / "watch.rss"), timeout=120, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    return p, peak or 0, json.loads(out.read_text()) if out.exists() else {}


GROWTH = 300 << 20  # watch's own memory over its imports' (torch.distributed's, for the store client) at most


def _imports_peak(tmp_path) -> int:
    """The peak RSS of an interpreter that imports what watch imports before it reads anything (the CLI and
    torch.distributed), measured by the same launcher: ~220 MiB with a CPU torch, ~600 MiB with a CUDA build (its
    libraries load at import: the lent H200's watch peaked at 626-628 MiB whatever its fakes sent)."""
    p, peak = peak_rss.run([sys.executable, "-c", "import ncclcheck.cli, torch.distributed"],
                           str(tmp_path / "imports.rss"), timeout=120, env=cli_env(), capture_output=True)
    assert p.returncode == 0 and peak, p.stderr[-1000:]
    return peak


def _answered(doc: dict) -> dict:
    return next(c for c in doc["checks"] if c["id"] == "live.answered")


def test_the_reviews_63_mib_reply_is_refused_unread_and_named_garbage(store, tmp_path):
    port, st, fakes = store
    _register(st, fakes, {0: _honest(0), 1: lambda req: ISSUE_REPLY, 2: _honest(2), 3: _honest(3), 4: _honest(4)})
    p, peak, doc = _watch(port, tmp_path)
    assert doc, p.stderr[-2000:]
    c = _answered(doc)
    assert "rank 1 of 5 answered with garbage" in c["summary"] and "did not answer" not in c["summary"], c
    assert "over the" in c["summary"] and "byte limit" in c["summary"], c
    assert fakes[1].sent < (8 << 20), f"watch read {fakes[1].sent:,} bytes of the 63 MiB reply"  # refused unread
    assert fakes[1].asked and fakes[1].asked[0]["max_bytes"] < len(ISSUE_REPLY)
    base = _imports_peak(tmp_path)
    print(f"FIGURE watch's peak RSS, one rank replying 63 MiB of {{}}: {peak / (1 << 20):,.0f} MiB, its imports "
          f"alone {base / (1 << 20):,.0f} MiB")
    assert doc["live"]["garbage"] == [1]
    assert peak - base < GROWTH, f"watch peaked at {peak / (1 << 20):,.0f} MiB, {base / (1 << 20):,.0f} its imports"


@pytest.mark.slow
def test_four_fake_ranks_sending_the_most_they_may_leave_watch_within_300_mib_of_its_imports(store, tmp_path):
    """Every rank a stranger's, four sending as many JSON values as watch lets them, of the shape that costs it the
    most memory, and one more sending 63 MiB: watch's peak RSS stays within GROWTH of its imports' (under 512 MB in
    all with a CPU torch), and it answers."""
    port, st, fakes = store
    _register(st, fakes, {0: _most(0), 1: _most(1), 2: _most(2), 3: _most(3), 4: lambda req: ISSUE_REPLY})
    p, peak, doc = _watch(port, tmp_path)
    assert doc, p.stderr[-2000:]
    base = _imports_peak(tmp_path)
    print(f"FIGURE watch's peak RSS, 4 ranks sending the most they may and one 63 MiB: {peak / (1 << 20):,.0f} MiB, "
          f"its imports alone {base / (1 << 20):,.0f} MiB")
    assert peak - base < GROWTH, f"watch peaked at {peak / (1 << 20):,.0f} MiB, {base / (1 << 20):,.0f} its imports"
    assert all(len(f.asked) >= 2 for f in fakes[:4]), doc["live"]  # both looks, each rank: every reply taken
    assert doc["live"]["garbage"] == [4] and doc["live"]["answered"] == [0, 1, 2, 3], doc["live"]
