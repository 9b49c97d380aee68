"""The tests' and simulations' job store (ncclcheck_lab/loopstore.py) listens on 127.0.0.1 alone: a dual-stack
listener sees a loopback client as ::ffff:127.0.0.1 and looks it up at the machine's resolver on its one thread."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("torch.distributed")

from ncclcheck_lab.loopstore import loopback_store  # noqa: E402


def test_the_store_listens_on_ipv4_loopback_only_and_serves_there():
    store = loopback_store(timeout_s=10)
    try:
        store.set("k", "v")
        assert store.get("k") == b"v"
        with socket.create_connection(("127.0.0.1", store.port), timeout=5):
            pass
        if socket.has_ipv6:
            with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                try:
                    s.connect(("::1", store.port))
                except OSError:
                    pass  # refused (or no IPv6 loopback here): nobody listens there
                else:
                    raise AssertionError("the store also listens on IPv6")
    finally:
        del store
