#!/bin/sh
# How tests/data/tc/ingress_*.json were made: a 2-host netlab lab on this machine whose h1 limits what it RECEIVES
# as Linux does it (eth0's ingress redirected by a u32 + mirred filter to ifb0, tbf 100mbit on ifb0's egress:
# netlab's "slow-link h1 100mbit ingress"), then what facts/links.py runs inside h1's namespace.
# This kernel has no act_police (CONFIG_NET_ACT_POLICE is not set: "Failed to load TC action module"), so a
# `police` action could not be captured here.
# Run as root from the repository root: flock /tmp/ncclcheck-heavy.lock sh tests/data/tc/capture_ingress.sh
set -eu
NAME=tcing
OUT=tests/data/tc
scripts/netlab --name $NAME up 2 --scenario "slow-link h1 100mbit ingress" >/dev/null
trap 'scripts/netlab --name $NAME down >/dev/null' EXIT
x() { scripts/netlab --name $NAME exec h1 -- tc -j "$@"; }
x qdisc show dev eth0 > $OUT/ingress_ifb_100mbit.qdisc.json            # noqueue root + the ingress qdisc ffff:
x filter show dev eth0 ingress > $OUT/ingress_ifb_100mbit.filter.json  # u32 match-all, mirred redirect to ifb0
x qdisc show dev ifb0 > $OUT/ingress_ifb_100mbit.ifb0.qdisc.json       # tbf 100mbit on ifb0
