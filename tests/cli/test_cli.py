"""The CLI contract users script against: exit codes, one-line usage errors, JSON that validates, fast --help."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env, run_cli


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_help_and_version_do_not_import_torch():
    code = ("import sys\nfrom ncclcheck.cli import main\n"
            "for argv in (['--help'], ['--version'], ['preflight', '--help'], ['bench', '--sizes', 'x']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=REPO)
    assert out.stdout.strip().splitlines()[-1] == "NO-TORCH", out.stderr


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
@pytest.mark.parametrize("args, needle", [
    (["preflight", "--master-port", "70000"], "--master-port"),
    (["preflight", "--no-such-flag"], "--no-such-flag"),
    (["bench", "--sizes", "1M-1X"], "1X"),
    (["bench", "--ops", "allreduce"], "allreduce"),
    (["bench", "--dtype", "float128"], "float128"),
    (["bench", "--iters", "-3"], "--iters"),
    (["preflight", "--json", "/nonexistent-dir/r.json"], "/nonexistent-dir"),
    (["preflight", "--nnodes", "2"], "--master-addr"),
    (["preflight", "--nnodes", "2", "--node-rank", "2", "--master-addr", "x"], "--node-rank"),
    (["report", "/nonexistent.json"], "/nonexistent.json"),
    ([], ""),
])
def test_usage_errors_exit_2_with_one_line(args, needle):
    p = run_cli(*args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    if needle:
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and needle in lines[0], p.stderr


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_preflight_standalone_passes_and_json_validates(validate_report):
    p = run_cli("preflight", "--json", "-")
    assert p.returncode == 0, p.stderr
    doc = validate_report(p.stdout)
    assert doc["command"] == "preflight" and doc["status"] in ("pass", "warn") and doc["exit_code"] == 0
    ids = {c["id"] for c in doc["checks"]}
    assert {"host.shm", "host.memlock", "net.interfaces", "net.socket_ifname", "ib.devices", "gpu.count",
            "env.nccl", "host.hostname_resolves", "rendezvous.master_reachable"} <= ids
    assert doc["nodes"][0]["facts"]["interfaces"]


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_preflight_console_is_readable():
    p = run_cli("preflight")
    assert p.returncode == 0, p.stderr
    # the answer first, the passes folded by kind (issue 77); every row one flag away
    assert ("PASS" in p.stdout or "WARN" in p.stdout) and "--verbose" in p.stdout
    assert "net.interfaces" not in p.stdout or "WARN" in p.stdout
    assert "net.interfaces" in run_cli("preflight", "--verbose").stdout


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_socket_ifname_naming_no_interface_fails_with_root_cause(validate_report, tmp_path):
    out = tmp_path / "r.json"
    p = run_cli("preflight", "--json", str(out), env={"NCCL_SOCKET_IFNAME": "nosuchnic9"})
    assert p.returncode == 1
    assert "root cause" in p.stdout and "nosuchnic9" in p.stdout
    doc = validate_report(out.read_text())
    bad = [c for c in doc["checks"] if c["status"] == "fail"]
    assert bad and bad[0]["id"] == "net.socket_ifname"


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_strict_turns_warnings_into_failure():
    env = {"NCCL_P2P_DISABLE": "1"}
    assert run_cli("preflight", "--quiet", env=env).returncode == 0
    assert run_cli("preflight", "--quiet", "--strict", env=env).returncode == 1


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_recommend_env_is_sourceable(tmp_path):
    p = run_cli("recommend", "--format", "env")
    assert p.returncode in (0, 1)
    script = tmp_path / "rec.sh"
    script.write_text(p.stdout)
    names = [ln.split()[1].split("=")[0] for ln in p.stdout.splitlines() if ln.startswith("export ")]
    probe = "; ".join(f'echo "{n}=${{{n}}}"' for n in names) or "true"
    out = subprocess.run(["bash", "-c", f"set -e; source {script}; {probe}"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for line in p.stdout.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            assert f"{name}={value.strip(chr(39))}" in out.stdout


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_env_json(validate_report):
    p = run_cli("env", "--json", "-")
    assert p.returncode == 0, p.stderr
    doc = validate_report(p.stdout)
    assert doc["command"] == "env" and doc["checks"] == []


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_report_roundtrip_keeps_exit_code(tmp_path):
    out = tmp_path / "r.json"
    assert run_cli("preflight", "--json", str(out), env={"NCCL_SOCKET_IFNAME": "nosuchnic9"}).returncode == 1
    p = run_cli("report", str(out))
    assert p.returncode == 1 and "nosuchnic9" in p.stdout
    (tmp_path / "bad.json").write_text("{not json")
    p = run_cli("report", str(tmp_path / "bad.json"))
    assert p.returncode == 2 and "Traceback" not in p.stderr


def replace_runner(monkeypatch, command: str, fake) -> None:
    """The commands table's runner of `command` (what the CLI and run_<command> call) replaced by `fake`."""
    from ncclcheck import api

    real = api.runner
    monkeypatch.setattr(api, "runner", lambda name: fake if name == command else real(name))


def test_internal_error_exits_3_and_names_the_log(monkeypatch, capsys, tmp_path):
    from ncclcheck import cli

    monkeypatch.setenv("NCCLCHECK_LOG_DIR", str(tmp_path))

    def boom(config, **kw):
        raise RuntimeError("simulated bug")

    replace_runner(monkeypatch, "preflight", boom)
    assert cli.main(["preflight"]) == 3
    err = capsys.readouterr().err
    assert "simulated bug" in err and str(tmp_path) in err
    log = next(tmp_path.glob("ncclcheck-*.log")).read_text()
    assert "Traceback" in log


def test_interrupt_exits_130(monkeypatch, tmp_path):
    from ncclcheck import cli

    monkeypatch.setenv("NCCLCHECK_LOG_DIR", str(tmp_path))

    def interrupted(config, **kw):
        raise KeyboardInterrupt

    replace_runner(monkeypatch, "preflight", interrupted)
    assert cli.main(["preflight"]) == 130


@pytest.mark.parametrize("command, args", [("bench", ["--sizes", "1K"]), ("links", []), ("preflight", [])])
def test_an_interrupt_before_the_world_formed_still_writes_the_partial_report(monkeypatch, tmp_path, command, args):
    # torchrun forwards scancel's SIGTERM to ranks that may still be importing torch or joining the store: the
    # command's pipeline has no report yet, and the JSON a CI step reads must still say what happened (it once
    # came out missing under load).
    from ncclcheck import cli
    from ncclcheck.errors import Terminated

    monkeypatch.setenv("NCCLCHECK_LOG_DIR", str(tmp_path))

    def terminated(config, **kw):
        raise Terminated()

    replace_runner(monkeypatch, command, terminated)
    out = tmp_path / "run.json"
    assert cli.main([command, *args, "--json", str(out)]) == 143
    doc = json.loads(out.read_text())
    assert doc["partial"] is True and doc["status"] == "fail" and doc["exit_code"] == 143
    world = [c for c in doc["checks"] if c["id"] == "rendezvous.world"]
    assert world and world[0]["status"] == "fail" and "interrupted (SIGTERM)" in world[0]["summary"]
    assert "nothing was measured" in world[0]["summary"]


def test_an_interrupt_of_a_command_that_forms_no_world_writes_nothing_and_exits_130(monkeypatch, tmp_path):
    from ncclcheck import cli

    monkeypatch.setenv("NCCLCHECK_LOG_DIR", str(tmp_path))

    def interrupted(config, **kw):
        raise KeyboardInterrupt

    replace_runner(monkeypatch, "env", interrupted)
    assert cli.main(["env", "--json", str(tmp_path / "env.json")]) == 130
    assert not (tmp_path / "env.json").exists()


def test_python_api_returns_report():
    import ncclcheck

    rep = ncclcheck.run_preflight()
    assert rep.command == "preflight" and rep.checks and json.dumps(rep.to_dict())


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
@pytest.mark.parametrize("content, needle", [
    ("[]", "expected object, got array"),
    ('{"schema": "x"}', "missing required field"),
    ("{not json", "not JSON"),
])
def test_report_validates_its_input_against_the_schema(tmp_path, content, needle):
    f = tmp_path / "run.json"
    f.write_text(content)
    p = run_cli("report", str(f))
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert needle in p.stderr, p.stderr


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_report_on_a_directory_says_directory(tmp_path):
    p = run_cli("report", str(tmp_path))
    assert p.returncode == 2 and "is a directory" in p.stderr, p.stderr


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_a_bad_environment_variable_is_named_as_such():
    p = run_cli("preflight", env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "abc"})
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "MASTER_PORT" in p.stderr and "--master-port" not in p.stderr, p.stderr


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_sizes_the_ranks_cannot_allocate_are_a_usage_error():
    p = run_cli("bench", "--sizes", "1T")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "--sizes" in p.stderr and "choose smaller --sizes" in p.stderr and "preflight" not in p.stderr, p.stderr
@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_no_ansi_codes_when_stdout_is_a_pipe_unless_forced():
    plain = run_cli("preflight")
    assert "\x1b[" not in plain.stdout and "\x1b[" not in plain.stderr
    forced = run_cli("preflight", env={"FORCE_COLOR": "1"})
    assert "\x1b[" in forced.stdout


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_output_path_templates_expand(tmp_path):
    p = run_cli("preflight", "--json", str(tmp_path / "pf-%j-n%n-r%r.json"), env={"SLURM_JOB_ID": "4242"})
    assert p.returncode == 0, p.stderr
    assert [f.name for f in tmp_path.iterdir()] == ["pf-4242-n0-r0.json"]


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_node_rank_in_the_environment_does_not_break_env():
    p = run_cli("env", env={"NODE_RANK": "1"})
    assert p.returncode == 0, p.stderr


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_nccl_without_a_gpu_per_rank_is_refused_before_any_rank_starts():
    from tests.conftest import run_cli

    for cmd in (["bench", "--sizes", "1K"], ["links", "--size", "1K"]):
        r = run_cli(*cmd, "--backend", "nccl", "--nproc-per-node", "2", timeout=60)
        assert r.returncode == 2 and r.stderr.startswith("ncclcheck: error: --backend nccl "), r.stderr
        assert r.stdout == ""  # no rank started, no report


@pytest.mark.slow  # spawns processes or waits out real deadlines: not for the fast tier
def test_a_usage_error_under_a_launcher_is_said_once_per_node_not_once_per_rank():
    from tests.conftest import run_cli

    ranks = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    quiet = run_cli("bench", "--sizes", "banana", env=ranks)
    assert quiet.returncode == 2 and quiet.stderr == ""  # local rank 1: its node's rank 0 says it
    said = run_cli("bench", "--sizes", "banana", env={**ranks, "RANK": "0", "LOCAL_RANK": "0"})
    assert said.returncode == 2 and said.stderr.count("ncclcheck: error:") == 1 and "banana" in said.stderr
