/* rc_ack_hold: in a ping-pong of RDMA WRITEs where each application waits on memory (perftest's
 * write latency loop), the ACK for the peer's WRITE waits for this side's next WRITE on the QP
 * and goes with it (acks_with_requests), every value lands, and when no WRITE follows, the held
 * ACK still goes out by itself (URNIC_ACK_HOLD_NS, 20 us): the peer's WRITE completes without a
 * retransmission, where the peer's tail-loss probe would otherwise resend it after 250 us. A
 * scheduler that keeps an engine thread off its CPU can delay any ACK that long, so this is
 * tried up to TRIES times; without the timer no try can pass. Under TSan about one try in four
 * is held up so: with 3 tries rc_ack_hold_udp failed 1 of 60 runs at 1e2ff9c and 4 of 100 at
 * 1af37f3, with 5 tries 0 of 60. */
#include "rc_harness.h"

#include <string.h>
#include <time.h>

#include "common/stats.h"

#define ROUNDS 300
#define TRIES 5

static uint64_t delta(const uint64_t *after, const uint64_t *before, enum urnic_counter c)
{
	return after[c] - before[c];
}

/* Waits on memory (no verb called) until the peer's WRITE put v at the start of the buffer:
 * spinning, as perftest does, or, with pause, sleeping 20 us between looks, so that the engine
 * threads get a CPU at once (a spinner on the same CPU can keep them off for a scheduler tick). */
static void wait_value(struct rc *rc, uint64_t v, bool pause)
{
	const volatile uint64_t *slot = (const volatile uint64_t *)(void *)rc->buf;
	double start = rc_now_ms();

	while (*slot != v) {
		if (rc_now_ms() - start > RC_WAIT_MS)
			rc_fail(rc, "waited %u ms for the value %llu, found %llu", RC_WAIT_MS,
				(unsigned long long)v, (unsigned long long)*slot);
		if (pause) {
			struct timespec ts = {0, 20000};

			nanosleep(&ts, NULL);
		}
	}
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

/* Waits for the completion of WRITE v, sleeping 20 us between polls: a poll that spins would
 * keep the peer's engine thread, woken on this CPU by the packet this process just sent, off
 * it until the spin ends (1.8 ms seen). */
static void wait_write_paused(struct rc *rc, uint64_t v)
{
	struct timespec ts = {0, 20000};
	double start = rc_now_ms();
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(rc->scq, 1, &wc)) == 0) {
		RC_CHECK(rc, rc_now_ms() - start < RC_WAIT_MS, "no completion of WRITE %llu in %u ms",
			 (unsigned long long)v, RC_WAIT_MS);
		nanosleep(&ts, NULL);
	}
	RC_CHECK(rc, n == 1, "ibv_poll_cq returned %d", n);
	rc_expect(rc, &wc, v, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
}

static int server(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	uint64_t v = ROUNDS;

	memset(rc->buf, 0, 16);
	rc_read_counters(rc, before);
	rc_sync(rc);
	rc_step(rc, "answer %d WRITEs with a WRITE each, waiting on memory", ROUNDS - 1);
	for (uint64_t i = 1; i < ROUNDS; i++) {
		wait_value(rc, i, false);
		write_value(rc, i);
	}
	rc_read_counters(rc, after);
	uint64_t carried = delta(after, before, URNIC_C_acks_with_requests);

	RC_CHECK(rc, carried >= 1 && carried < ROUNDS,
		 "%llu ACKs went with the %d answering WRITEs (expected 1 to %d)",
		 (unsigned long long)carried, ROUNDS - 1, ROUNDS - 1);
	rc_step(rc, "after a pause, WRITE once more and take the answer, calling no other verb");
	for (int t = 0; t < TRIES; t++, v += 2) {
		rc_sync(rc);
		/* no poll for longer than the engine thread stands back: it has the socket again */
		rc_sleep_ms(5);
		post_value(rc, v);
		/* the engine thread places the answer and holds its ACK for a request that never
		 * comes; the client reports whether its WRITE needed a retransmission */
		uint64_t clean = rc_get(rc);

		wait_value(rc, v + 1, true);
		rc_wait(rc, rc->scq, v, IBV_WC_RDMA_WRITE, NULL);
		if (clean)
			break;
	}
	rc_sync(rc);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	uint64_t v = ROUNDS, resent = 0;

	memset(rc->buf, 0, 16);
	rc_sync(rc);
	rc_step(rc, "send %d WRITEs, each after the answer to the one before, then answer one",
		ROUNDS - 1);
	for (uint64_t i = 1; i < ROUNDS; i++) {
		write_value(rc, i);
		wait_value(rc, i, false);
	}
	for (int t = 0; t < TRIES; t++, v += 2) {
		rc_read_counters(rc, before);
		rc_sync(rc);
		wait_value(rc, v, true);
		post_value(rc, v + 1);
		wait_write_paused(rc, v + 1);
		rc_read_counters(rc, after);
		resent = delta(after, before, URNIC_C_retransmits);
		rc_put(rc, resent == 0);
		if (resent == 0)
			break;
		rc_step(rc, "try %d: the WRITE was sent again %llu time(s), tail-loss probes %llu",
			t + 1, (unsigned long long)resent,
			(unsigned long long)delta(after, before, URNIC_C_tail_probes));
	}
	RC_CHECK(rc, resent == 0,
		 "in each of %d tries the last WRITE was sent again: the ACK the server held did "
		 "not go by itself", TRIES);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_ack_hold");

	o.buf_size = 16 + RC_GUARD;
	return rc_run(&o, server, client);
}
