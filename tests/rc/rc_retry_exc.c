/* rc_retry_exc: when the responder dies (SIGKILL) with WRITEs in flight, the requester's
 * first unacknowledged WR completes with IBV_WC_RETRY_EXC_ERR within the bound that timeout
 * and retry_cnt give, and every WR behind it flushes; completions stay in post order. */
#include "rc_harness.h"

#define TIMEOUT 10    /* 4.096 us * 2^10 = 4.2 ms per try */
#define RETRY_CNT 3   /* 1 + 3 tries: 16.8 ms; 67 ms even if each timer runs 4x long */
#define BOUND_MS 2000 /* the bound, with room for scheduling */
#define NBEFORE 16    /* 1 MiB WRITEs posted before the kill */
#define NAFTER 4      /* and after it: these cannot succeed */

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

	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, wr_id, 0, len, (wr_id % 8) * RC_MIB);
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

	rc_step(rc, "kill the responder mid-stream");
	for (uint64_t i = 0; i < NBEFORE; i++)
		post_write(rc, 100 + i, RC_MIB);
	double t_kill = rc_now_ms();
	rc_kill_peer(rc);
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
	RC_CHECK(
	    rc, t_err - t_kill < BOUND_MS,
	    "IBV_WC_RETRY_EXC_ERR %.0f ms after the kill; timeout %d, retry_cnt %d allow %d ms",
	    t_err - t_kill, TIMEOUT, RETRY_CNT, BOUND_MS);
	rc_expect_empty(rc, rc->scq, 20);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_retry_exc");

	o.buf_size = 8 * RC_MIB;
	o.alarm_s = 30;
	o.timeout = TIMEOUT;
	o.retry_cnt = RETRY_CNT;
	return rc_run(&o, server, client);
}
