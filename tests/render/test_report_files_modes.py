"""Issue 77 item 3: report files get the mode `tee` would give them (0666 less the umask), the log folder stays
private, and a path that is a FIFO, socket or device, or another user's file in a sticky directory, is refused with
one line and exit 2 before anything runs. Through the CLI: `report EXAMPLE --FLAG PATH` renders a saved run, the
cheapest command that writes every format."""

from __future__ import annotations

import contextlib
import os
import socket
import stat

import pytest

from ncclcheck.errors import UsageError
from ncclcheck.render.files import write_outputs
from ncclcheck.render.formats import FORMATS

from ..conftest import REPO, run_cli
from .conftest import load_example

EXAMPLE = os.path.join(REPO, "tests", "render", "examples", "preflight-pass-2node.json")
FLAGS = ["--json", "--html", "--junit", "--markdown", "--prometheus"]
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's needs root")
NOBODY = 65534


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)  # the CLI's process inherits it, as from the shell that starts it
    try:
        yield
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _report(flag: str, path, mask: int = 0o022):
    with umask(mask):
        return run_cli("report", EXAMPLE, flag, str(path), "--quiet")


def _refused_in_one_line(res, flag: str, path, why: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith(f"ncclcheck: error: {flag}: cannot write {path}: ") and why in lines[0], lines[0]
    assert res.stdout == ""  # refused before the run: no verdict printed


def test_every_format_is_covered_here():
    assert sorted(FLAGS) == sorted(f.flag for name, f in FORMATS.items() if name != "env_out")


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)],
                         ids=["umask022", "umask077", "umask002"])
def test_a_new_report_follows_the_umask(tmp_path, flag, mask, mode):
    out = tmp_path / "r.out"
    res = _report(flag, out, mask)
    assert res.returncode == 0, res.stderr
    assert _mode(out) == mode, oct(_mode(out))
    assert [p.name for p in tmp_path.iterdir()] == ["r.out"]  # no temp file left beside it


@pytest.mark.parametrize("flag", FLAGS)
def test_an_existing_file_of_ours_is_replaced_and_gets_the_umasks_mode(tmp_path, flag):
    out = tmp_path / "r.out"
    out.write_text("old")
    out.chmod(0o600)  # written by an older version, or by hand
    inode = out.stat().st_ino
    assert _report(flag, out, 0o022).returncode == 0
    assert _mode(out) == 0o644 and out.read_text() != "old"
    assert out.stat().st_ino != inode  # a rename, never written in place: a reader sees old or new, whole
    out.chmod(0o4777)  # no bit of the old file survives, setuid and world write included
    assert _report(flag, out, 0o077).returncode == 0
    assert _mode(out) == 0o600


def test_env_out_follows_the_umask_too(tmp_path):
    out = tmp_path / "nccl.env"
    with umask(0o022):
        res = run_cli("report", EXAMPLE, "--env-out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert _mode(out) == 0o644


@pytest.mark.parametrize("flag", FLAGS)
def test_a_fifo_is_refused_never_opened(tmp_path, flag):
    fifo = tmp_path / "r.out"
    os.mkfifo(fifo)
    res = _report(flag, fifo)  # opening it for writing would block here until the test's timeout
    _refused_in_one_line(res, flag, fifo, "it is a FIFO (named pipe), not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["r.out"]


@pytest.mark.parametrize("flag", FLAGS)
def test_a_socket_is_refused(tmp_path, flag, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative name: an AF_UNIX path is limited to 107 bytes
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("r.sock")
        res = _report(flag, tmp_path / "r.sock")
        _refused_in_one_line(res, flag, tmp_path / "r.sock", "it is a socket, not a regular file")
        assert stat.S_ISSOCK(os.lstat(tmp_path / "r.sock").st_mode)


@pytest.mark.parametrize("flag", FLAGS)
def test_a_device_is_refused(flag):
    res = _report(flag, "/dev/null")
    _refused_in_one_line(res, flag, "/dev/null", "it is a character device, not a regular file")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


@pytest.fixture
def sticky(tmp_path):
    d = tmp_path / "shared-tmp"
    d.mkdir()
    d.chmod(0o1777)  # like /tmp
    return d


@ROOT_ONLY
@pytest.mark.parametrize("flag", FLAGS)
def test_another_users_file_in_a_sticky_directory_is_refused(sticky, flag):
    planted = sticky / "x.json"
    planted.write_text("theirs")
    planted.chmod(0o644)  # readable by its planter: root's report must not land in it
    os.chown(planted, NOBODY, NOBODY)
    res = _report(flag, planted)
    _refused_in_one_line(res, flag, planted, f"it belongs to uid {NOBODY}")
    assert "is a sticky directory" in res.stderr
    st = os.lstat(planted)
    assert (st.st_uid, _mode(planted), planted.read_text()) == (NOBODY, 0o644, "theirs")
    assert [p.name for p in sticky.iterdir()] == ["x.json"]


@ROOT_ONLY
def test_another_users_link_in_a_sticky_directory_is_refused(sticky, tmp_path):
    target = tmp_path / "target"
    target.write_text("kept")
    link = sticky / "r.json"
    link.symlink_to(target)
    os.lchown(link, NOBODY, NOBODY)
    res = _report("--json", link)
    _refused_in_one_line(res, "--json", link, f"it belongs to uid {NOBODY}")
    assert link.is_symlink() and target.read_text() == "kept"


@ROOT_ONLY
def test_another_users_file_outside_a_sticky_directory_is_replaced_with_the_umasks_mode(tmp_path):
    # Only the directory's writers could have put it there: replaced, and root's report never keeps its mode
    planted = tmp_path / "x.json"
    planted.write_text("theirs")
    planted.chmod(0o666)
    os.chown(planted, NOBODY, NOBODY)
    assert _report("--json", planted, 0o077).returncode == 0
    st = os.lstat(planted)
    assert (st.st_uid, _mode(planted)) == (0, 0o600) and planted.read_text() != "theirs"


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600)], ids=["umask022", "umask077"])
def test_a_link_of_ours_is_replaced_by_a_new_file_never_followed(sticky, tmp_path, mask, mode):
    target = tmp_path / "prog"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o4755)
    link = sticky / "r.json"
    link.symlink_to(target)
    res = _report("--json", link, mask)
    assert res.returncode == 0, res.stderr
    assert not link.is_symlink() and _mode(link) == mode
    assert f"r.json was a symbolic link (to {target}): replaced it with a new file (mode {mode:04o})" in res.stderr
    assert _mode(target) == 0o4755 and target.read_text() == "#!/bin/sh\n"  # the target is untouched


def test_a_fifo_planted_after_the_check_is_refused_when_writing(tmp_path):
    fifo = tmp_path / "r.md"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="it is a FIFO") as err:
        write_outputs(load_example("links-slow-node"), markdown=str(fifo))
    assert "\n" not in str(err.value) and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def _logging_runner(config, **kw):
    import logging

    logging.getLogger("ncclcheck.test").warning("NCCL_X=value a log may hold")
    return load_example("preflight-pass-2node")


@pytest.mark.parametrize("mask", [0o002, 0o000], ids=["umask002", "umask000"])
def test_the_log_folder_stays_private_whatever_the_umask(tmp_path, monkeypatch, mask):
    from ncclcheck import api, cli

    monkeypatch.delenv("NCCLCHECK_LOG_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    real = api.runner
    monkeypatch.setattr(api, "runner", lambda name: _logging_runner if name == "report" else real(name))
    out = tmp_path / "r.json"
    with umask(mask):
        assert cli.main(["report", EXAMPLE, "--json", str(out), "--quiet"]) == 0
    logs = tmp_path / "state" / "ncclcheck"
    assert _mode(logs) == 0o700
    files = list(logs.glob("ncclcheck-*.log"))
    assert files and all(_mode(f) == 0o600 for f in files), [oct(_mode(f)) for f in files]
    assert "a log may hold" in files[0].read_text()
    assert _mode(out) == 0o666 & ~mask  # the report beside it follows the umask


def test_a_link_to_a_device_like_dev_stdout_is_refused_never_replaced(tmp_path):
    """`--json /dev/stdout` as root would have replaced the link /dev/stdout itself (for every process after it)."""
    link = tmp_path / "stdout"
    link.symlink_to("/dev/null")  # the shape of /dev/stdout -> /proc/self/fd/1: a link to a device
    res = _report("--json", str(link))
    _refused_in_one_line(res, "--json", str(link), "it is a symbolic link to a character device (/dev/null)")
    assert link.is_symlink() and os.readlink(link) == "/dev/null"
