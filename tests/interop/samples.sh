#!/usr/bin/env bash
# samples.sh - cuts small reference captures of kernel rxe's own packets out of run.sh's captures.
#
# Usage: bash tests/interop/samples.sh RUN_OUT DEST [N]
#   RUN_OUT  the directory run.sh wrote (BUILD_DIR/interop); DEST: where the samples go (tests/data)
#   N        rxe packets kept from each direction (default 12)
# For each tool it keeps the first N packets the guest (rxe) sent in both runs (rxe as client, rxe as server),
# so a sample holds rxe's requests and its responses/ACKs, with their real IP headers and ICRCs, and writes
# beside it DEST/rxe-NAME.fields: Wireshark's reading of each packet, which test_rxe_samples compares with
# urnic's.
# urnic's packets are left out: the samples are what rxe puts on the wire.
set -euo pipefail

[ $# -ge 2 ] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
OUT=$1 DEST=$2 N=${3:-12}
GUEST_IP=${URNIC_IX_NET:-10.77.91}.2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# sample NAME RUN: DEST/rxe-NAME.pcap from OUT/RUN.{urnic,rxe}-server.pcap.
sample() {
	local name=$1 run=$2 side parts=()
	for side in urnic rxe; do
		[ -e "$OUT/$run.$side-server.pcap" ] || { echo "samples.sh: no $OUT/$run.$side-server.pcap" >&2; return 1; }
		# Filter first, then cut: tshark's -c counts the packets it reads, not those that pass -Y.
		tshark -r "$OUT/$run.$side-server.pcap" -Y "ip.src == $GUEST_IP && udp.dstport == 4791" \
			-F pcap -w "$TMP/$run.$side.all.pcap" 2>/dev/null
		editcap -F pcap -r "$TMP/$run.$side.all.pcap" "$TMP/$run.$side.pcap" "1-$N"
		parts+=("$TMP/$run.$side.pcap")
	done
	mergecap -F pcap -w "$DEST/rxe-$name.pcap" "${parts[@]}"
	# What Wireshark reads from each packet, for test_rxe_samples (its FIELDS order).
	{
		echo "# ${FIELDS[*]}"
		tshark -r "$DEST/rxe-$name.pcap" -T fields -E separator=, $(printf -- '-e %s ' "${FIELDS[@]}") 2>/dev/null
	} >"$DEST/rxe-$name.fields"
	printf '%-28s %6d bytes  ' "rxe-$name.pcap" "$(stat -c %s "$DEST/rxe-$name.pcap")"
	tshark -r "$DEST/rxe-$name.pcap" -T fields -e infiniband.bth.opcode 2>/dev/null |
		sort -n | uniq -c | awk '{ printf "op%s x%s  ", $2, $1 } END { print "" }'
}

FIELDS=(infiniband.bth.opcode infiniband.bth.destqp infiniband.bth.psn infiniband.bth.a infiniband.bth.padcnt
	infiniband.reth.va infiniband.reth.r_key infiniband.reth.dmalen infiniband.atomiceth.swapdt
	infiniband.atomiceth.cmpdt infiniband.aeth.syndrome infiniband.aeth.msn infiniband.atomicacketh.origremdt
	infiniband.deth.q_key infiniband.deth.srcqp infiniband.invariant.crc)

mkdir -p "$DEST"
sample rc-pingpong-4k rc_pingpong-4k
sample ib_write_bw ib_write_bw
sample ib_read_lat ib_read_lat
sample ib_read_bw ib_read_bw
sample ib_atomic_bw ib_atomic_bw
sample ud-pingpong ud_pingpong
sample uc-pingpong uc_pingpong
sample rc-pingpong-m4096 rc_pingpong-m4096
