"""Everything ncclcheck prints for a shell pastes and sources as printed, in bash and zsh: the terminal's recommended
block at any width (issue 53: a 158-character comment wrapped onto a line without its `#` gave `syntax error near
unexpected token ')'`), the env file (`recommend --format env`, `--env-out`, HTML and Markdown), the scontrol lines of
health and sweep. Reasons and values carry what a hostile peer or path could: parentheses, quotes, `$(...)`,
backticks, newlines, tabs, escapes."""

from __future__ import annotations

import io
import re
import shutil

import pytest

from ncclcheck.model import NodeInfo, Recommendation, Report, Status, WorldInfo, passed
from ncclcheck.render.console import RECOMMENDED_HEAD, WHY_HEAD, make_console, print_parts, render_report
from ncclcheck.render.envfile import render_envfile
from tests.shells import SOURCING, paste, paste_errors, source, syntax_ok

needs = {s: pytest.mark.skipif(shutil.which(s) is None, reason=f"{s} is not installed") for s in ("bash", "zsh")}


def _hostile(pwned: str) -> Report:
    run = f"$(touch {pwned}) `touch {pwned}`"
    long_reason = ("eth0: the fastest running physical interface with an address; the leading '=' means exactly this "
                   "name (without it NCCL reads a name as a prefix: eth1 also matches eth10); it's \"quoted\" "
                   f"{run}\nand a second line\twith a tab")
    assert len(long_reason) > 158
    recs = [
        Recommendation("NCCL_SOCKET_IFNAME", "=eth0", long_reason),
        Recommendation("GLOO_SOCKET_IFNAME", "eth0; touch " + pwned, "same (interface) as NCCL; Gloo's exact names"),
        Recommendation("NCCL_DEBUG_FILE", f"/tmp/pm dir(1)/it's {run} \"x\"/" + "d" * 120 + "/nccl.%h.%p.log",
                       "one log per process (NCCL expands %h, %p) " * 5),
        Recommendation("NCCL_IB_HCA", "^=mlx5_0:1", "exclude (the) port"),
        Recommendation("NCCL_HOSTID", "two  spaces,  kept", "a value whose spaces a copy must keep"),
        Recommendation("TORCH_FR_DUMP_TEMP_FILE", "/tmp/a\nb", "a value with a newline"),
        Recommendation("NCCL_ALGO", "Ring\tTree", "a value with a tab"),
        Recommendation("NCCL_PROTO", "Simple\x1b]0;owned\x07", "a value with an escape"),
        Recommendation(f"BAD NAME;touch {pwned}", "1", "a name no shell may set"),
        Recommendation("NCCL_SOCKET_IFNAME", "=eth1", f"node 1's interface (it's {run})", node=1),
        Recommendation("NCCL_SOCKET_IFNAME", "=eth2", "node 2's", node=2),
    ]
    return Report(command="preflight", version="t", started="now", duration_s=1.0,
                  world=WorldInfo(nnodes=3, world_size=3, launcher="torchrun"),
                  nodes=[NodeInfo(0, "h0"), NodeInfo(1, f"h1{run}"), NodeInfo(2, "h2 (it's)")],
                  checks=[passed("host.shm", "ok", node=0)], recommendations=recs)


# What each exported variable must read after a paste or a source: the safe ones, as recommended.
def _expected(report: Report, node=None) -> dict:
    from ncclcheck.render.envfile import not_written

    out = {}
    for r in report.recommendations:
        if not_written(r.name, r.value) is None and r.node in (None, node):
            out[r.name] = r.value
    return out


ALL_NAMES = ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_DEBUG_FILE", "NCCL_IB_HCA", "NCCL_HOSTID",
             "TORCH_FR_DUMP_TEMP_FILE", "NCCL_ALGO", "NCCL_PROTO"]


def _console(report: Report, width: int) -> str:
    buf = io.StringIO()
    print_parts(make_console(buf, {"COLUMNS": str(width)}), render_report(report))
    return buf.getvalue()


def _block(text: str) -> tuple[list, dict]:
    """The console's recommended block: (cluster-wide export lines, {heading: that group's export lines}). Between
    the headings (wrapped or not: they are not pasted) every line is a whole `export`."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(RECOMMENDED_HEAD.split(" (")[0]))
    end = lines.index(WHY_HEAD, start)
    common, groups, heading, fresh = [], {}, "", False
    for line in lines[start:end]:
        if line.startswith("  "):
            assert line.startswith("  export "), line  # never a wrapped piece of a line
            (common if heading.startswith("Recommended") else groups.setdefault(heading, [])).append(line)
            fresh = False
        else:  # a heading, or the next piece of a wrapped one
            heading, fresh = (heading + " " + line if fresh else line), True
    return common, groups


@pytest.mark.parametrize("width", [40, 80, 160])
def test_the_terminal_block_is_whole_export_lines_at_any_width(tmp_path, width):
    rep = _hostile(str(tmp_path / "pwned"))
    text = _console(rep, width)
    common, groups = _block(text)
    assert len(common) == len(_expected(rep)) == 5
    assert len(groups) == 2 and all(len(v) == 1 for v in groups.values())
    assert max(len(line) for line in common) > width  # the long value stayed one line, uncut
    why = re.sub(r"\s+", "", text.split(WHY_HEAD, 1)[1])  # a narrow terminal folds the prose
    for name in ("TORCH_FR_DUMP_TEMP_FILE", "NCCL_ALGO", "NCCL_PROTO"):  # named, never exported
        assert name in why and f"export {name}" not in text
    assert "notwritten" in why and "\x1b" not in text and "\t" not in text


@pytest.mark.parametrize("shell", SOURCING)
@pytest.mark.parametrize("width", [40, 160])
def test_the_terminal_block_sources_as_printed(tmp_path, shell, width):
    pwned = tmp_path / "pwned"
    rep = _hostile(str(pwned))
    common, groups = _block(_console(rep, width))
    node1 = next(v for k, v in groups.items() if k.startswith("node 1"))
    path = tmp_path / "block.sh"
    path.write_text("\n".join(common + node1) + "\n")
    assert syntax_ok(shell, str(path)).returncode == 0
    got, err = source(shell, str(path), ALL_NAMES, str(tmp_path))
    want = _expected(rep, node=1)
    assert {k: v for k, v in got.items() if v != "<unset>"} == want and err == ""
    assert not pwned.exists()


@pytest.mark.parametrize("shell", [pytest.param(s, marks=needs[s]) for s in ("bash", "zsh")])
def test_the_terminal_block_pastes_into_an_interactive_shell(tmp_path, shell):
    """Pasted as a terminal pastes (bracketed), into bash and into zsh as installed (interactive_comments off: a
    `# ...` line would be a command there)."""
    pwned = tmp_path / "pwned"
    rep = _hostile(str(pwned))
    common, _ = _block(_console(rep, 40))
    got, transcript = paste(shell, "\n".join(common) + "\n", ALL_NAMES, str(tmp_path))
    assert paste_errors(transcript) == [], transcript[-2000:]
    assert {k: v for k, v in got.items() if v != "<unset>"} == _expected(rep), transcript[-2000:]
    assert not pwned.exists()


@pytest.mark.parametrize("shell", SOURCING)
@pytest.mark.parametrize("how", ["source", "eval"])
def test_the_env_file_sources_in_every_shell(tmp_path, shell, how):
    pwned = tmp_path / "pwned"
    rep = _hostile(str(pwned))
    text = render_envfile(rep)
    path = tmp_path / "ncclcheck.env"
    path.write_text(text)
    for sh in ("bash", "zsh"):
        if shutil.which(sh):
            res = syntax_ok(sh, str(path))
            assert res.returncode == 0, res.stderr
    got, err = source(shell, str(path), ALL_NAMES, str(tmp_path), {"NCCLCHECK_NODE_RANK": "2"}, how=how)
    assert {k: v for k, v in got.items() if v != "<unset>"} == _expected(rep, node=2) and err == ""
    assert not pwned.exists()
    for line in text.splitlines():  # every reason on one comment line; nothing else starts a line
        assert re.match(r"^(#|export |_ncclcheck_node=|if |fi$|case |esac$|unset |\s+|$)", line), line


@pytest.mark.parametrize("shell", [pytest.param(s, marks=needs[s]) for s in ("bash", "zsh")])
def test_the_env_file_pastes_where_comments_are_comments(tmp_path, shell):
    """The file is for sourcing; pasted, it works wherever `#` starts a comment: bash always, zsh with
    interactive_comments (the terminal's block is the one made to paste anywhere)."""
    pwned = tmp_path / "pwned"
    rep = _hostile(str(pwned))
    setup = "setopt interactive_comments" if shell == "zsh" else ""
    got, transcript = paste(shell, render_envfile(rep), ALL_NAMES, str(tmp_path), setup=setup)
    assert {k: v for k, v in got.items() if v != "<unset>"} == _expected(rep), transcript[-2000:]
    assert not pwned.exists()


def test_scontrol_lines_are_never_wrapped(tmp_path):
    reason = "ncclcheck: [health.gpus] 7 GPUs visible, 8 expected (Gres=gpu:8) " + "(it's) " * 20
    import shlex

    cmd = shlex.join(["scontrol", "update", "nodename=gpu-017", "state=drain", f"reason={reason}"])
    rep = Report(command="health", version="t", started="now", duration_s=0.1,
                 checks=[passed("host.shm", "ok", node=0)],
                 extra={"slurm": {"node": "gpu-017", "commands": [cmd], "dry_run": True}})
    text = _console(rep, 60)
    line = next(ln for ln in text.splitlines() if "scontrol" in ln)
    assert line.strip() == cmd
    path = tmp_path / "cmd.sh"
    path.write_text(line + "\n")
    assert syntax_ok("bash", str(path)).returncode == 0
    assert shlex.split(line)[-1] == f"reason={reason}"
    assert Status.PASS is rep.status


@pytest.mark.parametrize("shell", [pytest.param(s, marks=needs[s]) for s in ("bash", "zsh")])
def test_the_harness_sees_what_the_issue_saw(tmp_path, shell):
    """The block as 0.1.0 printed it: a reason wrapped onto a line without its `#` (bash: `syntax error near
    unexpected token ')'`), and a comment line, which zsh's defaults read as a command (its apostrophe opens a quote
    the paste never closes)."""
    old = ("  # eth0: the fastest running physical interface with an address; the leading '=' means exactly this "
           "name (without it NCCL reads a name as a prefix: eth1 also\nmatches eth10)\n"
           "  export NCCL_SOCKET_IFNAME='=eth0'\n")
    got, transcript = paste(shell, old, ["NCCL_SOCKET_IFNAME"], str(tmp_path), bound_s=5)
    assert paste_errors(transcript) != [] or got.get("NCCL_SOCKET_IFNAME") != "=eth0", transcript[-1000:]
    path = tmp_path / "old.sh"
    path.write_text(old)
    assert syntax_ok(shell, str(path)).returncode != 0
