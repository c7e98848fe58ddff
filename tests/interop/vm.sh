#!/usr/bin/env bash
# vm.sh - boots rdma_rxe guests on a bridge inside the private network namespace urnicix and runs commands in them.
#
#   vm.sh up [N]                  boot N guests (default 1); waits until each command server answers
#   vm.sh exec [-n I] [-t S] CMD  run bash CMD in guest I (default 0) with a limit of S seconds (default 300);
#                                 its output streams back and its exit status is this command's
#   vm.sh ns CMD...               run a host command inside the namespace (urnic, tshark, ...)
#   vm.sh console [I] | status | down
#
# Network (exists only inside netns $NS, which has no route out): bridge ixbr0 holds $NET.1/24, guest I is
# $NET.(2+I) on tap ixtapI with MAC 52:54:00:1c:00:(2+I); the link MTU is 9000 (URNIC_IX_LINK_MTU). Disks are snapshot=on: the cached image stays clean.
# KVM is not used by default: on the hosts this project runs on it hangs the stock kernel; URNIC_IX_ACCEL=kvm
# forces it. Exit 77 when the machine cannot run the guests (no image, not root, no tun, no netns).
set -euo pipefail

CACHE=${URNIC_IX_CACHE:-/var/cache/urnic-interop}
IMG=$CACHE/rootfs.img
ROOT=$CACHE/root
RUN=${URNIC_IX_RUN:-/run/urnic-interop}
NS=${URNIC_IX_NS:-urnicix}
NET=${URNIC_IX_NET:-10.77.91}
MEM=${URNIC_IX_MEM:-1024}
ACCEL=${URNIC_IX_ACCEL:-tcg}
BOOT_TIMEOUT=${URNIC_IX_BOOT_TIMEOUT:-300}
CMD_PORT=7123
# Jumbo frames, so that both stacks offer path MTU 4096 (rxe's and urnic's active MTU follow the link's).
LINK_MTU=${URNIC_IX_LINK_MTU:-9000}

guest_ip() { echo "$NET.$((2 + $1))"; }
nsx() { ip netns exec "$NS" "$@"; }
skip() { echo "vm.sh: SKIP: $*" >&2; exit 77; }
die() { echo "vm.sh: $*" >&2; exit 1; }

check_machine() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (netns, tap)"
	command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing (run tests/interop/image.sh)"
	[ -e "$IMG" ] || skip "no guest image at $IMG (run tests/interop/image.sh)"
	[ -c /dev/net/tun ] || skip "/dev/net/tun missing"
	qemu-system-x86_64 -accel help 2>/dev/null | grep -x "$ACCEL" >/dev/null || skip "qemu has no $ACCEL accelerator"
}

net_up() {
	local n=$1 i
	ip netns list | grep -x "$NS\( .*\)\?" >/dev/null || ip netns add "$NS" || skip "cannot create netns $NS"
	nsx ip link set lo up
	if ! nsx ip link show ixbr0 >/dev/null 2>&1; then
		nsx ip link add ixbr0 type bridge stp_state 0 forward_delay 0 || skip "cannot create a bridge in $NS"
		nsx ip addr add "$NET.1/24" dev ixbr0
		nsx ip link set ixbr0 up
	fi
	for ((i = 0; i < n; i++)); do
		nsx ip link show "ixtap$i" >/dev/null 2>&1 || nsx ip tuntap add "ixtap$i" mode tap ||
			skip "cannot create tap ixtap$i"
		# txqueuelen: the queue towards qemu holds a whole 8 MiB READ response burst (2048 packets of
		# 4 KiB) that a responder sends at once; TCG drains it slowly, and the default 1000 drops.
		nsx ip link set "ixtap$i" mtu "$LINK_MTU" txqueuelen 10000 master ixbr0 up
	done
	nsx ip link set ixbr0 mtu "$LINK_MTU" # a bridge takes its ports' smallest MTU; set it after they join
}

boot_guest() {
	local i=$1 kernel initrd cpu=max
	kernel=$(ls "$ROOT"/boot/vmlinuz-* | sort -V | tail -n 1)
	initrd=$(ls "$ROOT"/boot/initrd.img-* | sort -V | tail -n 1)
	[ "$ACCEL" = kvm ] && cpu=host
	rm -f "$RUN/vm$i.console" "$RUN/vm$i.pid"
	nsx qemu-system-x86_64 -accel "$ACCEL" -cpu "$cpu" -m "$MEM" -smp 1 -name "urnic-ix$i" \
		-kernel "$kernel" -initrd "$initrd" \
		-append "root=/dev/vda rw console=ttyS0 init=/usr/local/sbin/urnic-ix-init net.ifnames=0 quiet mitigations=off urnic_ix.ip=$(guest_ip "$i")/24" \
		-drive "file=$IMG,if=virtio,format=raw,snapshot=on" \
		-netdev "tap,id=n0,ifname=ixtap$i,script=no,downscript=no" \
		-device "virtio-net-pci,netdev=n0,mac=52:54:00:1c:00:$(printf %02x $((2 + i)))" \
		-display none -serial "file:$RUN/vm$i.console" -monitor none \
		-daemonize -pidfile "$RUN/vm$i.pid" 2>"$RUN/vm$i.qemu.err" ||
		skip "qemu cannot start guest $i: $(cat "$RUN/vm$i.qemu.err")"
}

guest_alive() { [ -e "$RUN/vm$1.pid" ] && kill -0 "$(cat "$RUN/vm$1.pid")" 2>/dev/null; }

guest_answers() {
	echo 'echo __alive' | nsx timeout 5 socat -t 5 - "TCP:$(guest_ip "$1"):$CMD_PORT,connect-timeout=2" 2>/dev/null |
		grep __alive >/dev/null # not -q: an early exit would SIGPIPE socat and, under pipefail, fail the test
}

cmd_up() {
	local n=${1:-1} i t0 waited
	check_machine
	mkdir -p "$RUN"
	net_up "$n"
	t0=$(date +%s)
	for ((i = 0; i < n; i++)); do
		guest_alive "$i" && { echo "vm.sh: guest $i already running"; continue; }
		boot_guest "$i"
		echo "vm.sh: guest $i pid $(cat "$RUN/vm$i.pid") accel=$ACCEL ip=$(guest_ip "$i")"
	done
	for ((i = 0; i < n; i++)); do
		until guest_answers "$i"; do
			guest_alive "$i" || { tail -n 20 "$RUN/vm$i.console" >&2; die "guest $i died while booting"; }
			waited=$(($(date +%s) - t0))
			[ "$waited" -lt "$BOOT_TIMEOUT" ] ||
				{ tail -n 20 "$RUN/vm$i.console" >&2; die "guest $i did not boot in ${BOOT_TIMEOUT}s"; }
			sleep 1
		done
		echo "vm.sh: guest $i up after $(($(date +%s) - t0))s"
	done
}

cmd_exec() {
	local i=0 limit=300
	while [ $# -gt 0 ]; do
		case $1 in
		-n) i=$2; shift 2 ;;
		-t) limit=$2; shift 2 ;;
		*) break ;;
		esac
	done
	# The guest ends the output with __URNIC_IX_RC=<status>; no such line means the link or the guest failed.
	set +e
	printf '%s\n' "$*" |
		nsx timeout "$limit" socat -t 100000 - "TCP:$(guest_ip "$i"):$CMD_PORT,connect-timeout=5" |
		awk '/^__URNIC_IX_RC=/ { rc = substr($0, 15); next } { print; fflush() } END { exit rc == "" ? 255 : rc }'
	local status=("${PIPESTATUS[@]}")
	set -e
	if [ "${status[1]}" = 124 ]; then
		echo "vm.sh: guest $i command timed out after ${limit}s" >&2
		return 124
	fi
	return "${status[2]}"
}

cmd_down() {
	local p pid
	for p in "$RUN"/vm*.pid; do
		[ -e "$p" ] || continue
		pid=$(cat "$p")
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid"
			for _ in $(seq 25); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
			kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
		fi
		rm -f "$p"
	done
	if ip netns list | grep -x "$NS\( .*\)\?" >/dev/null; then ip netns del "$NS"; fi
	echo "vm.sh: down"
}

cmd_status() {
	local p
	for p in "$RUN"/vm*.pid; do
		[ -e "$p" ] || continue
		if kill -0 "$(cat "$p")" 2>/dev/null; then echo "$(basename "$p" .pid) running"; else echo "$(basename "$p" .pid) dead"; fi
	done
}

case "${1:-}" in
up) shift; cmd_up "$@" ;;
exec) shift; cmd_exec "$@" ;;
ns) shift; nsx "$@" ;;
console) cat "$RUN/vm${2:-0}.console" ;;
status) cmd_status ;;
down) cmd_down ;;
*) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
