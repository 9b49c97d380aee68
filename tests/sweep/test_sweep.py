"""sweep over a links result (the links job itself is links' tests' business): links asked for its scale mode,
one verdict per node, only the proven-bad node drained through a fake scontrol, hostlists written."""

from __future__ import annotations

import pytest

from ncclcheck.config import Config, LinksConfig, SlurmActionConfig, SweepConfig
from ncclcheck.health.scontrol import Scontrol
from ncclcheck.links.analyze import analyze
from ncclcheck.model import Report, WorldInfo
from ncclcheck.render.slurm import slurm_lines
from ncclcheck.sweep.run import run_sweep
from tests.slurm_fake import FakeSlurm

# What links' scale mode measured on 4 nodes with node 3 (h4) slow: the pairing (0-3, 1-2), then each member of
# the slow pair against two nodes that passed.
PAIRS = [(0, 3), (1, 2), (3, 1), (0, 2), (3, 2), (0, 1)]


def links_report(slow: int = 3, n: int = 4) -> Report:
    m = [[None] * n for _ in range(n)]
    for a, b in PAIRS:
        m[a][b] = m[b][a] = 0.02 if slow in (a, b) else 0.9
    section = analyze(m, size=1 << 20, hosts=[f"h{i + 1}" for i in range(n)]).section
    return Report(command="links", version="0", started="", world=WorldInfo(nnodes=n), links=section,
                  checks=analyze(m, size=1 << 20).checks)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    f = FakeSlurm(tmp_path)
    for k, v in f.env().items():
        if k.startswith("FAKE_SCONTROL"):
            monkeypatch.setenv(k, v)
    for k in ("SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(k, raising=False)
    return f


def sweep(fake, tmp_path, **act):
    seen = {}

    def run_links(cfg, observer=None, placement=None):
        seen["rounds"] = cfg.links.rounds
        return links_report()

    cfg = Config(command="sweep", links=LinksConfig(size=1 << 20),
                 sweep=SweepConfig(nodelist="gpu[01-04]", slurm=SlurmActionConfig(**act),
                                   good_out=str(tmp_path / "good"), bad_out=str(tmp_path / "bad")))
    rep = run_sweep(cfg, run_links, scontrol=Scontrol(binary=str(fake.bin / "scontrol"),
                                                      dry_run=act.get("dry_run", False)))
    assert seen["rounds"] == "scale"
    return rep


def test_sweep_drains_exactly_the_proven_bad_node_named_as_slurm_names_it(fake, tmp_path, validate_report):
    fake.nodes(gpu01=("ALLOCATED", None), gpu02=("ALLOCATED", None), gpu03=("ALLOCATED", None),
               gpu04=("ALLOCATED", None))
    rep = sweep(fake, tmp_path, drain=True)
    ups = fake.updates()
    assert len(ups) == 1 and ups[0][:3] == ["update", "NodeName=gpu04", "State=DRAIN"], ups
    reason = ups[0][3]
    assert reason.startswith("Reason=ncclcheck: links.slow: measured 0.02 GB/s") and "expected >= " in reason
    assert (tmp_path / "good").read_text() == "gpu[01-03]\n" and (tmp_path / "bad").read_text() == "gpu04\n"
    lines = slurm_lines(rep)
    assert lines[:4] == ["gpu01 | Healthy", "gpu02 | Healthy", "gpu03 | Healthy",
                         f"gpu04 | ERROR: {reason[len('Reason='):]}"]
    assert rep.command == "sweep" and rep.exit_code == 1
    doc = validate_report(rep.to_json())
    assert doc["sweep"]["bad"] == "gpu04" and doc["slurm"]["commands"][0].startswith(str(fake.bin / "scontrol"))


def test_sweep_leaves_an_admins_drain_and_resumes_its_own(fake, tmp_path):
    fake.nodes(gpu01=("ALLOCATED", None), gpu02=("ALLOCATED+DRAIN", "ncclcheck: links.slow: old"),
               gpu03=("ALLOCATED", None), gpu04=("ALLOCATED+DRAIN", "admin: reseat cable"))
    sweep(fake, tmp_path, drain=True)
    assert fake.updates() == [["update", "NodeName=gpu02", "State=RESUME"]]
    assert fake.node("gpu04")["Reason"] == "admin: reseat cable"


def test_sweep_dry_run_and_no_flag_change_nothing(fake, tmp_path):
    fake.nodes(gpu01=("IDLE", None), gpu02=("IDLE", None), gpu03=("IDLE", None), gpu04=("IDLE", None))
    rep = sweep(fake, tmp_path, dry_run=True)
    assert fake.updates() == [] and any("State=DRAIN" in c for c in rep.extra["slurm"]["commands"])
    sweep(fake, tmp_path)
    assert fake.updates() == [] and [c[:2] for c in fake.calls()] == [["show", "node"]]


def test_sweep_with_the_controller_down_fails_saying_nothing_was_drained(fake, tmp_path, monkeypatch):
    fake.nodes(gpu01=("IDLE", None))
    monkeypatch.setenv("FAKE_SCONTROL_MODE", "down")
    rep = sweep(fake, tmp_path, drain=True)
    act = [c for c in rep.checks if c.id == "slurm.drain"]
    assert len(act) == 1 and act[0].status.value == "fail" and "nothing drained" in act[0].summary


TIMED_OUT = "Timed out waiting 3000ms for recv operation to complete"


def partly_measured_report() -> Report:
    """Issue 32's sweep: 3 nodes, node 2 behind a link 100x slower; its pairs timed out in one direction (the other,
    into it, was measured) and links named pair errors, not a slow node."""
    m = [[None, 0.9, 0.9], [0.9, None, None], [None, None, None]]
    errors = [{"a": 0, "b": 2, "error": TIMED_OUT}, {"a": 1, "b": 2, "error": TIMED_OUT}]
    res = analyze(m, size=1 << 20, hosts=["sl0", "sl1", "sl2"], errors=errors)
    return Report(command="links", version="0", started="", world=WorldInfo(nnodes=3), links=res.section,
                  checks=res.checks)


def test_a_node_whose_pairs_could_not_be_measured_is_never_healthy_nor_in_the_good_list(fake, tmp_path,
                                                                                        validate_report):
    fake.nodes(sl0=("ALLOCATED", None), sl1=("ALLOCATED", None), sl2=("ALLOCATED", None))
    cfg = Config(command="sweep", links=LinksConfig(size=1 << 20),
                 sweep=SweepConfig(nodelist="sl[0-2]", slurm=SlurmActionConfig(drain=True),
                                   good_out=str(tmp_path / "good"), bad_out=str(tmp_path / "bad")))
    rep = run_sweep(cfg, lambda c, observer=None, placement=None: partly_measured_report(),
                    scontrol=Scontrol(binary=str(fake.bin / "scontrol")))
    lines = slurm_lines(rep)
    assert "sl2 | Healthy" not in lines and lines[:2] == ["sl0 | Healthy", "sl1 | Healthy"], lines
    assert lines[2].startswith("sl2 | UNKNOWN: not proven healthy: pair with sl0 could not be measured: Timed out")
    assert "good (sbatch -w): sl[0-1]" in lines and (tmp_path / "good").read_text() == "sl[0-1]\n"
    assert "not measured (not drained): sl2" in lines
    assert fake.updates() == []  # nothing proven bad: nothing drained
    [chk] = [c for c in rep.checks if c.id == "sweep.unmeasured"]
    assert chk.status.value == "fail" and "sl2" in chk.summary and rep.exit_code == 1
    doc = validate_report(rep.to_json())
    assert doc["sweep"]["unknown"] == "sl2" and doc["sweep"]["good"] == "sl[0-1]"


def test_a_failed_pair_between_two_nodes_measured_elsewhere_leaves_both_unknown():
    from ncclcheck.sweep.verdict import node_verdicts

    # 0-1 failed, but each measured fine with node 2: the failure is on neither alone, so neither is proven healthy
    m = [[None, None, 0.9], [None, None, 0.9], [0.9, 0.9, None]]
    sec = {"matrix_gbps": m, "errors": [{"a": 0, "b": 1, "error": "Connection reset by peer"}]}
    v = node_verdicts(sec, ["a", "b", "c"])
    assert [x.status for x in v] == ["unknown", "unknown", "healthy"], v
    # one direction only, with no error recorded: half a pair is no evidence either
    v = node_verdicts({"matrix_gbps": [[None, 0.9], [None, None]]}, ["a", "b"])
    assert [x.status for x in v] == ["unknown", "unknown"], v


def fabric_report(n: int = 4) -> Report:
    """Every host reads a 1 Gbit/s tbf, every link measured at 100 Mbit/s (the switch, no host): all pairs."""
    from ncclcheck.links import efficiency
    from ncclcheck.nccl import bounds as B

    nb = efficiency.Bounds([B.Bound(0.125, "eth0: tbf 1 Gbit/s", "socket")] * n)
    m = [[None if a == b else 0.0119 for b in range(n)] for a in range(n)]
    hosts = [f"gpu0{i + 1}" for i in range(n)]
    res = analyze(m, size=1 << 20, hosts=hosts, floors=efficiency.floors(m, nb, 0.5))
    return Report(command="links", version="0", started="", world=WorldInfo(nnodes=n), links=res.section,
                  checks=res.checks)


def test_a_fabric_far_below_its_bounds_drains_nobody_and_calls_nobody_healthy(fake, tmp_path, validate_report):
    # issue 32: every link at 10% of a trusted bound is not "Healthy"; no node is at fault either (nothing drained).
    # A warning (exit 0) rather than a failure: with no contrast anywhere, a CPU transport that cannot fill a fast NIC
    # reads the same; the good list stays empty, so no node is vouched for.
    fake.nodes(**{f"gpu0{i}": ("ALLOCATED", None) for i in range(1, 5)})
    cfg = Config(command="sweep", links=LinksConfig(size=1 << 20),
                 sweep=SweepConfig(nodelist="gpu[01-04]", slurm=SlurmActionConfig(drain=True),
                                   good_out=str(tmp_path / "good"), bad_out=str(tmp_path / "bad")))
    rep = run_sweep(cfg, lambda c, observer=None, placement=None: fabric_report(),
                    scontrol=Scontrol(binary=str(fake.bin / "scontrol")))
    assert rep.exit_code == 0 and fake.updates() == []
    [slow] = [c for c in rep.checks if c.id == "links.slow"]
    assert slow.status.value == "warn" and "fabric" in slow.summary and slow.evidence["nodes"] == [0, 1, 2, 3]
    lines = slurm_lines(rep)
    assert not any(line.endswith("| Healthy") for line in lines), lines
    assert (tmp_path / "good").read_text() == "\n"
    doc = validate_report(rep.to_json())
    assert doc["links"]["fabric_slow"] is True and doc["sweep"]["suspect"] == "gpu[01-04]"


def test_a_node_measured_only_with_slow_nodes_is_not_proven_healthy():
    from ncclcheck.sweep.verdict import node_verdicts

    # node 3 met only nodes 0 and 1, both found slow: its slow links are theirs, and nothing shows it fine
    m = [[None, 0.01, 0.01, 0.01], [0.01, None, 0.01, 0.01], [0.01, 0.01, None, None], [0.01, 0.01, None, None]]
    sec = {"matrix_gbps": m, "slow_nodes": [0, 1], "slow": []}
    v = node_verdicts(sec, ["a", "b", "c", "d"])
    assert [x.status for x in v] == ["bad", "bad", "suspect", "suspect"], v
    assert "measured only with nodes found slow (a, b)" in v[3].message


def test_with_the_controller_down_and_no_bad_node_the_drain_is_never_a_pass(fake, tmp_path, monkeypatch):
    """scontrol failed: nothing could be read or resumed. health warns there (docs/slurm.md): so does sweep."""
    monkeypatch.setenv("FAKE_SCONTROL_MODE", "down")

    def run_links(cfg, observer=None, placement=None):
        return links_report(slow=-1)

    cfg = Config(command="sweep", links=LinksConfig(size=1 << 20),
                 sweep=SweepConfig(nodelist="gpu[01-04]", slurm=SlurmActionConfig(drain=True)))
    rep = run_sweep(cfg, run_links, scontrol=Scontrol(binary=str(fake.bin / "scontrol")))
    [act] = [c for c in rep.checks if c.id == "slurm.drain"]
    assert act.status.value == "warn" and "nothing drained or resumed" in act.summary, act


def test_ranks_of_one_host_are_not_nodes(fake, tmp_path, validate_report):
    """Outside an allocation the ranks ncclcheck starts share this host: loopback between them is not a node-to-node
    link, so no node is judged, listed twice or drained, and the warning says where to run it."""
    m = [[None, 0.3], [0.3, None]]
    res = analyze(m, size=1 << 20, hosts=["vm", "vm"])
    one = Report(command="links", version="0", started="", world=WorldInfo(nnodes=1), links=res.section,
                 checks=res.checks)
    cfg = Config(command="sweep", links=LinksConfig(size=1 << 20),
                 sweep=SweepConfig(slurm=SlurmActionConfig(drain=True)))
    rep = run_sweep(cfg, lambda c, observer=None, placement=None: one,
                    scontrol=Scontrol(binary=str(fake.bin / "scontrol")))
    [chk] = [c for c in rep.checks if c.id == "sweep.unmeasured"]
    assert chk.status.value == "warn" and "loopback between ranks of one host" in chk.summary
    assert "srun --ntasks-per-node=1" in chk.fix
    assert rep.extra["sweep"]["nodes"] == [] and fake.calls() == [] and "vm | Healthy" not in slurm_lines(rep)
    validate_report(rep.to_json())
