#!/usr/bin/env bash
# lat_bands.sh - what urnic's average latency over the rings is made of: pinned ib_send_lat (or
# another perftest latency tool) pairs with -H, every sample sorted into bands, each band's share
# of the samples and of their sum. The typical figure is the median; the average is the median
# plus what the slow samples add, and this shows how few samples that takes.
#
#   bash bench/lat_bands.sh BUILD [TOOL] [ITERS] [REPS]
#     BUILD  a build directory holding bin/urnic (build-rel: Release)
#     TOOL   ib_send_lat (default) or ib_write_lat, 8-byte messages
#     ITERS  round trips per run (default 20000, as bench/shm.sh)
#     REPS   runs (default 3)
# Server on CPU 0, client on CPU 1, URNIC_SHM=1; the client's samples are counted.
set -euo pipefail

BUILD=${1:?usage: lat_bands.sh BUILD [TOOL] [ITERS] [REPS]}
TOOL=${2:-ib_send_lat}
ITERS=${3:-20000}
REPS=${4:-3}
URNIC=$BUILD/bin/urnic
[ -x "$URNIC" ] || { echo "lat_bands.sh: no $URNIC" >&2; exit 2; }
command -v "$TOOL" >/dev/null || { echo "lat_bands.sh: needs perftest ($TOOL)" >&2; exit 2; }
LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT

for rep in $(seq "$REPS"); do
	port=$((18500 + rep))
	a=(-d urnic0 -x 0 -F -s 8 -n "$ITERS" -p "$port")
	timeout -k 2 60 taskset -c 0 env URNIC_SHM=1 "$URNIC" exec -- "$TOOL" "${a[@]}" \
		>"$LOG/srv" 2>&1 &
	sleep 0.4
	timeout -k 2 60 taskset -c 1 env URNIC_SHM=1 "$URNIC" exec -- "$TOOL" "${a[@]}" -H \
		localhost >"$LOG/cli" 2>&1 || true
	wait || true
	awk -v rep="$rep" '
		$1 == 8 && NF >= 6 { typ = $5; avg = $6 }
		/^[0-9]+, [0-9.]+$/ {
			v = $2 + 0; n++; sum += v
			b = v < 1 ? 0 : v < 2 ? 1 : v < 5 ? 2 : v < 20 ? 3 : v < 100 ? 4 : 5
			cnt[b]++; part[b] += v
		}
		END {
			if (!n) { printf "rep %d: no samples\n", rep; exit }
			split("<1 1-2 2-5 5-20 20-100 >=100", name, " ")
			printf "rep %d: typical %s avg %s us |", rep, typ, avg
			for (b = 0; b < 6; b++)
				printf " %s us: %.1f%% of samples, %.0f%% of the sum;", name[b + 1],
				       100 * cnt[b] / n, 100 * part[b] / sum
			printf "\n"
		}' "$LOG/cli"
done
