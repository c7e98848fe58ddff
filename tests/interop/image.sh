#!/usr/bin/env bash
# image.sh - builds and caches the Debian 12 guest image (kernel rdma_rxe + rdma-core + perftest) for interop.
#
# Idempotent: debootstrap runs once per package list, the ext4 image is rebuilt only when the guest
# configuration below changes (FORCE=1 rebuilds it anyway). Safe to run from several jobs at once (flock).
# Exit: 0 image ready, 77 this machine cannot build it (not root, tools or mirror unavailable), 1 failure.
# Environment: URNIC_IX_CACHE (default /var/cache/urnic-interop), MIRROR (default: from apt sources),
#              URNIC_IX_IMG_SIZE (default 2G), FORCE=1.
set -euo pipefail

CACHE=${URNIC_IX_CACHE:-/var/cache/urnic-interop}
ROOT=$CACHE/root
IMG=$CACHE/rootfs.img
SIZE=${URNIC_IX_IMG_SIZE:-2G}
# What the guest needs: a kernel with rdma_rxe, the rdma tools under test, and what the harness drives them with.
GUEST_PKGS=linux-image-amd64,kmod,iproute2,rdma-core,ibverbs-utils,ibverbs-providers,perftest,rdmacm-utils
GUEST_PKGS+=,udev,socat,procps,iputils-ping,tcpdump # udev: initramfs-tools needs it
HOST_TOOLS=(qemu-system-x86_64 debootstrap mkfs.ext4 socat tshark)
HOST_PKGS=(qemu-system-x86 debootstrap e2fsprogs socat tshark)
export DEBIAN_FRONTEND=noninteractive

skip() { echo "image.sh: SKIP: $*" >&2; exit 77; }
now() { date +%s; }

ensure_host_tools() {
	local missing=() c
	for c in "${HOST_TOOLS[@]}"; do command -v "$c" >/dev/null || missing+=("$c"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "image.sh: installing ${HOST_PKGS[*]} (missing: ${missing[*]})"
	apt-get install -y -q --no-install-recommends "${HOST_PKGS[@]}" >/dev/null ||
		{ apt-get update -qq && apt-get install -y -q --no-install-recommends "${HOST_PKGS[@]}" >/dev/null; } ||
		skip "cannot install ${HOST_PKGS[*]}"
}

# The Debian mirror this machine already uses (never hard-coded), minus the security archive.
find_mirror() {
	[ -n "${MIRROR:-}" ] && { echo "$MIRROR"; return; }
	{
		grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
		grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}'
	} | grep -v -- '-security' | grep -i debian | head -n 1 || true
}

debootstrap_root() {
	local stamp=$ROOT/.urnic-ix-debootstrap mirror
	[ -e "$stamp" ] && [ "$(cat "$stamp")" = "$GUEST_PKGS" ] && return 0
	mirror=$(find_mirror)
	[ -n "$mirror" ] || skip "no Debian mirror in /etc/apt (set MIRROR=)"
	echo "image.sh: debootstrap bookworm from $mirror into $ROOT"
	rm -rf "$ROOT"
	# Bounded: run.sh promises to finish in 15 minutes even on a cold cache.
	if ! timeout "${URNIC_IX_DEBOOTSTRAP_TIMEOUT:-600}" debootstrap --variant=minbase --include="$GUEST_PKGS" bookworm "$ROOT" "$mirror" \
		>"$CACHE/debootstrap.log" 2>&1; then
		tail -n 20 "$CACHE/debootstrap.log" >&2
		grep -qiE 'resolve|connect|Failed getting release file' "$CACHE/debootstrap.log" &&
			skip "mirror $mirror unreachable"
		echo "image.sh: debootstrap failed (log: $CACHE/debootstrap.log)" >&2
		exit 1
	fi
	echo "$GUEST_PKGS" >"$stamp"
}

# put PATH MODE: writes stdin to $ROOT/PATH.
put() {
	mkdir -p "$(dirname "$ROOT/$1")"
	cat >"$ROOT/$1"
	chmod "$2" "$ROOT/$1"
}

# Everything the harness relies on inside the guest. Its text is hashed: change it and the image is rebuilt.
configure_guest() {
	echo urnic-ix | put etc/hostname 644
	echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' | put etc/fstab 644
	# Throwaway guest reachable only inside the harness's private netns: empty root password.
	sed -i 's/^root:[^:]*:/root::/' "$ROOT/etc/shadow"
	# PID 1 is this script, not systemd: under TCG a full systemd boot costs 30-60 s more, and nothing the
	# tests use needs it (devtmpfs makes /dev/infiniband/*, kmod loads the modules, rdma talks netlink).
	# The address comes from the kernel command line (urnic_ix.ip=A.B.C.D/NN), set by vm.sh.
	put usr/local/sbin/urnic-ix-init 755 <<-'EOF'
		#!/bin/bash
		export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		mountpoint -q /proc || mount -t proc proc /proc
		mountpoint -q /sys || mount -t sysfs sys /sys
		mountpoint -q /dev || mount -t devtmpfs dev /dev
		mkdir -p /dev/pts /dev/shm
		mount -t devpts devpts /dev/pts
		mount -t tmpfs tmpfs /dev/shm
		mount -t tmpfs tmpfs /run
		mount -t tmpfs tmpfs /tmp
		mount -o remount,rw /
		hostname urnic-ix
		ip=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^urnic_ix\.ip=//p')
		modprobe virtio_net
		for i in $(seq 100); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
		ip link set lo up
		ip addr add "$ip" dev eth0
		ip link set eth0 up
		ulimit -l unlimited
		echo "urnic-ix: eth0 $ip, command server on TCP 7123"
		# This shell stays PID 1: it restarts the server if it ever exits and reaps orphaned test processes.
		while :; do
			socat -t 100000 TCP-LISTEN:7123,reuseaddr,fork EXEC:/usr/local/sbin/urnic-ix-cmd
			sleep 1
		done
	EOF
	# Command server: each TCP connection sends a bash script and half-closes; the guest runs it with
	# stdin closed and answers with its output and a last line "__URNIC_IX_RC=<status>".
	put usr/local/sbin/urnic-ix-cmd 755 <<-'EOF'
		#!/bin/bash
		f=$(mktemp /tmp/urnic-ix-cmd.XXXXXX)
		cat >"$f"
		cd /root
		bash "$f" </dev/null 2>&1
		echo "__URNIC_IX_RC=$?"
		rm -f "$f"
	EOF
	# A small initramfs (5 MB instead of 35 MB with MODULES=most): under TCG unpacking and probing it is
	# a good part of the boot.
	echo MODULES=list | put etc/initramfs-tools/conf.d/urnic-ix.conf 644
	printf '%s\n' virtio_pci virtio_blk virtio_net ext4 | put etc/initramfs-tools/modules 644
	chroot "$ROOT" update-initramfs -u -k all >/dev/null 2>&1
	ls "$ROOT"/boot/vmlinuz-* "$ROOT"/boot/initrd.img-* >/dev/null
	chmod 644 "$ROOT"/boot/vmlinuz-* "$ROOT"/boot/initrd.img-*
}

main() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, mkfs, later netns and tap)"
	ensure_host_tools
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
	local t0 t1 t2 want
	t0=$(now)
	debootstrap_root
	t1=$(now)
	want=$( (declare -f configure_guest put; echo "$GUEST_PKGS $SIZE") | sha256sum | cut -c1-16)
	if [ "${FORCE:-0}" = 1 ] || [ ! -e "$IMG" ] || [ "$(cat "$CACHE/image.stamp" 2>/dev/null)" != "$want" ]; then
		configure_guest
		rm -f "$IMG.tmp"
		mkfs.ext4 -q -F -L urnic-ix -d "$ROOT" "$IMG.tmp" "$SIZE" >/dev/null
		mv "$IMG.tmp" "$IMG"
		echo "$want" >"$CACHE/image.stamp"
	fi
	t2=$(now)
	echo "image.sh: debootstrap $((t1 - t0))s, image $((t2 - t1))s, total $((t2 - t0))s -> $IMG"
}

main "$@"
