/* rc_rnr_retry_exc: a SEND that finds no receive WR is RNR-NAKed. With rnr_retry = 1 it
 * completes with IBV_WC_RNR_RETRY_EXC_ERR; with rnr_retry = 7 (retry forever) it waits,
 * lands once the receiver posts a receive 200 ms later, and only then completes. */
#include "rc_harness.h"

#define LATE_MS 200

static int c; /* 0: rnr_retry 1, 1: rnr_retry 7 */

static int server(struct rc *rc)
{
	struct ibv_wc wc;

	if (c == 0) {
		rc_step(rc, "no receive posted");
		rc_sync(rc);
		rc_sync(rc);
		rc_expect_empty(rc, rc->rcq, 20);
		return RC_PASS;
	}
	rc_step(rc, "post the receive %d ms late", LATE_MS);
	rc_sync(rc);
	rc_sleep_ms(LATE_MS);
	rc_post_recv(rc, 0, 0x10, 0, 2 * rc->mtu);
	rc_wait(rc, rc->rcq, 0x10, IBV_WC_RECV, &wc);
	RC_CHECK(rc, wc.byte_len == rc->mtu + 1, "byte_len %u, expected %u", wc.byte_len,
		 rc->mtu + 1);
	rc_check(rc, rc->buf, rc->mtu + 1, 7, "data delivered after RNR NAKs");
	rc_sync(rc);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	struct rc_wr w;
	struct ibv_wc wc;

	rc_fill(rc->buf, rc->mtu + 1, 7);
	rc_wr(rc, &w, IBV_WR_SEND, 0x20, 0, rc->mtu + 1, 0);
	rc_sync(rc);
	double t0 = rc_now_ms();
	rc_post_send(rc, 0, &w.wr);
	if (c == 0) {
		rc_step(rc, "rnr_retry 1: retries exhausted");
		rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
		rc_expect(rc, &wc, 0x20, IBV_WC_RNR_RETRY_EXC_ERR,
			  -1); /* IBTA: RNR retry count exceeded */
	} else {
		rc_step(rc, "rnr_retry 7: waits for the late receive");
		rc_wait(rc, rc->scq, 0x20, IBV_WC_SEND, NULL);
		/* An RC SEND completes only once acknowledged, and the ACK needs the receive. */
		double dt = rc_now_ms() - t0;
		RC_CHECK(rc, dt >= LATE_MS * 3 / 4,
			 "SEND completed after %.1f ms, before the receive was posted (%d ms)", dt,
			 LATE_MS);
	}
	rc_sync(rc);
	return RC_PASS;
}

static void adjust(struct rc_opts *o, int i)
{
	o->rnr_retry = i == 0 ? 1 : 7;
	o->min_rnr_timer = i == 0 ? 1 : 14; /* 0.01 ms; 1.28 ms (IBTA RNR timer table) */
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_rnr_retry_exc");

	o.buf_size = RC_MIB;
	o.alarm_s = 30;
	return rc_run_cases(&o, 2, &c, adjust, server, client);
}
