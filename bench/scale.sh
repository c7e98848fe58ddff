#!/usr/bin/env bash
# scale.sh - bench/scale.c over 1, 16, 256 and 1024 RC QPs on both paths (udp: the wire path over
# loopback; shm: the intra-host rings), REPS alternating runs each, medians in one table.
#
# Usage:  bash bench/scale.sh [BUILD_DIR]     (default: build; a Release build)
#   env:  REPS=3  QPS="1 16 256 1024"  PATHS="udp shm"  SECONDS_EACH=2
#         OUT=DIR (raw.tsv and logs; default /tmp/urnic-scale.DATE)
# A run that fails (an error completion, a byte wrong) is counted in the "failed" column and
# left out of the medians; its log is kept under OUT.
set -u
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
SCALE=$BUILD/bin/scale
REPS=${REPS:-3}
QPS=${QPS:-1 16 256 1024}
PATHS=${PATHS:-udp shm}
SECS=${SECONDS_EACH:-2}
OUT=${OUT:-/tmp/urnic-scale.$(date +%Y%m%d-%H%M%S)}
[ -x "$SCALE" ] || { echo "scale.sh: $SCALE is not built" >&2; exit 1; }
mkdir -p "$OUT"
RAW=$OUT/raw.tsv
: >"$RAW"

for rep in $(seq "$REPS"); do
	for n in $QPS; do
		for path in $PATHS; do
			log=$OUT/$path-$n-$rep.log
			if URNIC_TEST_PATH=$path timeout 300 "$SCALE" --qps "$n" --seconds "$SECS" >"$log" 2>&1; then
				awk -v p="$path" -F'\t' '$1 == "scale" { print p "\t" $0 }' "$log" >>"$RAW"
			else
				printf '%s\tfailed\t%s\n' "$path" "$n" >>"$RAW"
			fi
		done
	done
done

# raw.tsv: path, "scale", qps, size, depth, setup_s, qps_per_s, rss client, rss server, GB/s,
# Mpps, retransmits, rto_expiries, p50 us, p99 us, samples, requests held back by a full ring
echo "# $(date -u +%FT%TZ) $(nproc) cores; $REPS runs of ${SECS} s per point, medians; raw: $RAW"
printf '%-5s %5s %10s %14s %14s %8s %12s %9s %9s %9s %7s\n' path qps setup/s rss_cli_KiB \
	rss_srv_KiB GB/s retransmits held p50_us p99_us failed
for path in $PATHS; do
	for n in $QPS; do
		awk -F'\t' -v p="$path" -v n="$n" '
			function median(a, k,   i, j, t) {
				for (i = 2; i <= k; i++)
					for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
						t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
					}
				return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
			}
			$1 == p && $2 == "failed" && $3 == n { failed++ }
			$1 == p && $2 == "scale" && $3 == n {
				k++; setup[k] = $7; rc[k] = $8; rs[k] = $9; bw[k] = $10; rt[k] = $12
				p50[k] = $14; p99[k] = $15; held[k] = $17
			}
			END {
				if (!k) { printf "%-5s %5s %10s %14s %14s %8s %12s %9s %9s %9s %7d\n", p, n, "-", "-", "-", "-", "-", "-", "-", "-", failed; exit }
				printf "%-5s %5d %10.0f %14.1f %14.1f %8.2f %12.0f %9.0f %9.1f %9.1f %7d\n", p, n,
					median(setup, k), median(rc, k), median(rs, k), median(bw, k),
					median(rt, k), median(held, k), median(p50, k), median(p99, k), failed
			}' "$RAW"
	done
done
