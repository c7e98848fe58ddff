#!/bin/bash
# tshark_decode.sh - captures urnic-demo on lo and checks that Wireshark reads every packet as the
# RoCEv2 urnic meant, field by field, and that the ICRC of every packet recomputes.
#
# usage: tshark_decode.sh URNIC_DEMO WIRE_ICRC_CHECK
#
# The demo runs three times under URNIC_TRACE=1: the default sizes (8 B to 1 MiB: ONLY and
# FIRST/MIDDLE/LAST of every operation), 1 byte (pad count 3) and MTU + 1 (FIRST then LAST, no
# MIDDLE). Every packet either process says it sent must be captured exactly once and decoded
# with the same opcode, QP, PSN, length and AckReq (and AETH and RETH, where its trace line
# came out whole: see trace_tuples); each must carry exactly the headers its opcode calls for,
# with DF set and IP ID 0 (the ICRC covers both), UDP port 4791, an invariant CRC, and no
# malformed or expert-warning mark. wire_icrc_check recomputes the ICRC of
# each from the captured IP header, and must find the value Wireshark shows (a READ response
# sent again after the READ completed may fail it: see wire_icrc_check -r).
# UDP GSO: in its own network namespace the test turns lo's tx-udp-segmentation off, so the
# kernel cuts urnic's GSO sends into the packets a wire would carry (IP IDs 0, 1, 2, ... within
# a send) before the capture sees them; then some packet must have a nonzero ID (GSO was used),
# none an ID of 64 or more, and each ICRC must match its real ID. On the host's lo (or without
# ethtool) the demo runs with URNIC_GSO=0 and every ID must be 0. Exit 0: pass,
# 1: fail, 77: skipped. URNIC_WIRE_KEEP=1 keeps the capture and logs even when it passes.
set -euo pipefail

readonly DEMO=${1:?usage: tshark_decode.sh URNIC_DEMO WIRE_ICRC_CHECK}
readonly ICRC_CHECK=${2:?usage: tshark_decode.sh URNIC_DEMO WIRE_ICRC_CHECK}
readonly DEADLINE=55 # seconds for the whole test; ctest's TIMEOUT is the outer bound
readonly ROCE_PORT=4791
readonly PROBE='urnic-wire-probe' # from 127.0.0.1 to itself: outside urnic's 127.64.0.0/10
# what dumpcap says when it may not open lo (tshark prints "Capturing on" before that)
readonly NO_CAPTURE_RIGHTS='permission to capture|operation not permitted|capture privileges'
readonly DEMO_RUNS=("-n 2" "-n 2 -s 1" "-n 2 -s 4097")
export URNIC_SHM=0 # the wire is what is under test: no shared-memory rings between the two
# What the demo does, in BTH opcodes: SEND (no immediate), WRITE, WRITE WITH IMM and READ at
# sizes from 1 byte to 1 MiB over a 4096-byte path MTU, FETCH_ADD and CMP_SWAP, and the
# responder's ACKs, read responses and atomic ACKs. SEND_*_IMM (3, 5) and the INV sends it never
# posts.
readonly REQUIRED_OPCODES="0 1 2 4 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"

WORK=
TSHARK_PID=
FAILED=1
NETNS=
GSO_IDS=0 # IP IDs below this are a packet's place in a GSO send; 0: GSO off, every ID is 0
DROPPED=
FULL_MATCHED=0

skip() {
	echo "SKIP: $*"
	FAILED=0
	exit 77
}

die() {
	echo "FAIL: $*"
	exit 1
}

# A step's time limit: its own, cut to what is left before the deadline.
limit() {
	local left=$((DEADLINE - SECONDS))

	((left > 1)) || left=1 # runs out at once, and the step fails
	echo $(($1 < left ? $1 : left))
}

cleanup() {
	if [[ -n $TSHARK_PID ]]; then
		kill -TERM "$TSHARK_PID" 2>/dev/null || true
		wait "$TSHARK_PID" 2>/dev/null || true
	fi
	if [[ -n $WORK ]]; then
		if ((FAILED)) || [[ -n ${URNIC_WIRE_KEEP:-} ]]; then
			echo "kept for inspection: $WORK"
		else
			rm -rf "$WORK"
		fi
	fi
}
trap cleanup EXIT

probe() {
	printf '%s %s' "$PROBE" "$1" 2>/dev/null >"/dev/udp/127.0.0.1/$ROCE_PORT" || true
}

# ---- capture ----

# Where it can, the test runs in a network namespace of its own: its lo then carries the demo's
# traffic alone, whatever else runs on the host. Elsewhere, the host's lo and the demo's
# addresses pick its packets out.
# URNIC_WIRE_NETNS=host asks for the host's lo.
enter_private_netns() {
	case ${URNIC_WIRE_NETNS:-} in
	private)
		ip link set lo up || die "cannot bring lo up in the private network namespace"
		NETNS="a private network namespace"
		if ethtool -K lo tx-udp-segmentation off 2>/dev/null; then
			GSO_IDS=64 # URNIC_GSO_MAX_SEGS
			NETNS+=", GSO sends segmented before lo"
		else
			export URNIC_GSO=0
			NETNS+=" (no ethtool: GSO off)"
		fi
		return
		;;
	host) ;;
	*)
		if command -v ip >/dev/null && unshare --net true 2>/dev/null; then
			exec env URNIC_WIRE_NETNS=private timeout -k 2 "$DEADLINE" \
				unshare --net -- bash "$0" "$@"
		fi
		;;
	esac
	NETNS="the host's network namespace (GSO off)"
	export URNIC_GSO=0 # the host's lo would carry a GSO send as one frame
}

# tshark is live once a probe sent after "Capturing on" has reached the file.
start_capture() {
	local i

	# timeout forwards the TERM that stop_capture sends to tshark, which then closes the file
	timeout -k 2 "$(limit 50)" tshark -i lo -f "udp port $ROCE_PORT" -B 64 -F pcap \
		-w "$WORK/capture.pcap" >"$WORK/tshark.out" 2>"$WORK/tshark.err" &
	TSHARK_PID=$!
	for ((i = 0; i < 200; i++)); do
		[[ -e $WORK/tshark.err ]] || { sleep 0.05; continue; }
		grep -q "Capturing on" "$WORK/tshark.err" && break
		kill -0 "$TSHARK_PID" 2>/dev/null || capture_failed
		sleep 0.05
	done
	grep -q "Capturing on" "$WORK/tshark.err" || die "tshark did not start: $(tail -3 "$WORK/tshark.err")"
	wait_for_probe start 10
}

capture_failed() {
	local rc=0

	wait "$TSHARK_PID" || rc=$?
	TSHARK_PID=
	if grep -qiE "$NO_CAPTURE_RIGHTS" "$WORK/tshark.err"; then
		skip "capture on lo is not permitted: $(grep -iE -m1 "$NO_CAPTURE_RIGHTS" "$WORK/tshark.err")"
	fi
	die "tshark exited ($rc) before capturing: $(tail -3 "$WORK/tshark.err")"
}

# Sends probe $1 until it is in the capture file: then everything sent before it is there too.
wait_for_probe() {
	local tag=$1 tries=$(($2 * 10)) i

	for ((i = 0; i < tries; i++)); do
		probe "$tag"
		grep -qa "$PROBE $tag" "$WORK/capture.pcap" 2>/dev/null && return 0
		kill -0 "$TSHARK_PID" 2>/dev/null || capture_failed
		sleep 0.1
	done
	die "probe '$tag' never reached the capture file"
}

stop_capture() {
	local rc=0

	wait_for_probe end 10
	kill -TERM "$TSHARK_PID"
	wait "$TSHARK_PID" || rc=$?
	TSHARK_PID=
	((rc == 0)) || die "tshark exited with $rc: $(tail -3 "$WORK/tshark.err")"
	# lost packets of other flows do no harm; a lost demo packet shows in compare_tuples
	DROPPED=$(grep -m1 -o '[0-9]* packets dropped' "$WORK/tshark.err" || true)
}

# ---- the demo ----

run_demos() {
	local n=0 rc

	for args in "${DEMO_RUNS[@]}"; do
		n=$((n + 1))
		rc=0
		# stderr line-buffered and opened for append: each line is one atomic write, so the two
		# processes' lines do not tear into each other (one process's threads still can: see
		# trace_tuples). stdbuf preloads a library, which a sanitized build accepts only when
		# told not to insist on its runtime coming first.
		# shellcheck disable=SC2086
		URNIC_TRACE=1 ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
			timeout -k 2 "$(limit 20)" stdbuf -eL "$DEMO" $args \
			>"$WORK/demo$n.out" 2>>"$WORK/trace$n.log" || rc=$?
		if ((rc != 0)); then
			grep -v '^urnic [0-9]* [rt]x ' "$WORK/trace$n.log" | tail -5 || true
			die "urnic-demo $args exited with $rc"
		fi
		grep -q "all data checked out" "$WORK/demo$n.out" || die "urnic-demo $args: data not checked"
	done
}

# Two lists of the packets that both processes of each run say they sent, as
#   heads: src dst opcode qpn psn len ackreq
#   full:  src dst opcode qpn psn len ackreq aeth_syndrome msn reth_va reth_len
# (hex without 0x or leading zeros; "-" where the opcode has no such header). A process's own
# address is the peer the other process of its run sends to. urnic prints a trace line in
# pieces, the head first, and another thread's line can come between the pieces: every head
# is whole, so heads lists every packet; full lists those whose line came out whole.
trace_tuples() {
	local log

	: >"$WORK/trace.heads"
	: >"$WORK/trace.full"
	for log in "$WORK"/trace*.log; do
		awk -v heads="$WORK/trace.heads" -v full="$WORK/trace.full" \
			-f <(awk_common) -f <(awk_trace) "$log"
	done
}

awk_trace() {
	cat <<'EOF'
BEGIN {
	HEAD = "urnic [0-9]+ [rt]x [0-9.]+ +[A-Z_]+ +qpn [0-9a-f]+ psn [0-9a-f]+ len [0-9]+( ackreq)?"
	WHOLE = "^" HEAD "( aeth [0-9a-f]+ msn [0-9]+)?( reth va [0-9a-f]+ len [0-9]+)?( t [0-9.]+)?$"
}
{
	whole = $0 ~ WHOLE
	rest = $0
	while (match(rest, HEAD)) {
		split(substr(rest, RSTART, RLENGTH), f, " +")
		rest = substr(rest, RSTART + RLENGTH)
		if (f[3] == "tx")
			add_head(f)
	}
	if (whole && $3 == "tx")
		add_whole()
}
function add_head(f) {
	if (!(f[5] in OPC)) { print "trace: unknown opcode " f[5] > "/dev/stderr"; bad = 1 }
	if ((f[2] in peer) && peer[f[2]] != f[4]) { print "trace: pid " f[2] " sends to two peers" > "/dev/stderr"; bad = 1 }
	peer[f[2]] = f[4]
	pid[++nh] = f[2]
	head[nh] = f[4] " " OPC[f[5]] " " nhex(f[7]) " " nhex(f[9]) " " (f[11] + 0) " " (f[12] == "ackreq")
}
function add_whole(   i, syn, msn, va, rlen) {
	syn = msn = va = rlen = "-"
	for (i = 12; i <= NF; i++) {
		if ($i == "aeth") { syn = nhex($(i + 1)); msn = $(i + 3) + 0 }
		else if ($i == "reth") { va = nhex($(i + 2)); rlen = $(i + 4) + 0 }
	}
	wpid[++nw] = $2
	wtail[nw] = syn " " msn " " va " " rlen
	whead[nw] = nh # the head just added is this line's
}
END {
	np = 0
	for (p in peer) pids[++np] = p
	if (np != 2) { print "trace: " np " processes sent, expected 2" > "/dev/stderr"; exit 1 }
	src[pids[1]] = peer[pids[2]]; src[pids[2]] = peer[pids[1]]
	for (i = 1; i <= nh; i++) print src[pid[i]] " " head[i] >> heads
	for (i = 1; i <= nw; i++) print src[wpid[i]] " " head[whead[i]] " " wtail[i] >> full
	exit bad
}
EOF
}

# ---- what Wireshark reads ----

# In the order of the columns that awk_common names.
readonly FIELDS=(frame.number frame.protocols ip.src ip.dst ip.id ip.flags.df udp.srcport
	udp.dstport udp.length infiniband.bth.opcode infiniband.bth.destqp infiniband.bth.psn
	infiniband.bth.a infiniband.bth.padcnt infiniband.reth.va infiniband.reth.r_key
	infiniband.reth.dmalen infiniband.aeth.syndrome infiniband.aeth.msn infiniband.atomiceth.swapdt
	infiniband.atomiceth.cmpdt infiniband.atomicacketh.origremdt infiniband.immdt
	infiniband.invariant.crc _ws.malformed _ws.expert.severity _ws.expert.message)

# The protocols that Wireshark guesses from an InfiniBand payload (RPC-over-RDMA, NVMe, SMB
# Direct, iSER...) are switched off: in the demo's random data a guess can end the dissection
# with an exception before Wireshark reaches the ICRC. The RoCEv2 framing, not a guess at what it
# carries, is under test. ethertype stays: Ethernet itself needs it.
decode_capture() {
	local args=() guessers

	for f in "${FIELDS[@]}"; do
		args+=(-e "$f")
	done
	guessers=$(tshark -G heuristic-decodes 2>/dev/null | awk -F '\t' '
		$1 == "infiniband.payload" && $2 != "ethertype" && $2 !~ /^infiniband/ { print $2 }')
	for p in $guessers; do
		args+=(--disable-protocol "$p")
	done
	timeout -k 2 "$(limit 20)" tshark -n -r "$WORK/capture.pcap" -T fields -E occurrence=a \
		-E aggregator=, "${args[@]}" >"$WORK/fields.tsv" 2>"$WORK/tshark-read.err" ||
		die "tshark -r failed: $(tail -3 "$WORK/tshark-read.err")"
}

# Shared by the awk programs: opcode names and numbers, the headers each opcode carries (IBTA
# vol. 1 ch. 9), the column of each field of FIELDS, hex normalisation.
awk_common() {
	cat <<'EOF'
function nhex(s) { s = tolower(s); sub(/^0x/, "", s); sub(/^0+/, "", s); return s == "" ? "0" : s }
function hexval(s,   v, i) { s = nhex(s); v = 0; for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
function set(dst, list,   n, i, v) { n = split(list, v, " "); for (i = 1; i <= n; i++) dst[v[i]] = 1 }
BEGIN {
	NOPS = split("SEND_FIRST SEND_MIDDLE SEND_LAST SEND_LAST_IMM SEND_ONLY SEND_ONLY_IMM " \
		  "WRITE_FIRST WRITE_MIDDLE WRITE_LAST WRITE_LAST_IMM WRITE_ONLY WRITE_ONLY_IMM " \
		  "READ_REQUEST READ_RESP_FIRST READ_RESP_MIDDLE READ_RESP_LAST READ_RESP_ONLY " \
		  "ACK ATOMIC_ACK CMP_SWAP FETCH_ADD", _names, " ")
	for (i = 1; i <= NOPS; i++) { NAME[i - 1] = _names[i]; OPC["RC_" _names[i]] = i - 1 }
	set(RETH, "6 10 11 12"); set(AETH, "13 15 16 17 18"); set(ATOMIC, "19 20")
	set(ATOMICACK, "18"); set(IMM, "3 5 9 11")
	# bytes of BTH and extension headers before the payload, by opcode
	split("12 12 12 16 12 16 28 12 12 16 28 32 28 16 12 16 16 16 24 40 40", _hdr, " ")
	for (i = 1; i <= NOPS; i++) HDR[i - 1] = _hdr[i]
	nc = split("frame protocols src dst ip_id df sport dport udp_len op qpn psn a pad va rkey " \
		   "dmalen syn msn swap cmp orig imm icrc malformed severity expert", _cols, " ")
	for (i = 1; i <= nc; i++) C[_cols[i]] = i
	WARNING = 6291456 # PI_WARN: expert severities from here up fail
	MAX_SHOWN = 20    # failures printed
}
EOF
}

# Lists the packets between the demo's addresses as trace_tuples does, and checks each against
# the headers its opcode calls for. Probes and other flows are counted.
check_decode() {
	awk -F '\t' -v addrs="$1" -v required="$REQUIRED_OPCODES" -v port="$ROCE_PORT" \
		-v summary="$WORK/summary.txt" -v icrcs="$WORK/icrc.tshark" -v gso_ids="$GSO_IDS" \
		-v heads="$WORK/capture.heads" -v full="$WORK/capture.full" \
		-f <(awk_common) -f <(awk_decode) "$WORK/fields.tsv"
}

awk_decode() {
	cat <<'EOF'
function bad(why) {
	if (++fails <= MAX_SHOWN) printf "FAIL frame %s: %s\n", $C["frame"], why > "/dev/stderr"
}
function has(f) { return $C[f] != "" }
function want(f, yes, what) {
	if (yes && !has(f)) bad(what " missing (" f ") on " NAME[op])
	if (!yes && has(f)) bad(what " present (" f ") on " NAME[op])
}
BEGIN { n = split(addrs, a, " "); for (i = 1; i <= n; i++) DEMO[a[i]] = 1 }
{
	if (!(($C["src"] in DEMO) && ($C["dst"] in DEMO))) {
		if ($C["src"] == "127.0.0.1" && $C["dst"] == "127.0.0.1") probes++; else other++
		next
	}
	frames++
	op = $C["op"]
	if ($C["protocols"] !~ /:udp:infiniband(:|$)/) bad("not decoded as InfiniBand: " $C["protocols"])
	if (has("malformed")) bad("malformed: " $C["malformed"])
	ns = split($C["severity"], sev, ",")
	for (i = 1; i <= ns; i++) if (sev[i] + 0 >= WARNING) bad("expert: " $C["expert"])
	if ($C["dport"] != port) bad("UDP destination port " $C["dport"])
	if ($C["df"] != "1") bad("IPv4 DF not set")
	id = hexval($C["ip_id"])
	if (id != 0 && id >= gso_ids) bad("IPv4 ID " $C["ip_id"])
	if (id) segments++
	if (!has("icrc")) bad("no invariant CRC")
	if (!(op in NAME)) { bad("opcode '" op "' is not an RC opcode"); next }
	want("va", (op in RETH) || (op in ATOMIC), "RETH/AtomicETH virtual address")
	want("rkey", (op in RETH) || (op in ATOMIC), "RETH/AtomicETH R_Key")
	want("dmalen", op in RETH, "RETH DMA length")
	want("syn", op in AETH, "AETH syndrome")
	want("msn", op in AETH, "AETH MSN")
	want("swap", op in ATOMIC, "AtomicETH swap/add data")
	want("cmp", op in ATOMIC, "AtomicETH compare data")
	want("orig", op in ATOMICACK, "AtomicAckETH original remote data")
	want("imm", op in IMM, "ImmDt")
	len = $C["udp_len"] - 8
	payload = len - HDR[op] - 4 - $C["pad"]
	if (payload < 0 || (payload + $C["pad"]) % 4)
		bad("length " len " with pad count " $C["pad"] " does not fit " NAME[op])
	if ((op == 10 || op == 11) && payload != $C["dmalen"])
		bad("payload of " payload " bytes but DMA length " $C["dmalen"])
	count[op]++; pads[$C["pad"]]++
	h = $C["src"] " " $C["dst"] " " op " " nhex($C["qpn"]) " " sprintf("%x", $C["psn"]) " " \
	    len " " $C["a"]
	print h > heads
	print h " " ((op in AETH) ? sprintf("%x", $C["syn"]) " " ($C["msn"] + 0) : "- -") " " \
	      ((op in RETH) ? nhex($C["va"]) " " ($C["dmalen"] + 0) : "- -") > full
	print $C["frame"] " " nhex($C["icrc"]) > icrcs
}
END {
	nr = split(required, req, " ")
	for (i = 1; i <= nr; i++)
		if (!(req[i] in count)) bad("no " NAME[req[i]] " packet captured")
	if (!(3 in pads)) bad("no packet with pad count 3")
	if (gso_ids && !segments) bad("no GSO segment (IP ID > 0): urnic never used GSO")
	if (fails) printf "%d failures\n", fails > "/dev/stderr"
	printf "%d frames: %d urnic-demo packets, %d probes, %d of other flows\n", NR, frames, probes, other > summary
	for (op = 0; op <= 20; op++) if (op in count) printf "  %-18s %6d\n", NAME[op], count[op] > summary
	if (gso_ids) printf "  %d packets sent as GSO segments 2 and later (IP ID 1..%d)\n", segments, gso_ids - 1 > summary
	printf "  pad counts:" > summary
	for (p = 0; p <= 3; p++) if (p in pads) printf " %d (x%d)", p, pads[p] > summary
	printf "\n" > summary
	exit fails ? 1 : 0
}
EOF
}

# Every packet sent was captured once with the same head; where the trace line is whole, the
# AETH and RETH agree too.
compare_tuples() {
	local t=$WORK/trace c=$WORK/capture

	sort "$t.heads" >"$t.heads.sorted"
	sort "$c.heads" >"$c.heads.sorted"
	if ! cmp -s "$t.heads.sorted" "$c.heads.sorted"; then
		echo "sent (<) and decoded (>): src dst opcode qpn psn len ackreq"
		diff "$t.heads.sorted" "$c.heads.sorted" | head -20 || true
		[[ -z $DROPPED ]] ||
			echo "tshark reports $DROPPED: if only lines marked < differ, the capture, not" \
				"urnic, lost them (other traffic on lo); rerun on a quiet lo"
		die "$(wc -l <"$t.heads") packets traced, $(wc -l <"$c.heads") decoded, not the same"
	fi
	sort -u "$t.full" >"$t.full.sorted"
	sort -u "$c.full" >"$c.full.sorted"
	comm -23 "$t.full.sorted" "$c.full.sorted" >"$t.full.unmatched"
	if [[ -s $t.full.unmatched ]]; then
		echo "sent but not decoded so: src dst opcode qpn psn len ackreq syndrome msn va dmalen"
		head -20 "$t.full.unmatched"
		die "AETH or RETH of $(wc -l <"$t.full.unmatched") packets decoded otherwise"
	fi
	FULL_MATCHED=$(wc -l <"$t.full")
}

# The ICRC of every demo packet recomputed from its captured IP header, and the value Wireshark
# read as the invariant CRC, frame by frame.
check_icrc() {
	local a=()

	for addr in $1; do
		a+=(-a "$addr")
	done
	if ! timeout -k 2 "$(limit 20)" "$ICRC_CHECK" -l -r "${a[@]}" "$WORK/capture.pcap" \
		>"$WORK/icrc.out"; then
		grep -v '^icrc ' "$WORK/icrc.out" | head -40 || true
		die "ICRC check failed"
	fi
	# shellcheck disable=SC2016 # an awk program
	awk -f <(awk_common) -f <(echo '$1 == "icrc" { print $2 " " nhex($3) }') "$WORK/icrc.out" |
		sort >"$WORK/icrc.helper.sorted"
	sort "$WORK/icrc.tshark" >"$WORK/icrc.tshark.sorted"
	if ! cmp -s "$WORK/icrc.helper.sorted" "$WORK/icrc.tshark.sorted"; then
		diff "$WORK/icrc.helper.sorted" "$WORK/icrc.tshark.sorted" | head -10 || true
		die "the ICRC wire_icrc_check (<) and tshark (>) read differ (frame icrc)"
	fi
	grep -v -e '^icrc ' -e '^PASS$' "$WORK/icrc.out" || true
}

main() {
	local addrs

	command -v tshark >/dev/null || skip "tshark is not installed (Debian package tshark)"
	enter_private_netns "$@"
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/urnic-wire.XXXXXX")
	start_capture
	run_demos
	stop_capture
	trace_tuples || die "cannot read the packet trace"
	addrs=$(awk '{ print $1; print $2 }' "$WORK/trace.heads" | sort -u | tr '\n' ' ')
	decode_capture
	check_decode "$addrs" || die "Wireshark does not read what urnic meant"
	compare_tuples
	check_icrc "$addrs"
	echo "tshark $(tshark --version 2>/dev/null | head -1 | awk '{ print $3 }'):" \
		"$(wc -l <"$WORK/trace.heads") packets traced, every one captured once and decoded" \
		"with its opcode, QP, PSN, length and AckReq; AETH and RETH too for the" \
		"$FULL_MATCHED whose trace line came out whole"
	echo "captured on lo in $NETNS${DROPPED:+ ($DROPPED, none from the demo)}"
	cat "$WORK/summary.txt"
	echo "PASS (${SECONDS}s)"
	FAILED=0
}

main "$@"
