#!/usr/bin/env bash
# perftest_pair.sh URNIC TOOL [ARGS...] - runs a perftest benchmark (ib_write_bw, ib_read_lat, ...)
# as server and client, both over urnic's library on its default device (urnic0, GID index 0);
# passes if both exit 0. Bounded in time: each side by timeout, the client retried while the
# server starts. PERFTEST_TIMEOUT (seconds, default 60) bounds each side.
set -u
urnic=$1
shift
command -v "$1" >/dev/null || { echo "SKIP: $1 not installed"; exit 77; }
limit=${PERFTEST_TIMEOUT:-60}
port=$((20000 + RANDOM % 20000))
args=("$@" -d urnic0 -x 0 -p "$port")
log=$(mktemp)
cli_log=$(mktemp)
trap 'rm -f "$log" "$cli_log"' EXIT

timeout "$limit" "$urnic" exec -- "${args[@]}" >"$log" 2>&1 &
srv=$!
sleep 0.3
cli_rc=1
for try in 1 2 3 4 5 6 7 8 9 10; do
	timeout "$limit" "$urnic" exec -- "${args[@]}" localhost >"$cli_log" 2>&1
	cli_rc=$?
	cat "$cli_log"
	# Only a client the server was not yet listening for is tried again: the server accepts one.
	[ "$cli_rc" -ne 0 ] && grep -q "^Couldn't connect to localhost" "$cli_log" &&
		kill -0 "$srv" 2>/dev/null || break
	sleep 0.3
done
# A client that never connected leaves the server waiting: end it rather than wait out its limit.
[ "$cli_rc" -ne 0 ] && kill "$srv" 2>/dev/null
wait "$srv"
srv_rc=$?
echo "--- server output:"
cat "$log"
echo "client rc=$cli_rc server rc=$srv_rc"
[ "$cli_rc" -eq 0 ] && [ "$srv_rc" -eq 0 ]
