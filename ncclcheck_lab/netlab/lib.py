"""Lifecycle of a lab (up, down, scenario, status, exec); the API scripts/netlab and the test fixtures use.

See netlab_core for what a lab is made of, netlab_scenarios for the switches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
from collections.abc import Sequence
from pathlib import Path

from .core import *  # noqa: F403 (re-exported: the one module callers import)
from .core import (
    MAX_HOSTS,
    NETNS_ETC,
    LabState,
    NetlabError,
    Scenarios,
    add_nic,
    allocate_slot,
    check_name,
    fit_neighbour_table,
    flocked,
    has_link,
    lab_dir,
    lab_lock,
    list_netns,
    load_state,
    make_bridge,
    missing_requirements,
    neighbour_need,
    pid_start_time,
    registered_labs,
    release_slot,
    require_state,
    save_state,
    sh,
)
from .scenarios import SCENARIO_USAGE, apply_scenario, reconcile  # noqa: F401 (SCENARIO_USAGE re-exported)

# ------------------------------------------------------------------------------------------------------------ up

def host_argv(state: LabState, host: str, argv: Sequence[str], mounts: Sequence[str] = ()) -> list[str]:
    """argv wrapped to run inside host: its UTS namespace (hostname), network namespace and /etc/netns files.

    mounts: shell `mount ...` commands run first in a mount namespace of the command's own (`unshare --mount`,
    propagation private), so the host sees e.g. a tmpfs or a read-only bind mount where the others see the shared
    directory; the mounts end with the command."""
    state.index(host)
    host = host if host in state.hosts else host[len(state.name) + 1:]
    inner = list(argv)
    if mounts:
        inner = ["unshare", "--mount", "--propagation", "private", "sh", "-ec",
                 " && ".join(mounts) + ' && exec "$@"', "sh", *argv]
    return ["nsenter", f"--uts={state.uts(host)}", "ip", "netns", "exec", state.ns(host), *inner]


def up(name: str, n: int, scenarios: Sequence[Sequence[str]] = (), *, owner_pid: int | None = None) -> LabState:
    """Make (or re-make) lab name with n hosts and exactly the given scenarios applied; idempotent."""
    check_name(name)
    if not 1 <= n <= MAX_HOSTS:
        raise NetlabError(f"host count {n} out of range 1..{MAX_HOSTS}")
    if why := missing_requirements():
        raise NetlabError("cannot make a lab: " + ", ".join(why))
    with flocked(lab_lock(name)):
        state = load_state(name)
        if state is not None and not (state.n == n and _intact(state)):
            _down_locked(name)
            state = None
        if state is None:
            state = LabState(name=name, slot=allocate_slot(name), n=n, owner_pid=owner_pid,
                             owner_start=pid_start_time(owner_pid) if owner_pid else None)
            save_state(state)  # before creating anything: down must be able to find it all
            try:
                sizes = [s.n for s in map(load_state, registered_labs()) if s is not None]
                fit_neighbour_table(neighbour_need(sizes))
                _create(state)
            except BaseException:
                _down_locked(name)
                raise
        state.scenarios = Scenarios()
        for tokens in scenarios:
            apply_scenario(state.scenarios, list(tokens), state)
        reconcile(state)
        save_state(state)
        return state


def _intact(state: LabState) -> bool:
    namespaces = set(list_netns())
    return all(ns in namespaces for ns in [state.sw, *map(state.ns, state.hosts)]) and has_link(state.sw,
                                                                                                  state.bridge("eth0"))


def _create(state: LabState) -> None:
    # The bridge lives in its own namespace, not the root one: there the machine's br_netfilter setting
    # (bridge-nf-call-iptables=1 on Docker/Kubernetes hosts) would run lab traffic through the machine's firewall.
    sh(["ip", "netns", "add", state.sw])
    if Path("/proc/sys/net/bridge").is_dir():
        sh(["ip", "netns", "exec", state.sw, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=0",
            "net.bridge.bridge-nf-call-ip6tables=0", "net.bridge.bridge-nf-call-arptables=0"], check=False)
    make_bridge(state, "eth0")
    lab_dir(state.name).mkdir(parents=True, exist_ok=True)
    for host in state.hosts:
        ns = state.ns(host)
        sh(["ip", "netns", "add", ns])
        sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        uts = state.uts(host)
        uts.touch()
        sh(["unshare", f"--uts={uts}", "hostname", host])
        add_nic(state, host, "eth0", state.ip(host))


# ------------------------------------------------------------------------------------------------------------ down

def down(name: str) -> None:
    """Remove lab name entirely (state or not: everything prefixed NAME- goes); idempotent."""
    check_name(name)
    with flocked(lab_lock(name), unlink=True):
        _down_locked(name)


def _down_locked(name: str) -> None:
    prefix = f"{name}-"
    namespaces = [ns for ns in list_netns() if ns.startswith(prefix)]
    for ns in namespaces:
        # A process left inside keeps the namespace, and so its veths and the bridge ports, alive.
        for pid in sh(["ip", "netns", "pids", ns], check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
    # Deleting the namespaces deletes the veths and bridges in them; anything named like the lab in the root
    # namespace is a leftover (of a crash half-way through a veth move) and goes too.
    links = [p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(prefix)]
    for link in sorted(links, key=lambda x: "-br" in x):  # ports first, then bridges
        sh(["ip", "link", "del", link], check=False)
    for ns in namespaces:
        sh(["ip", "netns", "del", ns], check=False)
    if NETNS_ETC.is_dir():
        for d in NETNS_ETC.iterdir():
            if d.name.startswith(prefix):
                shutil.rmtree(d, ignore_errors=True)
    ldir = lab_dir(name)
    if ldir.is_dir():
        for f in ldir.glob("uts-*"):
            sh(["umount", str(f)], check=False)
        shutil.rmtree(ldir, ignore_errors=True)
    release_slot(name)


def leftovers(name: str) -> list[str]:
    """Everything of lab name still on the machine (empty after a clean down)."""
    prefix = f"{name}-"
    found = [f"netns {ns}" for ns in list_netns() if ns.startswith(prefix)]
    found += [f"link {p.name}" for p in Path("/sys/class/net").iterdir() if p.name.startswith(prefix)]
    if NETNS_ETC.is_dir():
        found += [f"dir {d}" for d in NETNS_ETC.iterdir() if d.name.startswith(prefix)]
    if lab_dir(name).exists():
        found.append(f"dir {lab_dir(name)}")
    found += [f"mount {m}" for m in _mounts() if m.startswith(f"{lab_dir(name)}/")]
    if lab_lock(name).exists():
        found.append(f"lock {lab_lock(name)}")
    if name in registered_labs():
        found.append(f"registry entry {name}")
    return found


def _mounts() -> list[str]:
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]


def reap_orphans() -> list[str]:
    """Tear down labs whose owning process (a test session) died without tearing them down."""
    reaped = []
    for name in registered_labs():
        state = load_state(name)
        if state is None or state.owner_pid is None:
            continue
        if pid_start_time(state.owner_pid) != state.owner_start:
            down(name)
            reaped.append(name)
    return reaped


def scenario(name: str, tokens: Sequence[str]) -> LabState:
    """Apply one scenario switch to running lab name (on top of what is already applied)."""
    with flocked(lab_lock(check_name(name))):
        state = require_state(name)
        apply_scenario(state.scenarios, [str(t) for t in tokens], state)
        reconcile(state)
        save_state(state)
        return state


# ----------------------------------------------------------------------------------------------------------- status

def status(name: str | None = None) -> dict:
    """Labs on this machine (or one lab): hosts, addresses, scenarios, and whether all its parts exist."""
    names = [name] if name else sorted(registered_labs())
    labs = {}
    for lab in names:
        state = load_state(lab)
        if state is None:
            labs[lab] = {"up": False}
            continue
        labs[lab] = {
            "up": True, "intact": _intact(state), "slot": state.slot, "owner_pid": state.owner_pid,
            "hosts": {h: {"netns": state.ns(h), "eth0": state.ip(h),
                          **({"eth1": state.ip(h, "eth1")} if state.scenarios.second_nic else {})}
                      for h in state.hosts},
            "scenarios": dataclasses.asdict(state.scenarios),
        }
    return labs
