/* rc_retry_exc: when the responder dies (SIGKILL) with WRITEs in flight, the requester's
 * first unacknowledged WR completes with IBV_WC_RETRY_EXC_ERR within the bound that timeout
 * and retry_cnt give, and every WR behind it flushes; completions stay in post order.
 * --timing: with timeout 14 (67 ms) and retry_cnt 3 the error comes no earlier than 90% of the
 * (1 + retry_cnt) timeouts that the attributes imply: the fast retransmission timer below the IB
 * timeout (src/engine/retransmit.c) must not spend retries.
 * --stopped: the same bounds, but the responder is stopped (SIGSTOP) before the WRITEs, not
 * killed, and the WRITEs carry their payloads in the ring (URNIC_SHM_MR=0); the first, of
 * 6 MiB, fills it in its first sending (the fast timer no longer goes back on requests still
 * waiting in a ring, src/engine/retransmit.c, so sending again no longer fills it): the
 * packets that do
 * not fit are held back, and the requester must still give up (it waited forever when the IB
 * timer was timed to its cursor, which the held go-backs left at the oldest unacknowledged PSN).
 * Over UDP the stopped responder's socket drops what does not fit. */
#include "rc_harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"

#define RETRY_CNT 3   /* 1 + 3 tries */
#define NBEFORE 16    /* 1 MiB WRITEs posted before the kill */
#define NAFTER 4      /* and after it: these cannot succeed */
/* --stopped: the first WRITE's length, over the 4 MiB ring and under the 8 MiB window */
#define STOP_FIRST_LEN (6 * RC_MIB)

static struct {
	uint8_t timeout; /* 4.096 us * 2^timeout per try */
	double min_ms;	 /* the error may not come earlier than this after the kill */
	double max_ms;	 /* nor later: the bound, with room for scheduling */
	bool stop;	 /* SIGSTOP, not SIGKILL */
} mode = {10, 0, 2000, false}; /* 4.2 ms per try: 16.8 ms, 67 ms even if each timer runs 4x long */

static int server(struct rc *rc)
{
	rc_step(rc, "wait to be killed");
	rc_sync(rc);
	rc_sleep_ms(60 * 1000);
	rc_fail(rc, "still alive");
}

static void post_write(struct rc *rc, uint64_t wr_id, size_t len)
{
	struct rc_wr w;

	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, wr_id, 0, len, len > RC_MIB ? 0 : (wr_id % 8) * RC_MIB);
	rc_post_send(rc, 0, &w.wr);
}

static int client(struct rc *rc)
{
	struct ibv_wc wc;

	/* Single-packet WRITEs: with a 4 ms ACK timeout a live but descheduled peer on a loaded
	 * machine must not be mistaken for a dead one before the kill. */
	rc_step(rc, "traffic flows");
	for (uint64_t i = 0; i < 4; i++) {
		post_write(rc, i, 64);
		rc_wait(rc, rc->scq, i, IBV_WC_RDMA_WRITE, NULL);
	}
	rc_sync(rc);

	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	double t_kill = 0;

	rc_read_counters(rc, before);
	if (mode.stop) { /* stopped before any of the WRITEs: their first sending fills its ring */
		rc_step(rc, "stop the responder, then write");
		t_kill = rc_now_ms();
		rc_stop_peer(rc);
	}
	/* stopped: the first WRITE alone is more than the ring holds (posts behind a packet in
	 * flight wait for its ACK, which a stopped reader never sends) */
	for (uint64_t i = 0; i < NBEFORE; i++)
		post_write(rc, 100 + i, mode.stop && i == 0 ? STOP_FIRST_LEN : RC_MIB);
	if (!mode.stop) {
		rc_step(rc, "kill the responder mid-stream");
		t_kill = rc_now_ms();
		rc_kill_peer(rc);
	}
	for (uint64_t i = NBEFORE; i < NBEFORE + NAFTER; i++)
		post_write(rc, 100 + i, RC_MIB);

	int ok = 0, retry_exc = 0, flushed = 0;
	double t_err = 0;
	for (uint64_t i = 0; i < NBEFORE + NAFTER; i++) {
		rc_step(rc, "completion %llu of %d (%d ok, %d retry-exceeded, %d flushed so far)",
			(unsigned long long)i, NBEFORE + NAFTER, ok, retry_exc, flushed);
		rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
		if (retry_exc == 0 && wc.status == IBV_WC_SUCCESS) {
			rc_expect(rc, &wc, 100 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
			ok++;
		} else if (retry_exc == 0) {
			/* IBTA: transport retry counter exceeded. */
			rc_expect(rc, &wc, 100 + i, IBV_WC_RETRY_EXC_ERR, -1);
			t_err = rc_now_ms();
			retry_exc++;
		} else {
			rc_expect(rc, &wc, 100 + i, IBV_WC_WR_FLUSH_ERR, -1);
			flushed++;
		}
	}
	RC_CHECK(rc, retry_exc == 1 && ok <= NBEFORE, "%d ok, %d retry-exceeded", ok, retry_exc);
	RC_CHECK(rc, t_err - t_kill >= mode.min_ms && t_err - t_kill < mode.max_ms,
		 "IBV_WC_RETRY_EXC_ERR %.0f ms after the %s; timeout %d, retry_cnt %d: %.0f .. "
		 "%.0f ms",
		 t_err - t_kill, mode.stop ? "stop" : "kill", mode.timeout, RETRY_CNT, mode.min_ms,
		 mode.max_ms);
	rc_read_counters(rc, after);
	/* over the rings, what --stopped is about: the ring filled and held requests back */
	RC_CHECK(rc, !mode.stop || strcmp(rc->path, "shm") != 0 ||
			     (after[URNIC_C_shm_ring_full] > before[URNIC_C_shm_ring_full] &&
			      after[URNIC_C_tx_held] > before[URNIC_C_tx_held]),
		 "the stopped reader's ring never filled: %llu packets found it full, %llu held",
		 (unsigned long long)(after[URNIC_C_shm_ring_full] - before[URNIC_C_shm_ring_full]),
		 (unsigned long long)(after[URNIC_C_tx_held] - before[URNIC_C_tx_held]));
	printf("rc_retry_exc: IBV_WC_RETRY_EXC_ERR %.1f ms after the %s (timeout %d, retry_cnt "
	       "%d imply %.1f ms)\n",
	       t_err - t_kill, mode.stop ? "stop" : "kill", mode.timeout, RETRY_CNT,
	       (1 + RETRY_CNT) * 4.096e-3 * (double)(1u << mode.timeout));
	rc_expect_empty(rc, rc->scq, 20);
	if (mode.stop)
		rc_kill_peer(rc);
	return RC_PASS;
}

int main(int argc, char **argv)
{
	struct rc_opts o = rc_defaults("rc_retry_exc");

	bool stopped = argc > 1 && strcmp(argv[1], "--stopped") == 0;

	if (stopped || (argc > 1 && strcmp(argv[1], "--timing") == 0)) {
		double implied = (1 + RETRY_CNT) * 4.096e-3 * (double)(1u << 14);

		mode.timeout = 14;
		mode.min_ms = 0.9 * implied;
		mode.max_ms = 3 * implied + 200;
	}
	if (stopped) {
		mode.stop = true;
		setenv("URNIC_SHM_MR", "0", 1);
	}
	o.buf_size = 8 * RC_MIB;
	o.alarm_s = 30;
	o.timeout = mode.timeout;
	o.retry_cnt = RETRY_CNT;
	return rc_run(&o, server, client);
}
