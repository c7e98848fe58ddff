/* test_fault: the fault injector's reordering (src/net/fault.c). A reordered packet arrives
 * after 1 to depth later ones, as an unchanged copy, or once it has been held
 * URNIC_FAULT_HOLD_NS when no later one comes; every packet arrives once; a held packet's buffer
 * is not taken for another while the batch it was released into is being read; and a depth
 * outside 1..URNIC_FAULT_DEPTH is refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/fault.h"
#include "check.h"

#define NPKTS 20000
#define PKT_LEN 64

static struct urnic_fault fault;
static uint8_t wire[URNIC_RX_BATCH][PKT_LEN]; /* the receive buffers, reused every batch */

/* Packet k: PKT_LEN bytes, each k's low byte plus its offset, k in the first four. */
static void make(struct urnic_rxpkt *p, uint8_t *buf, uint32_t k)
{
	for (int i = 0; i < PKT_LEN; i++)
		buf[i] = (uint8_t)(k + (uint32_t)i);
	memcpy(buf, &k, sizeof(k));
	*p = (struct urnic_rxpkt){.len = PKT_LEN, .data = buf};
}

/* The number packet p carries, its bytes checked. */
static uint32_t number(const struct urnic_rxpkt *p)
{
	uint32_t k;

	CHECK(p->len == PKT_LEN, "a packet of %u bytes", p->len);
	memcpy(&k, p->data, sizeof(k));
	for (int i = (int)sizeof(k); i < PKT_LEN; i++)
		CHECK(p->data[i] == (uint8_t)(k + (uint32_t)i), "packet %u: byte %d changed", k, i);
	return k;
}

static void config_refused(const char *spec)
{
	CHECK(urnic_fault_config(&fault, spec) == -EINVAL, "\"%s\" accepted", spec);
}

/* Feeds NPKTS packets in batches of up to batch through fault configured by spec; checks each
 * arrives once, unchanged, at most maxshift places later than it would have; returns the
 * largest shift seen. */
static unsigned run(const char *spec, int batch, unsigned maxshift)
{
	static uint32_t arrived_at[NPKTS];
	struct urnic_rxpkt pkts[URNIC_RX_BATCH];
	uint32_t sent = 0, got = 0;
	unsigned widest = 0;

	CHECK(urnic_fault_config(&fault, spec) == 0, "\"%s\" refused", spec);
	memset(arrived_at, 0xff, sizeof(arrived_at));
	while (sent < NPKTS) {
		int n = 0;

		while (n < batch && sent < NPKTS) {
			make(&pkts[n], wire[n], sent++);
			n++;
		}
		n = urnic_fault_apply(&fault, pkts, n, URNIC_RX_BATCH);
		for (int i = 0; i < n; i++) {
			uint32_t k = number(&pkts[i]);

			CHECK(k < NPKTS && arrived_at[k] == UINT32_MAX, "%s: packet %u twice", spec,
			      k);
			arrived_at[k] = got++;
		}
		memset(wire, 0xee, sizeof(wire)); /* the next receive overwrites the buffers */
	}
	for (uint32_t k = 0; k < NPKTS; k++) {
		if (arrived_at[k] == UINT32_MAX) { /* held at the end: one of the last few */
			CHECK(k + URNIC_FAULT_HELD * maxshift >= NPKTS, "%s: packet %u lost", spec,
			      k);
			continue;
		}
		/* packets before k that arrived after it: how far k overtook, or was overtaken */
		unsigned shift = arrived_at[k] > k ? arrived_at[k] - k : 0;

		CHECK(shift <= maxshift, "%s: packet %u arrived %u places late", spec, k, shift);
		widest = shift > widest ? shift : widest;
	}
	CHECK(fault.reordered > 0, "%s: nothing reordered", spec);
	return widest;
}

/* Three packets, all held; nothing arrives before URNIC_FAULT_HOLD_NS has passed, then all three
 * do, from an empty receive. */
static void held_at_most_hold_ns(void)
{
	struct urnic_rxpkt pkts[URNIC_RX_BATCH];
	struct timespec hold = {.tv_nsec = (long)(2 * URNIC_FAULT_HOLD_NS)};

	CHECK(urnic_fault_config(&fault, "reorder=1,depth=256,seed=1") == 0, "refused");
	CHECK(urnic_fault_due_ns(&fault) == UINT64_MAX, "a due time with nothing held");
	for (uint32_t k = 0; k < 3; k++)
		make(&pkts[k], wire[k], k);
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(urnic_fault_apply(&fault, pkts, 3, URNIC_RX_BATCH) == 0, "a packet not held");
	CHECK(urnic_fault_due_ns(&fault) != UINT64_MAX, "no due time with packets held");
	int early = urnic_fault_apply(&fault, pkts, 0, URNIC_RX_BATCH);

	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* unless this thread was descheduled for the whole hold in between */
	if ((uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec)) <
	    URNIC_FAULT_HOLD_NS)
		CHECK(early == 0, "released at once");
	nanosleep(&hold, NULL);
	int n = early ? early : urnic_fault_apply(&fault, pkts, 0, URNIC_RX_BATCH);

	CHECK(n == 3, "%d of 3 held packets arrived after twice the longest hold", n);
	for (uint32_t k = 0; k < 3; k++)
		CHECK(number(&pkts[k]) == k, "packet %u out of slot order", k);
	CHECK(urnic_fault_due_ns(&fault) == UINT64_MAX, "a due time with nothing held");
}

int main(void)
{
	config_refused("depth=0");
	config_refused("depth=-1");
	config_refused("depth=257");
	config_refused("depth=8x");

	/* depth 1: after the next one; a packet overtaken by held ones is late by at most their
	 * number */
	run("reorder=0.05,seed=3", 1, URNIC_FAULT_HELD);
	unsigned w = run("reorder=0.05,depth=1,seed=3", 32, URNIC_FAULT_HELD);

	CHECK(w >= 1, "depth 1: no packet arrived late");
	/* depth 32: up to 32 later packets, and those held and released in between */
	w = run("reorder=0.2,depth=32,seed=5", 1, 32 + URNIC_FAULT_HELD);
	CHECK(w > 8, "depth 32: no packet more than %u places late", w);
	run("reorder=0.2,depth=32,seed=5", URNIC_RX_BATCH, 32 + URNIC_FAULT_HELD);
	/* every packet held that can be: the slots fill, and all 16 wait behind one packet */
	run("reorder=1,depth=1,seed=9", 7, 2 * URNIC_FAULT_HELD);
	held_at_most_hold_ns();
	printf("test_fault: ok\n");
	return 0;
}
