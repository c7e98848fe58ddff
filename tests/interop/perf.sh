#!/usr/bin/env bash
# perf.sh - rxe and urnic side by side on the same guest CPU: two qemu guests of the interop image
# (tests/interop/vm.sh), unmodified perftest between them, once over the kernel's rdma_rxe and once
# over urnic's libibverbs.so.1 copied into the guests, alternating, medians.
#
# Usage (from the repo root, as root):  bash tests/interop/perf.sh BUILD_DIR
#   env: REPS=3, URNIC_IX_KEEP=1 (leave the guests up), OUT=DIR (logs; default /tmp/urnic-ixperf.DATE)
# Exit: 0 with the table printed; 77 the machine cannot run the guests; 1 a run failed.
# Each guest is one TCG vCPU (KVM is not used, see vm.sh): the figures are what that CPU allows each
# stack, not what either does on real hardware. rxe and urnic cannot share a guest's UDP port 4791, so
# rdma_rxe is loaded only for the rxe runs. Both stacks get the same perftest arguments, the port's
# active MTU (4096 on the 9000-byte link), and -u 18 (a 1 s ACK timeout: a TCG guest stalls).
set -uo pipefail
export LC_ALL=C

HERE=$(cd "$(dirname "$0")" && pwd)
VM=$HERE/vm.sh
NET=${URNIC_IX_NET:-10.77.91}
export URNIC_IX_NET=$NET
REPS=${REPS:-3}
OUT=${OUT:-/tmp/urnic-ixperf.$(date +%Y%m%d-%H%M%S)}
LINK_MTU=${URNIC_IX_LINK_MTU:-9000}
G0=$NET.2 G1=$NET.3 # client guest 0, server guest 1
PORT=18900

say() { printf '[%s] %s\n' "$(date +%T)" "$*"; }
die() { echo "perf.sh: FAIL: $*" >&2; exit 1; }
vm() { bash "$VM" "$@"; }

[ $# -eq 1 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
LIB=$BUILD/lib/libibverbs.so.1
[ -e "$LIB" ] || die "$LIB missing: build first"
[ "$(id -u)" -eq 0 ] || { echo "perf.sh: SKIP: needs root" >&2; exit 77; }
mkdir -p "$OUT" /run/urnic-interop
exec 8>/run/urnic-interop/run.lock
flock -n 8 || die "another interop run holds /run/urnic-interop/run.lock"

bash "$HERE/image.sh" || exit $?
[ "${URNIC_IX_KEEP:-0}" = 1 ] || vm down >/dev/null 2>&1
trap '[ "${URNIC_IX_KEEP:-0}" = 1 ] || vm down >/dev/null 2>&1' EXIT
vm up 2 8>&- || exit $?

# urnic's library into both guests, where its own libibverbs stays untouched
for i in 0 1; do
	# gzip: one argument holds at most 128 KiB
	vm exec -n "$i" -t 60 "mkdir -p /opt/urnic/lib && base64 -d <<'__LIB__' | gunzip >/opt/urnic/lib/libibverbs.so.1
$(gzip -9c "$LIB" | base64)
__LIB__
ip link set eth0 mtu $LINK_MTU" || die "cannot copy urnic into guest $i"
done

# stack_up rxe|urnic: each guest runs that stack only; for rxe, RXE_GID is rxe0's IPv4 GID index.
stack_up() {
	local i ip want
	for i in 0 1; do
		if [ "$1" = urnic ]; then
			vm exec -n "$i" -t 60 'rdma link delete rxe0 2>/dev/null; modprobe -r rdma_rxe' ||
				die "cannot unload rdma_rxe in guest $i"
			continue
		fi
		ip=$NET.$((2 + i))
		want=0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${ip//./ })
		RXE_GID=$(vm exec -n "$i" -t 60 "modprobe rdma_rxe && { rdma link show rxe0/1 >/dev/null 2>&1 ||
			rdma link add rxe0 type rxe netdev eth0; } || exit 1
			for try in \$(seq 100); do
				for g in \$(seq 0 15); do
					[ \"\$(cat /sys/class/infiniband/rxe0/ports/1/gids/\$g)\" = $want ] && { echo \$g; exit 0; }
				done
				sleep 0.1
			done; exit 1" | tail -n 1)
		[[ $RXE_GID =~ ^[0-9]+$ ]] || die "rxe0 in guest $i has no GID ::ffff:$ip"
	done
}

# side STACK GUEST_IP: how a perftest command runs on that stack in that guest
side() {
	if [ "$1" = urnic ]; then
		echo "env LD_LIBRARY_PATH=/opt/urnic/lib URNIC_ADDR=$2"
	else
		echo "env"
	fi
}
dev_args() { [ "$1" = urnic ] && echo "-x 0" || echo "-d rxe0 -x $RXE_GID"; }

# name | perftest command | size | what the figure is
TESTS=(
	"write_bw|ib_write_bw -s 65536 -n 100|65536|bw"
	"read_bw|ib_read_bw -s 65536 -n 100 -o 16|65536|bw"
	"send_bw|ib_send_bw -s 65536 -n 100|65536|bw"
	"write_lat|ib_write_lat -s 8 -n 300|8|lat"
	"read_lat|ib_read_lat -s 8 -n 300 -o 16|8|lat"
	"send_lat|ib_send_lat -s 8 -n 300|8|lat"
)

# one STACK NAME CMD SIZE KIND REP: server in guest 1, client in guest 0; the figure into raw.tsv
one() {
	local stack=$1 name=$2 cmd=$3 size=$4 kind=$5 rep=$6 log spid v
	PORT=$((PORT + 1))
	log=$OUT/$name.$stack.$rep
	vm exec -n 1 -t 150 "timeout 140 $(side "$stack" "$G1") $cmd $(dev_args "$stack") -F -u 18 -p $PORT" \
		>"$log.server" 2>&1 8>&- &
	spid=$!
	for _ in $(seq 60); do
		vm exec -n 1 -t 10 "ss -ltnH 'sport = :$PORT'" 2>/dev/null | grep . >/dev/null && break
		sleep 0.5
	done
	vm exec -n 0 -t 150 "timeout 140 $(side "$stack" "$G0") $cmd $(dev_args "$stack") -F -u 18 -p $PORT $G1" \
		>"$log.client" 2>&1 8>&-
	local crc=$?
	wait "$spid"
	local src=$?
	# perftest's result line starts with the size: BW average is field 4, t_typical field 5
	if [ "$kind" = bw ]; then
		v=$(awk -v s="$size" '$1 == s && NF >= 5 { print $4 }' "$log.client" | tail -n 1)
	else
		v=$(awk -v s="$size" '$1 == s && NF >= 6 { print $5 }' "$log.client" | tail -n 1)
	fi
	if [ $crc -ne 0 ] || [ $src -ne 0 ] || [ -z "$v" ]; then
		say "$name over $stack: FAILED (client $crc, server $src; $log.*)"
		printf '%s\t%s\tfailed\n' "$stack" "$name" >>"$OUT/raw.tsv"
		FAILED=1
		return
	fi
	say "$name over $stack: $v"
	printf '%s\t%s\t%s\n' "$stack" "$name" "$v" >>"$OUT/raw.tsv"
}

FAILED=0
: >"$OUT/raw.tsv"
for rep in $(seq "$REPS"); do
	for stack in rxe urnic; do
		stack_up "$stack"
		for t in "${TESTS[@]}"; do
			IFS='|' read -r name cmd size kind <<<"$t"
			one "$stack" "$name" "$cmd" "$size" "$kind" "$rep"
		done
	done
done

echo "# $(date -u +%FT%TZ) two TCG guests (1 vCPU each) on $(nproc) host cores; $REPS runs each, medians"
echo "# bandwidth: perftest BW average, MB/s (2^20 B/s); latency: t_typical, us (one way)"
printf '%-10s %10s %10s %10s %7s\n' test rxe urnic urnic/rxe failed
for t in "${TESTS[@]}"; do
	IFS='|' read -r name _ _ kind <<<"$t"
	awk -F'\t' -v n="$name" -v kind="$kind" '
		function median(a, k,   i, j, x) {
			for (i = 2; i <= k; i++)
				for (j = i; j > 1 && a[j - 1] > a[j]; j--) { x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
			return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
		}
		$2 == n && $3 == "failed" { failed++; next }
		$2 == n && $1 == "rxe" { r[++kr] = $3 }
		$2 == n && $1 == "urnic" { u[++ku] = $3 }
		END {
			mr = kr ? median(r, kr) : 0; mu = ku ? median(u, ku) : 0
			printf "%-10s %10.2f %10.2f %10.2f %7d\n", n, mr, mu, mr ? mu / mr : 0, failed
		}' "$OUT/raw.tsv"
done
exit $FAILED
