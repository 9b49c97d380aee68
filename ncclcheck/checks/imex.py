"""gpu.imex: on a tray of a multi-node NVLink domain (GB200/GB300 NVL72), whether a job spanning trays can share GPU
memory over NVLink: an IMEX channel this process can open, and the IMEX daemon's domain UP with every node READY and
connected (facts/imex.py). Judged only where the job needs it: a job of several nodes on GPUs whose fabric names a
cluster; a job on one node uses NVLink within its tray without IMEX, and its report says what was read, unjudged.

What NCCL does without it: with no channel it cannot import the other trays' fabric handles and runs between trays
over the network instead (NCCL_MNNVL_ENABLE=1 makes that an error); with the daemon's domain down the imports fail.
"""

from __future__ import annotations

from ..facts import imex
from ..model import CheckResult, failed, passed, skipped, warned
from .local import LocalInput

CID = "gpu.imex"
FIX_CHANNEL = ("Create the channel: load the driver with `NVreg_CreateImexChannel0=1` (modprobe.d) or `mknod "
               "/dev/nvidia-caps-imex-channels/channel0 c <major> 0` (the major `grep nvidia-caps-imex-channels "
               "/proc/devices` prints), and pass it into the container (docker `--device "
               "/dev/nvidia-caps-imex-channels/channel0`; Kubernetes: a ComputeDomain's channel claim).")
FIX_DAEMON = ("`systemctl status nvidia-imex` and `journalctl -u nvidia-imex` on the trays named; "
              "/etc/nvidia-imex/nodes_config.cfg must list every tray of the domain, the same file on each; "
              "`nvidia-imex-ctl -N` shows each node's state and connections. To run now without NVLink between "
              "trays: NCCL_MNNVL_ENABLE=0.")
SHOWN = 8  # nodes named in a summary


def _daemon(d: dict) -> tuple:
    """(status or None when healthy, what the daemon's reading says) for a daemon fact that was read."""
    state = d.get("domain_state") or "not printed"
    nodes = [n for n in d.get("nodes") or [] if isinstance(n, dict)]
    bad = [n for n in nodes if n.get("state") != "READY"]
    cells = int(d.get("not_connected_n") or 0)
    named = ", ".join(f"node {n.get('index')} ({n.get('addr')}) {n.get('state')}" for n in bad[:SHOWN])
    named += f", +{len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
    if state == "UP" and not bad and not cells:
        return None, f"IMEX domain UP, {len(nodes)} node(s) READY and connected"
    what = (f"IMEX domain {state}" + (f": {named}" if named else "")
            + (f"; {cells} connection(s) of the node matrix not Connected" if cells else ""))
    ready = len(nodes) - len(bad)
    down = state == "DOWN" or (nodes and not ready)
    return ("fail" if down else "warn"), what + f" ({ready} of {len(nodes)} node(s) READY)"


def check_imex(inp: LocalInput) -> CheckResult:
    gh = inp.facts.get("gpu_health")
    gpus = (gh.get("gpus") or []) if isinstance(gh, dict) else []
    domains = imex.domains(gpus)
    if not domains:
        return skipped(CID, "no GPU in a multi-node NVLink domain (no fabric cluster UUID): IMEX is not used",
                       node=inp.node_rank)
    fact = gh.get("imex")
    if not isinstance(fact, dict):
        return skipped(CID, "IMEX not read on this node", node=inp.node_rank)
    where = f"multi-node NVLink domain (cluster {domains[0]}{f' and {len(domains) - 1} more' if domains[1:] else ''})"
    ev = {"domains": domains, "imex": fact}
    chans = fact.get("channels")
    daemon = fact.get("daemon") if isinstance(fact.get("daemon"), dict) else {"unavailable": "not asked"}
    said = []  # (status, what, fix)
    ok = ""
    if not chans:
        place = "missing" if chans is None else "empty"
        env = ((inp.facts.get("env") or {}).get("vars") or {}) if isinstance(inp.facts.get("env"), dict) else {}
        forced = str(env.get("NCCL_MNNVL_ENABLE", "")).strip() == "1"
        said.append(("fail" if forced else "warn",
                     f"no IMEX channel (/dev/nvidia-caps-imex-channels {place}"
                     f"{'; the driver lists none in /proc/devices' if not fact.get('major') else ''}): NCCL cannot "
                     "import the other trays' GPU memory and "
                     + ("fails at init (NCCL_MNNVL_ENABLE=1)" if forced else "runs between trays over the network"),
                     FIX_CHANNEL))
    if "unavailable" in daemon:
        said.append(("warn", f"the IMEX daemon's state not measured ({daemon['unavailable']})", FIX_DAEMON))
    else:
        st, what = _daemon(daemon)
        if st is not None:
            said.append((st, what, FIX_DAEMON))
        ok = what
    if not inp.multi_node:
        text = "; ".join(w for _, w, _ in said) or ok
        return skipped(CID, f"not judged (a job on one node uses NVLink within its tray without IMEX): {text}",
                       node=inp.node_rank, evidence=ev)
    if not said:
        return passed(CID, f"{ok}; channel {chans[0]} present, {where}", node=inp.node_rank, evidence=ev)
    make = failed if any(s == "fail" for s, _, _ in said) else warned
    fixes = list(dict.fromkeys(f for _, _, f in said))
    return make(CID, f"{'; '.join(w for _, w, _ in said)}, on a tray of a {where}", node=inp.node_rank,
                evidence=ev, fix=" ".join(fixes))
