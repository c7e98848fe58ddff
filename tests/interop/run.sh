#!/usr/bin/env bash
# run.sh - runs Debian's unmodified RDMA tools between urnic (host side of netns urnicix) and kernel rdma_rxe
# (a qemu guest on the same bridge), each pair both ways, and checks both stacks' counters.
#
# Usage (from the repo root, as root):  bash tests/interop/run.sh BUILD_DIR
# Exit: 0 every pair passed; 77 this machine cannot run the guest (message says why); 1 a pair failed.
# Each run: tshark captures the bridge to OUT/<pair>.<side>-server.pcap; both sides run under timeout and must
# exit 0; the rxe counters (rdma statistic) and urnic's (URNIC_STATS_DUMP) must show no dropped packet:
# rxe's rcvd_pkts (counted only after its header and ICRC checks) grows by exactly the number of packets urnic
# put on the wire, urnic's drop_* stay 0, and urnic's wire_icrc_check recomputes every ICRC in the capture.
# Environment: URNIC_IX_OUT (default BUILD_DIR/interop), URNIC_IX_ONLY (regex on pair names),
#   URNIC_IX_PERFTEST=0 (skip perftest pairs), URNIC_IX_TIMEOUT (seconds per run, default 120),
#   URNIC_IX_BUDGET (seconds for the whole script, default 1500), URNIC_IX_KEEP=1 (leave the guest up, reuse it),
#   URNIC_IX_TRACE=1 (URNIC_TRACE=1 on urnic's side), URNIC_IX_PCAP_KEEP_MB (a passing run's capture
#   larger than this is deleted; default 32), URNIC_IX_RESTARTS (how many times a run that a sick
#   guest failed may run again on a rebooted guest; default 1).
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
VM=$HERE/vm.sh
NET=${URNIC_IX_NET:-10.77.91}
export URNIC_IX_NET=$NET
NS=${URNIC_IX_NS:-urnicix}
export URNIC_IX_NS=$NS
HOST_IP=$NET.1
GUEST_IP=$NET.2
RUN_TIMEOUT=${URNIC_IX_TIMEOUT:-120}
BUDGET=${URNIC_IX_BUDGET:-1500}
T_START=$(date +%s)
PORT=18600 # TCP port of the tools' out-of-band exchange; one per run, so no run waits on another's TIME_WAIT

say() { printf '[%4ds] %s\n' "$(($(date +%s) - T_START))" "$*"; }
skip() { echo "run.sh: SKIP: $*" >&2; exit 77; }
die() { echo "run.sh: FAIL: $*" >&2; exit 1; }
vm() { bash "$VM" "$@"; }
nsx() { ip netns exec "$NS" "$@"; }

# ---- setup ------------------------------------------------------------------------------------------

[ $# -eq 1 ] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
URNIC=$BUILD/bin/urnic
[ -x "$URNIC" ] && [ -e "$BUILD/lib/libibverbs.so.1" ] || die "$BUILD has no bin/urnic or lib/libibverbs.so.1: build first"
OUT=${URNIC_IX_OUT:-$BUILD/interop}
[ "$(id -u)" -eq 0 ] || skip "needs root (netns, tap, qemu)"
command -v ibv_rc_pingpong >/dev/null || skip "ibv_rc_pingpong missing on the host (apt-get install ibverbs-utils)"
[ -c /dev/net/tun ] || skip "/dev/net/tun missing"
ip netns list >/dev/null 2>&1 || skip "cannot list network namespaces"
rm -rf "$OUT"
mkdir -p "$OUT" /run/urnic-interop
exec 8>/run/urnic-interop/run.lock
flock -n 8 || die "another run.sh holds /run/urnic-interop/run.lock"

BG_PIDS=()
cleanup() {
	local p
	for p in "${BG_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && stop "$p"; done
	if [ "${URNIC_IX_KEEP:-0}" != 1 ]; then vm down >/dev/null 2>&1; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t=$(date +%s)
bash "$HERE/image.sh"
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || die "image.sh failed ($rc)"
T_IMAGE=$(($(date +%s) - t))
say "image ready in ${T_IMAGE}s"

# guest_up: boots the guest (URNIC_IX_KEEP=1 also reuses one a previous URNIC_IX_KEEP=1 run left up), adds
# rxe0 on its eth0, sets RXE_GID and copies ix_verbs in. Called again when a sick guest is restarted: then
# (RXE_GID already set) it returns 1 instead of ending the script, so that the table still gets printed,
# and a machine that "cannot run the guest" (77) is a failure, not a skip.
# rxe on 6.1 lists only RoCE v2 GIDs; take the index of the IPv4-mapped one rather than assuming 1. The GID
# table fills in asynchronously after "rdma link add", so poll for it.
# ix_verbs (tests/interop/ix_verbs.c) checks every RC operation byte for byte; the guest runs the
# host's build of it, copied to the same path, over its own libibverbs and rxe.
LINK_MTU=${URNIC_IX_LINK_MTU:-9000}
IXV=$BUILD/bin/ix_verbs
[ -x "$IXV" ] || die "$IXV missing (a build with libibverbs-dev and no sanitizer makes it)"
guest_fail() {
	[ -z "${RXE_GID:-}" ] || { say "guest restart failed: $*"; return 1; }
	die "$@"
}
guest_up() {
	local t rc gid
	t=$(date +%s)
	vm up 1 8>&- # qemu outlives this script: it must not inherit the lock
	rc=$?
	[ $rc -eq 77 ] && [ -z "${RXE_GID:-}" ] && exit 77
	[ $rc -eq 0 ] || { guest_fail "guest did not boot (console: /run/urnic-interop/vm0.console)"; return; }
	t=$(($(date +%s) - t))
	T_BOOT=${T_BOOT:-$t} # the first boot's; a restart's is in its own line
	say "guest up in ${t}s"
	gid=$(vm exec -t 60 "ip link set eth0 mtu $LINK_MTU && modprobe rdma_rxe && { rdma link show rxe0/1 >/dev/null 2>&1 ||
		rdma link add rxe0 type rxe netdev eth0; } || exit 1
		want=0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${GUEST_IP//./ })
		for try in \$(seq 100); do
			for g in \$(seq 0 15); do
				[ \"\$(cat /sys/class/infiniband/rxe0/ports/1/gids/\$g)\" = \$want ] && { echo \$g; exit 0; }
			done
			sleep 0.1
		done" | tail -n 1)
	[[ $gid =~ ^[0-9]+$ ]] || { guest_fail "rxe0 in the guest has no GID ::ffff:$GUEST_IP"; return; }
	# the pairs below carry the index in their arguments: a restarted guest must give the same one
	[ -z "${RXE_GID:-}" ] || [ "$gid" = "$RXE_GID" ] ||
		{ guest_fail "the restarted guest's GID index is $gid, not $RXE_GID"; return; }
	vm exec -t 30 'uname -r; ibv_devinfo -d rxe0 | grep -E "state|mtu"' >"$OUT/guest-rxe0.txt"
	grep -q 'active_mtu:.*4096' "$OUT/guest-rxe0.txt" ||
		{ guest_fail "rxe0's active MTU is not 4096 on a $LINK_MTU-byte link: $(grep active_mtu "$OUT/guest-rxe0.txt")"; return; }
	say "guest rxe0 up, GID index $gid for ::ffff:$GUEST_IP ($(head -n 1 "$OUT/guest-rxe0.txt"))"
	vm exec -t 60 "mkdir -p '$(dirname "$IXV")' && base64 -d >'$IXV' <<'__IXV__'
$(base64 "$IXV")
__IXV__
chmod 755 '$IXV'; '$IXV' -x >/dev/null 2>&1; [ \$? = 2 ]" ||
		{ guest_fail "ix_verbs does not run in the guest"; return; }
	RXE_GID=$gid
}
[ "${URNIC_IX_KEEP:-0}" = 1 ] || vm down >/dev/null 2>&1
RXE_GID=
guest_up

PERFTEST=1
if [ "${URNIC_IX_PERFTEST:-1}" = 0 ]; then
	PERFTEST=0 PERFTEST_WHY="URNIC_IX_PERFTEST=0"
elif ! command -v ib_write_bw >/dev/null; then
	PERFTEST=0 PERFTEST_WHY="perftest not installed on the host"
# "ib_write_bw -h" exits 1 even when it works: judge by the loader's messages instead.
elif err=$(nsx env URNIC_ADDR="$HOST_IP" "$URNIC" exec -- ib_write_bw -h 2>&1 >/dev/null);
	grep -q 'symbol lookup error\|error while loading' <<<"$err"; then
	PERFTEST=0 PERFTEST_WHY="perftest does not load over urnic: $(grep -m1 -o '[^:]*error.*' <<<"$err")"
fi

# ---- the pairs --------------------------------------------------------------------------------------
# name | program and arguments both sides give | urnic's extra arguments | rxe's extra arguments
# Iteration counts are small: under TCG rxe moves about 1-2 MB/s.
# The pingpongs run with -c: each side checks every received buffer byte for byte. Their path MTU is 1024
# (their default) unless -m says otherwise; perftest takes the port's active MTU (4096) unless -m says 1024.
PP="-g 0|-d rxe0 -g $RXE_GID"
PAIRS=(
	"rc_pingpong-4k|ibv_rc_pingpong -s 4096 -n 100 -c|$PP"
	"rc_pingpong-4k-e|ibv_rc_pingpong -s 4096 -n 100 -e -c|$PP"
	"rc_pingpong-1m|ibv_rc_pingpong -s 1048576 -n 5 -c|$PP"
	"rc_pingpong-1m-e|ibv_rc_pingpong -s 1048576 -n 5 -e -c|$PP"
	"rc_pingpong-m4096|ibv_rc_pingpong -s 65536 -n 20 -m 4096 -c|$PP"
	"uc_pingpong|ibv_uc_pingpong -s 4096 -n 100 -c|$PP"
	"uc_pingpong-m4096|ibv_uc_pingpong -s 16384 -n 50 -m 4096 -c|$PP"
	"ud_pingpong|ibv_ud_pingpong -s 2048 -n 100 -c|$PP"
	"ud_pingpong-4k|ibv_ud_pingpong -s 4096 -n 100 -c|$PP"
	"ix_verbs|$IXV|$PP"
	"ix_verbs-m4096|$IXV -m 4096|$PP"
	"srq_pingpong|ibv_srq_pingpong -s 4096 -n 20 -q 16 -c|$PP|late"
	"srq_pingpong-e|ibv_srq_pingpong -s 4096 -n 20 -q 4 -e -c|$PP|late"
)
# A fifth field holds flags, comma-separated.
# "late": ibv_srq_pingpong counts its -n exchanges over all its QPs and posts a SEND
# whenever its own count is short, so each side may send up to q-1 messages more than its peer waits for.
# The peer has destroyed those QPs by then and drops them, as hardware does: urnic counts drop_unknown_qp,
# rxe does not count them in rcvd_pkts. Only for such pairs are those two figures forgiven (in any pair, see
# trailing_dup_acks for the one other drop_unknown_qp forgiven).
# perftest: -o 16 because each side sets its max_rd_atomic to the other's outstanding-reads figure; urnic's
# max_qp_rd_atom was 16 (modify_qp(RTS) failed against rxe's 128 without it), and is 128 now too: the
# pairs keep 16, so their packet counts compare with the runs before. -u 18 (1 s ACK
# timeout instead of perftest's 67 ms): a TCG guest on a busy host stalls for hundreds of milliseconds, and
# every needless go-back-N retry queues another window of duplicates in front of the slow receiver.
PT="-F -u 18"
# The fixed-size runs use path MTU 1024 (-m 1024); the -a runs (every size from 2 bytes to 8 MiB) take the
# port's 4096.
PX="-x 0|-d rxe0 -x $RXE_GID"
PERF_PAIRS=(
	"ib_write_bw|ib_write_bw -s 4096 -n 200 -m 1024 $PT|$PX"
	"ib_read_bw|ib_read_bw -s 4096 -n 200 -m 1024 -o 16 $PT|$PX"
	"ib_send_bw|ib_send_bw -s 4096 -n 200 -m 1024 $PT|$PX"
	"ib_atomic_bw|ib_atomic_bw -n 200 -m 1024 -o 16 $PT|$PX"
	"ib_write_lat|ib_write_lat -s 64 -n 200 -m 1024 $PT|$PX"
	"ib_read_lat|ib_read_lat -s 64 -n 200 -m 1024 -o 16 $PT|$PX"
	"ib_send_lat|ib_send_lat -s 64 -n 200 -m 1024 $PT|$PX"
	"ib_write_bw-a|ib_write_bw -a -n 5 $PT|$PX"
	"ib_read_bw-a|ib_read_bw -a -n 5 -o 16 $PT|$PX"
	"ib_send_bw-a|ib_send_bw -a -n 5 $PT|$PX"
	"ib_write_lat-a|ib_write_lat -a -n 5 $PT|$PX"
	"ib_read_lat-a|ib_read_lat -a -n 5 -o 16 $PT|$PX"
	"ib_send_lat-a|ib_send_lat -a -n 5 $PT|$PX"
)
# "loss=P": nftables on the bridge drops P% of the RoCE packets in each direction, at random (the host
# kernel has no netem): the bridge family's output hook takes urnic's packets after the capture saw them
# and before they reach the guest's tap, and its input hook takes rxe's before the capture and urnic see
# them. The counts then expect rxe to receive what urnic sent less what the rule dropped.
# The ACK timeout stays at 1 s (-u 18, ix_verbs' default): with 67 ms, a requester that retries a
# 64 KiB READ before the TCG guest has streamed it queues replay after replay in front of rxe's
# responder, which never catches up (seen: IBV_WC_RETRY_EXC_ERR with no response in 0.5 s).
LOSS_PAIRS=(
	"ix_verbs-loss2|$IXV|$PP|loss=2"
	"ib_write_bw-loss2|ib_write_bw -s 65536 -n 50 -m 1024 $PT|$PX|loss=2"
	"ib_read_bw-loss2|ib_read_bw -s 65536 -n 50 -m 1024 -o 16 $PT|$PX|loss=2"
)
[ $PERFTEST = 1 ] && PAIRS+=("${PERF_PAIRS[@]}")
if nsx nft list tables >/dev/null 2>&1; then
	PAIRS+=("${LOSS_PAIRS[0]}")
	[ $PERFTEST = 1 ] && PAIRS+=("${LOSS_PAIRS[@]:1}")
else
	LOSS_WHY="nft does not work in $NS (apt-get install nftables)"
fi

# loss_on PCT / loss_off: the bridge rule of a loss=PCT pair; loss_dropped: "OUT IN", the packets dropped.
loss_on() {
	nsx nft -f - <<-EOF
		table bridge urnic_ix_loss {
			chain to_guest { type filter hook output priority 0; udp dport 4791 numgen random mod 100 < $1 counter drop; }
			chain from_guest { type filter hook input priority 0; udp dport 4791 numgen random mod 100 < $1 counter drop; }
		}
	EOF
}
loss_dropped() {
	nsx nft list table bridge urnic_ix_loss | awk '/chain/ { c = $2 } /counter packets/ {
		for (i = 1; i < NF; i++) if ($i == "packets") n[c] = $(i + 1) } END { print n["to_guest"] + 0, n["from_guest"] + 0 }'
}
loss_off() { nsx nft delete table bridge urnic_ix_loss 2>/dev/null; }

# rxe0's counters as "name value" lines ("rdma statistic" prints "link rxe0/1 name value name value ..."),
# and what the guest dropped below rxe: eth0's receive drops and the UDP layer's errors.
rxe_counters() {
	vm exec -t 30 'rdma statistic show link rxe0/1
		echo "x x eth0_rx_dropped $(cat /sys/class/net/eth0/statistics/rx_dropped)"
		awk "/^Udp:/ { if (n++) print \"x x udp_InErrors\", \$4, \"udp_RcvbufErrors\", \$6 }" /proc/net/snmp' |
		awk '{ for (i = 3; i < NF; i += 2) print $i, $(i + 1) }'
}

# delta BEFORE AFTER: "name=delta" for every counter that moved.
delta() {
	awk 'NR == FNR { b[$1] = $2; next } $2 != b[$1] { printf "%s=%d\n", $1, $2 - b[$1] }' "$1" "$2"
}

# wait_listen SIDE PORT: until the side's server listens on its TCP port (30 s at most).
wait_listen() {
	for _ in $(seq 60); do
		if [ "$1" = urnic ]; then
			nsx ss -ltnH "sport = :$2" | grep . >/dev/null && return 0
		else
			vm exec -t 10 "ss -ltnH 'sport = :$2'" 2>/dev/null | grep . >/dev/null && return 0
		fi
		sleep 0.5
	done
	return 1
}

# start SIDE LOG LIMIT ARGS...: runs the tool on one side in the background; its pid in STARTED.
start() {
	local side=$1 log=$2 limit=$3
	shift 3
	if [ "$side" = urnic ]; then
		ip netns exec "$NS" timeout "$limit" env URNIC_ADDR="$HOST_IP" URNIC_STATS_DUMP=1 \
			${URNIC_IX_TRACE:+URNIC_TRACE=1} "$URNIC" exec -- "$@" >"$log" 2>&1 8>&- &
	else
		bash "$VM" exec -t "$((limit + 5))" "timeout $limit $*" >"$log" 2>&1 8>&- &
	fi
	STARTED=$!
	BG_PIDS+=("$STARTED")
}

# stop PID: SIGTERM (a background job ignores SIGINT), SIGKILL if it is still there after 10 s.
stop() {
	kill "$1" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

RESULTS=()
FAILED=0
CONSOLE=/run/urnic-interop/vm0.console
RESTARTS=0
MAX_RESTARTS=${URNIC_IX_RESTARTS:-1}

# guest_sick: prints why the guest, not the stacks, failed the last run, if it did: its virtio-net
# transmit queue stalled (the kernel's NETDEV WATCHDOG on its console since the run began; seen in CI
# under TCG, after which the guest answered nothing) or its command server no longer answers.
guest_sick() {
	local line
	line=$(tail -c "+$((CONSOLE_AT + 1))" "$CONSOLE" 2>/dev/null | grep -a -m1 'NETDEV WATCHDOG')
	if [ -n "$line" ]; then
		echo "guest console: ${line//[$'\r']/}"
	elif ! vm exec -t 20 true >/dev/null 2>&1; then
		echo "guest no longer answers on its command port"
	else
		return 1
	fi
}

# restart_guest: the sick guest's console is kept as guest-console.N.txt, then a fresh guest boots;
# false if it did not come up.
restart_guest() {
	RESTARTS=$((RESTARTS + 1))
	cp "$CONSOLE" "$OUT/guest-console.$RESTARTS.txt" 2>/dev/null
	vm down >/dev/null 2>&1
	guest_up
}

# trailing_dup_acks PCAP: how many of rxe's last packets in the capture are ACKs repeating an earlier
# ACK's QP and PSN. rxe answers each of urnic's resends (a tail-loss probe, a go-back) with such an ACK;
# when the resend was of the last packet and rxe was slow (TCG), the repeat arrives after urnic has
# completed the work request and the application has destroyed the QP, and urnic drops it as an unknown
# QP, as hardware does. Only repeats at the very end of the run count: nothing else follows them.
trailing_dup_acks() {
	tshark -r "$1" -Y "ip.src == $GUEST_IP" -T fields -e infiniband.bth.opcode \
		-e infiniband.bth.destqp -e infiniband.bth.psn 2>/dev/null |
		awk '$1 == 17 && seen[$2 " " $3]++ { tail++; next }
		     { tail = 0; if ($1 == 17) seen[$2 " " $3] = 1 }
		     END { print tail + 0 }'
}

# without_unknown_qp DROPS: the drop counters but drop_unknown_qp, space-separated.
without_unknown_qp() { tr ' ' '\n' <<<"$1" | grep -v -e '^drop_unknown_qp=' -e '^$' | tr '\n' ' '; }

# run_pair NAME TOOL URNIC_ARGS RXE_ARGS SERVER [FLAGS]: one run, server on SERVER's side, client on the other.
run_pair() {
	local name=$1 tool=$2 uargs=$3 rargs=$4 server=$5 flags=,${6:-}, client dir limit base
	local late="" loss=0 lost_out=0 lost_in=0
	[[ $flags == *,late,* ]] && late=late
	[[ $flags =~ ,loss=([0-9]+), ]] && loss=${BASH_REMATCH[1]}
	local spid cpid src crc tpid t0 why="" urnic_log pcap before after
	CONSOLE_AT=$(stat -c %s "$CONSOLE" 2>/dev/null || echo 0)
	if [ "$server" = urnic ]; then client=rxe dir="urnic-srv/rxe-cli"; else client=urnic dir="rxe-srv/urnic-cli"; fi
	base=$OUT/$name.$server-server
	pcap=$base.pcap
	limit=$(( BUDGET - ($(date +%s) - T_START) - 30 ))
	# under loss rxe's requester waits its 1 s ACK timeout for each lost tail packet (CI saw
	# ix_verbs-loss2 take 73 s of its 120): a loss pair may run twice as long
	local cap=$RUN_TIMEOUT
	[ "$loss" != 0 ] && cap=$((2 * RUN_TIMEOUT))
	[ $limit -gt "$cap" ] && limit=$cap
	if [ $limit -lt 20 ]; then
		RESULTS+=("$name|$dir|NOT RUN|-|time budget of ${BUDGET}s spent")
		VERDICT=NOTRUN
		return
	fi
	PORT=$((PORT + 1))
	say "$name $dir (port $PORT, limit ${limit}s)"
	t0=$(date +%s)

	# Started as a plain command, not through a function, so that $! is tshark itself and SIGTERM reaches it.
	# -B: a 256 MiB kernel buffer, so that the capture keeps up with a burst of 4 KiB packets while qemu and
	# urnic hold both CPUs; a capture that still dropped packets fails the run (its counts would not add up).
	ip netns exec "$NS" tshark -i ixbr0 -B 256 -f 'udp port 4791' -F pcap -w "$pcap" -q >"$base.tshark.log" 2>&1 8>&- &
	tpid=$!
	BG_PIDS+=("$tpid")
	for _ in $(seq 50); do grep -q 'Capturing on' "$base.tshark.log" && break; sleep 0.1; done
	before=$base.rxe-before
	after=$base.rxe-after
	rxe_counters >"$before"
	loss_off
	[ "$loss" = 0 ] || loss_on "$loss" || why+=" cannot install the loss rule;"

	local -A args=([urnic]="$tool $uargs -p $PORT" [rxe]="$tool $rargs -p $PORT")
	local peer_ip
	[ "$server" = urnic ] && peer_ip=$HOST_IP || peer_ip=$GUEST_IP
	start "$server" "$base.server.log" "$limit" ${args[$server]}
	spid=$STARTED
	if wait_listen "$server" "$PORT"; then
		start "$client" "$base.client.log" "$limit" ${args[$client]} "$peer_ip"
		cpid=$STARTED
		wait "$cpid"
		crc=$?
	else
		crc=-1
		why="server never listened on $PORT;"
	fi
	wait "$spid"
	src=$?
	sleep 0.5 # let the last ACK reach the capture
	if [ "$loss" != 0 ]; then
		read -r lost_out lost_in < <(loss_dropped)
		loss_off
	fi
	stop "$tpid"
	rxe_counters >"$after"

	# Figures: packets each side put on the wire, rxe's counter deltas, urnic's non-zero counters.
	local n_urnic n_rxe rxe_delta rcvd urnic_cnt drops
	n_urnic=$(tshark -r "$pcap" -Y "ip.src == $HOST_IP" -T fields -e frame.number 2>/dev/null | wc -l)
	n_rxe=$(tshark -r "$pcap" -Y "ip.src == $GUEST_IP" -T fields -e frame.number 2>/dev/null | wc -l)
	rxe_delta=$(delta "$before" "$after" | tr '\n' ' ')
	rcvd=$(sed -n 's/.*\brcvd_pkts=\([0-9]*\).*/\1/p' <<<"$rxe_delta")
	rcvd=${rcvd:-0}
	if [ "$server" = urnic ]; then urnic_log=$base.server.log; else urnic_log=$base.client.log; fi
	# perftest leaves its last line unterminated, so the dump need not start a line.
	local dump
	dump=$(grep -o 'urnic: [^ ]* (pid [0-9]*) counters:.*' "$urnic_log" | head -n 1)
	urnic_cnt=${dump#*counters:}
	drops=$(tr ' ' '\n' <<<"$urnic_cnt" | grep '^drop_' | tr '\n' ' ')
	local forgiven=""
	if [ "$late" = late ]; then
		forgiven="late: $(tr ' ' '\n' <<<"$drops" | grep '^drop_unknown_qp=' | tr '\n' ' ')"
		drops=$(without_unknown_qp "$drops")
		[ "$rcvd" -lt "$n_urnic" ] && forgiven+="rxe missed $((n_urnic - rcvd)) late packets "
		[ "$rcvd" -le "$n_urnic" ] && rcvd=$n_urnic
	fi
	local unknown dup_acks
	unknown=$(sed -n 's/.*\bdrop_unknown_qp=\([0-9]*\).*/\1/p' <<<"$drops")
	if [ -n "$unknown" ]; then
		dup_acks=$(trailing_dup_acks "$pcap")
		if [ "$unknown" -le "$dup_acks" ]; then
			forgiven+="drop_unknown_qp=$unknown: rxe's last $dup_acks packets repeat ACKs, answering resends "
			drops=$(without_unknown_qp "$drops")
		fi
	fi

	local cap_lost
	cap_lost=$(sed -n 's/.*\b\([0-9][0-9]*\) packets\{0,1\} dropped from.*/\1/p' "$base.tshark.log" | head -n 1)
	[ "${cap_lost:-0}" = 0 ] || why+=" the capture lost $cap_lost packets;"
	[ "$src" = 0 ] || why+=" server exit $src;"
	[ "$crc" = 0 ] || why+=" client exit $crc;"
	[ -n "$dump" ] || why+=" no URNIC_STATS_DUMP line;"
	[ -z "$drops" ] || why+=" urnic dropped: $drops;"
	[ "$rcvd" = $((n_urnic - lost_out)) ] ||
		why+=" rxe rcvd_pkts +$rcvd but urnic sent $n_urnic${lost_out:+ and the link dropped $lost_out};"
	local rxe_errs
	rxe_errs=$(tr ' ' '\n' <<<"$rxe_delta" | grep -vE '^(sent_pkts|rcvd_pkts|rdma_sends|rdma_recvs|ack_deferred)=|^$' | tr '\n' ' ')
	local figures="${n_urnic} urnic pkts, ${n_rxe} rxe pkts; rxe: ${rxe_errs:-no error counters}; urnic: ${drops:-no drops}"
	local retr
	retr=$(tr ' ' '\n' <<<"$urnic_cnt" | grep -E '^(retransmitted_packets|ack_timeouts|duplicate_requests|nak_)' | tr '\n' ' ')
	[ -n "$retr" ] && figures+=" ($retr)"
	[ -n "$forgiven" ] && figures+=" (forgiven: $forgiven)"
	[ "$loss" = 0 ] || figures+="; link dropped $lost_out to rxe, $lost_in to urnic ($loss% each way)"
	# Both stacks' ICRCs, recomputed from the capture by urnic's own checker when the build has it.
	if [ -x "$BUILD/bin/wire_icrc_check" ]; then
		if "$BUILD/bin/wire_icrc_check" -a "$HOST_IP" -a "$GUEST_IP" "$pcap" >"$base.icrc.log" 2>&1; then
			figures+="; pcap ICRC ok"
		else
			why+=" pcap ICRC check failed ($(grep -m1 FAIL "$base.icrc.log"));"
		fi
	fi
	local verdict=PASS mib
	[ -z "$why" ] || { verdict=FAIL figures="$why $figures"; }
	VERDICT=$verdict
	# A passing run's big capture goes: the -a runs write 100-400 MiB each.
	mib=$(($(stat -c %s "$pcap") >> 20))
	if [ $verdict = PASS ] && [ $mib -gt "${URNIC_IX_PCAP_KEEP_MB:-32}" ]; then
		rm -f "$pcap"
		figures+="; capture of $mib MiB deleted"
	fi
	RESULTS+=("$name|$dir|$verdict|$(($(date +%s) - t0))s|$figures")
	say "  $verdict $(($(date +%s) - t0))s: $figures"
}

for p in "${PAIRS[@]}"; do
	IFS='|' read -r name tool uargs rargs flags <<<"$p"
	[[ -z ${URNIC_IX_ONLY:-} || $name =~ $URNIC_IX_ONLY ]] || continue
	for server in urnic rxe; do
		run_pair "$name" "$tool" "$uargs" "$rargs" $server "$flags"
		# A run that failed because the guest fell ill runs once more on a fresh guest; the first
		# try's verdict stays in the figures, and a failure with a healthy guest is never retried.
		if [ "$VERDICT" = FAIL ] && [ $RESTARTS -lt "$MAX_RESTARTS" ] && sick=$(guest_sick); then
			say "  the guest is sick ($sick): restarting it and running the pair again"
			if ! restart_guest; then
				RESULTS[-1]+="; the guest was sick ($sick) and did not come back: no more runs"
				FAILED=1
				break 2
			fi
			first=${RESULTS[-1]}
			unset 'RESULTS[-1]'
			run_pair "$name" "$tool" "$uargs" "$rargs" $server "$flags"
			RESULTS[-1]+="; second try after a guest restart ($sick); first try: ${first#*|*|*|*|}"
		fi
		[ "$VERDICT" = PASS ] || FAILED=1
	done
done

# ---- afterwards: the guest's view of the whole session -------------------------------------------
rxe_counters >"$OUT/rxe-counters-final.txt"
vm exec -t 30 'dmesg | grep -iE "rxe|rdma|icrc" | tail -n 50' >"$OUT/guest-dmesg.txt" 2>&1
cp "$CONSOLE" "$OUT/guest-console.txt" 2>/dev/null

echo
echo "== urnic <-> rdma_rxe interop ($(head -n 1 "$OUT/guest-rxe0.txt"), logs and pcaps in $OUT) =="
printf '%-18s %-18s %-7s %-6s %s\n' PAIR DIRECTION RESULT TIME FIGURES
for r in "${RESULTS[@]}"; do
	IFS='|' read -r a b c d e <<<"$r"
	printf '%-18s %-18s %-7s %-6s %s\n' "$a" "$b" "$c" "$d" "$e"
done
[ $PERFTEST = 1 ] || echo "perftest pairs SKIPPED: $PERFTEST_WHY"
[ -z "${LOSS_WHY:-}" ] || echo "loss pairs SKIPPED: $LOSS_WHY"
echo "rxe0 counters after all runs: $(awk '{ printf "%s=%s ", $1, $2 }' "$OUT/rxe-counters-final.txt")"
grep -qi 'icrc' "$OUT/guest-dmesg.txt" && { echo "guest dmesg mentions ICRC:"; grep -i icrc "$OUT/guest-dmesg.txt"; FAILED=1; }
[ $RESTARTS = 0 ] || echo "the guest was restarted $RESTARTS time(s); the sick consoles are $OUT/guest-console.N.txt"
echo "timings: image ${T_IMAGE}s, boot ${T_BOOT}s, total $(($(date +%s) - T_START))s"
[ ${#RESULTS[@]} -gt 0 ] || die "no pair matched URNIC_IX_ONLY=${URNIC_IX_ONLY:-}"
[ $FAILED = 0 ] && echo "run.sh: all ${#RESULTS[@]} runs passed" || echo "run.sh: FAILED"
exit $FAILED
