#!/usr/bin/env bash
# stats.sh URNIC - `urnic stats` reads the counters of a running process. Two processes play
# ibv_rc_pingpong over urnic for longer than the test asks; the tool must show the server's
# device with tx_packets above 1000 and its one QP's tx_packets between the device's and the
# device's in a second reading (the same packets, read while they move: the tool folds the
# device's counters before it reads the QPs'), give or take 1%. A device's counters are spread
# over per-thread shards of its stats file (src/common/stats.h): a reader that missed the shards
# would show 0 here. Within 1% of one reading's device figure alone failed in CI: the reader,
# descheduled between the two, saw the QP 3.7% ahead.
set -u
urnic=$1
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibv_rc_pingpong not installed"; exit 77; }
port=$((20000 + RANDOM % 20000))
out=$(mktemp)
timeout 60 "$urnic" exec -- ibv_rc_pingpong -g 0 -p "$port" -n 5000000 >/dev/null 2>&1 &
srv=$!
cli=
trap 'kill $srv $cli 2>/dev/null; rm -f "$out"' EXIT
sleep 0.3
timeout 60 "$urnic" exec -- ibv_rc_pingpong -g 0 -p "$port" -n 5000000 localhost \
	>/dev/null 2>&1 &
cli=$!
# The server's process is timeout's child (urnic exec execs the tool). Read from /proc, not with
# pgrep: pgrep hangs with the ASan runtime preloaded, as the sanitizer build runs this script.
child_of() {
	local f=/proc/$1/task/$1/children
	if [ -r "$f" ]; then
		awk '{ print $1 }' "$f"
	else
		awk -v pp="$1" '$4 == pp { print $1 }' /proc/[0-9]*/stat 2>/dev/null | head -1
	fi
}
pid=
for i in $(seq 100); do
	pid=$(child_of "$srv")
	[ -n "$pid" ] && break
	sleep 0.1
done
[ -n "$pid" ] || { echo "FAIL: no server process"; exit 1; }
# The server's tx_packets in one `urnic stats --qp`: its device's (2 spaces in), then its QP's
# (4 spaces in).
read_stats() {
	"$urnic" stats --qp >"$out" 2>&1
	awk -v pid="$pid" '
		/^[^ ]/ { mine = ($3 == pid) }
		mine && /^  tx_packets / { dev = $2 }
		mine && /^    tx_packets / { qp = $2 }
		END { print dev + 0, qp + 0 }' "$out"
}
for i in $(seq 100); do
	read -r dev qp < <(read_stats)
	[ "$dev" -gt 1000 ] && break
	kill -0 "$srv" 2>/dev/null || break
	sleep 0.2
done
read -r dev_after qp_after < <(read_stats)
echo "server pid $pid: device tx_packets $dev, QP tx_packets $qp, device again $dev_after"
if [ "$dev" -le 1000 ] || [ "$qp" -le 0 ]; then
	echo "FAIL: urnic stats did not show the server's traffic"; cat "$out"; exit 1
fi
if [ $((qp * 100)) -lt $((dev * 99)) ] || [ $((qp * 100)) -gt $((dev_after * 101)) ]; then
	echo "FAIL: the QP's tx_packets $qp is not between the device's before and after it" \
		"($dev .. $dev_after), give or take 1%"
	cat "$out"; exit 1
fi
echo "PASS"
