#!/usr/bin/env bash
# netns_loss.sh - an RC test program between two network namespaces joined by a veth pair, the
# kernel dropping a share of urnic's packets in both directions: nftables on each namespace's
# input hook, `udp dport 4791 numgen random mod 1000 < PERMILLE drop` (on the output hook the
# sender would get EPERM, which is not loss). The program's client runs in one namespace and its
# server in the other (tests/common/rc_harness.c enter_netns). Passes when the program passes and
# the rules really dropped packets.
#
# urnic's GSO sends cross a veth as one skb: the rule would drop a whole run of up to 64 packets
# at once. So each veth end's tx-udp-segmentation is turned off (ethtool), and the kernel cuts
# the runs into packets before the rule sees them: loss per packet. NETNS_LOSS_BURSTS=1 leaves
# it on, to lose whole GSO sends (bursts of up to 64 packets) instead.
#
#   netns_loss.sh PROGRAM PERMILLE [ARGS...]        exit 77: no root, netns, veth or nftables
set -uo pipefail
prog=$1 permille=$2
shift 2
skip() { echo "netns_loss: SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root for network namespaces"
command -v nft >/dev/null || skip "nft not installed"
tag=$$
a=urnic-la-$tag b=urnic-lb-$tag
net=10.$((200 + tag % 50)).$((tag / 50 % 250)).
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT
ip netns add "$a" && ip netns add "$b" || skip "cannot create network namespaces"
ip link add "va$tag" netns "$a" type veth peer name "vb$tag" netns "$b" || skip "no veth"
ip -n "$a" addr add "${net}1/30" dev "va$tag" && ip -n "$b" addr add "${net}2/30" dev "vb$tag"
loss="per packet"
[ "${NETNS_LOSS_BURSTS:-0}" = 1 ] && loss="per GSO send (bursts)"
for ns in "$a" "$b"; do
	dev=$([ "$ns" = "$a" ] && echo "va$tag" || echo "vb$tag")
	ip -n "$ns" link set lo up
	ip -n "$ns" link set "$dev" up
	if [ "${NETNS_LOSS_BURSTS:-0}" != 1 ] &&
		! ip netns exec "$ns" ethtool -K "$dev" tx-udp-segmentation off >/dev/null 2>&1; then
		export URNIC_GSO=0 # no ethtool: packets one datagram each, as the rule needs
		loss="per packet (GSO off: no ethtool)"
	fi
	ip netns exec "$ns" nft -f - <<NFT || skip "nftables rule refused"
table inet urnic_loss {
	chain input {
		type filter hook input priority 0;
		udp dport 4791 numgen random mod 1000 < $permille counter drop
	}
}
NFT
done
drops() { ip netns exec "$1" nft list table inet urnic_loss | sed -n 's/.*counter packets \([0-9]*\).*/\1/p'; }
echo "netns_loss: $(basename "$prog") client in $a (${net}1), server in $b (${net}2), $permille/1000 dropped each way, $loss"
URNIC_TEST_CLIENT_NETNS=$a URNIC_TEST_CLIENT_ADDR=${net}1 \
URNIC_TEST_SERVER_NETNS=$b URNIC_TEST_SERVER_ADDR=${net}2 \
	timeout -k 5 "${NETNS_LOSS_TIMEOUT:-280}" "$prog" "$@"
rc=$?
da=$(drops "$a") db=$(drops "$b")
echo "netns_loss: program exit $rc; kernel dropped $da packets into $a, $db into $b"
[ "$rc" = 0 ] || exit "$rc"
if [ "$permille" -gt 0 ] && [ $((${da:-0} + ${db:-0})) -eq 0 ]; then
	echo "netns_loss: FAIL: the rules dropped nothing: loss was not tested"
	exit 1
fi
exit 0
