"""`ncclcheck health` on a GB200 NVL72 tray: gpu.imex judges the IMEX channel a job across trays imports GPU memory
through and the IMEX daemon's domain (facts/imex.py, checks/imex.py), whichever source read the GPUs; a node outside
a multi-node NVLink domain is not judged."""

from __future__ import annotations

import json

import pytest

from ncclcheck.facts import imex
from ncclcheck_lab import fakehw, hwcorpus
from tests.conftest import run_cli

KEYS = ("PATH", "PYTHONPATH", "NCCLCHECK_SYSFS_ROOT", "NCCLCHECK_PROCFS_ROOT", "NCCLCHECK_DEVFS_ROOT",
        "NCCLCHECK_FAKE_HW")


def health(tmp_path, spec, smi=False, extra_env=None):
    env = fakehw.install(tmp_path / "node", {**spec, "ib_ports": []}, with_pynvml=not smi)
    out = tmp_path / "h.json"
    p = run_cli("health", "--gpus", str(len(spec["gpus"])), "--dry-run", "--drain", "--node", "tray1", "--json",
                str(out), env={**{k: env[k] for k in KEYS}, **(extra_env or {})})
    doc = json.loads(out.read_text())
    return p, doc, next(c for c in doc["checks"] if c["id"] == "gpu.imex")


def tray(**imex_changes) -> dict:
    spec = hwcorpus.gb200_tray()
    spec["imex"] = {**spec["imex"], **imex_changes}
    return spec


@pytest.mark.parametrize("smi", [False, True], ids=["nvml", "nvidia-smi"])
def test_a_tray_with_its_channel_and_its_domain_up_passes(tmp_path, smi):
    p, doc, c = health(tmp_path, tray(), smi)
    assert c["status"] == "pass", c["summary"]
    assert c["summary"] == ("IMEX domain UP, 18 node(s) READY and connected; channel channel0 present, multi-node "
                            f"NVLink domain (cluster {hwcorpus.GB200_CLUSTER})")
    assert p.returncode == 0, [(x["id"], x["summary"]) for x in doc["checks"] if x["status"] == "fail"]


def test_no_channel_warns_that_nccl_goes_over_the_network_between_trays(tmp_path):
    p, _doc, c = health(tmp_path, tray(channels=None))
    assert c["status"] == "warn", c["summary"]
    assert c["summary"].startswith("no IMEX channel (/dev/nvidia-caps-imex-channels missing): NCCL cannot import the "
                                   "other trays' GPU memory and runs between trays over the network")
    assert "NVreg_CreateImexChannel0=1" in c["fix"] and "--device /dev/nvidia-caps-imex-channels/channel0" in c["fix"]
    assert p.returncode == 0


def test_no_channel_fails_where_nccl_is_told_to_use_multi_node_nvlink(tmp_path):
    p, _doc, c = health(tmp_path, tray(channels=[], major=False), extra_env={"NCCL_MNNVL_ENABLE": "1"})
    assert c["status"] == "fail" and p.returncode == 1, c["summary"]
    assert ("no IMEX channel (/dev/nvidia-caps-imex-channels empty; the driver lists none in /proc/devices): NCCL "
            "cannot import the other trays' GPU memory and fails at init (NCCL_MNNVL_ENABLE=1)") in c["summary"]


def test_a_degraded_domain_names_the_trays_not_ready(tmp_path):
    addrs = hwcorpus.GB200_TRAY_ADDRS
    states = ["READY"] * 18
    states[5] = "UNAVAILABLE"
    text = fakehw.imex_domain(addrs, states=states, links={(0, 5): "N", (5, 0): "N"}, domain="DEGRADED")
    p, _doc, c = health(tmp_path, tray(ctl=text))
    assert c["status"] == "warn" and p.returncode == 0, c["summary"]
    assert c["summary"].startswith("IMEX domain DEGRADED: node 5 (198.18.7.6) UNAVAILABLE; 2 connection(s) of the "
                                   "node matrix not Connected (17 of 18 node(s) READY)"), c["summary"]
    assert "nodes_config.cfg" in c["fix"]


def test_a_domain_down_fails(tmp_path):
    text = fakehw.imex_domain(hwcorpus.GB200_TRAY_ADDRS, states=["UNAVAILABLE"] * 18, domain="DOWN")
    p, _doc, c = health(tmp_path, tray(ctl=text))
    assert c["status"] == "fail" and p.returncode == 1, c["summary"]
    assert "IMEX domain DOWN" in c["summary"] and "(0 of 18 node(s) READY)" in c["summary"]


def test_a_daemon_nobody_could_ask_is_unmeasured_never_healthy(tmp_path):
    p, _doc, c = health(tmp_path, tray(ctl=None))
    assert c["status"] == "warn", c["summary"]
    assert "the IMEX daemon's state not measured (nvidia-imex-ctl is not installed" in c["summary"]
    p, _doc, c = health(tmp_path / "2", tray(ctl="nvidia-imex-ctl: could not connect\n", ctl_rc=1))
    assert c["status"] == "warn" and "the IMEX daemon's state not measured (" in c["summary"], c["summary"]


def test_a_node_outside_a_multi_node_nvlink_domain_is_not_judged(tmp_path):
    spec = fakehw.node_spec(gpus=8, nvswitches=4, ib_ports=0)
    for g in spec["gpus"]:
        g["fabric"] = fakehw.healthy_fabric()  # a single HGX node: clique 0 of the all-zero cluster
    _p, _doc, c = health(tmp_path, spec)
    assert c["status"] == "skip" and "no GPU in a multi-node NVLink domain" in c["summary"]


def test_the_domain_text_as_posted_for_one_node_is_read():
    text = ("Connectivity Table Legend:\nC - Connected - Ready for operation\n\n3/25/2025 10:39:43.659\nNodes:\n"
            "Node #0   - 198.18.9.48   - READY\n\n Nodes From\\To  0\n       0        C\nDomain State: UP\n")
    assert imex.parse_domain(text) == {"domain_state": "UP", "nodes": [{"index": 0, "addr": "198.18.9.48",
                                                                        "state": "READY"}],
                                       "not_connected": [], "not_connected_n": 0}
