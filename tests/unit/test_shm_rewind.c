/* test_shm_rewind: a ring that its consumer has emptied goes on from its start once its head
 * stands URNIC_SHM_REWIND_AT or more into it (net/shm.c, rewind_if_empty), so a ping-pong's
 * records stay on the ring's first pages. Three behaviours, every packet checked byte for byte
 * and in order:
 * - ping-pong: 20,000 small packets, each received and given back before the next is sent (about
 *   2.4 MiB of stream), never land more than URNIC_SHM_REWIND_AT plus two records past the first
 *   one (without the rewind they go 2.4 MiB into the ring);
 * - room: a packet of URNIC_SHM_MTU sent right behind the run that rewound, before the consumer
 *   read the wrap, still fits (the rewind leaves at least URNIC_SHM_REWIND_AT less that run);
 * - bursts: runs of 8 packets in one send, received after each run, of 64-byte to 40 KiB
 *   packets, over about 70 MB of stream: small runs, which rewind the emptied ring and follow
 *   its wrap, and now and then a run of 156 KiB, more than a rewind is made for (128 KiB). */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/param.h"
#include "net/net.h"
#include "net/shm.h"
#include "check.h"

#define HDR_LEN 28	 /* a BTH and a RETH, as a WRITE's first packet */
#define PINGS 20000	 /* about 2.5 MiB of 128-byte records */
#define BURST 8
#define BURSTS 2000
#define MAX_TOTAL 40960u /* the largest burst packet: in the ring, not by place */

#define PING_TOTAL (HDR_LEN + 36) /* a record of 128 bytes */

static struct urnic_net consumer, producer;
static uint8_t sent_bytes[BURST][HDR_LEN + URNIC_SHM_MTU];
static const uint8_t *ring_start; /* where the ring's first record's packet landed */

/* *p: packet number seq, of total bytes, its bytes derived from seq (kept in out). */
static void make_packet(struct urnic_txpkt *p, uint32_t seq, uint32_t total, uint8_t *out)
{
	uint32_t x = seq * 2654435761u + 1;

	for (uint32_t i = 0; i < total; i++) {
		x = x * 1103515245u + 12345u;
		out[i] = (uint8_t)(x >> 16);
	}
	*p = (struct urnic_txpkt){.daddr = consumer.addr, .len = total};
	memcpy(p->hdr, out, HDR_LEN);
	p->iov[p->iovcnt++] = (struct iovec){.iov_base = p->hdr, .iov_len = HDR_LEN};
	p->iov[p->iovcnt++] = (struct iovec){.iov_base = out + HDR_LEN, .iov_len = total - HDR_LEN};
}

/* Packets pkts[0..n), first_seq on, in one send: all must go. */
static void send_run(struct urnic_txpkt *pkts, int n, uint32_t first_seq)
{
	struct urnic_net_tally t = {0};

	CHECK(urnic_net_send(&producer, pkts, n, &t, NULL) == n, "packets %u.. (%d) not sent",
	      first_seq, n);
}

/* Receives want packets (at most BURST), checks them against sent_bytes in order, gives their
 * records back; returns the first one's data pointer. */
static const uint8_t *receive(int want, const uint32_t *totals, uint32_t first_seq)
{
	struct urnic_net_tally t = {0};
	const uint8_t *first = NULL;
	int got = 0;

	for (int tries = 0; tries < 100000 && got < want; tries++) {
		int n = urnic_net_recv(&consumer, consumer.rx_pkts, &t, 0);

		for (int i = 0; i < n; i++, got++) {
			const struct urnic_rxpkt *r = &consumer.rx_pkts[i];

			CHECK(got < want && r->local, "packet %u: %d of %d received, not local",
			      first_seq + (uint32_t)got, got, want);
			bool same = r->len == totals[got] &&
				    memcmp(r->data, sent_bytes[got], r->len) == 0;

			CHECK(same, "packet %u (%u bytes) differs or is out of order",
			      first_seq + (uint32_t)got, totals[got]);
			if (!first)
				first = r->data;
		}
		urnic_net_recv_done(&consumer);
	}
	CHECK(got == want, "packets %u..: %d of %d received", first_seq, got, want);
	return first;
}

/* One ping: packet seq sent alone and received before anything else; returns where it landed. */
static const uint8_t *ping(uint32_t seq)
{
	uint32_t total = PING_TOTAL;
	struct urnic_txpkt p;

	make_packet(&p, seq, total, sent_bytes[0]);
	send_run(&p, 1, seq);
	return receive(1, &total, seq);
}

static void ping_pong(void)
{
	size_t furthest = 0;

	for (uint32_t seq = 0; seq < PINGS; seq++) {
		const uint8_t *at = ping(seq);

		if (!ring_start)
			ring_start = at;
		CHECK(at >= ring_start, "packet %u landed before the ring's first record", seq);
		if ((size_t)(at - ring_start) > furthest)
			furthest = (size_t)(at - ring_start);
	}
	CHECK(furthest <= URNIC_SHM_REWIND_AT + 256,
	      "a ping-pong's records reached %zu bytes into the ring: it should have gone on from "
	      "its start at %u",
	      furthest, URNIC_SHM_REWIND_AT);
	printf("test_shm_rewind: %d ping-pong packets within %zu bytes of the ring's start\n",
	       PINGS, furthest);
}

/* Right after a rewind, before the consumer has read its wrap, the room left (at least
 * URNIC_SHM_REWIND_AT less the run that rewound) still takes a packet of URNIC_SHM_MTU: pings
 * find the rewinds' period, then the ping that rewinds and a packet of the largest size are
 * sent before either is received. */
static void room_after_rewind(void)
{
	uint32_t totals[2] = {PING_TOTAL, HDR_LEN + URNIC_SHM_MTU};
	uint32_t seq = PINGS, last = 0, period = 0;
	struct urnic_txpkt p;

	for (; period == 0 && seq < 4 * PINGS; seq++) {
		if (ping(seq) != ring_start)
			continue;
		period = last ? seq - last : 0;
		last = seq;
	}
	CHECK(period > 0, "no two rewinds in %u pings", seq - PINGS);
	for (uint32_t i = 1; i < period; i++, seq++)
		ping(seq);
	make_packet(&p, seq, totals[0], sent_bytes[0]);
	send_run(&p, 1, seq); /* the ring is empty, its head a period on: it rewinds */
	make_packet(&p, seq + 1, totals[1], sent_bytes[1]);
	send_run(&p, 1, seq + 1);
	CHECK(receive(2, totals, seq) == ring_start,
	      "packet %u did not go on from the ring's start", seq);
	printf("test_shm_rewind: a packet of %u bytes behind a rewind (a rewind every %u pings)\n",
	       totals[1], period);
}

static void bursts(void)
{
	static const uint32_t sizes[] = {HDR_LEN + 36, 1000, 4124, 9000, 17000, MAX_TOTAL};
	uint32_t seq = 0;

	for (int b = 0; b < BURSTS; b++) {
		struct urnic_txpkt pkts[BURST];
		uint32_t totals[BURST];

		for (int i = 0; i < BURST; i++) {
			/* mostly small runs (they rewind), now and then 156 KiB (too large to) */
			bool large = b % 7 == 3;

			totals[i] = large ? sizes[(size_t)(i % 3) + 3] : sizes[(size_t)(b + i) % 3];
			make_packet(&pkts[i], seq + (uint32_t)i, totals[i], sent_bytes[i]);
		}
		send_run(pkts, BURST, seq);
		receive(BURST, totals, seq);
		seq += BURST;
	}
	printf("test_shm_rewind: %u packets in runs of %d, in order, byte for byte\n", seq, BURST);
}

int main(void)
{
	setenv("URNIC_SHM", "1", 1);
	CHECK(urnic_net_open(&consumer, addr_of("127.88.4.1")) == 0, "open the consumer");
	CHECK(urnic_net_open(&producer, addr_of("127.88.4.2")) == 0, "open the producer");
	ping_pong();
	room_after_rewind();
	bursts();
	urnic_net_close(&producer);
	urnic_net_close(&consumer);
	return 0;
}
