"""Stores for the rendezvous tests: torch's in-memory HashStore (no network) and a real TCPStore on loopback."""

from __future__ import annotations

import datetime as dt

import pytest


@pytest.fixture
def hash_store():
    import torch.distributed as dist

    return dist.HashStore()


@pytest.fixture
def tcp_store():
    import torch.distributed as dist

    server = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False, timeout=dt.timedelta(seconds=30))
    yield server
    del server
