#!/usr/bin/env bash
# shm.sh - urnic's intra-host path (shared-memory rings, URNIC_SHM=1) under unmodified perftest,
# 1 MiB payloads read in place (one copy) and, with URNIC_SHM_MR=0, carried in the ring (two),
# side by side with UCX's shared-memory transports (UCX_TLS=posix,cma) and single-thread memcpy,
# on this machine, in one run: the figures and targets of the intra-host issue.
#
# Usage:  bash bench/shm.sh [BUILD_DIR]     (default: build; urnic must be built)
#   env:  REPS=3 (alternating runs, medians)   OUT=DIR (raw.tsv, logs/; default /tmp/urnic-shm.DATE)
# Server pinned to CPU 0, client to CPU 1, as bench/compare.sh. perftest latencies and UCX am_lat
# are one way (RTT/2); GB/s = 1e9 B/s of payload. Each latency twice, like against like: the
# typical one (perftest's t_typical, UCX's 50th percentile) and the average (perftest's t_avg,
# UCX's overall average), which shows a tail the typical figure hides.
set -u
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# the tree the measured build was made from (another worktree, for an A/B), named in the report
build_source() {
	local s
	s=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
	echo "${s:-$ROOT}"
}
BUILD=${1:-$ROOT/build}
URNIC=$BUILD/bin/urnic
REPS=${REPS:-3}
OUT=${OUT:-/tmp/urnic-shm.$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/logs"
RAW=$OUT/raw.tsv
: >"$RAW"
PORT=$((32000 + RANDOM % 8000))
SEQ=0
[ -x "$URNIC" ] || { echo "shm.sh: $URNIC is not built" >&2; exit 1; }
timeout 60 gcc -O2 -Wall -o "$OUT/memcpy_bw" "$ROOT/bench/memcpy_bw.c" || { echo "memcpy_bw build failed" >&2; exit 2; }
timeout 60 gcc -O2 -Wall -o "$OUT/ring_copy" "$ROOT/bench/ring_copy.c" -lpthread ||
	{ echo "ring_copy build failed" >&2; exit 2; }
command -v ib_write_bw >/dev/null && command -v ucx_perftest >/dev/null ||
	{ echo "shm.sh: needs perftest and ucx-utils" >&2; exit 1; }

# run NAME SERVER_CMD... :: CLIENT_CMD...: both pinned and bounded; the client's output in $LOG
run() {
	local name=$1 srv=() pid
	shift
	while [ "$1" != :: ]; do srv+=("$1"); shift; done
	shift
	SEQ=$((SEQ + 1))
	LOG=$OUT/logs/$SEQ.$name.log
	timeout -k 2 60 taskset -c 0 "${srv[@]}" >"$OUT/logs/$SEQ.$name.srv.log" 2>&1 &
	pid=$!
	sleep 0.4
	timeout -k 2 60 taskset -c 1 "$@" >"$LOG" 2>&1
	sleep 0.3
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	PORT=$((PORT + 1))
}
record() { printf '%s\t%s\n' "$1" "${2:-FAILED}" >>"$RAW"; }

# 5000 messages, as UCX's put_bw and tag_bw below (which also warm up first): at 2000, the
# figures before 2026-12-06 21:50, the start of a run weighed more in urnic's figure than in UCX's
# MR=0: with URNIC_SHM_MR=0, payloads in the ring (two copies) instead of read in place (one)
urnic_bw() { # TOOL SIZE [MR] -> GB/s
	local a=(-d urnic0 -x 0 -F -s "$2" -n 5000 -p "$PORT") mr=${3:-1} key="urnic_${1#ib_}_$2"
	[ "$mr" = 0 ] && key=${key}_in_ring
	run "$1" env URNIC_SHM=1 URNIC_SHM_MR="$mr" "$URNIC" exec -- "$1" "${a[@]}" :: \
		env URNIC_SHM=1 URNIC_SHM_MR="$mr" "$URNIC" exec -- "$1" "${a[@]}" localhost
	record "$key" "$(awk '$1 == '"$2"' && NF >= 5 { print $4 * 1048576 / 1e9 }' "$LOG" | tail -1)"
}
urnic_lat() { # TOOL SIZE -> us (typical and average)
	local a=(-d urnic0 -x 0 -F -s "$2" -n 20000 -p "$PORT")
	run "$1" env URNIC_SHM=1 "$URNIC" exec -- "$1" "${a[@]}" :: \
		env URNIC_SHM=1 "$URNIC" exec -- "$1" "${a[@]}" localhost
	record "urnic_${1#ib_}_$2" "$(awk '$1 == '"$2"' && NF >= 5 { print $5 }' "$LOG" | tail -1)"
	record "urnic_${1#ib_}_avg_$2" "$(awk '$1 == '"$2"' && NF >= 6 { print $6 }' "$LOG" | tail -1)"
}
ucx() { # TEST SIZE ITERS -> GB/s or us
	local a=(-t "$1" -s "$2" -n "$3" -w $(($3 / 10)) -f -v)
	run "ucx_$1" env UCX_TLS=posix,cma,self UCX_NET_DEVICES=lo ucx_perftest -p "$PORT" :: \
		env UCX_TLS=posix,cma,self UCX_NET_DEVICES=lo ucx_perftest 127.0.0.1 -p "$PORT" "${a[@]}"
	local o
	o=$(grep -E '^ *[0-9]+,' "$LOG" | tail -1)
	case $1 in
	*lat) # CSV: iterations,50.0_percentile_lat,avg_lat,overall_lat,...
		record "ucx_$1_$2" "$(echo "$o" | awk -F, '{print $2}')"
		record "ucx_$1_avg_$2" "$(echo "$o" | awk -F, '{print $4}')" ;;
	*) record "ucx_$1_$2" "$(echo "$o" | awk -F, '{print $6 * 1048576 / 1e9}')" ;;
	esac
}
memcpy_point() { record "memcpy_$1" "$(timeout 60 taskset -c 0 "$OUT/memcpy_bw" "$1" 3 | sort -g | sed -n 2p)"; }
# the two-copy ring without urnic (bench/ring_copy.c): the ceiling of the rings' design here
ring_model() { record ring_model "$(timeout 60 "$OUT/ring_copy" 3 | sort -g | sed -n 2p)"; }

for rep in $(seq "$REPS"); do
	echo "# rep $rep/$REPS" >&2
	urnic_bw ib_write_bw 1048576
	ucx ucp_put_bw 1048576 5000
	urnic_bw ib_read_bw 1048576
	ucx tag_bw 1048576 5000
	memcpy_point 1048576
	urnic_bw ib_write_bw 1048576 0
	ring_model
	urnic_bw ib_read_bw 1048576 0
	urnic_lat ib_write_lat 8
	ucx ucp_am_lat 8 200000
	urnic_lat ib_send_lat 8
	ucx ucp_put_lat 8 200000
done

median() { awk -F'\t' -v k="$1" '$1 == k && $2 != "FAILED" { print $2 }' "$RAW" | sort -g |
	awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "nan" }'; }
W=$(median urnic_write_bw_1048576) R=$(median urnic_read_bw_1048576)
P=$(median ucx_ucp_put_bw_1048576) T=$(median ucx_tag_bw_1048576) M=$(median memcpy_1048576)
RM=$(median ring_model)
WI=$(median urnic_write_bw_1048576_in_ring) RI=$(median urnic_read_bw_1048576_in_ring)
WL=$(median urnic_write_lat_8) SL=$(median urnic_send_lat_8)
AL=$(median ucx_ucp_am_lat_8) PL=$(median ucx_ucp_put_lat_8)
WLA=$(median urnic_write_lat_avg_8) SLA=$(median urnic_send_lat_avg_8)
ALA=$(median ucx_ucp_am_lat_avg_8) PLA=$(median ucx_ucp_put_lat_avg_8)
{
	echo "== urnic intra-host path vs UCX posix,cma and memcpy ($(date -u +%FT%TZ), REPS=$REPS, out: $OUT)"
	printf '%-28s %10s\n' "urnic WRITE 1 MiB (GB/s)" "$W" "urnic READ 1 MiB (GB/s)" "$R" \
		"UCX put_bw 1 MiB (GB/s)" "$P" "UCX tag_bw 1 MiB (GB/s)" "$T" "memcpy 1 MiB (GB/s)" "$M" \
		"urnic WRITE, in the ring" "$WI" "urnic READ, in the ring" "$RI" \
		"two-copy ring model (GB/s)" "$RM" \
		"urnic write_lat 8 B (us)" "$WL" "urnic send_lat 8 B (us)" "$SL" \
		"UCX am_lat 8 B (us)" "$AL" "UCX put_lat 8 B (us)" "$PL" \
		"urnic write_lat 8 B avg (us)" "$WLA" "urnic send_lat 8 B avg (us)" "$SLA" \
		"UCX am_lat 8 B avg (us)" "$ALA" "UCX put_lat 8 B avg (us)" "$PLA"
	echo "targets:"
	echo "  WRITE >= 0.7 x memcpy:   $(ratio "$W" "$M") x memcpy"
	echo "  READ  >= 0.7 x memcpy:   $(ratio "$R" "$M") x memcpy"
	echo "  WRITE >= UCX put_bw:     $(ratio "$W" "$P") x"
	echo "  READ  >= UCX put_bw:     $(ratio "$R" "$P") x"
	echo "  (payloads read in place against in the ring, URNIC_SHM_MR=0: WRITE $(ratio "$W" "$WI") x, READ $(ratio "$R" "$RI") x)"
	echo "  (in the ring against the two-copy ring model: WRITE $(ratio "$WI" "$RM") x, READ $(ratio "$RI" "$RM") x; the model $(ratio "$RM" "$M") x memcpy)"
	echo "  8 B send_lat <= 1.5 x UCX am_lat:  $(ratio "$SL" "$AL") x typical, $(ratio "$SLA" "$ALA") x average"
	echo "  8 B write_lat <= 1.5 x UCX am_lat: $(ratio "$WL" "$AL") x typical, $(ratio "$WLA" "$ALA") x average"
	echo "urnic $(git -C "$(build_source)" describe --always --dirty 2>/dev/null); $(nproc) cpus; load $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/table.txt"
