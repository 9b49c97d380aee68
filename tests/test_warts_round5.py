"""Issue 77, item 5: the warts a new user met in the first hour, each through the CLI."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import time

import pytest

from ncclcheck.render import words
from tests.conftest import REPO, cli_env, run_cli

LEGEND = (words.SINGLE_FORM_LEGEND, words.NOT_CHECKED_NOTE)  # a sweep of all_reduce without --check shows both
BENCH = ("bench", "--sizes", "64K", "--ops", "all_reduce", "--iters", "3", "--warmup", "1")
_ESCAPE = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")


def _legend_lines(text: str, width: int) -> None:
    """Each legend note is in the text whole once its lines are joined, and no line is wider than `width`."""
    lines = [line.rstrip() for line in text.splitlines()]
    assert all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
    flat = " ".join(text.split())
    for note in LEGEND:
        assert flat.count(note) == 1, note


def test_bench_legend_is_wrapped_between_words_to_columns_in_a_pipe():
    res = run_cli(*BENCH, env={"COLUMNS": "100"}, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    head = res.stdout[:res.stdout.index("bench: ")]  # the streamed table and its legend, before the phase line
    _legend_lines(head, 100)
    assert any(line.startswith("  ") and line.strip()[0].isalpha() for line in head.splitlines())  # a continuation


def _on_a_terminal(args: tuple, cols: int, bound_s: float = 180) -> tuple[int, str]:
    """The CLI with stdout on a pseudo-terminal `cols` wide (no COLUMNS: the terminal's own size): (rc, what the
    terminal got, escapes removed, carriage-return overdraws resolved to their last text)."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    env = {k: v for k, v in cli_env({"TERM": "xterm"}).items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    proc = subprocess.Popen([sys.executable, "-m", "ncclcheck", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    os.close(slave)
    out, end = b"", time.monotonic() + bound_s
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child and every holder of the terminal are gone
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=max(1.0, end - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    text = _ESCAPE.sub("", out.decode(errors="replace"))
    return rc, "\n".join(line.rstrip("\r").split("\r")[-1] for line in text.split("\n"))  # the tty's \r\n


def test_bench_legend_is_wrapped_between_words_to_a_100_column_terminal():
    rc, text = _on_a_terminal(BENCH, 100)
    assert rc == 0, text[-2000:]
    assert "all_reduce  type float32" in text
    _legend_lines(text[:text.index("bench summary")], 100)


def _phases(out: str) -> list[tuple[str, int, int]]:
    return [(m[1], int(m[2]), int(m[3])) for m in re.finditer(r"(?m)^(links[a-z -]*): (\d+) of (\d+)$", out)]


@pytest.mark.slow  # 5 ranks on loopback, one of them 0.4 s late per send
def test_links_progress_counts_the_rounds_it_said_it_would_and_says_the_retests_apart(tmp_path):
    # Quick mode's one random round, rank 1 sending 0.4 s late (tests/links_faults.py): its pair is re-tested in
    # rounds the first phase's total could not know of. Each phase's total is its own rounds, done never past it.
    # Loopback on a shared 2-core machine now and then leaves no pair that passed to re-test against (then there is
    # no re-test and nothing to count): up to 3 runs, each held to the same rules.
    code = ("import sys; import ncclcheck.links.job as j, tests.links_faults as f; "
            "j.links_job = f.links_job_one_round_slow_rank_1; "
            "from ncclcheck.cli import main; sys.exit(main(sys.argv[1:]))")
    report = tmp_path / "links.json"
    for _ in range(3):
        res = subprocess.run([sys.executable, "-c", code, "links", "--nproc-per-node", "5", "--rounds", "quick",
                              "--size", "1M", "--iters", "3", "--min-time", "0", "--relative", "0.05",
                              "--json", str(report)], capture_output=True, text=True, env=cli_env(), cwd=REPO,
                             timeout=240)
        assert res.returncode in (0, 1), res.stderr[-2000:]
        phases = _phases(res.stdout)
        rounds = json.loads(report.read_text())["links"]["rounds"]
        assert phases[0] == ("links", 1, 1) and all(done == total for _, done, total in phases), phases
        assert [name for name, _, _ in phases[1:]] == ["links re-test"] * (len(phases) - 1)
        assert sum(total for _, _, total in phases) == len(rounds), (phases, rounds)
        if len(rounds) > 1:
            return
    pytest.skip("no run re-tested a pair (loopback noise left no pair that passed): the case was not reached")


@pytest.mark.parametrize("argv, said", [
    (("preflight", "--nnode", "2"), "unrecognized argument --nnode; did you mean --nnodes?"),
    (("bench", "--size=1M"), "unrecognized argument --size; did you mean --sizes?"),
    (("preflite",), "invalid choice: 'preflite'; did you mean 'preflight'?"),
    (("links", "--rounds", "quik"), "invalid choice: 'quik'; did you mean 'quick'?"),
])
def test_a_typo_is_one_line_naming_what_was_meant(argv, said):
    res = run_cli(*argv)
    assert res.returncode == 2 and res.stdout == "", res.stderr
    [line] = res.stderr.strip().splitlines()
    assert said in line and "Traceback" not in res.stderr
    if said.startswith("unrecognized"):  # the flag's value is not named apart: it belongs to the mistyped flag
        assert " 2 " not in line and "1M" not in line


def test_a_flag_nothing_resembles_is_named_without_a_guess():
    res = run_cli("preflight", "--zzzqqq")
    assert res.returncode == 2 and "unrecognized argument --zzzqqq (see 'ncclcheck preflight --help')" in res.stderr
    assert "did you mean" not in res.stderr


def test_env_of_an_empty_code_folder_says_so_instead_of_a_digest(tmp_path):
    empty = tmp_path / "job"
    empty.mkdir()
    html = tmp_path / "env.html"
    res = run_cli("env", "--code", str(empty), "--html", str(html), "--json", str(tmp_path / "env.json"),
                  env={"COLUMNS": "200"})
    assert res.returncode == 0, res.stderr[-2000:]
    [line] = [ln.strip() for ln in res.stdout.splitlines() if ln.strip().startswith("code ")]
    assert f"tree {empty}: no files to hash" in line and "sha256" not in line
    page = html.read_text()
    row = page[page.index("<th>code</th>"):].split("</tr>")[0]  # the versions table's (the page's JSON keeps all)
    assert f"{empty} (tree): no files to hash" in row and "sha256" not in row
    code = json.loads((tmp_path / "env.json").read_text())["nodes"][0]["facts"]["code"]
    assert code["files"] == 0  # the JSON keeps the fact as read
    (empty / "train.py").write_text("print('step')\n")
    res = run_cli("env", "--code", str(empty), env={"COLUMNS": "200"})
    [line] = [ln.strip() for ln in res.stdout.splitlines() if ln.strip().startswith("code ")]
    assert "sha256:" in line and "(1 file)" in line


_SETPRIV = shutil.which("setpriv")
_NOBODY = 65534


def _as_nobody(*args: str) -> subprocess.CompletedProcess:
    """scripts/netlab ARGS as an unprivileged user (uid/gid 65534, no groups), this checkout on PYTHONPATH."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": REPO, "HOME": "/tmp", "LANG": "C.UTF-8"}
    return subprocess.run([_SETPRIV, "--reuid", str(_NOBODY), "--regid", str(_NOBODY), "--clear-groups",
                           sys.executable, os.path.join(REPO, "scripts", "netlab"), "--name", "wartsnb", *args],
                          capture_output=True, text=True, env=env, cwd="/", timeout=60)


@pytest.mark.skipif(not (_SETPRIV and os.geteuid() == 0), reason="needs root to drop to an unprivileged user")
@pytest.mark.parametrize("args", [("up", "2"), ("down",), ("scenario", "blocked-port", "h1", "29500"), ("gc",)])
def test_netlab_without_root_says_it_needs_root_before_touching_anything(args):
    if subprocess.run([_SETPRIV, "--reuid", str(_NOBODY), "--regid", str(_NOBODY), "--clear-groups",
                       sys.executable, "-c", "import ncclcheck_lab"], env={"PYTHONPATH": REPO},
                      capture_output=True, cwd="/").returncode:
        pytest.skip("this Python or checkout is not readable by an unprivileged user")
    res = _as_nobody(*args)
    assert res.returncode == 2 and res.stdout == "", (res.stdout, res.stderr)
    [line] = res.stderr.splitlines()
    assert line.startswith(f"netlab {args[0]}: needs root (") and "Traceback" not in res.stderr
    assert _as_nobody("status").returncode == 0  # reading what labs exist needs nothing


def test_netlab_root_check_names_the_command_and_lets_root_and_status_through():
    from ncclcheck_lab.netlab.cli import NEEDS_ROOT, parser, root_needed

    commands = set(parser()._subparsers._group_actions[0].choices)
    assert NEEDS_ROOT == commands - {"status"}  # a new command is decided here, not forgotten
    assert root_needed("up", euid=0) is None and root_needed("status", euid=1000) is None
    assert root_needed("exec", euid=1000).startswith("netlab exec: needs root (")


def _shaped(rate_bits: float) -> dict:
    """One node's link facts as facts/links.py reads them: eth0 at 10 Gb/s under a root tbf of `rate_bits`."""
    return {"netdevs": [{"name": "eth0", "speed_mbps": 10000, "speed_unknown": None, "virtual": None,
                         "shaper": {"qdiscs": [{"kind": "tbf", "root": True, "rate_bytes_per_s": rate_bits / 8}]}}],
            "default_interface": "eth0", "ib_ports": [], "env": {}, "nvlink": None, "pcie_gpus": []}


def test_links_shows_each_bound_in_the_unit_of_its_figures(tmp_path):
    # A lab run of 3 hosts, h2 shaped to 200 Mb/s (tests/data/bounds), its bounds worked out again by this tree from
    # the same shapers: figures and bounds alike in GB/s, what sets a bound named without a figure of its own.
    from ncclcheck.links import efficiency

    with open(os.path.join(REPO, "tests", "data", "bounds", "links_3_hosts_h2_at_200mbit.json")) as f:
        doc = json.load(f)
    sec = doc["links"]
    by_node = {0: _shaped(1e9), 1: _shaped(200e6), 2: _shaped(1e9)}
    fields, _ = efficiency.evaluate(sec["matrix_gbps"], by_node, "gloo", "node", sec["hosts"], None,
                                    sec["slow_nodes"])
    sec.update(fields)
    saved = tmp_path / "links.json"
    saved.write_text(json.dumps(doc))
    res = run_cli("report", str(saved), env={"COLUMNS": "250"})
    assert res.returncode in (0, 1), res.stderr[-2000:]
    out = res.stdout[res.stdout.index("Links  GB/s"):]
    assert "node 1 (h2): 0.025 GB/s (node 1 eth0: tbf)" in out and "0.125 GB/s (node 0 eth0: tbf)" in out
    assert not re.search(r"\d ?[MG]b/s", out), out  # no rate in bits beside the GB/s figures
