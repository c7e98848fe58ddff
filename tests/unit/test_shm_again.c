/* test_shm_again: a ring's producer rings its reader's doorbell (a control datagram to the
 * reader's socket) for a packet it sends again (txpkt.again: a probe, a go-back), even while
 * the reader is not asleep, and not for a first sending (net/shm.c, produce). A standing-back
 * engine thread on rings alone listens for that doorbell, so an application taken for a busy
 * poller that stopped polling to wait on memory gets its peer's packet at the peer's probe,
 * not at the engine thread's re-check (engine.c, sleep_until). Each packet is checked byte for
 * byte after the ring carried it. */
#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/param.h"
#include "net/net.h"
#include "net/shm.h"
#include "check.h"

#define HDR_LEN 28 /* a BTH and a RETH, as a WRITE's first packet */
#define TOTAL 64

static struct urnic_net consumer, producer;
static uint8_t sent_bytes[TOTAL];

/* *p: packet number seq, each byte its offset plus seq times 37 (kept in sent_bytes). */
static void make_packet(struct urnic_txpkt *p, uint32_t seq, bool again)
{
	for (uint32_t i = 0; i < TOTAL; i++)
		sent_bytes[i] = (uint8_t)(i + seq * 37u);
	*p = (struct urnic_txpkt){.daddr = consumer.addr, .len = TOTAL, .again = again};
	memcpy(p->hdr, sent_bytes, HDR_LEN);
	p->iov[p->iovcnt++] = (struct iovec){.iov_base = p->hdr, .iov_len = HDR_LEN};
	p->iov[p->iovcnt++] =
		(struct iovec){.iov_base = sent_bytes + HDR_LEN, .iov_len = TOTAL - HDR_LEN};
}

/* Whether a datagram waits on the consumer's socket within wait_ms. */
static bool datagram_waiting(int wait_ms)
{
	struct pollfd p = {.fd = consumer.rx_fd, .events = POLLIN};

	return poll(&p, 1, wait_ms) > 0 && (p.revents & POLLIN);
}

/* Sends packet seq through the ring (again or not), and receives it, byte for byte, from the
 * ring; returns whether a doorbell came with it. */
static bool send_and_receive(uint32_t seq, bool again)
{
	struct urnic_net_tally t = {0};
	struct urnic_txpkt p;
	bool rang;
	int got = 0;

	make_packet(&p, seq, again);
	CHECK(urnic_net_send(&producer, &p, 1, &t, NULL) == 1, "packet %u not sent", seq);
	rang = datagram_waiting(again ? 2000 : 100);
	if (rang) /* as the engine thread that the datagram woke: the next receive reads it */
		atomic_store(&consumer.sock_due, true);
	for (int tries = 0; tries < 100000 && got == 0; tries++) {
		int n = urnic_net_recv(&consumer, consumer.rx_pkts, &t, 0);

		for (int i = 0; i < n; i++, got++) {
			const struct urnic_rxpkt *r = &consumer.rx_pkts[i];

			CHECK(got == 0 && r->local, "packet %u: more than one, or not by the ring",
			      seq);
			CHECK(r->len == TOTAL && memcmp(r->data, sent_bytes, TOTAL) == 0,
			      "packet %u differs", seq);
		}
		urnic_net_recv_done(&consumer);
	}
	CHECK(got == 1, "packet %u not received", seq);
	CHECK(!datagram_waiting(0), "after packet %u the consumer's socket still holds a datagram",
	      seq);
	return rang;
}

int main(void)
{
	setenv("URNIC_SHM", "1", 1);
	CHECK(urnic_net_open(&consumer, addr_of("127.88.5.1")) == 0, "open the consumer");
	CHECK(urnic_net_open(&producer, addr_of("127.88.5.2")) == 0, "open the producer");
	/* the first packet announces the ring (a control datagram): the receive maps it */
	(void)send_and_receive(0, false);
	for (uint32_t seq = 1; seq <= 20; seq++) {
		bool again = seq % 2 == 0;
		bool rang = send_and_receive(seq, again);

		CHECK(rang == again, "packet %u, %s: the doorbell %s", seq,
		      again ? "sent again" : "a first sending", rang ? "rang" : "did not ring");
	}
	printf("test_shm_again: 10 packets sent again rang the awake reader's doorbell, 10 first "
	       "sendings did not\n");
	urnic_net_close(&producer);
	urnic_net_close(&consumer);
	return 0;
}
