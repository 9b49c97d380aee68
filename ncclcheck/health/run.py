"""run_health: collect this node's facts within a bound, check them against the expectations, and (with --drain or
--dry-run) drain or resume the Slurm node by the prefix rule. Never imports torch: Slurm runs it on every node every
few minutes, and as a Prolog before every job."""

from __future__ import annotations

import datetime as _dt
import functools
import threading
import time
from typing import Callable, Optional

from ..checks.gpu import hw_expect
from ..checks.health import Expect, health_checks
from ..config import Config, HealthConfig
from ..model import CheckResult, NodeInfo, Report, Status, WorldInfo, failed, passed, warned
from . import drain as drainmod
from .scontrol import Scontrol, ScontrolError, gres_gpus

TIMEOUT_CHECK = "health.timeout"
SLURM_CHECK = "slurm.drain"


def _collect_bounded(collect: Callable, bound_s: float) -> tuple[Optional[dict], str]:
    """(facts, '') or (None, the group still being read) when the collection outlives bound_s. A read stuck in the
    kernel (a hung NFS mount, a GPU driver in trouble) cannot be interrupted, so it is left behind in a daemon thread
    and the run fails in time with the group's name instead of being killed by Slurm with no reason at all."""
    box: dict = {"group": "start"}

    def work() -> None:
        box["facts"] = collect(on_group=lambda g: box.__setitem__("group", g))

    t = threading.Thread(target=work, name="ncclcheck-health-facts", daemon=True)
    t.start()
    t.join(bound_s)
    if t.is_alive() or "facts" not in box:
        return None, box["group"]
    return box["facts"], ""


def _first_failure(checks: list, strict: bool) -> Optional[CheckResult]:
    bad = (Status.FAIL, Status.WARN) if strict else (Status.FAIL,)
    return next((c for c in checks if c.status in bad), None)


def run_health(config: Config, version: str, collect: Optional[Callable] = None,
               scontrol: Optional[Scontrol] = None) -> Report:
    """Health of this node. `collect` (default facts.collect_health_facts) and `scontrol` are for tests."""
    from ..facts import collect_health_facts, hostname

    t0 = time.monotonic()
    started = _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")
    hc = config.health or HealthConfig()
    golden_path = config.baseline.path if config.baseline and config.baseline.path else None
    golden = _load_golden(golden_path) if golden_path else None  # a bad file: usage error before anything runs
    sc = scontrol or Scontrol(dry_run=hc.slurm.dry_run)
    sc.dry_run = sc.dry_run or hc.slurm.dry_run  # a dry run never runs an action, whoever built the Scontrol
    node = hc.node or hostname()
    state, state_error = None, None
    # The node's Slurm state: needed to drain or resume by the prefix rule, and for the Gres GPU count. A dry run
    # asks Slurm nothing (scontrol would reach the controller, or look it up in DNS): it says what it would do.
    if not hc.slurm.dry_run and (hc.slurm.acts or (hc.gpus is None and hc.node)):
        try:
            state = sc.show_node(node)
        except ScontrolError as e:
            state_error = str(e)
    expect_gpus, gpus_from = hc.gpus, "--gpus"
    if expect_gpus is None and state is not None:
        expect_gpus, gpus_from = gres_gpus(state.gres), f"Gres={state.gres}"
    expect = Expect(gpus=expect_gpus, gpus_from=gpus_from, ifname=hc.ifname, mtu=hc.mtu,
                    min_speed_mbps=hc.min_speed_mbps, ib_rate_gbps=hc.ib_rate_gbps)
    from ..rendezvous.budget import FIXED

    bound_s = hc.timeout_s or FIXED.health_timeout_s
    hwc = config.hardware
    if collect is None:
        collect = functools.partial(collect_health_facts, counter_window_s=FIXED.counter_window_s,
                                    xid_window_s=hwc.xid_window_s, bound_s=bound_s)
    facts, stuck = _collect_bounded(collect, bound_s)
    if facts is None:
        checks = [failed(TIMEOUT_CHECK, f"the node's checks did not finish within {bound_s:g} s (stuck "
                         f"reading {stuck})", evidence={"timeout_s": bound_s, "stuck_in": stuck},
                         detail="A read that hangs (a driver or filesystem in trouble) is a sick node; Slurm "
                                "would have killed the health check at 60 s without a reason.",
                         fix=f"Look at what reading {stuck} waits for on the node (`dmesg`, `nvidia-smi`, "
                             "hung mounts); raise --timeout only if the node is merely slow.")]
        facts = {}
    else:
        checks = health_checks(facts, expect, hw_expect(hwc, facts, golden, golden_path))
        if golden is not None:
            from ..checks.registry import baseline_results

            me = [NodeInfo(0, (facts.get("host") or {}).get("hostname") or "?", facts)]
            checks += baseline_results(me, golden, golden_path)  # drift, and ib.counters since the saved run
    first = _first_failure(checks, config.output.strict)
    actions: list = []
    if hc.slurm.acts:
        why = drainmod.reason(first.id, first.summary) if first is not None else None
        checks.append(_act(sc, node, state, state_error, why, actions, unasked=hc.slurm.dry_run))
    slurm = {"node": node, "state": state.state if state else None, "reason": state.reason if state else None,
             "state_error": state_error, "actions": actions, "commands": list(sc.commands), "dry_run": hc.slurm.dry_run}
    return Report(command="health", version=version, started=started, duration_s=time.monotonic() - t0,
                  world=WorldInfo(nnodes=1, world_size=0, backend="none", launcher="none"),
                  nodes=[NodeInfo(0, (facts.get("host") or {}).get("hostname") or hostname(), facts)],
                  checks=checks, strict=config.output.strict, extra={"slurm": slurm})


def _act(sc: Scontrol, node: str, state, state_error: Optional[str], why: Optional[str], actions: list,
         unasked: bool = False):
    """Drain or resume by the prefix rule; the slurm.drain check says what was done (or could not be). unasked (a
    dry run): Slurm's state was not read, the plan says what would be done and on what condition."""
    if unasked:
        action = drainmod.plan_unasked(node, why)
        actions.append(action.to_json())
        sc.apply(action)  # dry_run: recorded, not run
        if action.kind == "drain":
            return passed(SLURM_CHECK, f"would drain {node}: `{sc.commands[-1]}`: {action.why}",
                          evidence=action.to_json())
        return passed(SLURM_CHECK, f"would not drain {node}: {action.why}", evidence=action.to_json())
    if state is None:
        text = f"node {node}'s Slurm state unknown: {state_error}"
        # A failing node that could not be drained fails anyway; a healthy one only could not be resumed.
        return (failed if why else warned)(SLURM_CHECK, text, evidence={"node": node, "error": state_error},
                                           fix="Check that scontrol works on the node (SLURM_CONF, munge, "
                                               "slurmctld reachable); the node's own checks are above.")
    action = drainmod.plan(node, state, why)
    actions.append(action.to_json())
    try:
        sc.apply(action)
    except ScontrolError as e:
        return (failed if why else warned)(SLURM_CHECK, f"could not {action.kind} {node}: {e}",
                                           evidence=action.to_json(),
                                           fix="Check scontrol on the node (permissions: root or SlurmUser).")
    verb = {"drain": "drained", "resume": "resumed", "none": "nothing done to"}[action.kind]
    if sc.dry_run and action.kind != "none":
        verb = f"would have {verb} (--dry-run: {sc.commands[-1]})"
    return passed(SLURM_CHECK, f"{verb} {node}: {action.why}", evidence=action.to_json())


def _load_golden(path: str) -> list:
    from ..checks.drift import load_golden

    return load_golden(path)


def run(config: Config, observer=None, placement=None) -> Report:
    """The commands table's runner for `health` (commands.py)."""
    from ..version import __version__

    return run_health(config, __version__)
