"""This host's MUNGE service (the credential daemon every Slurm node runs): where its socket is, and one bounded
`munge` / `unmunge` call. rendezvous/trust.py uses it to hand the run's key to the job's other nodes.

Every call is a subprocess with a timeout (a stuck munged is named, never waited out). The payload goes through stdin,
never argv: a command line is readable by every user of the host. Slurm sites that move munged's socket say so in
slurm.conf (`AuthInfo=socket=PATH`), which is where Slurm itself looks, so that is read too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"
DEFAULT_SOCKET = "/run/munge/munge.socket.2"  # munged's own default (MUNGE_SOCKET in its build)
MAX_CRED = 16384  # a credential for a payload of a few hundred bytes is well under 1 KiB
STATUS_SUCCESS = 0
STATUS_REPLAYED = 17  # unmunge: the credential was decoded on this host before (another local rank of the job)


class MungeError(RuntimeError):
    """munge or unmunge failed; the message is one line."""


@dataclass(frozen=True)
class Decoded:
    status: int  # unmunge's exit status: 0, or 17 (replayed on this host: integrity still verified)
    uid: Optional[int]  # the user who encoded it
    encode_time: Optional[int]  # seconds since the epoch, the encoder's clock
    payload: bytes


def in_slurm_job(env: Mapping[str, str]) -> bool:
    """Started inside a Slurm job (an allocation or a step)."""
    return bool(env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"))


def available() -> bool:
    """munge and unmunge are installed (whether munged answers is only known by calling it)."""
    return shutil.which("munge") is not None and shutil.which("unmunge") is not None


def running(env: Mapping[str, str]) -> bool:
    """munged's socket exists where Slurm (or munge's default) reaches it: munge installed but not running is no
    trust level (a Slurm-like environment without munged had failed every run closed)."""
    return os.path.exists(socket_path(env) or DEFAULT_SOCKET)


def socket_path(env: Mapping[str, str]) -> Optional[str]:
    """munged's socket as Slurm is configured to reach it (AuthInfo=socket=PATH in slurm.conf), None for munge's
    own default."""
    path = env.get("SLURM_CONF") or DEFAULT_SLURM_CONF
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    for line in text.splitlines():
        m = re.match(r"\s*AuthInfo\s*=\s*(\S+)", line, re.I)
        if m:
            for part in m.group(1).split(","):
                k, _, v = part.partition("=")
                if k.strip().lower() == "socket" and v.strip():
                    return v.strip()
    return None


def _run(argv: list, data: bytes, timeout_s: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, input=data, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise MungeError(f"{argv[0]} did not answer within {timeout_s:.0f} s (is munged running?)") from None
    except OSError as exc:
        raise MungeError(f"{argv[0]}: {exc.strerror or exc}") from None


def _why(p: subprocess.CompletedProcess) -> str:
    lines = p.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:200] if lines else f"exit {p.returncode}"


def encode(payload: bytes, restrict_uid: int, ttl_s: int, timeout_s: float, sock: Optional[str]) -> str:
    """A credential only restrict_uid may decode, valid ttl_s seconds, carrying payload."""
    argv = ["munge", "-u", str(restrict_uid), "-t", str(int(ttl_s))] + (["-S", sock] if sock else [])
    p = _run(argv, payload, timeout_s)
    if p.returncode != 0:
        raise MungeError(f"munge: {_why(p)}")
    cred = p.stdout.decode("ascii", "replace").strip()
    if not cred or len(cred) > MAX_CRED:
        raise MungeError("munge returned no credential")
    return cred


def decode(cred: str, timeout_s: float, sock: Optional[str]) -> Decoded:
    """unmunge's verdict on cred: MungeError unless its integrity holds (status 0, or 17: replayed on this host)."""
    if len(cred) > MAX_CRED or not re.fullmatch(r"MUNGE:[A-Za-z0-9+/=]+:", cred):
        raise MungeError("not a MUNGE credential")
    p = _run(["unmunge"] + (["-S", sock] if sock else []), cred.encode() + b"\n", timeout_s)
    if p.returncode not in (STATUS_SUCCESS, STATUS_REPLAYED):
        raise MungeError(f"unmunge: {_why(p)}")
    meta, _, payload = p.stdout.partition(b"\n\n")
    fields = {}
    for line in meta.decode("utf-8", "replace").splitlines():
        k, _, v = line.partition(":")
        fields[k.strip()] = v.strip()

    def number(k: str) -> Optional[int]:
        m = re.search(r"\((\d+)\)\s*$", fields.get(k, ""))
        return int(m.group(1)) if m else None

    return Decoded(p.returncode, number("UID"), number("ENCODE_TIME"), payload)


def my_uid() -> int:
    return os.getuid()
