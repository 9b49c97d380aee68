"""A job's store for the tests and the simulations: torch's TCPStore server on an IPv4 socket at 127.0.0.1, as
ncclcheck's own store front makes it (rendezvous/serve.py).

Left to bind itself, torch's server listens on every IPv6 and IPv4 address, where a loopback client is
::ffff:127.0.0.1, which no hosts file names: the server looked each accepted connection up at the machine's resolver,
on its one thread. Outside a private network namespace that query leaves the machine, and here one in ~200 took 10 s
to fail (EAI_AGAIN), while every other client's connect to that store waited behind it: a responder's 1.5 s connect
to the store of tests/live/test_reach.py timed out in ~1 run of 3 of it beside tests/live/test_jobs.py. 127.0.0.1 is
"localhost" in every hosts file.
"""

from __future__ import annotations

import datetime as _dt
import socket
from typing import Any, Optional

BACKLOG = 4096  # connections the kernel queues while the store's one thread accepts: a simulation's thousands of ranks


def loopback_store(port: int = 0, world_size: Optional[int] = None, timeout_s: float = 300.0,
                   wait_for_workers: bool = False) -> Any:
    """torch's TCPStore server listening on 127.0.0.1:`port` (0: one the kernel picks; its `.port` says which)."""
    import torch.distributed as dist

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(BACKLOG)
        port = sock.getsockname()[1]
    except OSError:
        sock.close()
        raise
    return dist.TCPStore("127.0.0.1", port, world_size, True, timeout=_dt.timedelta(seconds=timeout_s),
                         wait_for_workers=wait_for_workers, master_listen_fd=sock.detach())
