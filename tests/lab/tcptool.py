"""Tiny TCP server/client the lab self-tests run on lab hosts: reachability and bulk-transfer timing, as JSON."""

from __future__ import annotations

import json
import socket
import sys
import time

CHUNK = b"\0" * (1 << 20)


def serve(port: int, bind: str = "0.0.0.0") -> None:
    """Accept connections forever; read each to EOF, answer with the byte count."""
    srv = socket.create_server((bind, port), reuse_port=False)
    print("listening", flush=True)
    while True:
        conn, _ = srv.accept()
        with conn:
            n = 0
            while data := conn.recv(1 << 20):
                n += len(data)
            conn.sendall(json.dumps({"bytes": n}).encode())


def send(addr: str, port: int, nbytes: int, timeout: float) -> int:
    """Connect, send nbytes, wait for the server's count; print JSON {ok, error, seconds, bits_per_s}."""
    start = time.monotonic()
    try:
        with socket.create_connection((addr, port), timeout=timeout) as s:
            s.settimeout(max(timeout, 30.0))
            left = nbytes
            while left > 0:
                left -= s.send(CHUNK[: min(left, len(CHUNK))])
            s.shutdown(socket.SHUT_WR)
            reply = json.loads(s.makefile().read())
        seconds = time.monotonic() - start
        ok = reply["bytes"] == nbytes
        print(json.dumps({"ok": ok, "error": None if ok else "short", "seconds": seconds,
                          "bits_per_s": nbytes * 8 / seconds if nbytes else None}))
        return 0 if ok else 1
    except socket.timeout:
        error = "timeout"
    except ConnectionRefusedError:
        error = "refused"
    except OSError as e:
        error = f"oserror:{e.errno}"
    print(json.dumps({"ok": False, "error": error, "seconds": time.monotonic() - start, "bits_per_s": None}))
    return 1


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "serve":
        serve(int(args[0]), *args[1:])
    else:
        sys.exit(send(args[0], int(args[1]), int(args[2]), float(args[3]) if len(args) > 3 else 2.0))
