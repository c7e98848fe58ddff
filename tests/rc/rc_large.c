/* rc_large: one 1 GiB RDMA WRITE, then one 1 GiB RDMA READ of it back, byte for byte: message
 * sizes go to at least 1 GiB (IBTA allows 2^31), through PSN wrap and every window refill. */
#include "rc_harness.h"

#include <string.h>

#define LARGE ((size_t)1 << 30)

static int server(struct rc *rc)
{
	rc_step(rc, "be written 1 GiB");
	memset(rc->buf, 0, LARGE);
	rc_sync(rc);
	rc_sync(rc); /* the WRITE completed */
	rc_check(rc, rc->buf, LARGE, 77, "1 GiB written");
	rc_sync(rc); /* checked: the client may read it back */
	rc_sync(rc); /* the READ completed */
	return RC_PASS;
}

static int client(struct rc *rc)
{
	struct rc_wr w;

	rc_step(rc, "write 1 GiB");
	rc_fill(rc->buf, LARGE, 77);
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, 1, 0, LARGE, 0);
	rc_sync(rc);
	rc_post_send(rc, 0, &w.wr);
	rc_poll(rc, rc->scq, (struct ibv_wc[1]){0}, 1, 240000);
	rc_sync(rc);
	rc_sync(rc);
	rc_step(rc, "read 1 GiB back");
	memset(rc->buf, 0, LARGE);
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 2, 0, LARGE, 0);
	rc_post_send(rc, 0, &w.wr);
	struct ibv_wc wc;

	rc_poll(rc, rc->scq, &wc, 1, 240000);
	rc_expect(rc, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	RC_CHECK(rc, wc.byte_len == LARGE, "READ byte_len %u", wc.byte_len);
	rc_check(rc, rc->buf, LARGE, 77, "1 GiB read back");
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_large");

	o.alarm_s = 290;
	o.timeout = 17; /* 0.5 s: a sanitizer build on a loaded machine can stall that long */
	o.buf_size = LARGE + RC_GUARD;
	return rc_run(&o, server, client);
}
