"""ncclcheck_lab/private_net.py: a bench re-runs itself in a private network namespace only where it can make one
and bring its loopback up; elsewhere it runs as it is (a lent GPU machine had unshare and no `ip`: every bench that
isolated itself exited 127, "ip: not found")."""

from __future__ import annotations

import shutil

from ncclcheck_lab import private_net


def test_without_ip_no_namespace_is_made_and_the_bench_runs_as_it_is(monkeypatch):
    real = shutil.which
    monkeypatch.delenv(private_net.FLAG, raising=False)
    monkeypatch.setattr(private_net.os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda n, *a, **k: None if n == "ip" else real(n, *a, **k) or "/usr/bin/" + n)
    made = []
    monkeypatch.setattr(private_net.subprocess, "call", lambda *a, **k: made.append(a) or 0)
    assert private_net.available() is False and made == []
    private_net.isolate("ncclcheck_lab.bench_scale")  # returns: the caller goes on in this namespace
    assert made == []
