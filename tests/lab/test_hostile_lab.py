"""Issue 21: a stranger on the master port of a 3-node `preflight` can neither change a verdict, nor plant code in an
env file, nor crash or hang a run.

h1..h3 run the preflight (node ranks 0..2, --env-out); the stranger runs on a fourth host, h4 (on h1 itself when it
squats the master port), with torch's own TCPStore (tests/lab/stranger.py). What must hold whatever it writes:
exit codes never lowered (a node with a real fault of its own exits 1, node 0 exits 1 when any node has one), no
variable outside the allow-list in any env file, sourcing one (and starting bash after it) runs nothing, no exit 3,
every node done within T + 10 s, node 0's report written. With a job token (NCCLCHECK_TOKEN) shared by the nodes
and not known to the stranger, its writes are ignored: every node reaches node 0's real verdict.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ncclcheck.nccl.rules import env_name_allowed
from ncclcheck_lab.netlab.harness import Lab, NcclcheckRun

pytestmark = pytest.mark.lab

PORT = 29500
T = 20  # --timeout: a 3-node preflight on a loaded 2-core machine takes about 10 s
SLACK = 10
RANKS = {"h1": 0, "h2": 1, "h3": 2}
FAULT = {"h3": {"NCCL_SOCKET_IFNAME": "docker0"}}  # node 2's own, real fault: an interface it does not have
TOKEN = {"NCCLCHECK_TOKEN": "a-job-secret-the-stranger-does-not-know"}


def explain(runs: dict) -> str:
    return "\n".join(f"--- {h} rc={r.rc} {r.elapsed:.1f}s timed_out={r.timed_out}\n{r.stdout[-1500:]}\n"
                     f"{r.stderr[-1500:]}" for h, r in runs.items())


def _stranger(lab_: Lab, mode: str, host: str = "h4"):
    canary = lab_.tmp / "canary"
    (lab_.tmp / "evil.sh").write_text(f"touch {canary}\n")
    addr = lab_.ip("h1")
    return lab_.spawn(host, [sys.executable, "-m", "tests.lab.stranger", mode, addr, str(PORT), "--canary",
                             str(canary), "--hold", str(T + 3 * SLACK)], cwd=str(lab_.tmp))


def _preflight(lab_: Lab, fault: bool = False, env: dict | None = None) -> dict[str, NcclcheckRun]:
    args = {h: ["preflight", "--nnodes", "3", "--node-rank", str(r), "--master-addr", lab_.ip("h1"),
                "--master-port", str(PORT), "--timeout", str(T), "--env-out", str(lab_.tmp / f"{h}.env")]
            for h, r in RANKS.items()}
    return lab_.ncclcheck(args, deadline=T + 3 * SLACK, env=env, host_env=FAULT if fault else None)


def _own_code(run: NcclcheckRun) -> int:
    """The exit code a node owes to its own checks alone (a stranger may make a run fail, never pass)."""
    rank = RANKS[run.host]
    mine = [c for c in (run.report or {}).get("checks", []) if c.get("node") == rank]
    return 1 if any(c["status"] == "fail" for c in mine) else 0


def _violations(lab_: Lab, runs: dict[str, NcclcheckRun]) -> list[str]:
    """Every property that does not hold, whatever the stranger wrote, token or not: all are listed, so one run
    shows which hold and which do not (the env-file ones, for instance, hold even where an exit code is wrong)."""
    bad = []
    for h, r in runs.items():
        if r.rc == 3:
            bad.append(f"{h}: exit 3 (internal error)")
        if r.timed_out or r.elapsed > T + SLACK:
            bad.append(f"{h}: done after {r.elapsed:.1f} s > T + {SLACK} s")
        if r.rc is None or r.rc < _own_code(r):
            bad.append(f"{h}: exit {r.rc}, below its own findings ({_own_code(r)})")
    if runs["h1"].report is None:
        bad.append("h1: node 0 wrote no report")
    canary = lab_.tmp / "canary"
    for h in RANKS:
        path = lab_.tmp / f"{h}.env"
        if not path.exists():
            continue
        text = path.read_text()
        names = re.findall(r"^\s*export\s+([^=\s]+)=", text, re.M)
        if not all(env_name_allowed(n) for n in names):
            bad.append(f"{h}: env file sets {[n for n in names if not env_name_allowed(n)]}")
        if "\x1b" in text:
            bad.append(f"{h}: env file holds ESC")
        if subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode != 0:
            bad.append(f"{h}: env file does not parse")
        # Source it, then start a bash as a training launch would (BASH_ENV would run there) and an interactive
        # one (PROMPT_COMMAND): the canary file never appears.
        subprocess.run(["bash", "-c", f". {path}; bash -c true; bash -i -c true </dev/null"], capture_output=True,
                       timeout=20, env={"PATH": os.environ["PATH"], "HOME": str(lab_.tmp), "NCCLCHECK_NODE_RANK":
                                        str(RANKS[h])})
        if canary.exists():
            bad.append(f"{h}: sourcing its env file ran the stranger's command")
            canary.unlink()
    return bad


def _stop(proc) -> str:
    """Stop the stranger; what it said it did (for the failure message)."""
    proc.kill()
    out, err = proc.communicate(timeout=10)
    return f"--- stranger rc={proc.returncode}\n{out[-1000:]}\n{err[-1500:]}"


def _assert_contained(lab_: Lab, runs: dict[str, NcclcheckRun], stranger: str, *more: tuple) -> None:
    """The properties above, plus (condition, what is wrong) pairs of the test's own: all reported at once."""
    bad = _violations(lab_, runs) + [why for ok, why in more if not ok]
    if '"did"' not in stranger:  # a test whose attack never happened proves nothing
        bad.append("the stranger never wrote to the store")
    assert not bad, "\n".join(bad) + "\n" + explain(runs) + "\n" + stranger


def test_forged_result_and_exit_code_neither_lower_a_code_nor_plant_code(lab):
    lab4 = lab(4)
    stranger = _stranger(lab4, "forge")
    runs = _preflight(lab4, fault=True)
    said = _stop(stranger)
    print("forge: " + ", ".join(f"{h} exit {r.rc} in {r.elapsed:.1f} s" for h, r in runs.items()))
    _assert_contained(lab4, runs, said, (runs["h1"].rc == 1, "h1: node 0 must exit 1 (node 2's real fault)"),
                      (runs["h3"].rc == 1, "h3: its own fault must not be lowered by the forged exit 0"))


@pytest.mark.long  # CI: the tokenless forgery here, a token's in tests/rendezvous/test_trust.py and the munge case
def test_with_a_token_a_forged_result_is_ignored_and_every_node_gets_the_real_verdict(lab):
    lab4 = lab(4)
    stranger = _stranger(lab4, "forge")
    runs = _preflight(lab4, fault=True, env=TOKEN)
    said = _stop(stranger)
    print("forge, token: " + ", ".join(f"{h} exit {r.rc} in {r.elapsed:.1f} s" for h, r in runs.items()))
    forged = [h for h in RANKS if runs[h].report and {"BASH_ENV", "LD_PRELOAD"} & {
        r["name"] for r in runs[h].report["recommendations"]}]
    _assert_contained(lab4, runs, said,
                      ([runs[h].rc for h in RANKS] == [1, 1, 1], "with the token every node exits 1"),
                      (not forged, f"{forged}: the unsigned forged recommendations were read"))


# Each a 3-node run: the long tier's (scripts/long_tests.py); CI holds the store's garbage on one host
# (tests/rendezvous, tests/scripts/test_trust_attacks.py)
@pytest.mark.long
@pytest.mark.parametrize("attack", ["malformed", "counter", "oversized"])
def test_garbage_in_the_store_neither_crashes_nor_hangs_a_node(lab, attack):
    """malformed: join records that are a list, a check with status "bogus"; counter: join/count raised by 10^9;
    oversized: many 7 MiB records (torch's server refuses values over 8 MiB)."""
    lab4 = lab(4)
    stranger = _stranger(lab4, attack)
    runs = _preflight(lab4)
    said = _stop(stranger)
    print(f"{attack}: " + ", ".join(f"{h} exit {r.rc} in {r.elapsed:.1f} s" for h, r in runs.items()))
    _assert_contained(lab4, runs, said)


def _squatted(lab_: Lab, env: dict | None = None) -> tuple[dict[str, NcclcheckRun], str]:
    squatter = _stranger(lab_, "squat", host="h1")
    line = squatter.stdout.readline()  # {"listening": true} once it holds the port
    assert "listening" in line, (line, squatter.stderr.read() if squatter.poll() is not None else "")
    runs = _preflight(lab_, env=env)
    return runs, line + _stop(squatter)


def test_node_0_refuses_a_store_it_did_not_create_and_names_who_holds_the_port(lab):
    lab4 = lab(4)
    runs, said = _squatted(lab4)
    print("squat: " + ", ".join(f"{h} exit {r.rc} in {r.elapsed:.1f} s" for h, r in runs.items()))
    world = [c for c in (runs["h1"].report or {}).get("checks", []) if c["id"] == "rendezvous.world"]
    text = json.dumps(world)
    _assert_contained(lab4, runs, said,
                      (runs["h1"].rc == 1, "h1: node 0 must refuse the squatted store (exit 1)"),
                      (bool(world) and world[0]["status"] == "fail", f"h1: rendezvous.world did not fail: {text}"),
                      ("python" in text or "pid" in text, f"h1: the port's holder is not named: {text}"))


@pytest.mark.long  # CI keeps the tokenless squat (test_node_0_refuses_a_store_it_did_not_create...)
def test_with_a_token_a_squatted_port_fails_every_node(lab):
    lab4 = lab(4)
    runs, said = _squatted(lab4, env=TOKEN)
    print("squat, token: " + ", ".join(f"{h} exit {r.rc} in {r.elapsed:.1f} s" for h, r in runs.items()))
    _assert_contained(lab4, runs, said,
                      ([runs[h].rc for h in RANKS] == [1, 1, 1], "with the token every node exits 1"))
