#!/usr/bin/env bash
# pair.sh URNIC TOOL [ARGS...] - runs an unmodified rdma-core tool as server and client, both
# over urnic's library on the default device; passes if both exit 0. Bounded in time.
set -u
urnic=$1
shift
command -v "$1" >/dev/null || { echo "SKIP: $1 not installed"; exit 77; }
port=$((20000 + RANDOM % 20000))
log=$(mktemp)
trap 'rm -f "$log"' EXIT
timeout 60 "$urnic" exec -- "$@" -p "$port" >"$log" 2>&1 &
srv=$!
sleep 0.3
cli_rc=1
for try in 1 2 3 4 5 6 7 8 9 10; do # the server may still be starting
	timeout 60 "$urnic" exec -- "$@" -p "$port" localhost && { cli_rc=0; break; }
	cli_rc=$?
	kill -0 "$srv" 2>/dev/null || break
	sleep 0.3
done
wait "$srv"
srv_rc=$?
echo "--- server output:"
cat "$log"
echo "client rc=$cli_rc server rc=$srv_rc"
[ "$cli_rc" -eq 0 ] && [ "$srv_rc" -eq 0 ]
