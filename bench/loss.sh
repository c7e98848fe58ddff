#!/usr/bin/env bash
# loss.sh - 64 MiB RDMA WRITE and READ throughput at each loss rate, as a fraction of the
# loss-free figure measured in the same run. Loss comes from urnic's receive-side fault injector
# in both processes (URNIC_FAULT=drop=P), so both directions lose packets: requests, ACKs, NAKs
# and READ responses alike. Every byte moved is checked (bench/rc_xfer.c). Over UDP (the wire
# path) unless URNIC_TEST_PATH=shm.
#
#   bash bench/loss.sh [BUILD_DIR]      env: RATES="0 0.001 0.01 0.05 0.2" ITERS=3 SIZE=67108864
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rates=${RATES:-0 0.001 0.01 0.05 0.2}
iters=${ITERS:-3}
size=${SIZE:-67108864}
if [ ! -x "$build/bin/rc_xfer" ]; then
	cmake -S . -B "$build" -DBUILD_TESTING=ON >/dev/null
	cmake --build "$build" -j"$(nproc)" --target rc_xfer >/dev/null
fi
median() { # op rate -> MB/s
	URNIC_TEST_PATH=${URNIC_TEST_PATH:-udp} URNIC_FAULT="drop=$2,seed=11" timeout 600 "$build/bin/rc_xfer" --op "$1" --size "$size" \
		--iters "$iters" | sed -n 's/.*median \([0-9.]*\) MB\/s.*/\1/p'
}
echo "# $(date -u +%FT%TZ) $(nproc) cores; $iters runs of $size B per point, medians"
printf '%-8s %-6s %10s %10s\n' op loss MB/s fraction
for op in write read; do
	base=
	for r in $rates; do
		v=$(median "$op" "$r")
		[ -z "$base" ] && base=$v
		printf '%-8s %-6s %10s %10.2f\n' "$op" "$r" "$v" "$(awk -v v="$v" -v b="$base" 'BEGIN { print v / b }')"
	done
done
