"""Command line of scripts/netlab: up, down, status, exec, scenario, gc over netlab_lib; slurm and mpi-agent over
netlab_launchers."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from . import lib as nl

SCENARIO_HELP = "scenarios (repeat --scenario, quote ones with arguments):\n" + "\n".join(
    f"  {u}" for u in nl.SCENARIO_USAGE.values())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="netlab", description="Hosts from network namespaces, for multi-node tests.",
                                epilog=SCENARIO_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", default=os.environ.get("NETLAB_NAME"),
                   help=f"lab name, 1-8 chars [a-z0-9], prefixes its namespaces and links (default $NETLAB_NAME or "
                        f"{nl.DEFAULT_NAME}; status without it lists every lab)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("up", help="make the lab (idempotent; re-applies exactly the given scenarios)",
                       epilog=SCENARIO_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("n", type=int, help="number of hosts (h1..hN)")
    s.add_argument("--scenario", action="append", default=[], metavar="'NAME [ARGS]'")
    sub.add_parser("down", help="remove the lab and everything it made (idempotent)")
    sub.add_parser("status", help="show the lab given by --name, or every lab on this machine, as JSON")
    s = sub.add_parser("exec", help="run a command on a host: exec h1 -- CMD...")
    s.add_argument("host")
    s.add_argument("argv", nargs=argparse.REMAINDER)
    s = sub.add_parser("scenario", help="switch a scenario on the running lab: scenario blocked-port h1 29500",
                       epilog=SCENARIO_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("tokens", nargs="+", metavar="NAME [ARGS]")
    sub.add_parser("gc", help="tear down labs whose owning test session died")
    s = sub.add_parser("slurm", help="start Slurm on the lab (slurmctld on h1, a slurmd per host); prints the "
                                     "SLURM_CONF to export before srun/sbatch on h1")
    s.add_argument("--cpus", type=int, default=2, help="CPUs each lab node offers (default 2)")
    sub.add_parser("mpi-agent", help="write the rsh agent for mpirun --mca plm_rsh_agent; prints its path")
    return p


# Every command but status makes, changes or enters network namespaces (ip netns, veth, tc, nft, bind mounts under
# /run/netns, the lock files under /run/netlab): root's alone. Asked first, so that a user without it reads what it
# needs instead of a PermissionError from whichever of these came first.
NEEDS_ROOT = frozenset({"up", "down", "exec", "scenario", "gc", "slurm", "mpi-agent"})


def root_needed(cmd: str, euid: int | None = None) -> str | None:
    """The one line to print when `cmd` needs root and this process (`euid`, default its own) is not root."""
    if cmd not in NEEDS_ROOT or (os.geteuid() if euid is None else euid) == 0:
        return None
    return (f"netlab {cmd}: needs root (it makes and enters network namespaces, veth links, tc and nft rules, "
            f"mounts under /run/netns): run it as root, e.g. sudo scripts/netlab {cmd} ...")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    why = root_needed(args.cmd)
    if why:
        print(why, file=sys.stderr)
        return 2
    listing = args.cmd == "status" and args.name is None
    args.name = args.name or nl.DEFAULT_NAME
    try:
        if args.cmd == "up":
            state = nl.up(args.name, args.n, [shlex.split(s) for s in args.scenario])
            print(json.dumps(nl.status(state.name), indent=2))
        elif args.cmd == "down":
            nl.down(args.name)
        elif args.cmd == "status":
            print(json.dumps(nl.status(None if listing else args.name), indent=2))
        elif args.cmd == "exec":
            cmd = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
            if not cmd:
                print("netlab exec: give a command: exec h1 -- CMD...", file=sys.stderr)
                return 2
            full = nl.host_argv(nl.require_state(args.name), args.host, cmd)
            os.execvp(full[0], full)
        elif args.cmd == "scenario":
            nl.scenario(args.name, args.tokens)
        elif args.cmd == "slurm":
            import time

            from . import launchers as nlx

            t = time.monotonic()
            env = nlx.slurm_up(nl.require_state(args.name), cpus=args.cpus)
            print(f"export SLURM_CONF={env['SLURM_CONF']}   # Slurm up in {time.monotonic() - t:.1f} s", flush=True)
        elif args.cmd == "mpi-agent":
            from . import launchers as nlx

            print(nlx.mpi_agent(nl.require_state(args.name)))
        elif args.cmd == "gc":
            for name in nl.reap_orphans():
                print(f"removed orphan lab {name}")
    except nl.NetlabError as e:
        print(f"netlab: {e}", file=sys.stderr)
        return 1
    return 0
