"""How long `ncclcheck health` takes on a fake node with every hardware source present (8 GPUs, NVSwitches, 8 IB
ports), against a node with none, with its correctness fields: ncclcheck_lab/bench_health.py.

    python3 scripts/bench_health.py [--runs 5] [--gpus 8] [--nvswitches 4] [--ib-ports 8] [--keep DIR]
"""

from _entry import run

if __name__ == "__main__":
    run("bench_health")
