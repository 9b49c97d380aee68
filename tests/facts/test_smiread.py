"""`nvidia-smi -q` read whole, else per GPU (facts/smiread.py): what no answer reached is `unread` (unmeasured),
never `absent` (missing); only a complete answer that leaves a GPU out makes it absent."""

from __future__ import annotations

from ncclcheck.checks import gpu as hwc
from ncclcheck.checks.local import LocalInput
from ncclcheck.facts import gpuhealth, smiq
from ncclcheck.facts.util import CommandFailed, Output, Unanswered
from ncclcheck_lab import fakehw, hwcorpus

from ..checks.hwnode import _no_pynvml, _tree


def collect(tmp_path, monkeypatch, spec, run, tree=True) -> dict:
    if tree:
        _tree(tmp_path, monkeypatch, spec)
    else:  # a container without the host's /sys: no PCI tree to name the GPUs by
        _tree(tmp_path, monkeypatch, {**spec, "gpus": []})
    monkeypatch.setattr(gpuhealth.nv_, "import_nvml", _no_pynvml)
    return gpuhealth.collect(run=run, which=lambda n: "/usr/bin/" + n if n == "nvidia-smi" else None)


def readable(gh: dict):
    return hwc.check_readable(LocalInput.of({"gpu_health": gh}, multi_node=True))


def asking(spec, log: list, q=None, per_gpu=None):
    """nvidia-smi on the fake node with `-q` (and `-q -i`) answered by q / per_gpu where given; every argv logged."""
    def run(argv, t):
        log.append(list(argv[1:]))
        if argv[1:] == ["-q"] and q is not None:
            return q(argv)
        if argv[1:3] == ["-q", "-i"] and per_gpu is not None:
            return per_gpu(argv)
        return fakehw.smi_answer(spec, argv)
    return run


def test_a_q_that_did_not_answer_leaves_every_gpu_unmeasured_not_missing(tmp_path, monkeypatch):
    spec, log = fakehw.node_spec(ib_ports=0), []

    def wedged(argv):
        raise Unanswered("nvidia-smi did not answer in 10 s: the driver may be wedged")

    gh = collect(tmp_path, monkeypatch, spec, asking(spec, log, q=wedged))
    assert gh["absent"] == [] and gh["gpus"] == []
    assert [u["bus_id"] for u in gh["unread"]] == [g["bus_id"] for g in spec["gpus"]]
    assert {u["cause"] for u in gh["unread"]} == {"unanswered"}
    assert not [a for a in log if a[:2] == ["-q", "-i"]]  # a wedged driver is not asked eight more times
    r = readable(gh)
    assert r.status.value == "skip" and "no GPU measured" in r.summary and "did not answer" in r.summary


def test_an_answer_short_of_its_attached_count_is_completed_per_gpu(tmp_path, monkeypatch):
    """A -q that ends after 6 of its "Attached GPUs : 8" (not past the cap: nvidia-smi stopped) is incomplete."""
    spec, log = fakehw.node_spec(ib_ports=0), []
    whole = fakehw.render_q(spec)[0]
    short = whole[:whole.index("GPU 0000" + spec["gpus"][6]["bus_id"].upper())]
    assert smiq.parse(short)["attached"] == 8 and len(smiq.parse(short)["gpus"]) == 6
    gh = collect(tmp_path, monkeypatch, spec, asking(spec, log, q=lambda argv: short))
    assert [g["bus_id"] for g in gh["gpus"]] == [g["bus_id"] for g in spec["gpus"]]
    assert [g["index"] for g in gh["gpus"]] == list(range(8))
    assert [a[2] for a in log if a[:2] == ["-q", "-i"]] == [g["bus_id"] for g in spec["gpus"][6:]]
    assert gh["unread"] == [] and gh["absent"] == [] and readable(gh).status.value == "pass"


def test_without_a_pci_tree_the_rest_of_the_count_is_asked_by_index(tmp_path, monkeypatch):
    spec, log = fakehw.node_spec(ib_ports=0), []
    whole = fakehw.render_q(spec)[0]
    cut = Output(whole[:whole.index("GPU 0000" + spec["gpus"][5]["bus_id"].upper()) + 300])
    cut.cut = len(whole)
    gh = collect(tmp_path, monkeypatch, spec, asking(spec, log, q=lambda argv: cut), tree=False)
    assert [a[2] for a in log if a[:2] == ["-q", "-i"]] == ["5", "6", "7"]  # GPU 5's block was cut: asked again
    assert len(gh["gpus"]) == 8 and gh["unread"] == []


def test_a_per_gpu_question_that_fails_leaves_that_gpu_unmeasured(tmp_path, monkeypatch):
    spec, log = hwcorpus.many_processes(fakehw.node_spec(ib_ports=0), range(8)), []
    capped = hwcorpus.capped(lambda argv, t: fakehw.smi_answer(spec, argv))
    target = spec["gpus"][7]["bus_id"]

    def per_gpu(argv):
        if argv[3] == target:  # not "no such GPU" (exit 6): the answer says nothing about the GPU
            raise CommandFailed("nvidia-smi exited 255: Unknown Error", "", 255)
        return capped(argv, 10)

    gh = collect(tmp_path, monkeypatch, spec, asking(spec, log, q=lambda argv: capped(argv, 10), per_gpu=per_gpu))
    assert gh["absent"] == [] and [(u["bus_id"], u["cause"], u["index"]) for u in gh["unread"]] == [
        (target, "failed", 7)]
    r = readable(gh)
    assert r.status.value == "warn" and "GPU 7 (" + target in r.summary and "exited 255" in r.summary


def test_a_gpu_the_driver_does_not_know_is_absent_from_a_complete_answer(tmp_path, monkeypatch):
    """nvidia-smi -q -i <bus id> exiting 6 ("a query to find an object was unsuccessful") is a complete answer."""
    spec = fakehw.faulty(hwcorpus.many_processes(fakehw.node_spec(ib_ports=0), range(7)), gpu=7, probe_failed=True,
                         bound=True)
    log: list = []
    gh = collect(tmp_path, monkeypatch, spec, hwcorpus.capped(asking(spec, log)))
    bus = spec["gpus"][7]["bus_id"]
    assert ["-q", "-i", bus] in log and gh["unread"] == [] and [a["bus_id"] for a in gh["absent"]] == [bus]
    assert readable(gh).status.value == "fail"
