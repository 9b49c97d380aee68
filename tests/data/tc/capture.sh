#!/bin/sh
# How tests/data/tc/*.json were made: a 3-host netlab lab on this machine, shaped as the lab tests shape hosts,
# then `tc -j qdisc show dev eth0` (and `tc -j class show dev eth0`) read inside each host's namespace.
# Run as root from the repository root: sh tests/data/tc/capture.sh
set -eu
NAME=tccap
OUT=tests/data/tc
scripts/netlab --name $NAME up 3 --scenario "slow-link h1 100mbit" --scenario "slow-pair h2 h3 50mbit" \
  --scenario "slow-link h3 1gbit" --scenario "slow-pair h3 h1 200mbit" >/dev/null
trap 'scripts/netlab --name $NAME down >/dev/null' EXIT
x() { scripts/netlab --name $NAME exec "$1" -- tc -j "$2" show dev eth0; }
x h1 qdisc > $OUT/tbf_100mbit.qdisc.json           # tbf rate 100mbit on eth0
x h2 qdisc > $OUT/htb_pair_default0.qdisc.json     # htb default 0 + one 50mbit class for traffic to h3 only
x h2 class > $OUT/htb_pair_default0.class.json
x h3 qdisc > $OUT/htb_link_and_pair.qdisc.json     # htb default 10 (1gbit link class) + a 200mbit class to h1
x h3 class > $OUT/htb_link_and_pair.class.json
scripts/netlab --name $NAME scenario healthy >/dev/null 2>&1 || true
x h2 qdisc > $OUT/unshaped_veth.qdisc.json         # what an unshaped veth shows (noqueue / default qdisc)
