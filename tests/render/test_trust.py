"""Issue 21, the plain parts: the env-name allow-list, control characters at ingestion, file modes, exit codes."""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat

import pytest

from ncclcheck.errors import EXIT_CODES
from ncclcheck.model import CheckResult, NodeInfo, Recommendation, Report, Status, clean_text, clean_tree
from ncclcheck.nccl.rules import ENV_EXACT, ENV_LOADS_CODE, ENV_PREFIXES, allowed_recommendations, env_name_allowed
from ncclcheck.render.files import write_atomic

from ..conftest import run_cli

ROOT = pathlib.Path(__file__).parents[2]


@pytest.mark.parametrize("name", ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "TORCH_NCCL_X",
                                  "NCCLCHECK_NODE_RANK", "UCX_TLS", "FI_PROVIDER"])
def test_the_communication_stack_may_be_recommended(name):
    assert env_name_allowed(name)


@pytest.mark.parametrize("name", ["BASH_ENV", "ENV", "LD_PRELOAD", "LD_LIBRARY_PATH", "PATH", "PROMPT_COMMAND",
                                  "PYTHONPATH", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "FI_PROVIDER_PATH",
                                  "NCCL_X$(touch y)", "NCCL_ X", "nccl_lower", "", None, 5, "NCCL_" + "X" * 200])
def test_anything_else_may_not(name):
    assert not env_name_allowed(name)


def test_every_name_a_rule_recommends_is_allowed():
    # The rules build Recommendation("NAME", ...) in recommend/: each such name must pass the allow-list, or the env
    # file would drop ncclcheck's own advice.
    names = set()
    for path in (ROOT / "ncclcheck" / "recommend").glob("*.py"):
        names |= set(re.findall(r'Recommendation\(\s*"([A-Z0-9_]+)"', path.read_text()))
    assert names and all(env_name_allowed(n) for n in names), names


def test_allowed_recommendations_split():
    kept, dropped = allowed_recommendations([Recommendation("NCCL_IB_HCA", "=mlx5_0", "r"),
                                             Recommendation("LD_PRELOAD", "/x.so", "r")])
    assert [r.name for r in kept] == ["NCCL_IB_HCA"] and dropped == ["LD_PRELOAD"]


def test_trust_doc_lists_the_allow_list_as_the_code_has_it():
    text = (ROOT / "docs" / "trust.md").read_text()
    for item in ENV_PREFIXES + ENV_EXACT + ENV_LOADS_CODE:
        assert f"`{item}`" in text, item
    assert "docs/trust.md" in (ROOT / "README.md").read_text()


def test_control_characters_are_stripped_and_text_kept():
    assert clean_text("h1\x1b]0;owned\x07\r\x9b31m\u202e ok\tx\ny") == "h1]0;owned31m ok\tx\ny"
    assert clean_tree({"a\x1b": ["\x00b", {"c": "\x85d"}], "n": 1.5}) == {"a": ["b", {"c": "d"}], "n": 1.5}


def test_ingestion_cleans_and_checks_types():
    c = CheckResult.from_json({"id": "net.x", "status": "fail", "summary": "s\x1b[2J", "node": 1,
                               "evidence": {"host": "h\x1b]0;t\x07"}})
    assert c.summary == "s[2J" and c.evidence == {"host": "h]0;t"}
    with pytest.raises(ValueError, match="status: 'bogus'"):
        CheckResult.from_json({"id": "net.x", "status": "bogus", "summary": "s"})
    with pytest.raises(ValueError, match="node: expected a node rank"):
        CheckResult.from_json({"id": "net.x", "status": "pass", "summary": "s", "node": "0"})
    with pytest.raises(ValueError, match="record: expected an object, got list"):
        CheckResult.from_json([1, 2])
    with pytest.raises(ValueError, match=r"value: expected a string"):
        Recommendation.from_json({"name": "NCCL_X", "value": 5})
    assert NodeInfo.from_json({"node_rank": 2, "hostname": "gpu\x1b[31m2"}).hostname == "gpu[31m2"
    with pytest.raises(ValueError, match="nested more than"):
        clean_tree(json.loads("[" * 100 + "]" * 100))


def test_exit_codes_are_the_schemas():
    schema = json.loads((ROOT / "ncclcheck" / "schema" / "report-1.schema.json").read_text())
    assert schema["properties"]["exit_code"]["enum"] == list(EXIT_CODES)


def test_an_interrupted_report_carries_the_process_exit_code():
    r = Report(command="bench", version="v", started="s", checks=[CheckResult("bench.coverage", Status.FAIL, "cut")],
               partial=True, interrupted=True, interrupted_by="SIGTERM", interrupt_code=143)
    assert r.to_dict()["exit_code"] == 143


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_log_directory_is_0700_and_logs_0600(tmp_path, monkeypatch):
    import logging

    from ncclcheck import cli

    state = tmp_path / "state"
    (state / "ncclcheck").mkdir(parents=True)
    (state / "ncclcheck").chmod(0o755)  # as an older version left it
    monkeypatch.delenv("NCCLCHECK_LOG_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    path = cli._setup_logging()
    try:
        logging.getLogger("ncclcheck.test").warning("something to log")
        assert _mode(state / "ncclcheck") == 0o700
        assert _mode(path) == 0o600
    finally:
        cli._finish_logging(path)


@pytest.mark.parametrize("env", [{}, {"FORCE_COLOR": "1"}], ids=["plain", "colour"])
def test_the_console_never_prints_an_escape_from_data(env):
    import io

    from ncclcheck.render.console import make_console, render_report

    hostile = "gpu7\x1b]0;owned\x07\x1b[2J\x9b2J"
    r = Report(command="preflight", version="v\x1b[5m", started="s", nodes=[NodeInfo(0, hostile), NodeInfo(1, "h2")],
               checks=[CheckResult("net.x", Status.FAIL, f"bad on {hostile}", fix=hostile, node=0)],
               recommendations=[Recommendation("NCCL_SOCKET_IFNAME", "=eth0", hostile, node=0)])
    out = io.StringIO()
    console = make_console(out, env, width=120)
    for part in render_report(r):
        console.print(part)
    text = out.getvalue()
    assert "gpu7]0;owned" in text  # the text is shown, without what would steer the terminal
    assert "\x1b]" not in text and "\x1b[2J" not in text and "\x9b" not in text and "\x07" not in text
    if env:  # rich's own styles still work
        assert "\x1b[" in text


def test_a_link_planted_at_an_output_path_is_replaced_not_followed_for_its_mode(tmp_path):
    """Issue 36 hole 2: `nccl.env -> /dev/null` in a world-writable directory gave root's env file mode 0666 (anyone
    could append to it before root sourced it); a link to a setuid binary gave 04755."""
    os.chmod(tmp_path, 0o1777)
    setuid = tmp_path / "prog"
    setuid.write_text("#!/bin/sh\n")
    setuid.chmod(0o4755)
    (tmp_path / "r.json").symlink_to(setuid)
    old = os.umask(0o077)
    try:
        res = run_cli("recommend", "--json", str(tmp_path / "r.json"))
        # a link to a device is refused whole: replacing it would remove a link like /dev/stdout for everyone
        (tmp_path / "nccl.env").symlink_to("/dev/null")
        dev = run_cli("recommend", "--env-out", str(tmp_path / "nccl.env"))
    finally:
        os.umask(old)
    assert res.returncode in (0, 1), res.stderr
    p = tmp_path / "r.json"
    assert not p.is_symlink() and p.is_file()
    assert _mode(p) == 0o600, oct(_mode(p))  # the umask's mode (tests/render/test_report_files_modes.py)
    assert f"r.json was a symbolic link (to {setuid})" in res.stderr
    assert _mode(setuid) == 0o4755 and setuid.read_text() == "#!/bin/sh\n"  # the target is untouched
    assert dev.returncode == 2 and "Traceback" not in dev.stderr and len(dev.stderr.strip().splitlines()) == 1
    assert "it is a symbolic link to a character device (/dev/null)" in dev.stderr, dev.stderr
    assert (tmp_path / "nccl.env").is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_an_existing_file_never_keeps_its_mode(tmp_path):
    old = os.umask(0o022)
    try:
        for planted in (0o666, 0o4755, 0o2770, 0o640):
            p = tmp_path / f"f{planted:o}"
            p.write_text("old")
            p.chmod(planted)
            assert write_atomic(str(p), "new") is None
            assert _mode(p) == 0o644 and p.read_text() == "new"
    finally:
        os.umask(old)


def test_a_hostname_expansion_never_leaves_the_directory():
    """Issue 36 hole 7: %h of a host called 'x/../../etc' expanded to a path outside the directory."""
    from ncclcheck.render.files import expand_path

    out = expand_path("/out/pf-%h.json", {"h": "x/../../etc/cron.d/y"})
    assert out.startswith("/out/pf-") and out.count("/") == 2 and ".." not in out, out
    for host in ("..", ".", "a/..", "../x", "a\\..\\b"):
        part = expand_path("%h", {"h": host})
        assert "/" not in part and ".." not in part, part
    assert expand_path("run-%j-%n-%%h.json", {"j": "17", "n": 2, "h": "node1"}) == "run-17-2-%h.json"


def test_an_env_value_too_long_for_a_shell_is_skipped_and_named():
    from ncclcheck.render.envfile import MAX_VALUE_CHARS, render_envfile

    rep = Report(command="recommend", version="t", started="now", duration_s=0.0, checks=[],
                 recommendations=[Recommendation("NCCL_SOCKET_IFNAME", "x" * 300_000, "r"),
                                  Recommendation("NCCL_IB_HCA", "mlx5", "r")])
    text = render_envfile(rep)
    assert "export NCCL_IB_HCA=mlx5" in text and "x" * MAX_VALUE_CHARS not in text
    assert "# skipped: NCCL_SOCKET_IFNAME's value is 300000 characters" in text
    from rich.console import Console

    from ncclcheck.render.console import recommendations_block  # the terminal's copyable export block

    term = Console(width=100, record=True, file=open(os.devnull, "w"))
    term.print(recommendations_block(rep), crop=False)
    shown = term.export_text()
    assert "export NCCL_IB_HCA=mlx5" in shown and "export NCCL_SOCKET_IFNAME" not in shown
    assert "not written: NCCL_SOCKET_IFNAME's value is 300000 characters" in " ".join(shown.split()), shown[:400]


@pytest.mark.parametrize("args", [("preflight", "--timeout", "1e308"), ("bench", "--timeout", "1e308"),
                                  ("preflight", "--timeout", "inf"), ("preflight", "--master-addr", "a" * 300),
                                  ("preflight", "--master-addr", "h\udcff\udcfe"), ("env", "--json", "")])
def test_absurd_flags_are_one_line_usage_errors(args):
    res = run_cli(*args, timeout=60)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, (res.returncode, res.stderr[-500:])


def test_a_json_text_cleaned_by_its_text_alone_is_cleaned_as_its_walk_would_be():
    """clean.clean_json skips the walk of a document whose JSON text can hold no dirty string: for every text, dirty
    or not (escaped controls, a raw DEL, C1 and bidirectional characters raw or escaped, lone surrogates, an escaped
    backslash before a letter), it gives what clean_doc gives, and the walk is skipped for a plain ASCII text."""
    import random

    from ncclcheck import clean

    pieces = ["ok", "h1", "\x1b]0;x\x07", "\r", "\b", "\f", "\x7f", "\x85", "\x9b", "\u202e", "\u2066", "\ud800",
              "\udfff", "\\u", "\\r", "é", "\t", "\n", "\u00e9t\u00e9", "\\"]
    rng = random.Random(7)
    for i in range(3000):
        def s() -> str:
            return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 4)))
        doc = {s(): [s(), {s(): s(), "n": i}, 1.5, None, True], "k": s()}
        for text in (json.dumps(doc), json.dumps(doc, ensure_ascii=False)):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a raw lone surrogate is not UTF-8: no reply or record carries one
                continue
            assert clean.clean_json(json.loads(text), text) == clean.clean_doc(json.loads(text)), text
    plain = json.dumps({"a": ["b", {"c": "d\\u0041"}], "e": "f\nline\tx"}).replace("\\\\u0041", "")
    walked = []
    real = clean.clean_doc
    try:
        clean.clean_doc = lambda v: walked.append(v) or real(v)
        assert clean.clean_json(json.loads(plain), plain) == json.loads(plain) and walked == []
        dirty = json.dumps({"a": "\x1b[31m"})
        assert clean.clean_json(json.loads(dirty), dirty) == {"a": "[31m"} and len(walked) == 1
    finally:
        clean.clean_doc = real
