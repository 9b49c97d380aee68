"""Issue 36: the job token's handling (hole 7) and trust without configuration (rendezvous/trust.py): a per-run key
handed out in a MUNGE credential (a real munged on a private socket) or in a 0600 file in a shared directory, and a
stranger's forged pass ignored at either level."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import socket
import subprocess
import threading
import time
from typing import Optional

import pytest

from ncclcheck.agent.launchers import detect_placement
from ncclcheck.config import Config, StorageConfig, WorldConfig, build_world, read_token
from ncclcheck.errors import UsageError
from ncclcheck.facts import munge
from ncclcheck.model import failed, passed
from ncclcheck.preflight import cluster
from ncclcheck.preflight import keys as K
from ncclcheck.rendezvous import trust as T
from ncclcheck.rendezvous.budget import Budget
from tests.conftest import free_port, run_cli

# --- the token (hole 7)


def test_a_whitespace_only_token_is_a_usage_error():
    with pytest.raises(UsageError, match="NCCLCHECK_TOKEN .* only whitespace"):
        build_world(env={"NCCLCHECK_TOKEN": "  \t "})


def test_an_empty_token_variable_is_no_token(tmp_path):
    assert read_token(None, {"NCCLCHECK_TOKEN": ""}, str(tmp_path / "absent")) == (None, "", "")


def test_a_token_file_gives_its_first_line_only(tmp_path):
    f = tmp_path / "token"
    f.write_text("s3cret\nsecond line that is not the token\n")
    f.chmod(0o600)
    tok, src, warning = read_token(str(f), {})
    assert tok == b"s3cret" and src == f"--token-file {f}" and warning == ""


def test_a_token_file_others_can_read_is_warned_about(tmp_path):
    f = tmp_path / "token"
    f.write_text("s3cret\n")
    f.chmod(0o644)
    _, _, warning = read_token(str(f), {})
    assert "can be read by other users (mode 0o644)" in warning
    w = build_world(env={"NCCLCHECK_TOKEN_FILE": str(f)})
    assert w.token == b"s3cret" and w.token_warning == warning


def test_a_token_file_that_is_one_huge_line_is_refused(tmp_path):
    f = tmp_path / "token"
    f.write_bytes(b"x" * 10_000_000)
    with pytest.raises(UsageError, match="first line is over 4096 bytes"):
        read_token(str(f), {})


def test_a_mounted_kubernetes_secret_is_the_token_when_nothing_else_is_given(tmp_path):
    f = tmp_path / "token"
    f.write_text("from-the-secret\n")
    f.chmod(0o644)  # Kubernetes' default mode for a Secret: inside the pod's own mount, not a warning
    assert read_token(None, {}, str(f)) == (b"from-the-secret", f"the Secret mounted at {f}", "")
    assert read_token(None, {"NCCLCHECK_TOKEN": "env"}, str(f))[0] == b"env"


def test_cli_whitespace_token_exits_2_in_one_line():
    p = run_cli("preflight", "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", "29999",
                env={"NCCLCHECK_TOKEN": "   "})
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "only whitespace" in p.stderr


def test_the_level_is_the_nodes_own_configuration():
    assert T.choose(True, "auto", True, True, "/d") == "token"
    assert T.choose(False, "auto", True, True, "/d") == "munge"
    assert T.choose(False, "auto", False, True, "/d") == "none"  # a shared-dir file only when asked for
    assert T.choose(False, "shared-file", False, True, "/d") == "shared-file"
    assert T.choose(False, "auto", True, False, None) == "none"
    assert T.choose(False, "none", True, True, "/d") == "none"


# --- two nodes on loopback, no token




def _forger(port: int, stop: threading.Event, wrote: list) -> threading.Thread:
    """A stranger writing an unsigned exit code 0 into the store, over and over (a forged `world/result` is refused
    too, but then the member has no result and node 0 waits out its agreement bound: a slower test of the same)."""
    def run() -> None:
        import torch.distributed as dist

        while not stop.is_set():  # a plain connect first: torch's client backs off for seconds when refused
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                stop.wait(0.01)
        store = dist.TCPStore("127.0.0.1", port, None, False, timeout=dt.timedelta(seconds=10))
        while store is not None and not stop.is_set():
            try:
                store.set("ncclcheck/preflight/" + K.FINAL, '{"exit_code": 0}')
                wrote.append(1)
            except Exception:  # noqa: BLE001 - the store went away
                return
            stop.wait(0.001)
    t = threading.Thread(target=run, daemon=True)
    return t


def _world(port: int, storage: Optional[StorageConfig] = None) -> tuple:
    """Node 0 with a real fault and node 1 healthy, a stranger forging a pass: (outcome, code) per node."""
    out: dict = {}

    def node(rank: int, checks: list) -> None:
        w = WorldConfig(nnodes=2, node_rank=rank, master_addr="127.0.0.1", master_port=port, timeout_s=8.0,
                        trust="shared-file" if storage else "auto")
        cfg = Config(command="preflight", world=w, storage=storage or StorageConfig())
        o = cluster.run_cluster_preflight(cfg, detect_placement({}, w), {}, checks, Budget.of(cfg),
                                          join_grace_s=0.2)
        if rank == 0:
            time.sleep(0.5)  # node 0 builds its report first: node 1 looks for the exit code before it exists
        out[rank] = (o, o.agree_exit_code(1 if any(c.status.value == "fail" for c in o.checks) else 0))

    stop, wrote = threading.Event(), []
    forger = _forger(port, stop, wrote)
    t0 = threading.Thread(target=node, args=(0, [failed("host.shm", "/dev/shm is 64 MiB", node=0)]), daemon=True)
    t0.start()
    forger.start()
    end = time.monotonic() + 20
    while not wrote and time.monotonic() < end:  # the forgery is in the store before node 1 looks
        time.sleep(0.01)
    node(1, [passed("host.shm", "fine", node=1)])
    t0.join(60)
    stop.set()
    forger.join(10)
    assert wrote, "the stranger never wrote"
    return out


def _assert_forgery_ignored(out: dict, level: str) -> None:
    (o0, c0), (o1, c1) = out[0], out[1]
    assert (o0.trust["level"], o1.trust["level"]) == (level, level), (o0.trust, o1.trust)
    assert (c0, c1) == (1, 1), (o1.checks, o1.rejected)
    assert any("not signed" in r for r in o1.trust.get("ignored", [])), o1.trust


def test_with_a_shared_directory_a_per_run_key_file_signs_the_run(tmp_path):
    port = free_port()
    out = _world(port, StorageConfig(dirs=(str(tmp_path),)))
    _assert_forgery_ignored(out, "shared-file")
    assert not [p for p in os.listdir(tmp_path) if p.startswith(T.FILE_PREFIX)]  # node 0 removed it


def test_a_key_file_others_can_read_is_refused(tmp_path):
    f = tmp_path / (T.FILE_PREFIX + "0" * 16)
    f.write_text(T._new_payload(b"k" * 32, 1).decode())
    f.chmod(0o644)
    with pytest.raises(T.TrustError, match="not this user's private file"):
        T._read_key_file(str(f), 1)
    os.symlink(f, tmp_path / "link")
    with pytest.raises(FileNotFoundError):
        T._read_key_file(str(tmp_path / "link"), 1)


@pytest.fixture
def munged(tmp_path, monkeypatch):
    """A real munged on a private socket, named in a slurm.conf as Slurm sites do (AuthInfo=socket=PATH)."""
    if shutil.which("munged") is None or not munge.available() or os.geteuid() != 0:
        pytest.skip("needs munge and munged, as root (apt-get install munge)")
    key = tmp_path / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = tmp_path / "munge.socket"
    proc = subprocess.Popen(["munged", "--foreground", "--force", f"--socket={sock}", f"--key-file={key}",
                             f"--pid-file={tmp_path / 'pid'}", f"--log-file={tmp_path / 'log'}",
                             f"--seed-file={tmp_path / 'seed'}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 10
    while not sock.exists() and time.monotonic() < end:
        time.sleep(0.05)
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"AuthType=auth/munge\nAuthInfo=socket={sock}\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    yield str(sock)
    proc.terminate()
    proc.wait(10)


def test_munge_round_trip_checks_the_user_and_names_a_stuck_or_missing_munged(munged, tmp_path):
    assert munge.socket_path(os.environ) == munged
    cred = munge.encode(b'{"x": 1}', os.getuid(), 60, 5.0, munged)
    d = munge.decode(cred, 5.0, munged)
    assert (d.status, d.uid, d.payload) == (0, os.getuid(), b'{"x": 1}')
    assert munge.decode(cred, 5.0, munged).status == munge.STATUS_REPLAYED  # a second local rank still decodes it
    with pytest.raises(munge.MungeError, match="unmunge"):
        munge.decode(munge.encode(b"x", 12345, 60, 5.0, munged), 5.0, munged)  # made for another user
    with pytest.raises(munge.MungeError, match="munge"):
        munge.encode(b"x", 0, 60, 5.0, str(tmp_path / "no-socket"))
    with pytest.raises(munge.MungeError, match="not a MUNGE credential"):
        munge.decode("$(touch x)", 5.0, munged)


def test_under_slurm_with_munge_a_per_run_key_signs_the_run_without_a_token(munged):
    _assert_forgery_ignored(_world(free_port()), "munge")
