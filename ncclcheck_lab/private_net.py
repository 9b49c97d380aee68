"""A simulated world kept on loopback: a bench re-runs itself in a private network namespace (`unshare -n`, only
loopback up) when it can (root, unshare there and allowed), else runs as it is.

Why: c10d reverse-resolves socket addresses (its client the address it connects to, its server each connection it
accepts, for its log lines), and the machine's resolver must not see a simulator's thousands of queries. In this
sandbox the resolver also drops queries under such a burst, 5 s each: torch's store server does its lookups on its
one event-loop thread, so 2,048 simulated ranks registering at once left it behind a queue of connections for
minutes (issue 56; bench_scale saw the client's side). In the namespace the resolver is unreachable and a lookup
fails at once, locally.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Optional

FLAG = "NCCLCHECK_PRIVATE_NETNS"  # set inside: a bench started there (or a child of one) does not re-run itself


def available() -> bool:
    """Can this process make a private network namespace (root, unshare and ip installed, and the kernel lets it)?
    Without `ip` the namespace's loopback cannot be brought up (a lent GPU machine had unshare and no iproute2)."""
    if os.environ.get(FLAG) or os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return False
    return subprocess.call(["unshare", "-n", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


def isolate(module: str, port_low: Optional[int] = None) -> None:
    """Re-run `python -m module` with this process's arguments in a private network namespace and exit with its
    code; return at once where that cannot be done (not root, no unshare, a kernel that refuses) or is done already.
    port_low: the namespace's ephemeral ports start there (the machine's setting is left as it is; where /proc/sys
    is read-only the run goes on with the default range)."""
    if not available():
        return
    ports = f'{{ echo "{port_low} 65535" 2>/dev/null >/proc/sys/net/ipv4/ip_local_port_range || true; }} && ' \
        if port_low else ""
    cmd = ["unshare", "-n", "sh", "-c", f'ip link set lo up && {ports}exec "$0" "$@"', sys.executable, "-m", module,
           *sys.argv[1:]]
    sys.exit(subprocess.call(cmd, env=dict(os.environ, **{FLAG: "1"})))
