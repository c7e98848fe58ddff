/* test_icrc_rxe_pcap - urnic's ICRC agrees with Linux rxe's on every packet of a real capture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expect.h"
#include "pcap.h"
#include "wire/wire.h"

#define MAX_FRAME 65536

/* tshark -r rxe-rc-pingpong.pcap -T fields -e infiniband.bth.opcode -e infiniband.bth.destqp
 *        -e infiniband.bth.psn */
static const struct {
	uint8_t opcode;
	uint32_t dqpn, psn;
} tshark_bth[] = {
    {4, 0x15, 12361952}, {17, 0x13, 12361952}, {4, 0x13, 2608372}, {17, 0x15, 2608372},
    {4, 0x15, 12361953}, {17, 0x13, 12361953}, {4, 0x13, 2608373}, {17, 0x15, 2608373},
    {4, 0x15, 12361954}, {17, 0x13, 12361954}, {4, 0x13, 2608374}, {17, 0x15, 2608374},
    {4, 0x15, 12361955}, {17, 0x13, 12361955}, {4, 0x13, 2608375}, {17, 0x15, 2608375},
    {4, 0x15, 12361956}, {17, 0x13, 12361956}, {4, 0x13, 2608376}, {17, 0x15, 2608376},
};
#define N_PACKETS (sizeof(tshark_bth) / sizeof(tshark_bth[0]))

static void check_bth(unsigned n, const uint8_t *bth, size_t len)
{
	const struct urnic_opcode_info *o = urnic_op(bth_opcode(bth));

	EXPECT(bth_opcode(bth) == tshark_bth[n].opcode && bth_dqpn(bth) == tshark_bth[n].dqpn &&
		   bth_psn(bth) == tshark_bth[n].psn,
	       "packet %u: BTH opcode %u QP %#x PSN %u, tshark says %u %#x %u", n + 1,
	       bth_opcode(bth), bth_dqpn(bth), bth_psn(bth), tshark_bth[n].opcode,
	       tshark_bth[n].dqpn, tshark_bth[n].psn);
	EXPECT(o->mask && o->hdr_len + URNIC_ICRC_LEN + bth_padcnt(bth) <= len,
	       "packet %u: opcode %s does not fit %zu bytes", n + 1, o->name ? o->name : "?", len);
}

/* Flips every bit of the packet in turn, but for BTH byte 4 (FECN, BECN, resv6: masked out of the
 * ICRC so switches may mark congestion): a receiver that knows the peer must reject each. With no
 * prediction yet (hint 0) the check is 16 bits weaker; that count is printed, not asserted. */
static void check_flips(unsigned n, const struct urnic_ip4_flow *flow, uint8_t *pkt, size_t len,
			uint16_t true_id, unsigned *flips, unsigned *weak_passes)
{
	for (size_t bit = 0; bit < len * 8; bit++) {
		uint16_t hint = (uint16_t)(true_id - 1), unknown = 0;

		if (bit / 8 == 4)
			continue;
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		EXPECT(!urnic_icrc_check(flow, pkt, len, &hint),
		       "packet %u: flipped bit %zu accepted", n + 1, bit);
		if (urnic_icrc_check(flow, pkt, len, &unknown))
			(*weak_passes)++;
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		(*flips)++;
	}
}

static void check_packet(unsigned n, const struct test_udp4 *u, struct test_peers *peers,
			 unsigned *flips, unsigned *weak_passes)
{
	struct urnic_ip4_flow flow = {
	    .saddr = u->saddr, .daddr = u->daddr, .sport = u->sport, .dport = u->dport};
	size_t len = u->payload_len, body = len - URNIC_ICRC_LEN;
	uint8_t *pkt = malloc(len), icrc[4];
	struct iovec iov = {.iov_base = pkt, .iov_len = body};
	uint16_t *hint = test_peer_hint(peers, u->saddr), none = 0;

	memcpy(pkt, u->payload, len);
	check_bth(n, pkt, len);

	urnic_icrc_compute_ipid(&flow, u->ip_id, u->ip_frag, &iov, 1, body, icrc);
	EXPECT(!memcmp(icrc, pkt + body, 4),
	       "packet %u: ICRC %02x%02x%02x%02x with ID %#x, captured %02x%02x%02x%02x", n + 1,
	       icrc[0], icrc[1], icrc[2], icrc[3], u->ip_id, pkt[body], pkt[body + 1],
	       pkt[body + 2], pkt[body + 3]);

	EXPECT(urnic_icrc_check(&flow, pkt, len, hint), "packet %u: check rejects ID %#x, hint %#x",
	       n + 1, u->ip_id, *hint);
	EXPECT(*hint == u->ip_id, "packet %u: hint %#x after ID %#x", n + 1, *hint, u->ip_id);
	EXPECT(!urnic_icrc_check(&flow, pkt, len, NULL), "packet %u: accepted with no hint", n + 1);
	none = (uint16_t)(u->ip_id + 4096);
	EXPECT(!urnic_icrc_check(&flow, pkt, len, &none), "packet %u: accepted far from hint",
	       n + 1);

	check_flips(n, &flow, pkt, len, u->ip_id, flips, weak_passes);
	free(pkt);
}

int main(int argc, char **argv)
{
	static uint8_t frame[MAX_FRAME];
	struct test_pcap cap;
	struct test_peers peers = {0};
	int r;
	unsigned n = 0, flips = 0, weak_passes = 0;
	size_t len;

	alarm(20);
	if (argc < 2 || test_pcap_open(&cap, argv[1])) {
		printf("FAIL: cannot read pcap %s\n", argc < 2 ? "(none given)" : argv[1]);
		return 1;
	}
	EXPECT(cap.linktype == 1, "link type %u, expected Ethernet", cap.linktype);
	while ((r = test_pcap_next(&cap, frame, sizeof(frame), &len)) == 1) {
		struct test_udp4 u;

		if (test_parse_udp4(frame, len, &u) || u.dport != URNIC_ROCEV2_PORT)
			continue;
		if (n == N_PACKETS) {
			n++;
			break;
		}
		EXPECT(u.payload_len >= URNIC_BTH_LEN + URNIC_ICRC_LEN, "packet %u too short",
		       n + 1);
		if (u.payload_len >= URNIC_BTH_LEN + URNIC_ICRC_LEN)
			check_packet(n, &u, &peers, &flips, &weak_passes);
		n++;
	}
	EXPECT(r >= 0, "pcap read error");
	EXPECT(n == N_PACKETS, "%u RoCEv2 packets, expected %zu", n, N_PACKETS);
	test_pcap_close(&cap);

	printf(
	    "checked %u rxe packets from %d peers: ICRC reproduced from the real IP ID, accepted "
	    "without it (ID recovered near the hint), BTH matches tshark\n",
	    n, peers.n);
	printf("tried %u single-bit flips: all must be rejected with the peer's ID predicted; with "
	       "no prediction (16-bit check) %u were accepted\n",
	       flips, weak_passes);
	printf("%s\n", test_failures ? "FAIL" : "PASS");
	return test_failures ? 1 : 0;
}
