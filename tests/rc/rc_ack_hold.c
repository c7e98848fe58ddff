/* rc_ack_hold: in a ping-pong of RDMA WRITEs where each application waits on memory (perftest's
 * write latency loop), the ACK for the peer's WRITE waits for this side's next WRITE on the QP
 * and goes with it (acks_with_requests), every value lands, and when no WRITE follows, the held
 * ACK still goes out by itself (URNIC_ACK_HOLD_NS): the peer's last WRITE completes without a
 * retransmission. */
#include "rc_harness.h"

#include <string.h>

#include "common/stats.h"

#define ROUNDS 300

static uint64_t delta(const uint64_t *after, const uint64_t *before, enum urnic_counter c)
{
	return after[c] - before[c];
}

/* Waits on memory (no verb called) until the peer's WRITE put v at the start of the buffer. */
static void wait_value(struct rc *rc, uint64_t v)
{
	const volatile uint64_t *slot = (const volatile uint64_t *)(void *)rc->buf;
	double start = rc_now_ms();

	while (*slot != v)
		if (rc_now_ms() - start > RC_WAIT_MS)
			rc_fail(rc, "waited %u ms for the value %llu, found %llu", RC_WAIT_MS,
				(unsigned long long)v, (unsigned long long)*slot);
}

/* Posts a WRITE of v to the start of the peer's buffer (from offset 8 of ours). */
static void post_value(struct rc *rc, uint64_t v)
{
	struct rc_wr w;

	memcpy(rc->buf + 8, &v, sizeof(v));
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, v, 8, sizeof(v), 0);
	rc_post_send(rc, 0, &w.wr);
}

/* The same, and waits for its completion. */
static void write_value(struct rc *rc, uint64_t v)
{
	post_value(rc, v);
	rc_wait(rc, rc->scq, v, IBV_WC_RDMA_WRITE, NULL);
}

static int server(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];

	memset(rc->buf, 0, 16);
	rc_read_counters(rc, before);
	rc_sync(rc);
	rc_step(rc, "answer %d WRITEs with a WRITE each, waiting on memory", ROUNDS);
	for (uint64_t i = 1; i < ROUNDS; i++) {
		wait_value(rc, i);
		write_value(rc, i);
	}
	/* the last answer is not waited for: the engine thread takes the next WRITE, and holds
	 * its ACK for a request that does not come */
	wait_value(rc, ROUNDS);
	post_value(rc, ROUNDS);
	rc_step(rc, "take one more WRITE and answer nothing, calling no verb");
	wait_value(rc, ROUNDS + 1);
	rc_sync(rc); /* the client's last WRITE completed (or failed the test) */
	rc_wait(rc, rc->scq, ROUNDS, IBV_WC_RDMA_WRITE, NULL);
	rc_read_counters(rc, after);
	uint64_t carried = delta(after, before, URNIC_C_acks_with_requests);

	RC_CHECK(rc, carried >= 1 && carried <= ROUNDS,
		 "%llu ACKs went with the %d answering WRITEs (expected 1 to %d)",
		 (unsigned long long)carried, ROUNDS, ROUNDS);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];

	memset(rc->buf, 0, 16);
	rc_sync(rc);
	rc_step(rc, "send %d WRITEs, each after the answer to the one before, then one more",
		ROUNDS);
	for (uint64_t i = 1; i <= ROUNDS; i++) {
		if (i == ROUNDS) /* the last one follows at once: its answer was sent just now */
			rc_read_counters(rc, before);
		write_value(rc, i);
		wait_value(rc, i);
	}
	write_value(rc, ROUNDS + 1);
	rc_read_counters(rc, after);
	RC_CHECK(rc, delta(after, before, URNIC_C_retransmits) == 0,
		 "the last WRITE was sent again %llu time(s) (tail-loss probes %llu, timer "
		 "expiries %llu): the ACK the server held did not go by itself",
		 (unsigned long long)delta(after, before, URNIC_C_retransmits),
		 (unsigned long long)delta(after, before, URNIC_C_tail_probes),
		 (unsigned long long)delta(after, before, URNIC_C_rto_expiries));
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_ack_hold");

	o.buf_size = 16 + RC_GUARD;
	return rc_run(&o, server, client);
}
