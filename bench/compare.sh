#!/usr/bin/env bash
# compare.sh - urnic under unmodified perftest side by side with the peers a user would pick instead
# (UCX over TCP, libfabric tcp, kernel TCP) and the memcpy ceiling, on this machine, in one run.
#
# Usage:  bash bench/compare.sh [BUILD_DIR]     (BUILD_DIR default: build; urnic must be built)
#   env:  REPS=3       runs per data point; the points alternate within each rep, medians reported
#         BUDGET=900   seconds; points still pending after that are recorded as SKIPPED
#         OUT=DIR      results.tsv, raw.tsv, commands.txt, logs/, *.png (default /tmp/urnic-compare.DATE)
#         SIZES="8 4096 65536 1048576"   bandwidth sizes;  LAT_SIZES="8 4096"
# Rules (as /work/shared/bench/peers.sh): traffic to loopback only (urnic's 127.64.0.0/10, UCX/libfabric
# on lo, iperf3 on 127.0.0.1; eth0 tx packets are counted), every process under timeout(1), servers
# stopped by PID, server pinned to CPU 0 and client to CPU 1.
# Units: latency in us as each tool reports it (perftest write/send_lat and UCX: one way = RTT/2;
# ib_read_lat: the full READ round trip); bandwidth GB/s = 1e9 B/s of payload; rate Mpps. Each
# latency twice, like against like: METRIC is the typical one (perftest's t_typical, UCX's 50th
# percentile), METRIC_avg the average (perftest's t_avg, UCX's overall average, fi_pingpong's
# usec/xfer), which shows a tail the typical figure hides.
# CPU s/GiB: user+sys seconds of server and client together (GNU time on each process, so urnic's
# engine thread is included) per 2^30 payload bytes; bandwidth points only.
set -u
export LC_ALL=C
# the wire path is what this compares (UDP over loopback); bench/shm.sh measures the intra-host
# rings against UCX's shared-memory transports
export URNIC_SHM=${URNIC_SHM:-0}
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
BUDGET=${BUDGET:-900}
SIZES=${SIZES:-8 4096 65536 1048576}
LAT_SIZES=${LAT_SIZES:-8 4096}
OUT=${OUT:-/tmp/urnic-compare.$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/logs"
RAW=$OUT/raw.tsv
RES=$OUT/results.tsv
CMDS=$OUT/commands.txt
: >"$RAW"
: >"$CMDS"
T0=$(date +%s)
SRV_CPU=0
CLI_CPU=1
[ "$(nproc)" -lt 2 ] && CLI_CPU=0
PORT=$((24000 + RANDOM % 8000))
SEQ=0
TIME=/usr/bin/time

log() { echo "# $*" >&2; }
over_budget() { [ $(($(date +%s) - T0)) -gt "$BUDGET" ]; }
hsize() { case $1 in 1048576) echo 1M ;; 65536) echo 64K ;; 4096) echo 4K ;; *) echo "$1" ;; esac; }
note_cmd() { grep -qxF -- "$*" "$CMDS" 2>/dev/null || echo "$*" >>"$CMDS"; }

for t in "$URNIC" ib_write_bw ucx_perftest "$TIME" gcc; do
	command -v "$t" >/dev/null || { echo "compare.sh: $t missing (build urnic; bash scripts/deps.sh)" >&2; exit 2; }
done

nextport() {
	while :; do
		PORT=$((PORT + 1))
		ss -Hantu "sport = :$PORT" | grep -q . || break
	done
}
wait_listen() {
	local i
	for i in $(seq 60); do
		ss -Hltn "sport = :$1" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}
# srv_start TIMEOUT cmd...: background, pinned, CPU time to $SRV_CPUF; sets SRV_PID
srv_start() {
	local to=$1
	shift
	SEQ=$((SEQ + 1))
	SRV_LOG=$OUT/logs/$SEQ.srv.log
	SRV_CPUF=$OUT/logs/$SEQ.srv.cpu
	CLI_LOG=$OUT/logs/$SEQ.cli.log
	CLI_CPUF=$OUT/logs/$SEQ.cli.cpu
	echo "$*" >"$SRV_LOG"
	timeout -k 2 "$to" taskset -c $SRV_CPU $TIME -f '%U %S' -o "$SRV_CPUF" "$@" >>"$SRV_LOG" 2>&1 &
	SRV_PID=$!
}
# give the server up to $1 s to exit by itself, then stop it by its PID
srv_stop() {
	local i
	for i in $(seq $((${1:-0} * 10))); do
		kill -0 "$SRV_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill "$SRV_PID" 2>/dev/null
	wait "$SRV_PID" 2>/dev/null
	return 0
}
# cli TIMEOUT cmd...: foreground, pinned, output to $CLI_LOG, CPU time to $CLI_CPUF
cli() {
	local to=$1
	shift
	echo "$*" >"$CLI_LOG"
	timeout -k 2 "$to" taskset -c $CLI_CPU $TIME -f '%U %S' -o "$CLI_CPUF" "$@" >>"$CLI_LOG" 2>&1
}
cpu_of() { awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { s = $1 + $2 } END { printf "%.3f", s + 0 }' "$1" 2>/dev/null || echo 0; }
# raw TOOL TRANSPORT METRIC SIZE UNIT VALUE BYTES: one measurement, CPU of the last server+client
raw() {
	local v=$6
	printf '%s\n' "$v" | grep -qE '^[0-9.eE+-]+$' || v=FAILED
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$v" "$7" \
		"$(cpu_of "$SRV_CPUF")" "$(cpu_of "$CLI_CPUF")" >>"$RAW"
}
skip() { printf '%s\t%s\t%s\t%s\t%s\tSKIPPED\t0\t0\t0\n' "$@" >>"$RAW"; }

###########################################################################
# urnic: unmodified perftest under `urnic exec`, client retried while its server starts
pt_iters() {
	case $1:$2 in
	*lat:*) echo 5000 ;; *:8) echo 100000 ;; *:4096) echo 20000 ;; *:65536) echo 3000 ;; *) echo 300 ;;
	esac
}
urnic_point() { # TOOL SIZE
	local t=$1 s=$2 n try o v args
	n=$(pt_iters "$t" "$s")
	nextport
	args=(-d urnic0 -x 0 -p "$PORT" -s "$s" -n "$n" -F)
	note_cmd "server: taskset -c $SRV_CPU $URNIC exec -- $t ${args[*]/$PORT/PORT} ; client: taskset -c $CLI_CPU $URNIC exec -- $t ${args[*]/$PORT/PORT} localhost"
	srv_start 60 "$URNIC" exec -- "$t" "${args[@]}"
	sleep 0.3
	for try in 1 2 3 4 5 6 7 8 9 10; do
		# perftest's out-of-band TCP exchange goes to localhost; the RoCE traffic to the 127.64.x.y it learns
		cli 60 "$URNIC" exec -- "$t" "${args[@]}" localhost
		grep -q "^Couldn't connect" "$CLI_LOG" && kill -0 "$SRV_PID" 2>/dev/null || break
		sleep 0.3
	done
	srv_stop 5
	o=$(awk '$1 == '"$s"' && NF >= 5' "$CLI_LOG" | tail -1)
	case $t in
	*lat) # #bytes #iterations t_min t_max t_typical t_avg ...
		raw urnic perftest "${t#ib_}" "$s" us "$(echo "$o" | awk '{print $5}')" 0
		raw urnic perftest "${t#ib_}_avg" "$s" us "$(echo "$o" | awk '{print $6}')" 0 ;;
	*) # #bytes #iterations BW_peak BW_average(MiB/s) MsgRate(Mpps)
		raw urnic perftest "${t#ib_}" "$s" GB/s "$(echo "$o" | awk '{print $4 * 1048576 / 1e9}')" $((s * n))
		[ "$s" = 8 ] && [ "$t" = ib_write_bw ] &&
			raw urnic perftest write_msgrate 8 Mpps "$(echo "$o" | awk '{print $5}')" $((s * n)) ;;
	esac
}

###########################################################################
# UCX ucx_perftest over TCP (UCX_TLS=tcp, lo), iterations as peers.sh
ucx_iters() {
	case $1:$2 in
	*lat:8 | *lat:4096) echo 20000 ;; *lat:65536) echo 2000 ;; *lat:*) echo 200 ;;
	*bw:8) echo 100000 ;; *bw:4096) echo 50000 ;; *bw:65536) echo 5000 ;; *) echo 1000 ;;
	esac
}
ucx_point() { # TEST SIZE
	local t=$1 s=$2 n o
	n=$(ucx_iters "$t" "$s")
	nextport
	note_cmd "UCX_TLS=tcp UCX_NET_DEVICES=lo  server: taskset -c $SRV_CPU ucx_perftest -p PORT ; client: taskset -c $CLI_CPU ucx_perftest 127.0.0.1 -p PORT -t $t -s $s -n $n -w $((n / 10)) -f -v"
	UCX_TLS=tcp UCX_NET_DEVICES=lo srv_start 60 ucx_perftest -p "$PORT"
	wait_listen "$PORT"
	UCX_TLS=tcp UCX_NET_DEVICES=lo cli 60 ucx_perftest 127.0.0.1 -p "$PORT" -t "$t" -s "$s" -n "$n" -w $((n / 10)) -f -v
	srv_stop 3
	# CSV: iters,lat50,lat_avg,lat_overall(us),bw_avg,bw_overall(MiB/s),mr_avg,mr_overall
	o=$(grep -E '^ *[0-9]+,' "$CLI_LOG" | tail -1)
	case $t in
	*lat) raw ucx_perftest "tcp" "${t#ucp_}" "$s" us "$(echo "$o" | awk -F, '{print $2}')" 0
	      raw ucx_perftest "tcp" "${t#ucp_}_avg" "$s" us "$(echo "$o" | awk -F, '{print $4}')" 0 ;;
	*) raw ucx_perftest "tcp" "${t#ucp_}" "$s" GB/s "$(echo "$o" | awk -F, '{print $6 * 1048576 / 1e9}')" $((s * n))
	   [ "$s" = 8 ] && raw ucx_perftest "tcp" "${t#ucp_}_msgrate" 8 Mpps "$(echo "$o" | awk -F, '{print $8 / 1e6}')" $((s * n)) ;;
	esac
}

###########################################################################
# libfabric tcp provider, fi_pingpong (msg endpoint): one-way latency and ping-pong bandwidth
fi_point() { # SIZE
	local s=$1 n o
	case $s in 8 | 4096) n=10000 ;; 65536) n=2000 ;; *) n=200 ;; esac
	nextport
	note_cmd "FI_TCP_IFACE=lo  server: taskset -c $SRV_CPU fi_pingpong -p tcp -e msg -I $n -S $s -B PORT ; client: taskset -c $CLI_CPU fi_pingpong -p tcp -e msg -I $n -S $s -P PORT 127.0.0.1"
	FI_TCP_IFACE=lo srv_start 60 fi_pingpong -p tcp -e msg -I "$n" -S "$s" -B "$PORT"
	wait_listen "$PORT"
	FI_TCP_IFACE=lo cli 60 fi_pingpong -p tcp -e msg -I "$n" -S "$s" -P "$PORT" 127.0.0.1
	srv_stop 3
	# bytes #sent #ack total time MB/sec(1e6) usec/xfer(one way) Mxfers/sec
	o=$(awk 'NF == 8 && $1 != "bytes"' "$CLI_LOG" | tail -1)
	raw fi_pingpong "tcp msg" lat_avg "$s" us "$(echo "$o" | awk '{print $7}')" 0
	[ "$s" -ge 65536 ] && raw fi_pingpong "tcp msg" pingpong_bw "$s" GB/s "$(echo "$o" | awk '{print $6 / 1000}')" $((2 * s * n))
}

###########################################################################
# kernel TCP stream, iperf3 with SIZE-byte writes, a fixed 2 GiB so CPU per GiB is exact
iperf_point() { # SIZE
	local s=$1
	nextport
	note_cmd "server: taskset -c $SRV_CPU iperf3 -s -B 127.0.0.1 -p PORT -1 ; client: taskset -c $CLI_CPU iperf3 -c 127.0.0.1 -B 127.0.0.1 -p PORT -n 2G -l $s -f g   (receiver rate)"
	srv_start 60 iperf3 -s -B 127.0.0.1 -p "$PORT" -1
	wait_listen "$PORT"
	cli 60 iperf3 -c 127.0.0.1 -B 127.0.0.1 -p "$PORT" -n 2G -l "$s" -f g
	srv_stop 3
	raw iperf3 "tcp lo" stream_bw "$s" GB/s \
		"$(awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i == "Gbits/sec") print $(i - 1) / 8 }' "$CLI_LOG")" $((2 << 30))
}

memcpy_point() { # SIZE
	SRV_CPUF=/dev/null CLI_CPUF=/dev/null
	note_cmd "taskset -c $SRV_CPU $OUT/memcpy_bw $1 3   (median of 3 trials)"
	raw memcpy "1 thread" copy_bw "$1" GB/s \
		"$(timeout 60 taskset -c $SRV_CPU "$OUT/memcpy_bw" "$1" 3 | sort -g | sed -n 2p)" 0
}

###########################################################################
{
	echo "date: $(date -u +%FT%TZ)  REPS=$REPS BUDGET=$BUDGET"
	echo "kernel: $(uname -r)   cpus: $(nproc) x $(lscpu | sed -n 's/^Model name: *//p')   mem: $(free -g | awk '/Mem:/{print $2}') GiB"
	echo "urnic: $(git -C "$(build_source)" describe --always --dirty 2>/dev/null) build type $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)"
	dpkg-query -W -f='${Package} ${Version}\n' perftest ucx-utils libfabric-bin iperf3 gnuplot-nox 2>/dev/null
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
ETH_TX0=$(cat /sys/class/net/eth0/statistics/tx_packets 2>/dev/null || echo 0)
timeout 60 gcc -O2 -Wall -o "$OUT/memcpy_bw" "$ROOT/bench/memcpy_bw.c" || { echo "memcpy_bw build failed" >&2; exit 2; }
HAVE_FI=0; command -v fi_pingpong >/dev/null && HAVE_FI=1
HAVE_IPERF=0; command -v iperf3 >/dev/null && HAVE_IPERF=1

# every point, in the order one rep runs them: urnic and its peers alternate
POINTS=()
for s in $SIZES; do
	POINTS+=("urnic_point ib_write_bw $s" "ucx_point ucp_put_bw $s" "urnic_point ib_read_bw $s"
		"ucx_point tag_bw $s" "urnic_point ib_send_bw $s")
	[ "$HAVE_IPERF" = 1 ] && [ "$s" -ge 4096 ] && POINTS+=("iperf_point $s")
	[ "$HAVE_FI" = 1 ] && [ "$s" -ge 65536 ] && POINTS+=("fi_point $s")
done
for s in $LAT_SIZES; do
	POINTS+=("urnic_point ib_write_lat $s" "ucx_point ucp_am_lat $s" "urnic_point ib_read_lat $s"
		"ucx_point ucp_put_lat $s" "urnic_point ib_send_lat $s")
	[ "$HAVE_FI" = 1 ] && POINTS+=("fi_point $s")
done
for s in 65536 1048576; do POINTS+=("memcpy_point $s"); done

for r in $(seq "$REPS"); do
	for p in "${POINTS[@]}"; do
		# shellcheck disable=SC2086
		set -- $p
		if over_budget; then
			skip "${1%_point}" - "$2" "${3:-}" -
			continue
		fi
		log "rep $r/$REPS: $p"
		"$@"
	done
done
ETH_TX1=$(cat /sys/class/net/eth0/statistics/tx_packets 2>/dev/null || echo 0)
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); eth0 tx packets during the run: $((ETH_TX1 - ETH_TX0))" >>"$OUT/machine.txt"

###########################################################################
# medians: tool transport metric size unit median min max n cpu_s_per_gib(median; - if no bytes)
sort -t"$(printf '\t')" -k1,4 "$RAW" | awk -F'\t' -v OFS='\t' '
	function flush(   i, j, t, m, c) {
		if (key == "") return
		if (n == 0) { print key, unit, (bad ? bad : "FAILED"), "-", "-", 0, "-"; return }
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) {
			if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			if (cp[j] < cp[i]) { t = cp[i]; cp[i] = cp[j]; cp[j] = t } }
		m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		c = (nc == 0) ? "-" : sprintf("%.3g", (nc % 2) ? cp[(nc + 1) / 2] : (cp[nc / 2] + cp[nc / 2 + 1]) / 2)
		print key, unit, sprintf("%.4g", m), sprintf("%.4g", v[1]), sprintf("%.4g", v[n]), n, c
	}
	{ k = $1 OFS $2 OFS $3 OFS $4
	  if (k != key) { flush(); key = k; n = 0; nc = 0; bad = ""; delete v; delete cp }
	  unit = $5
	  if ($6 == "FAILED" || $6 == "SKIPPED") { bad = $6; next }
	  v[++n] = $6
	  if ($7 > 0 && $8 + $9 > 0) { cp[++nc] = ($8 + $9) / ($7 / 1073741824); if (nc > n) nc = n } }
	END { flush() }' >"$RES.tmp"
{
	printf 'tool\ttransport\tmetric\tsize\tunit\tmedian\tmin\tmax\tn\tcpu_s_per_gib\n'
	cat "$RES.tmp"
} >"$RES"
rm -f "$RES.tmp"

# the table: each urnic figure against the best peer figure of the same kind and size
TABLE=$OUT/table.txt
awk -F'\t' '
	NR == 1 { next }
	{ k = $3 SUBSEP $4; val[$1, k] = $6; cpu[$1, k] = $10; unit[$3] = $5
	  if ($1 != "urnic" && $6 ~ /^[0-9]/) { peers[++np] = $1 "|" $2 "|" $3 "|" $4 "|" $6 "|" $10 } }
	function kind(m) { return m ~ /msgrate/ ? "rate" : m ~ /lat/ ? "lat" : m ~ /copy/ ? "copy" : "bw" }
	END {
		printf "%-14s %8s %16s %10s  %-34s %6s  %-30s %s\n", "metric", "size", "urnic", "peer", "best peer", "ratio", "direction", "CPU s/GiB urnic | peer"
		n = split("write_bw read_bw send_bw write_msgrate write_lat read_lat send_lat " \
			  "write_lat_avg read_lat_avg send_lat_avg", ms, " ")
		ns = split("8 4096 65536 1048576", ss, " ")
		for (i = 1; i <= n; i++) for (j = 1; j <= ns; j++) {
			m = ms[i]; s = ss[j]; k = m SUBSEP s
			if (!(("urnic", k) in val)) continue
			kd = kind(m); best = ""; bn = ""; bc = "-"
			for (p = 1; p <= np; p++) {
				split(peers[p], f, "|")
				if (f[4] != s || kind(f[3]) != kd) continue
				if (kd == "lat" && m !~ /_avg$/ && f[3] !~ /^(am|put)_lat$/) continue
				if (kd == "lat" && m ~ /_avg$/ && f[3] !~ /^((am|put)_lat|lat)_avg$/) continue
				if (best == "" || (kd == "lat" ? f[5] + 0 < best + 0 : f[5] + 0 > best + 0)) {
					best = f[5]; bn = f[1] " " f[2] " " f[3]; bc = f[6] }
			}
			u = val["urnic", k]
			r = (best != "" && u ~ /^[0-9]/ && best + 0 > 0) ? sprintf("%.2f", u / best) : "-"
			d = kd == "lat" ? "lower is better (>1: slower)" : "higher is better (>1: faster)"
			printf "%-14s %8s %16s %10s  %-34s %6s  %-30s %s | %s\n", m, s, u " " unit[m], (best == "" ? "-" : best), bn, r, d, cpu["urnic", k], bc
		}
		for (p = 1; p <= np; p++) { split(peers[p], f, "|"); if (f[1] == "memcpy") printf "%-14s %8s %16s %10s  %-34s\n", "memcpy ceiling", f[4], "-", f[5] " GB/s", "1 thread" }
	}' "$RES" >"$TABLE"

# the targets of the issue, each against one named UCX-tcp figure
awk -F'\t' '
	NR > 1 { v[$1, $3, $4] = $6 }
	function t(name, u, p, f) {
		if (u == "" || p == "" || p !~ /^[0-9]/ || u !~ /^[0-9]/) { printf "%-44s urnic %-10s target %-10s -\n", name, u, p; return }
		printf "%-44s urnic %-10s target %-10.4g %s (urnic/target %.2f)\n", name, u, p * f, (f == 1 && name ~ /lat/ ? (u <= p ? "MET" : "not met") : (u >= p * f ? "MET" : "not met")), u / (p * f) }
	END {
		print ""; print "targets (UCX_TLS=tcp figures of this run):"
		t("8 B write_lat <= UCX am_lat (us)", v["urnic", "write_lat", 8], v["ucx_perftest", "am_lat", 8], 1)
		t("8 B send_lat <= UCX am_lat (us)", v["urnic", "send_lat", 8], v["ucx_perftest", "am_lat", 8], 1)
		t("8 B write_lat avg <= UCX am_lat avg (us)", v["urnic", "write_lat_avg", 8], v["ucx_perftest", "am_lat_avg", 8], 1)
		t("8 B send_lat avg <= UCX am_lat avg (us)", v["urnic", "send_lat_avg", 8], v["ucx_perftest", "am_lat_avg", 8], 1)
		t("1 MiB write_bw >= UCX tag_bw (GB/s)", v["urnic", "write_bw", 1048576], v["ucx_perftest", "tag_bw", 1048576], 1)
		t("1 MiB read_bw >= UCX tag_bw (GB/s)", v["urnic", "read_bw", 1048576], v["ucx_perftest", "tag_bw", 1048576], 1)
		t("1 MiB write_bw >= 1.5 x UCX put_bw (GB/s)", v["urnic", "write_bw", 1048576], v["ucx_perftest", "put_bw", 1048576], 1.5)
		t("1 MiB read_bw >= 1.5 x UCX put_bw (GB/s)", v["urnic", "read_bw", 1048576], v["ucx_perftest", "put_bw", 1048576], 1.5)
		t("8 B write rate >= UCX put rate (Mpps)", v["urnic", "write_msgrate", 8], v["ucx_perftest", "put_bw_msgrate", 8], 1)
	}' "$RES" >>"$TABLE"

# plots: bandwidth by size, latency by size
if command -v gnuplot >/dev/null; then
	series() { awk -F'\t' -v t="$1" -v m="$2" '$1 == t && $3 == m && $6 ~ /^[0-9]/ { print $4, $6 }' "$RES" | sort -n >"$OUT/$3.dat"; }
	series urnic write_bw u_write
	series urnic read_bw u_read
	series urnic send_bw u_send
	series ucx_perftest put_bw ucx_put
	series ucx_perftest tag_bw ucx_tag
	series iperf3 stream_bw tcp
	series urnic write_lat u_wlat
	series urnic read_lat u_rlat
	series urnic send_lat u_slat
	series ucx_perftest am_lat ucx_am
	series ucx_perftest put_lat ucx_putlat
	series fi_pingpong lat_avg fi_lat
	plotline() { # file title...
		local f=$1
		shift
		[ -s "$OUT/$f.dat" ] && printf "'%s' using 1:2 with linespoints title '%s', " "$OUT/$f.dat" "$*"
	}
	{
		echo "set terminal png size 800,500 noenhanced; set output '$OUT/bandwidth.png'; set logscale x 2; set logscale y"
		echo "set xlabel 'message size (bytes)'; set ylabel 'GB/s (1e9 B/s)'; set key left top; set grid"
		echo "set title 'bandwidth by size, loopback, server CPU 0 / client CPU 1'"
		echo "plot $(plotline u_write urnic WRITE)$(plotline u_read urnic READ)$(plotline u_send urnic SEND)$(plotline ucx_put UCX tcp put_bw)$(plotline ucx_tag UCX tcp tag_bw)$(plotline tcp kernel TCP iperf3)" | sed 's/, $//'
		echo "set output '$OUT/latency.png'; set ylabel 'us (perftest/UCX/fi: one way; READ: round trip)'; set title 'latency by size (typical; libfabric: average)'"
		echo "plot $(plotline u_wlat urnic WRITE)$(plotline u_rlat urnic READ rtt)$(plotline u_slat urnic SEND)$(plotline ucx_am UCX tcp am_lat)$(plotline ucx_putlat UCX tcp put_lat)$(plotline fi_lat libfabric tcp avg)" | sed 's/, $//'
	} >"$OUT/plot.gp"
	timeout 60 gnuplot "$OUT/plot.gp" 2>"$OUT/logs/gnuplot.log" || log "gnuplot failed: $OUT/logs/gnuplot.log"
fi

echo
echo "== urnic vs peers  ($(date -u +%FT%TZ), REPS=$REPS, $(($(date +%s) - T0)) s, out: $OUT)"
cat "$TABLE"
echo
cat "$OUT/machine.txt"
