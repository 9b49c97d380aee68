"""Shared pytest helpers: run the CLI of THIS checkout in a subprocess, validate reports against the schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Whether the running test is gpu-marked (set per test by _gpu_world below): only such a test's processes see the
# machine's GPUs.
_GPU_TEST = {"on": False}


def cli_env(extra=None, drop=("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT", "RANK",
                              "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK")):
    """The environment of a process a test starts: this checkout first on PYTHONPATH, no launcher or NCCL variable
    of the shell, and a CPU world: CUDA_VISIBLE_DEVICES="" (torch and nvidia-smi's list show no GPU, so ranks are
    CPU ranks over gloo and a test's expectations do not depend on the GPUs of the machine it runs on). A gpu-marked
    test's processes see the machine's GPUs, and a fake node's (`extra` from ncclcheck_lab/fakehw.py's env_for) its
    own, which CUDA_VISIBLE_DEVICES would hide from nvidia-smi's list; `extra` may set CUDA_VISIBLE_DEVICES itself."""
    extra = extra or {}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("NCCLCHECK_", "NCCL_"))}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if not _GPU_TEST["on"] and "NCCLCHECK_FAKE_HW" not in extra:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra)
    return env


@pytest.fixture
def cpu_world(monkeypatch):
    """The CPU world of cli_env() for this test's own in-process product calls and the ranks they spawn:
    CUDA_VISIBLE_DEVICES="" (torch counts GPUs through NVML, honouring it, until CUDA is initialised here)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(autouse=True)
def _gpu_world(request):
    """cli_env's world for this test: the machine's GPUs for a gpu-marked test, none for every other."""
    _GPU_TEST["on"] = request.node.get_closest_marker("gpu") is not None
    yield
    _GPU_TEST["on"] = False


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing holds, for a process the test starts to bind later. Drawn below the kernel's ephemeral range:
    a port the kernel hands out for a bind to 0 is also the next outgoing connection's, and in a two-lane run another
    test's client took one such port between the draw and the child's bind (CI: "Address already in use")."""
    import random
    import socket

    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    top = max(min(low, 29000), 12000)  # and below 29500-29516, the ports the README's and docs' examples name
    for _ in range(500):
        port = random.randrange(10000, top)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # every draw held: the kernel's choice, racy as it is
        s.bind((host, 0))
        return s.getsockname()[1]


def run_cli(*args, env=None, timeout=120, cwd=None):
    """`python -m ncclcheck ARGS` from this checkout; returns CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True, text=True,
                          env=cli_env(env), timeout=timeout, cwd=cwd or REPO)


@pytest.fixture
def validate_report():
    jsonschema = pytest.importorskip("jsonschema")
    from ncclcheck.render.json import load_schema

    validator = jsonschema.Draft202012Validator(load_schema())

    def check(doc):
        if isinstance(doc, str):
            doc = json.loads(doc)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        assert not errors, "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
        return doc

    return check


COLLECTED_FILES = pytest.StashKey[set]()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    """Tiers are markers: a slow file says `pytestmark = pytest.mark.slow` itself; tests/lab (root and network
    namespaces, left where it is) is marked `lab` here, so `pytest -m "not slow and not lab"` is the fast tier.

    Lanes (CI's `pytest -n 2 --dist loadgroup`, pytest-xdist): every lab test shares one lane, one after another
    (the labs' namespaces, Slurm's ports and the machine's nftables are one per machine); every other file is a
    group of its own (its module fixtures are built once). The lab lane is the longest, so a worker lists it first
    and it starts first; every worker sorts alike, as xdist requires."""
    lab = f"{os.sep}tests{os.sep}lab{os.sep}"
    # every file collected, before any -m / -k deselection (pytest's own hook runs after this one): what
    # tests/test_tooling.py's collection check reads instead of collecting the whole suite a second time
    config.stash[COLLECTED_FILES] = {str(item.path) for item in items}
    for item in items:
        in_lab = lab in str(item.fspath)
        if in_lab:
            item.add_marker(pytest.mark.lab)
        item.add_marker(pytest.mark.xdist_group("lab" if in_lab else item.nodeid.split("::", 1)[0]))
    if hasattr(config, "workerinput"):  # an xdist worker: the controller schedules groups in this order
        items.sort(key=lambda it: lab not in str(it.fspath))  # stable: files keep their order within a lane
_ALLOWED_NETS = ("127.0.0.0/8", "198.18.0.0/15", "::1/128")  # loopback and the lab's own namespaces (issue 13)


# The socket methods the guard hands allowed connects to (looked up per call, so the guard's own test can put a
# recorder here and prove the guard stops an outside address without ever sending a packet).
REAL_CONNECT: dict = {}


def _allowed(address) -> bool:
    import ipaddress

    if not isinstance(address, tuple):  # AF_UNIX paths and the like never leave the machine
        return True
    try:
        ip = ipaddress.ip_address(str(address[0]).split("%")[0])
    except ValueError:
        return False  # a name: connect() would resolve it through the machine's resolver
    return any(ip in ipaddress.ip_network(n) for n in _ALLOWED_NETS)


@pytest.fixture(autouse=True)
def _traffic_stays_on_loopback_and_the_lab(monkeypatch):
    """No test in this process connects outside 127.0.0.0/8 and the lab's 198.18.0.0/15 (the traffic rule)."""
    import socket

    REAL_CONNECT.setdefault("connect", socket.socket.connect)
    REAL_CONNECT.setdefault("connect_ex", socket.socket.connect_ex)

    def guard(address) -> None:
        if not _allowed(address):
            raise AssertionError(f"traffic rule: a test tried to connect to {address!r}")

    def connect(self, address):
        guard(address)
        return REAL_CONNECT["connect"](self, address)

    def connect_ex(self, address):
        guard(address)
        return REAL_CONNECT["connect_ex"](self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


def _local_names(path: str = "/etc/hosts") -> set:
    """Names /etc/hosts answers for (nsswitch's `files`, read before any resolver is asked): this machine's own
    hostname and localhost. Looking them up sends nothing."""
    names: set = set()
    try:
        with open(path) as f:
            for line in f:
                names.update(line.split("#", 1)[0].split()[1:])
    except OSError:
        pass
    return names


# Which resolver calls the guard wraps, with their real functions (looked up per call, like REAL_CONNECT).
REAL_RESOLVE: dict = {}


def _lookup_allowed(host) -> bool:
    import ipaddress

    h = host.decode() if isinstance(host, bytes) else host
    if h in (None, "") or h in _local_names():
        return True
    try:
        ipaddress.ip_address(str(h).split("%")[0])
        return True  # a literal address: no query
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _names_resolve_only_locally(monkeypatch):
    """No test in this process asks the machine's resolver for a name (the traffic rule): a lookup of anything but
    a literal address or a name /etc/hosts holds fails the test. Products take an injected resolver for that;
    the lab resolves its own names inside namespaces whose resolv.conf names their own loopback."""
    import socket

    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex"):
        REAL_RESOLVE.setdefault(name, getattr(socket, name))

        def guarded(host, *a, _name=name, **kw):
            if not _lookup_allowed(host):
                raise AssertionError(f"traffic rule: a test asked the machine's resolver for {host!r}")
            return REAL_RESOLVE[_name](host, *a, **kw)

        monkeypatch.setattr(socket, name, guarded)


@pytest.fixture
def fs(tmp_path, monkeypatch):
    """A fake node: sysfs and procfs trees under tmp_path that facts/ reads instead of the machine's
    (tests/fakesys.py; scenarios such as docker0_decoy or ib_port_down build on it)."""
    from tests.fakesys import FakeSys

    return FakeSys(tmp_path, monkeypatch)


def kill_job(job: subprocess.Popen) -> None:
    """SIGKILL a launched job and every process under it: torchrun starts each rank in a session of its own, so its
    process group is not the ranks' (a rank deadlocked with its DataLoader worker outlived the test and held 400 MB)."""
    import psutil

    try:
        kids = psutil.Process(job.pid).children(recursive=True)
    except psutil.Error:
        kids = []
    try:
        os.killpg(job.pid, 9)
    except ProcessLookupError:
        pass
    for k in kids:
        try:
            k.kill()
        except psutil.Error:
            pass
    job.wait(30)


_SESSION: dict = {}


def pytest_sessionfinish(session, exitstatus):
    _SESSION["status"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """End the test process with the session's own status once every report is written. Some in-process tests leave
    daemon threads inside torch's C++ (a TCPStore client waiting on a test's store), and the interpreter's shutdown
    then aborts in C++ ("terminate called without an active exception", exit 134) after every test passed: a status
    of the harness, not of a test. The product's own processes are run as subprocesses and keep their real exits."""
    if "status" in _SESSION and os.environ.get("NCCLCHECK_TEST_NORMAL_EXIT") != "1":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_SESSION["status"])
