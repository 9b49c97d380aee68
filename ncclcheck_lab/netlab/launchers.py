"""Real launchers on a lab: a Slurm cluster (slurmctld + one slurmd per host) and Open MPI's rsh agent.

Slurm in network namespaces (slurm-wlm 22.05 and munge from Debian):
- `ip netns exec` mounts a fresh /sys without cgroups, so slurmd gets a cgroup.conf with CgroupPlugin=cgroup/v1 and
  slurm.conf uses ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, JobAcctGatherType=jobacct_gather/none;
- one munged serves every namespace through a private socket (munged --socket=PATH, AuthInfo=socket=PATH): a
  filesystem socket is reachable from any network namespace;
- slurmctld runs on h1 (SlurmctldHost=h1(ADDR)), `slurmd -D -N hI` inside each host's network and UTS namespaces;
- clients get SLURM_CONF, so they never look for DNS SRV records; each host's resolv.conf points at its loopback.
Every daemon runs inside a lab namespace, so `netlab down` (which kills what runs in them) stops them all, and the
files live in the lab's run directory, which down removes.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import time
from pathlib import Path

from .core import LabState, NetlabError, lab_dir, sh
from .lib import host_argv

SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
DOCS_SLURM = Path(__file__).resolve().parents[2] / "docs" / "slurm.md"
DOCS_MARKER = "<!-- slurm.conf lines (used verbatim by the lab tests) -->"


def slurm_dir(state: LabState) -> Path:
    return lab_dir(state.name) / "slurm"


def slurm_env(state: LabState) -> dict[str, str]:
    """What a Slurm client (srun, sbatch, sinfo) on a lab host needs in its environment."""
    return {"SLURM_CONF": str(slurm_dir(state) / "slurm.conf")}


def _spawn(state: LabState, host: str, argv: list[str], log: Path) -> subprocess.Popen:
    """A daemon inside host's namespaces, in its own session; `down` kills it with the namespace's processes."""
    out = open(log, "ab")
    try:
        return subprocess.Popen(host_argv(state, host, argv), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, env={**os.environ, **slurm_env(state)})
    finally:
        out.close()


def docs_slurm_lines(health_program: str, prolog: str, docs: Path = DOCS_SLURM) -> list[str]:
    """docs/slurm.md's slurm.conf lines for ncclcheck, with only the two script paths replaced by the lab's: the
    lab runs the lines the docs show, so the two cannot drift apart."""
    text = docs.read_text()
    start = text.index(DOCS_MARKER)
    block = text[start:].split("```", 2)[1]
    lines = [ln.strip() for ln in block.splitlines()[1:] if ln.strip()]
    paths = {"HealthCheckProgram": health_program, "Prolog": prolog}
    out = []
    for ln in lines:
        key, _, _value = ln.partition("=")
        out.append(f"{key}={paths[key]}" if key in paths else ln)
    missing = set(paths) - {ln.partition("=")[0] for ln in lines}
    if missing:
        raise NetlabError(f"{docs}: the slurm.conf block lacks {', '.join(sorted(missing))}")
    return out


def slurm_conf(state: LabState, cpus: int, extra: tuple = ()) -> str:
    d = slurm_dir(state)
    first = state.hosts[0]
    nodes = "\n".join(f"NodeName={h} NodeAddr={state.ip(h)} CPUs={cpus} State=UNKNOWN" for h in state.hosts)
    return f"""# written by scripts/netlab for lab {state.name}
ClusterName=netlab{state.name}
SlurmctldHost={first}({state.ip(first)})
SlurmctldPort={SLURMCTLD_PORT}
SlurmdPort={SLURMD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d / "munge.socket"}
StateSaveLocation={d / "state"}
SlurmdSpoolDir={d / "spool"}/%n
SlurmctldPidFile={d / "slurmctld.pid"}
SlurmdPidFile={d / "slurmd-%n.pid"}
SlurmctldLogFile={d / "slurmctld.log"}
SlurmdLogFile={d / "slurmd-%n.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=10
{nodes}
PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""" + "".join(f"{line}\n" for line in extra)


def slurm_up(state: LabState, cpus: int = 2, timeout: float = 30.0, extra_conf: tuple = ()) -> dict[str, str]:
    """Start munged, slurmctld on h1 and a slurmd per host; wait until every node has registered (idle, or drained
    by a health check in extra_conf). Returns slurm_env()."""
    d = slurm_dir(state)
    (d / "state").mkdir(parents=True, exist_ok=True)
    for h in state.hosts:
        (d / "spool" / h).mkdir(parents=True, exist_ok=True)
    key = d / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    key.chmod(stat.S_IRUSR)
    (d / "slurm.conf").write_text(slurm_conf(state, cpus, tuple(extra_conf)))
    (d / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
    first = state.hosts[0]
    sock = d / "munge.socket"
    _spawn(state, first, ["munged", "--foreground", "--force", f"--socket={sock}", f"--key-file={key}",
                          f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}",
                          f"--seed-file={d / 'munged.seed'}"], d / "munged.out")
    _wait(lambda: sock.exists(), timeout, "munged did not create its socket", d / "munged.out")
    _spawn(state, first, ["slurmctld", "-D", "-i", "-f", str(d / "slurm.conf")], d / "slurmctld.out")
    for h in state.hosts:
        _spawn(state, h, ["slurmd", "-D", "-N", h, "-f", str(d / "slurm.conf")], d / f"slurmd-{h}.out")
    env = {**os.environ, **slurm_env(state)}

    def idle() -> bool:
        p = subprocess.run(host_argv(state, first, ["sinfo", "-h", "-N", "-o", "%N %T"]), capture_output=True,
                           text=True, env=env, timeout=10)
        states = dict(line.split() for line in p.stdout.splitlines() if len(line.split()) == 2)
        return p.returncode == 0 and len(states) == len(state.hosts) and all(
            s in ("idle", "mixed", "allocated", "drained", "draining") for s in states.values())

    _wait(idle, timeout, "Slurm nodes did not become idle", d / "slurmctld.log")
    return slurm_env(state)


def restart_slurmd(state: LabState, host: str, timeout: float = 30.0) -> None:
    """Stop host's slurmd and start it again (it runs HealthCheckProgram when it starts, before registering)."""
    d = slurm_dir(state)
    pids = [int(p) for p in sh(["ip", "netns", "pids", state.ns(host)], check=False).stdout.split()
            if _comm(p) == "slurmd"]
    for pid in pids:
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass
    _wait(lambda: not any(_running(p) for p in pids), timeout, f"slurmd on {host} did not stop",
          d / f"slurmd-{host}.out")
    _spawn(state, host, ["slurmd", "-D", "-N", host, "-f", str(d / "slurm.conf")], d / f"slurmd-{host}.out")


def _running(pid: int) -> bool:
    """pid has not exited: a slurmd this process started stays a zombie until reaped, so reap it here."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _wait(ready, timeout: float, what: str, log: Path) -> None:
    end = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > end:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
            raise NetlabError(f"{what} within {timeout:g} s; {log}:\n{tail}")
        time.sleep(0.1)


def mpi_agent(state: LabState) -> Path:
    """An rsh agent for `mpirun --mca plm_rsh_agent PATH`: runs its command inside the named lab host."""
    path = lab_dir(state.name) / "mpi-rsh-agent"
    cases = "\n".join(f"  {h}|{state.ip(h)}) exec {shlex.join(host_argv(state, h, ['/bin/sh', '-c']))} \"$*\" ;;"
                      for h in state.hosts)
    path.write_text(f"""#!/bin/sh
# mpirun --mca plm_rsh_agent {path}: "ssh HOST COMMAND..." into lab {state.name}'s host namespaces.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
case "$host" in
{cases}
  *) echo "mpi-rsh-agent: no host $host in lab {state.name}" >&2; exit 255 ;;
esac
""")
    path.chmod(0o755)
    return path


def mpirun_argv(state: LabState, nproc_per_node: int, argv: list[str], env: dict[str, str]) -> list[str]:
    """mpirun across every lab host (run it on h1), nproc_per_node ranks each, exporting env to every rank."""
    hosts = ",".join(f"{h}:{nproc_per_node}" for h in state.hosts)
    out = ["mpirun", "--allow-run-as-root", "--host", hosts, "--map-by", f"ppr:{nproc_per_node}:node",
           "--mca", "plm_rsh_agent", str(mpi_agent(state)), "--mca", "plm_rsh_no_tree_spawn", "1",
           "--mca", "btl_tcp_if_include", "eth0", "--mca", "oob_tcp_if_include", "eth0", "--mca", "btl", "self,tcp"]
    for k, v in env.items():
        out += ["-x", f"{k}={v}"]
    return out + list(argv)


def slurm_down(state: LabState) -> None:
    """Stop the daemons without removing the lab (down does this too, with everything else)."""
    for h in state.hosts:
        for pid in sh(["ip", "netns", "pids", state.ns(h)], check=False).stdout.split():
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm in ("slurmd", "slurmctld", "munged", "slurmstepd"):
                try:
                    os.kill(int(pid), 15)
                except ProcessLookupError:
                    pass
