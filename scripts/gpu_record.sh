#!/usr/bin/env bash
# The GPU record (docs/gpu.md): every NCCL path of ncclcheck run once on a real NVIDIA GPU, each step's command,
# exit code and output kept under OUTDIR. Run from the repository root on a machine with torch+CUDA:
#     scripts/gpu_record.sh OUTDIR
# Steps are independent and each is bounded by `timeout`, so one failure never hides the others. ONLY="a b" runs
# those steps alone (a lent GPU's calls are bounded: run the record in parts into one OUTDIR; steps.txt gathers them).
# NCCL_TESTS_SRC=DIR (an nccl-tests source tree: the lent machine reaches no network) adds bench beside nccl-tests.
set -u
out=${1:?usage: scripts/gpu_record.sh OUTDIR}
mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
summary=$out/steps.txt
[ -e "$summary" ] || : >"$summary"

step() {  # step NAME SECONDS CMD... : run CMD, keep its output in NAME.log, one line per step in steps.txt
    local name=$1 limit=$2
    shift 2
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
    local t0=$SECONDS
    echo "== $name: $*" | tee "$out/$name.log"
    timeout -k 10 "$limit" "$@" >>"$out/$name.log" 2>&1
    local rc=$?
    printf '%-14s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" "$*" | tee -a "$summary"
}

step smi 20 nvidia-smi
step versions 40 "$py" -c 'import torch, sys; print("python", sys.version.split()[0]); print("torch", torch.__version__);
print("cuda", torch.version.cuda); print("nccl", ".".join(map(str, torch.cuda.nccl.version())));
print("devices", torch.cuda.device_count(), torch.cuda.get_device_name(0))'
step env 60 "$py" -m ncclcheck env --json "$out/env.json"
step bench 120 "$py" -m ncclcheck bench --backend nccl --sizes 1K-1G --ops all --json "$out/bench.json"
step bench_inplace 120 "$py" -m ncclcheck bench --backend nccl --sizes 1K-1G --ops all --in-place --check \
    --json "$out/bench_inplace.json"
step capture 90 "$py" -m ncclcheck bench --backend nccl --sizes 1M-16M --nccl-capture --json "$out/capture.json"
step gpu_tests 150 "$py" -m pytest -q -p no:cacheprovider -m gpu -rs tests/bench/test_bench_gpu.py
# watch on a real NCCL job whose GPU is stuck before a collective; its report and dump kept under watch_gpu/
step watch_gpu 150 env GPU_CAPTURE_OUT="$out/watch_gpu" "$py" -m pytest -q -p no:cacheprovider -m gpu -rs \
    tests/live/test_watch_gpu.py
if [ -n "${NCCL_TESTS_SRC:-}" ]; then
    step vs_nccl_tests 480 "$py" scripts/bench_vs_nccl_tests.py --nccl-tests-src "$NCCL_TESTS_SRC" --sizes 1M-1G \
        --ops all_reduce,all_gather,reduce_scatter,broadcast,all_to_all --iters 50 --warmup 5 --work "$out/vs"
fi
# the real NCCL failures diagnose names (tests/postmortem/fixtures/gpu_*): nine bounded torchrun jobs
step captures 400 tests/postmortem/fixtures/gpu/make_gpu_captures.sh "$out/captures"
# NCCL's RAS client asked about that hung job (the nccl.ras check's real input)
step ras 150 tests/postmortem/fixtures/gpu/make_ras_capture.sh "$out/ras"
step links 90 "$py" -m ncclcheck links --backend nccl --nccl-capture --json "$out/links.json"
step too_big 60 "$py" -m ncclcheck bench --backend nccl --sizes 512G
step two_ranks 90 "$py" -m ncclcheck bench --backend nccl --nproc-per-node 2 --sizes 1M-4M
step fidelity 180 "$py" scripts/bench_fidelity.py --backend nccl --nranks 1 --sizes 64M,128M,256M,512M,1G \
    --iters 20 --warmup 5 --repeats 5
step preflight 90 "$py" -m ncclcheck preflight --json "$out/preflight.json"
# The GPU hardware checks (docs/hardware.md): what NVML answers to every question they ask, idle and under a matmul
# (clock-event reasons, PCIe generation), nvidia-smi's answers (the fallback's input), the kernel log's access, then
# health and preflight for real, health as a Prolog with a process holding GPU memory, and the host copies.
step nvml_idle 60 "$py" tests/data/nvml/nvml_probe.py
step nvml_load 120 "$py" tests/data/nvml/nvml_probe.py --load 10
step smi_queries 90 "$py" tests/data/nvml/nvml_probe.py --smi
step kernel_log 30 sh -c 'id -u; cat /proc/sys/kernel/dmesg_restrict; dmesg | grep -i -e xid -e nvrm | tail -20;
journalctl -k -b 0 -n 3 -o short-monotonic --no-pager'
step health 60 "$py" -m ncclcheck health --dry-run --drain --node "$(hostname)" --json "$out/health.json"
step health_prolog 120 sh -c '"$0" -c "import torch, time; x = torch.empty(4 << 30, dtype=torch.uint8, device=\"cuda\");
time.sleep(40)" & holder=$!; sleep 15; "$0" -m ncclcheck health --prolog --dry-run --drain --node "$(hostname)" \
--json "$1/health_prolog.json"; rc=$?; kill $holder; wait $holder; exit $rc' "$py" "$out"
step preflight_gpu 120 "$py" -m ncclcheck preflight --gpu --json "$out/preflight_gpu.json"
step gpu_hw_tests 150 "$py" -m pytest -q -p no:cacheprovider -m gpu -rs -s tests/steps/test_hostcopy_gpu.py
step fast_tier 150 "$py" -m pytest -q -p no:cacheprovider -m "not slow and not lab"
step slow_bench 300 "$py" -m pytest -q -p no:cacheprovider tests/bench/test_bench_gloo.py tests/agent/test_runner.py
[ -n "${ONLY:-}" ] || cat "$summary"
