"""Stores for the rendezvous tests: torch's in-memory HashStore (no network) and a real TCPStore on loopback."""

from __future__ import annotations

import pytest

from ncclcheck_lab.loopstore import loopback_store


@pytest.fixture
def hash_store():
    import torch.distributed as dist

    return dist.HashStore()


@pytest.fixture
def tcp_store():
    server = loopback_store(timeout_s=30)
    yield server
    del server
