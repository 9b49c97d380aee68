"""The Lab object lab tests drive: run commands on lab hosts, run ncclcheck on many hosts at once, switch scenarios."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from . import lib as nl

REPO_ROOT = Path(__file__).resolve().parents[2]

# World and NCCL settings of the pytest process (a CI job may itself run under Slurm or torchrun) must not leak
# into the lab's nodes: each test says what its nodes get.
SCRUBBED_PREFIXES = ("MASTER_", "NCCL_", "GLOO_", "NCCLCHECK_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "TORCHELASTIC_",
                     "TORCH_NCCL_")
SCRUBBED_NAMES = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "ROLE_RANK"}

ScenarioSpec = Union[str, Sequence[Any]]


@dataclass
class HostRun:
    """One host's command in run_all: exit code (negative = killed by that signal), output, seconds it ran."""

    host: str
    argv: list[str]
    rc: Optional[int]
    stdout: str
    stderr: str
    elapsed: float
    timed_out: bool


@dataclass
class NcclcheckRun(HostRun):
    """A host's ncclcheck run: HostRun plus its parsed --json report (None when it wrote none or not valid JSON)."""

    report: Optional[dict] = None
    json_path: Optional[str] = None


def scenario_tokens(spec: ScenarioSpec) -> list[str]:
    """'blocked-port h1 29500' or ('blocked-port', 'h1', 29500) -> ['blocked-port', 'h1', '29500']."""
    return spec.split() if isinstance(spec, str) else [str(t) for t in spec]


def scenario_list(scenario: Union[None, ScenarioSpec, Sequence[ScenarioSpec]]) -> list[list[str]]:
    """None, one spec string ('blocked-port h1 29500'), or a list of specs (strings or token tuples)."""
    if scenario is None:
        return []
    if isinstance(scenario, str):
        return [scenario.split()]
    return [scenario_tokens(s) for s in scenario]


def unique_name() -> str:
    """A lab name no other lab on this machine has (tests in parallel sessions never collide)."""
    taken = nl.registered_labs()
    while True:
        name = "t" + secrets.token_hex(3)
        if name not in taken and not nl.state_path(name).exists():
            return name


def _kill_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM the command's process group (its workers too), then SIGKILL after grace seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


class Lab:
    """A running lab of n hosts (h1..hN); made by the `lab` fixture, torn down by it."""

    def __init__(self, n: int = 2, scenario: Union[None, ScenarioSpec, Sequence[ScenarioSpec]] = None,
                 name: Optional[str] = None) -> None:
        self.name = name or unique_name()
        try:
            self.state = nl.up(self.name, n, scenario_list(scenario), owner_pid=os.getpid())
        except BaseException:
            nl.down(self.name)
            raise
        self.hosts: list[str] = self.state.hosts
        # Scratch space (outputs, reports) inside the lab's run directory: `down` removes it, even a reaped one's.
        self.tmp = nl.lab_dir(self.name) / "scratch"
        self.tmp.mkdir()
        self._procs: list[subprocess.Popen] = []
        self.mounts: dict[str, list[str]] = {}

    # -- addressing ---------------------------------------------------------------------------------------------
    def ip(self, host: str, nic: str = "eth0") -> str:
        """host's address on nic: eth0 198.18.SLOT.I, eth1 198.19.SLOT.I."""
        return self.state.ip(host, nic)

    def ns(self, host: str) -> str:
        """host's network namespace name (NAME-hI)."""
        return self.state.ns(host)

    def argv(self, host: str, argv: Sequence[str]) -> list[str]:
        """argv wrapped so it runs on host (its hostname, network, hosts file, and its mounts: see `mount`)."""
        return nl.host_argv(self.state, host, [str(a) for a in argv], self.mounts.get(host, ()))

    def mount(self, host: str, *commands: str) -> None:
        """Every later command on host runs in its own mount namespace where these `mount ...` commands ran first
        (e.g. a tmpfs over a directory the other hosts share): a host with its own mounts, as a node whose shared
        mount did not come up is."""
        self.mounts.setdefault(host, []).extend(commands)

    def env(self, env: Optional[Mapping[str, str]] = None) -> dict[str, str]:
        """The environment lab commands get: ours minus world/NCCL settings, PYTHONPATH=repo root, plus env."""
        out = {k: v for k, v in os.environ.items()
               if k not in SCRUBBED_NAMES and not k.startswith(SCRUBBED_PREFIXES)}
        out["PYTHONPATH"] = str(REPO_ROOT)
        out.update(env or {})
        return out

    # -- running --------------------------------------------------------------------------------------------------
    def exec(self, host: str, argv: Sequence[str], *, timeout: float = 30.0,
             env: Optional[Mapping[str, str]] = None, input: Optional[str] = None,
             check: bool = False, cwd: Optional[Union[str, Path]] = None) -> subprocess.CompletedProcess[str]:
        """Run argv on host to completion; on timeout kill its process group and raise subprocess.TimeoutExpired."""
        full = self.argv(host, argv)
        proc = subprocess.Popen(full, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env(env), cwd=cwd, start_new_session=True)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc, 0.0)
            proc.communicate()
            raise
        done = subprocess.CompletedProcess(full, proc.returncode, out, err)
        if check:
            done.check_returncode()
        return done

    def spawn(self, host: str, argv: Sequence[str], env: Optional[Mapping[str, str]] = None,
              **popen: Any) -> subprocess.Popen:
        """Start argv on host and return at once (text pipes by default); killed at teardown if still running."""
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
        popen.setdefault("stdin", subprocess.DEVNULL)
        popen.setdefault("text", True)
        proc = subprocess.Popen(self.argv(host, argv), env=self.env(env), start_new_session=True, **popen)
        self._procs.append(proc)
        return proc

    def run_all(self, commands: Mapping[str, Sequence[str]], deadline: float, *,
                env: Optional[Mapping[str, str]] = None,
                host_env: Optional[Mapping[str, Mapping[str, str]]] = None,
                grace: float = 1.0, cwd: Optional[Union[str, Path]] = None) -> dict[str, HostRun]:
        """Run {host: argv} concurrently; whatever still runs `deadline` seconds from now is killed (SIGTERM, then
        SIGKILL after grace). Output goes through files, so a killed command's output is kept. A key "h1#2" runs on
        host h1 too (a second process there: two nodes of a job on one host)."""
        start = time.monotonic()
        end = start + deadline
        runs: dict[str, HostRun] = {}
        procs = {}
        for host, argv in commands.items():
            out = open(self.tmp / f"run-{host}-{secrets.token_hex(2)}.out", "w+")
            err = open(self.tmp / f"run-{host}-{secrets.token_hex(2)}.err", "w+")
            merged = {**(env or {}), **((host_env or {}).get(host, {}))}
            proc = subprocess.Popen(self.argv(host.split("#")[0], argv), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err,
                                    env=self.env(merged), cwd=cwd, start_new_session=True)
            self._procs.append(proc)
            procs[host] = (proc, out, err, [str(a) for a in argv])

        def wait(host: str) -> None:
            proc, out, err, argv = procs[host]
            timed_out = False
            try:
                proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc, grace)
            elapsed = time.monotonic() - start
            out.seek(0)
            err.seek(0)
            runs[host] = HostRun(host, argv, proc.returncode, out.read(), err.read(), elapsed, timed_out)
            out.close()
            err.close()

        threads = [threading.Thread(target=wait, args=(h,)) for h in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {h: runs[h] for h in commands}

    def ncclcheck(self, hosts_to_args: Mapping[str, Sequence[str]], deadline: float, *,
                  env: Optional[Mapping[str, str]] = None,
                  host_env: Optional[Mapping[str, Mapping[str, str]]] = None,
                  pythonpath: Optional[Union[str, Path]] = None,
                  cwd: Optional[Union[str, Path]] = None) -> dict[str, NcclcheckRun]:
        """Run `python -m ncclcheck ARGS --json FILE` on each host at once and parse each host's report.

        The code run is the checkout's (PYTHONPATH=repo root, or pythonpath), from cwd (default: the lab's scratch
        directory, so neither the caller's directory nor an installed copy decides what `-m ncclcheck` finds)."""
        # %h (each lab host's hostname is its name): one report per job means a path the same on every node is
        # written by node 0 alone, and each host's own report is what these tests read.
        token = secrets.token_hex(3)
        paths = {h: self.tmp / f"report-{h}-{token}.json" for h in hosts_to_args}
        commands = {h: [sys.executable, "-m", "ncclcheck", *map(str, args), "--json",
                        str(self.tmp / f"report-%h-{token}.json")] for h, args in hosts_to_args.items()}
        base = {**(env or {}), **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
        runs = self.run_all(commands, deadline, env=base, host_env=host_env, cwd=cwd or self.tmp)
        out = {}
        for host, run in runs.items():
            try:
                report = json.loads(paths[host].read_text())
            except (OSError, ValueError):
                report = None
            out[host] = NcclcheckRun(**vars(run), report=report, json_path=str(paths[host]))
        return out

    def wait_tcp(self, from_host: str, addr: str, port: int, timeout: float = 5.0) -> None:
        """Wait until from_host can connect to addr:port (a server spawned on a host is listening)."""
        code = ("import socket,sys,time\nend=time.monotonic()+float(sys.argv[3])\nwhile True:\n"
                " try:\n  socket.create_connection((sys.argv[1],int(sys.argv[2])),0.5).close(); break\n"
                " except OSError:\n  assert time.monotonic()<end, 'not listening'\n  time.sleep(0.05)\n")
        self.exec(from_host, [sys.executable, "-c", code, addr, str(port), str(timeout)], timeout=timeout + 5,
                  check=True)

    # -- scenarios ------------------------------------------------------------------------------------------------
    def scenario(self, *tokens: Any) -> None:
        """Switch one scenario on, as on the command line: lab.scenario("blocked-port", "h1", 29500)."""
        if len(tokens) == 1 and isinstance(tokens[0], str):
            tokens = tuple(tokens[0].split())
        self.state = nl.scenario(self.name, [str(t) for t in tokens])

    def healthy(self) -> None:
        """Switch every scenario off."""
        self.scenario("healthy")

    def docker_decoy(self) -> None:
        self.scenario("docker-decoy")

    def second_nic(self) -> None:
        self.scenario("second-nic")

    def dead_nic(self, *hosts: str) -> None:
        """eth1 on every host; its traffic dropped on hosts (default: all)."""
        self.scenario("dead-nic", *hosts)

    def block_port(self, host: str, port: int, mode: str = "drop") -> None:
        """host drops (connect times out) or rejects (connection refused) inbound TCP to port."""
        self.scenario("blocked-port", host, port, mode)

    def slow_link(self, host: str, rate: str, direction: str = "both") -> None:
        """tbf at rate on host's eth0 egress, and (direction both) on the bridge side towards it."""
        self.scenario("slow-link", host, rate, direction)

    def slow_pair(self, host: str, peer: str, rate: str) -> None:
        """Only traffic host -> peer limited to rate (htb class + u32 dst match on host's eth0)."""
        self.scenario("slow-pair", host, peer, rate)

    def set_mtu(self, host: str, mtu: int) -> None:
        self.scenario("mtu", host, mtu)

    def hostname_loopback(self, host: str) -> None:
        """host's own hosts file maps its hostname to 127.0.1.1, like stock Ubuntu."""
        self.scenario("hostname-loopback", host)

    # -- teardown -------------------------------------------------------------------------------------------------
    def down(self) -> None:
        """Kill what was started on the lab and remove it all, its scratch directory too (idempotent)."""
        for proc in self._procs:
            if proc.poll() is None:
                _kill_group(proc, 0.0)
        nl.down(self.name)


def code_drift(lab: Lab) -> dict[str, list[str]]:
    """Per-host --code: h3's copy of the training code differs."""
    extra = {}
    for h in lab.hosts:
        d = lab.tmp / f"code-{h}"
        d.mkdir()
        (d / "train.py").write_text("print('hello')\n" if h != "h3" else "print('changed')\n")
        extra[h] = ["--code", str(d)]
    return extra
