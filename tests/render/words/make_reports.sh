#!/bin/sh
# How the saved reports beside this script were made: real CLI runs on one 2-core CPU machine (gloo, loopback),
# with ncclcheck at main ceae1cb (before render/words.py). Run from the repository root; root is needed for
# `unshare -u` (a UTS namespace only: the two links nodes get their own hostnames, the network stays loopback).
set -eu
out=${1:-tests/render/words}
export PYTHONPATH=$PWD

# bench-cpu-single-form.json: all_reduce (torch's single in-place form) and all_gather in and out of place, no link
# bound on one host (the caption once read "eff = busbw / bound ? GB/s"; the single form read "one", "single form
# (in place)" and "out" in three formats).
python3 -m ncclcheck bench --sizes 1M-2M --ops all_reduce,all_gather --in-place --iters 3 --warmup 1 \
    --json "$out/bench-cpu-single-form.json" >/dev/null

# links-2node-only-h1-listed.json: two nodes h1 and h2 over loopback; the report's `nodes` named node 0 only, so the
# terminal header read "[h1]" (links.hosts has both names).
a="links --nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29741 --size 1M --iters 2 --timeout 30"
unshare -u sh -c "hostname h2; python3 -m ncclcheck $a --node-rank 1" >/dev/null &
unshare -u sh -c "hostname h1; python3 -m ncclcheck $a --node-rank 0 --json $out/links-2node-only-h1-listed.json" \
    >/dev/null
wait

# preflight-2node-same-hostname.json: two preflight nodes on one machine, both called by its hostname
# (`report --format labels` printed two kubectl label lines for the one Kubernetes node).
p="preflight --nnodes 2 --master-addr 127.0.0.1 --master-port 29751 --timeout 30"
python3 -m ncclcheck $p --node-rank 1 >/dev/null &
python3 -m ncclcheck $p --node-rank 0 --json "$out/preflight-2node-same-hostname.json" >/dev/null
wait
