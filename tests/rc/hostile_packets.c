/* hostile_packets: forged packets aimed at a connected RC QP are dropped and counted per reason
 * in the device's `urnic stats` counters, place no byte, and leave the connection healthy.
 *
 * Every forgery is one defect away from a packet the server would execute: an RDMA WRITE ONLY to
 * the server's QP, at the PSN it expects next, with its real rkey, aimed at a poisoned area of its
 * MR. The client sends them from a plain UDP socket (not through urnic) before any real traffic,
 * waits for the server to count them (its counters moved by exactly what was sent, no NAK and no
 * duplicate drawn), then does a real WRITE and SEND; the server checks that the poisoned area is
 * untouched and that the real data arrived byte for byte. */
#include "rc_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/stats.h"
#include "net/net.h"
#include "wire/wire.h"

#define COPIES 5	    /* of each forgery */
#define TARGET (1u << 20)   /* offset of the poisoned area in the server's MR */
#define TARGET_LEN 64u	    /* payload of each forgery */
#define REAL_LEN (256u * 1024u) /* the real WRITE after them */
#define POISON 0x3c
#define RC_OPCODE_RESERVED 0x1f /* IBTA vol. 1 table 38: RC opcodes 0x18-0x1f are reserved */

enum forgery {
	F_BAD_ICRC,
	F_TRUNCATED,
	F_OVERSIZE,
	F_SHORT_HEADERS,
	F_PAD_BEYOND,
	F_BAD_PKEY,
	F_UNKNOWN_OPCODE,
	F_WRONG_TRANSPORT,
	F_UNKNOWN_QP,
	F_WRONG_PEER,
	F_PSN_FAR_AHEAD,
	F_COUNT
};

/* What each forgery is and which counter must count it. */
static const struct {
	const char *name;
	enum urnic_counter counter;
} forgeries[F_COUNT] = {
	[F_BAD_ICRC] = {"ICRC off by one bit", URNIC_C_drop_icrc},
	[F_TRUNCATED] = {"8 bytes, shorter than a BTH", URNIC_C_drop_short},
	[F_OVERSIZE] = {"datagram larger than any packet", URNIC_C_drop_short},
	[F_SHORT_HEADERS] = {"WRITE ONLY cut inside its RETH", URNIC_C_drop_length},
	[F_PAD_BEYOND] = {"pad count beyond the payload", URNIC_C_drop_length},
	[F_BAD_PKEY] = {"a P_Key not ours", URNIC_C_drop_bad_header},
	[F_UNKNOWN_OPCODE] = {"reserved RC opcode", URNIC_C_drop_opcode},
	[F_WRONG_TRANSPORT] = {"UD SEND ONLY to an RC QP", URNIC_C_drop_opcode},
	[F_UNKNOWN_QP] = {"destination QPN that does not exist", URNIC_C_drop_no_qp},
	[F_WRONG_PEER] = {"source address not the connected peer", URNIC_C_drop_peer},
	[F_PSN_FAR_AHEAD] = {"PSN 2^22 ahead of the expected one", URNIC_C_drop_psn},
};

static uint32_t gid_ip4(const union ibv_gid *g)
{
	uint32_t a;

	memcpy(&a, g->raw + 12, 4);
	return a;
}

/* What the forgeries must add to each counter. */
static void forgery_counts(uint64_t want[URNIC_C_COUNT])
{
	memset(want, 0, URNIC_C_COUNT * sizeof(want[0]));
	for (int f = 0; f < F_COUNT; f++)
		want[forgeries[f].counter] += COPIES;
}

/* Waits until the counters have moved by want (every forgery judged; they are read as the
 * engine counts), or 10 s pass. */
static void wait_judged(struct rc *rc, const uint64_t *before, const uint64_t *want, uint64_t *now)
{
	double end = rc_now_ms() + 10000;

	for (;;) {
		bool all = true;

		rc_read_counters(rc, now);
		for (int c = 0; c < URNIC_C_COUNT; c++)
			all = all && now[c] - before[c] >= want[c];
		if (all || rc_now_ms() > end)
			return;
		rc_sleep_ms(1);
	}
}

static int server(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], judged[URNIC_C_COUNT], want[URNIC_C_COUNT];

	memset(rc->buf, RC_CANARY, rc->o.buf_size);
	memset(rc->buf + TARGET, POISON, TARGET_LEN);
	rc_post_recv(rc, 0, 1, 0, 64);
	rc_read_counters(rc, before);
	rc_sync(rc); /* the client sends the forgeries */
	rc_step(rc, "judge the forgeries");
	forgery_counts(want);
	wait_judged(rc, before, want, judged);
	for (int f = 0; f < F_COUNT; f++) {
		enum urnic_counter c = forgeries[f].counter;

		rc_step(rc, "counter %s after %s", urnic_counter_names[c], forgeries[f].name);
		RC_CHECK(rc, judged[c] - before[c] == want[c], "%s moved by %llu, expected %llu",
			 urnic_counter_names[c], (unsigned long long)(judged[c] - before[c]),
			 (unsigned long long)want[c]);
	}
	/* read before the real traffic, whose own retransmissions (a slow TSan run) would count */
	rc_step(rc, "a forgery drew no NAK and no duplicate handling");
	RC_CHECK(rc, judged[URNIC_C_nak_seq_sent] == before[URNIC_C_nak_seq_sent],
		 "%llu sequence NAKs sent",
		 (unsigned long long)(judged[URNIC_C_nak_seq_sent] - before[URNIC_C_nak_seq_sent]));
	RC_CHECK(rc, judged[URNIC_C_dup_requests] == before[URNIC_C_dup_requests],
		 "%llu duplicate requests",
		 (unsigned long long)(judged[URNIC_C_dup_requests] - before[URNIC_C_dup_requests]));
	rc_sync(rc); /* the real WRITE and SEND */
	rc_step(rc, "the real SEND after the forgeries");
	rc_wait(rc, rc->rcq, 1, IBV_WC_RECV, NULL);
	rc_check(rc, rc->buf, 64, 2, "SEND payload");
	rc_check(rc, rc->buf + 2 * TARGET, REAL_LEN, 1, "real WRITE");

	rc_step(rc, "no forgery placed a byte");
	rc_check_const(rc, rc->buf + TARGET, TARGET_LEN, POISON, "poisoned area");
	rc_check_const(rc, rc->buf + TARGET + TARGET_LEN, TARGET - TARGET_LEN, RC_CANARY,
		       "memory after the poisoned area");
	RC_CHECK(rc, rc_qp_state(rc, rc->qp[0]) == IBV_QPS_RTS, "server QP left RTS");
	rc_sync(rc);
	return RC_PASS;
}

struct forger {
	int fd, stranger_fd;
	uint32_t saddr, stranger, daddr;
	uint16_t sport, stranger_sport;
};

static int udp_socket(struct rc *rc, uint32_t addr, uint16_t *port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = addr};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	RC_CHECK(rc, fd >= 0, "socket: %s", strerror(errno));
	RC_CHECK(rc, bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0, "bind %s: %s",
		 inet_ntoa(sin.sin_addr), strerror(errno));
	RC_CHECK(rc, getsockname(fd, (struct sockaddr *)&sin, &len) == 0, "getsockname: %s",
		 strerror(errno));
	*port = ntohs(sin.sin_port);
	return fd;
}

/* The packet the server would execute: WRITE ONLY at its expected PSN into the poisoned area. */
static size_t build_write(struct rc *rc, uint8_t *pkt, uint8_t opcode, uint32_t dqpn, uint32_t psn)
{
	const struct urnic_bth_fields f = {
		.opcode = opcode, .ackreq = true, .pkey = URNIC_DEFAULT_PKEY, .dqpn = dqpn, .psn = psn};

	urnic_bth_build(pkt, &f);
	reth_build(pkt + URNIC_BTH_LEN, rc->peer.addr + TARGET, rc->peer.rkey, TARGET_LEN);
	memset(pkt + URNIC_BTH_LEN + URNIC_RETH_LEN, 0xee, TARGET_LEN);
	return URNIC_BTH_LEN + URNIC_RETH_LEN + TARGET_LEN + URNIC_ICRC_LEN;
}

static void seal(const struct forger *fg, uint32_t saddr, uint16_t sport, uint8_t *pkt, size_t len)
{
	const struct urnic_ip4_flow flow = {
		.saddr = saddr, .daddr = fg->daddr, .sport = sport, .dport = URNIC_ROCEV2_PORT};
	const struct iovec iov = {.iov_base = pkt, .iov_len = len - URNIC_ICRC_LEN};

	urnic_icrc_compute(&flow, &iov, 1, len - URNIC_ICRC_LEN, pkt + len - URNIC_ICRC_LEN);
}

static void send_forgery(struct rc *rc, const struct forger *fg, enum forgery f)
{
	static uint8_t pkt[URNIC_RX_BUF_LEN + 512];
	const uint32_t qpn = rc->peer.qpn[0], epsn = rc->me.psn[0];
	bool stranger = f == F_WRONG_PEER;
	size_t len = build_write(rc, pkt, URNIC_OP_RC | URNIC_OP_WRITE_ONLY, qpn, epsn);

	switch (f) {
	case F_TRUNCATED:
		len = 8;
		break;
	case F_OVERSIZE:
		len = sizeof(pkt);
		break;
	case F_SHORT_HEADERS:
		len = URNIC_BTH_LEN + 8 + URNIC_ICRC_LEN;
		break;
	case F_PAD_BEYOND: /* no payload, yet three pad bytes */
		len = build_write(rc, pkt, URNIC_OP_RC | URNIC_OP_WRITE_ONLY, qpn, epsn) - TARGET_LEN;
		pkt[1] |= 3u << 4;
		break;
	case F_BAD_PKEY:
		urnic_put16(pkt + 2, 0x7ffe);
		break;
	case F_UNKNOWN_OPCODE:
		pkt[0] = URNIC_OP_RC | RC_OPCODE_RESERVED;
		break;
	case F_WRONG_TRANSPORT:
		pkt[0] = URNIC_OP_UD | URNIC_OP_SEND_ONLY;
		break;
	case F_UNKNOWN_QP:
		urnic_put24(pkt + 5, qpn ^ 0x5a5a5au);
		break;
	case F_PSN_FAR_AHEAD:
		urnic_put24(pkt + 9, psn_add(epsn, 1u << 22));
		break;
	default:
		break;
	}
	if (len >= URNIC_BTH_LEN + URNIC_ICRC_LEN)
		seal(fg, stranger ? fg->stranger : fg->saddr,
		     stranger ? fg->stranger_sport : fg->sport, pkt, len);
	if (f == F_BAD_ICRC)
		pkt[len - 1] ^= 1;
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(URNIC_ROCEV2_PORT),
				 .sin_addr.s_addr = fg->daddr};
	ssize_t n = sendto(stranger ? fg->stranger_fd : fg->fd, pkt, len, 0, (struct sockaddr *)&to,
			   sizeof(to));

	RC_CHECK(rc, n == (ssize_t)len, "sendto (%s): %s", forgeries[f].name, strerror(errno));
}

static int client(struct rc *rc)
{
	struct forger fg = {.saddr = gid_ip4(&rc->me.gid), .daddr = gid_ip4(&rc->peer.gid)};
	struct rc_wr w;

	/* the stranger: another loopback address, neither ours nor the server's */
	fg.stranger = htonl(ntohl(fg.saddr) ^ 0x1u);
	if (fg.stranger == fg.daddr)
		fg.stranger = htonl(ntohl(fg.saddr) ^ 0x2u);
	fg.fd = udp_socket(rc, fg.saddr, &fg.sport);
	fg.stranger_fd = udp_socket(rc, fg.stranger, &fg.stranger_sport);
	rc_fill(rc->buf, REAL_LEN, 1);
	rc_fill(rc->buf + REAL_LEN, 64, 2);
	rc_sync(rc);

	for (int f = 0; f < F_COUNT; f++) {
		rc_step(rc, "send %d x %s", COPIES, forgeries[f].name);
		for (int i = 0; i < COPIES; i++)
			send_forgery(rc, &fg, (enum forgery)f);
	}
	rc_sync(rc); /* the server has judged them */
	rc_step(rc, "real WRITE and SEND on the same connection");
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, 1, 0, REAL_LEN, 2 * TARGET);
	rc_post_send(rc, 0, &w.wr);
	rc_wait(rc, rc->scq, 1, IBV_WC_RDMA_WRITE, NULL);
	rc_wr(rc, &w, IBV_WR_SEND, 2, REAL_LEN, 64, 0);
	rc_post_send(rc, 0, &w.wr);
	rc_wait(rc, rc->scq, 2, IBV_WC_SEND, NULL);
	rc_sync(rc);
	close(fg.fd);
	close(fg.stranger_fd);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("hostile_packets");

	o.buf_size = 4 * RC_MIB;
	return rc_run(&o, server, client);
}
