"""health on fake nodes from real answers and staged faults, through NVML and nvidia-smi each, and on a node whose
nvidia-smi answers slowly: ncclcheck_lab/bench_hwnodes.py.

    python3 scripts/bench_hwnodes.py [--runs 3] [--smi-delay 0.3] [--gpus 8] [--only SUBSTRING] [--verbose]
"""

from _entry import run

if __name__ == "__main__":
    run("bench_hwnodes")
