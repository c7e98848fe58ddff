/* test_shm_batch: the packets of one send call to one ring peer reach the consumer together. A
 * consumer thread polls its rings while a producer sends pairs (an "ACK" and a "WRITE", as a
 * request that carries an owed ACK sends them); every receive call must hold whole pairs, in
 * order, byte for byte. A pair seen apart let a poll return the first packet's completion while
 * the second waited in the ring with no one to read it (ib_write_lat's tail-loss probes). The
 * producer stays far behind a full ring, where a split would be a fair answer. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/net.h"
#include "net/shm.h"
#include "check.h"

#define PAIRS 200000
#define AHEAD 512 /* pairs the producer may be ahead of the consumer: 64 KiB of a 4 MiB ring */
#define PKT_LEN 24
#define LIMIT_NS 20000000000ull

static struct urnic_net consumer, producer;
static atomic_uint taken;    /* pairs the consumer has checked */
static atomic_bool finished; /* the consumer saw every pair, or failed */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Packet half (0: the ACK, 1: the WRITE) of pair i: its tag, then the pair's number. */
static void fill(uint8_t *p, unsigned i, int half)
{
	memset(p, half ? 'W' : 'A', PKT_LEN);
	memcpy(p + 4, &i, sizeof(i));
}

static void make_pair(struct urnic_txpkt pkts[2], unsigned i)
{
	for (int h = 0; h < 2; h++) {
		pkts[h] = (struct urnic_txpkt){.daddr = consumer.addr, .iovcnt = 1, .len = PKT_LEN};
		fill(pkts[h].hdr, i, h);
		pkts[h].iov[0] = (struct iovec){.iov_base = pkts[h].hdr, .iov_len = PKT_LEN};
	}
}

static void *produce(void *arg)
{
	struct urnic_txpkt pkts[2];
	struct urnic_net_tally t = {0};
	uint64_t start = now_ns();

	(void)arg;
	for (unsigned i = 0; i < PAIRS && !atomic_load(&finished); i++) {
		while (i - atomic_load(&taken) >= AHEAD && !atomic_load(&finished))
			CHECK(now_ns() - start < LIMIT_NS, "the consumer stopped at pair %u",
			      atomic_load(&taken));
		make_pair(pkts, i);
		CHECK(urnic_net_send(&producer, pkts, 2, &t, NULL) == 2, "pair %u not sent", i);
	}
	return NULL;
}

/* One receive call's ring packets: whole pairs, the next ones expected. */
static void check_call(const struct urnic_rxpkt *pkts, int n, unsigned *next)
{
	uint8_t want[PKT_LEN];
	int local = 0;

	for (int k = 0; k < n; k++) {
		/* the consumer's inbox is there before the first send: the ring from the start */
		CHECK(pkts[k].local, "pair %u came by UDP", *next);
		fill(want, *next, local % 2);
		CHECK(pkts[k].len == PKT_LEN && memcmp(pkts[k].data, want, PKT_LEN) == 0,
		      "pair %u: packet %d is not what was sent", *next, local % 2);
		if (++local % 2 == 0)
			atomic_store(&taken, ++*next);
	}
	CHECK(local % 2 == 0, "pair %u seen apart: its ACK in one receive, its WRITE later",
	      *next);
}

int main(void)
{
	pthread_t thread;
	struct urnic_net_tally t = {0};
	unsigned next = 0;
	uint64_t start = now_ns();

	setenv("URNIC_SHM", "1", 1);
	CHECK(urnic_net_open(&consumer, addr_of("127.88.2.1")) == 0, "open the consumer");
	CHECK(urnic_net_open(&producer, addr_of("127.88.2.2")) == 0, "open the producer");
	CHECK(pthread_create(&thread, NULL, produce, NULL) == 0, "start the producer");
	while (next < PAIRS) {
		int n = urnic_net_recv(&consumer, consumer.rx_pkts, &t, 0);

		check_call(consumer.rx_pkts, n, &next);
		urnic_net_recv_done(&consumer);
		if (now_ns() - start > LIMIT_NS)
			break;
	}
	atomic_store(&finished, true);
	pthread_join(thread, NULL);
	CHECK(next == PAIRS, "%u of %u pairs arrived", next, PAIRS);
	urnic_net_close(&producer);
	urnic_net_close(&consumer);
	printf("test_shm_batch: %u pairs, none apart\n", next);
	return 0;
}
