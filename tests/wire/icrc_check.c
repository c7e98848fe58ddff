/* icrc_check.c - recomputes the ICRC of each RoCEv2 packet of a capture from its real IP header. */

/*
 * usage: wire_icrc_check [-a ADDR]... [-l] FILE.pcap
 *   -a ADDR  check only packets whose source and destination are both among the ADDRs (the
 *            processes under test); others are counted and skipped. Without -a, every packet.
 *   -l       print "icrc FRAME 0xXXXXXXXX" for each packet checked: the captured ICRC bytes read
 *            in wire order, the way Wireshark shows infiniband.invariant.crc.
 *   -r       a READ response sent again (same source, QPN and PSN as one earlier in the
 *            capture) may fail: a READ the requester re-sent is executed again over memory the
 *            responder's application may be rewriting by then (the READ itself completed), and
 *            a software NIC computes the ICRC before the kernel copies the payload. Such a
 *            packet is dropped by its receiver (drop_bad_icrc); it is counted, not failed.
 * A packet passes when it is an unfragmented IPv4/UDP datagram to or from port 4791 whose BTH
 * opcode urnic knows, whose headers fit, whose length is a multiple of 4 (the pad count at work)
 * and whose last 4 bytes equal urnic_icrc_compute_ipid() over it with the IP ID and flags it was
 * sent with. A capture without a single checked packet fails.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pcap.h"
#include "wire/wire.h"

#define MAX_FRAME 65536
#define MAX_ADDRS 16
#define TIME_LIMIT_S 20
#define DUMP_BYTES 64 /* of a failing packet, from the BTH on */

struct opts {
	uint32_t addrs[MAX_ADDRS]; /* network order */
	int naddrs;
	bool list;
	bool resent_reads_may_fail;
	const char *path;
};

struct tally {
	unsigned frames, checked, other, failed, resent_reads_changed;
};

/* READ responses seen so far, by source, QPN and PSN: an open-addressed set. */
#define SEEN_SLOTS (1u << 16)
static uint64_t seen[SEEN_SLOTS];

/* Records the response; returns true if it was seen before. */
static bool read_response_seen(const struct test_udp4 *u)
{
	const uint8_t *bth = u->payload;
	uint64_t key = (uint64_t)u->saddr << 32 ^ (uint64_t)bth_dqpn(bth) << 24 ^ bth_psn(bth) ^ 1;
	uint32_t i = (uint32_t)(key * 0x9e3779b97f4a7c15ull >> 48);

	for (unsigned probes = 0; probes < SEEN_SLOTS; probes++, i = (i + 1) % SEEN_SLOTS) {
		if (seen[i] == key)
			return true;
		if (seen[i] == 0) {
			seen[i] = key;
			return false;
		}
	}
	return false; /* full: every later one counts as new, the strict side */
}

static bool is_read_response(const uint8_t *bth)
{
	uint8_t op = bth_opcode(bth);

	return op >= (URNIC_OP_RC | URNIC_OP_READ_RESP_FIRST) &&
	       op <= (URNIC_OP_RC | URNIC_OP_READ_RESP_ONLY);
}

static bool addr_selected(const struct opts *o, uint32_t addr)
{
	for (int i = 0; i < o->naddrs; i++)
		if (o->addrs[i] == addr)
			return true;
	return false;
}

static void dump(const char *what, const uint8_t *p, size_t len)
{
	printf("  %s:", what);
	for (size_t i = 0; i < len && i < DUMP_BYTES; i++)
		printf("%s%02x", i % 4 ? "" : " ", p[i]);
	printf("%s\n", len > DUMP_BYTES ? " ..." : "");
}

static void fail_packet(struct tally *t, unsigned frame, const struct test_udp4 *u, const char *why)
{
	char s[INET_ADDRSTRLEN], d[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &u->saddr, s, sizeof(s));
	inet_ntop(AF_INET, &u->daddr, d, sizeof(d));
	printf("FAIL frame %u %s:%u > %s:%u ip id 0x%04x flags/frag 0x%04x: %s\n", frame, s,
	       u->sport, d, u->dport, u->ip_id, u->ip_frag, why);
	dump("udp payload", u->payload, u->payload_len);
	t->failed++;
}

/* The layout checks a receiver would make before the ICRC: NULL when the packet is sound. */
static const char *layout_problem(const uint8_t *pkt, size_t len)
{
	const struct urnic_opcode_info *op;

	if (len < URNIC_BTH_LEN + URNIC_ICRC_LEN)
		return "shorter than BTH + ICRC";
	op = urnic_op(bth_opcode(pkt));
	if (!op->mask)
		return "unknown BTH opcode";
	if (op->hdr_len + bth_padcnt(pkt) + URNIC_ICRC_LEN > len)
		return "headers and pad do not fit";
	if ((len - URNIC_ICRC_LEN) % 4)
		return "BTH to ICRC is not a multiple of 4 bytes (pad count)";
	return NULL;
}

static void check_packet(const struct opts *o, struct tally *t, unsigned frame,
			 const struct test_udp4 *u)
{
	struct urnic_ip4_flow flow = {
	    .saddr = u->saddr, .daddr = u->daddr, .sport = u->sport, .dport = u->dport};
	size_t body = u->payload_len - URNIC_ICRC_LEN;
	struct iovec iov = {.iov_base = (void *)u->payload, .iov_len = body};
	const char *why = layout_problem(u->payload, u->payload_len);
	const uint8_t *got;
	uint8_t want[4];
	char msg[96];

	t->checked++;
	if (why) {
		fail_packet(t, frame, u, why);
		return;
	}
	got = u->payload + body;
	urnic_icrc_compute_ipid(&flow, u->ip_id, u->ip_frag, &iov, 1, body, want);
	bool again = is_read_response(u->payload) && read_response_seen(u);

	if (memcmp(want, got, sizeof(want)) && again && o->resent_reads_may_fail) {
		t->resent_reads_changed++;
	} else if (memcmp(want, got, sizeof(want))) {
		snprintf(msg, sizeof(msg),
			 "ICRC %02x%02x%02x%02x captured, %02x%02x%02x%02x computed", got[0],
			 got[1], got[2], got[3], want[0], want[1], want[2], want[3]);
		fail_packet(t, frame, u, msg);
		return;
	}
	if (o->list)
		printf("icrc %u 0x%02x%02x%02x%02x\n", frame, got[0], got[1], got[2], got[3]);
}

static void check_frame(const struct opts *o, struct tally *t, const uint8_t *frame, size_t len)
{
	struct test_udp4 u;
	unsigned n = ++t->frames;

	if (test_parse_udp4(frame, len, &u)) {
		/* the capture filter lets only UDP to or from 4791 in: this is a fragment */
		printf("FAIL frame %u: not an unfragmented Ethernet/IPv4/UDP frame\n", n);
		dump("frame", frame, len);
		t->failed++;
		return;
	}
	if (u.sport != URNIC_ROCEV2_PORT && u.dport != URNIC_ROCEV2_PORT) {
		t->other++;
		return;
	}
	if (o->naddrs && !(addr_selected(o, u.saddr) && addr_selected(o, u.daddr))) {
		t->other++;
		return;
	}
	check_packet(o, t, n, &u);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	int c;

	while ((c = getopt(argc, argv, "a:lr")) != -1) {
		switch (c) {
		case 'a':
			if (o->naddrs == MAX_ADDRS ||
			    inet_pton(AF_INET, optarg, &o->addrs[o->naddrs]) != 1) {
				fprintf(stderr, "wire_icrc_check: bad or too many -a '%s'\n",
					optarg);
				return -1;
			}
			o->naddrs++;
			break;
		case 'l':
			o->list = true;
			break;
		case 'r':
			o->resent_reads_may_fail = true;
			break;
		default:
			return -1;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: wire_icrc_check [-a ADDR]... [-l] [-r] FILE.pcap\n");
		return -1;
	}
	o->path = argv[optind];
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t frame[MAX_FRAME];
	struct opts o = {0};
	struct tally t = {0};
	struct test_pcap cap;
	size_t len;
	int r;

	alarm(TIME_LIMIT_S);
	if (parse_opts(argc, argv, &o))
		return 2;
	if (test_pcap_open(&cap, o.path)) {
		printf("FAIL: %s is not a readable classic pcap file\n", o.path);
		return 1;
	}
	if (cap.linktype != 1) {
		printf("FAIL: link type %u, expected Ethernet (1)\n", cap.linktype);
		test_pcap_close(&cap);
		return 1;
	}
	while ((r = test_pcap_next(&cap, frame, sizeof(frame), &len)) == 1)
		check_frame(&o, &t, frame, len);
	test_pcap_close(&cap);
	if (r < 0) {
		printf("FAIL: read error after frame %u of %s\n", t.frames, o.path);
		t.failed++;
	}
	if (t.checked == 0) {
		printf("FAIL: no RoCEv2 packet to check in %s\n", o.path);
		t.failed++;
	}
	printf("ICRC: %u frames, %u RoCEv2 packets checked against their real IP ID and flags, "
	       "%u failed, %u of other flows skipped\n",
	       t.frames, t.checked, t.failed, t.other);
	if (t.resent_reads_changed)
		printf("ICRC: %u re-sent READ responses over memory changed since (allowed by -r)\n",
		       t.resent_reads_changed);
	printf("%s\n", t.failed ? "FAIL" : "PASS");
	return t.failed ? 1 : 0;
}
