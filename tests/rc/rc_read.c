/* rc_read: RDMA READ of every size brings the remote bytes intact into the local buffer and
 * writes nothing past the requested length. */
#include "rc_harness.h"

#include <string.h>

#define ROFF 5

static int server(struct rc *rc)
{
	size_t sizes[RC_NSIZES];
	int n = rc_sizes(rc, rc->o.buf_size - RC_GUARD - ROFF, sizes);

	for (int i = 0; i < n; i++) {
		rc_step(rc, "be read %zu bytes", sizes[i]);
		rc_fill(rc->buf + ROFF, sizes[i], 3000 + (uint32_t)i);
		rc_sync(rc);
		rc_sync(rc);
		/* A READ leaves the responder's memory as it was. */
		rc_check(rc, rc->buf + ROFF, sizes[i], 3000 + (uint32_t)i, "source after the read");
	}
	rc_expect_empty(rc, rc->rcq, 10);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	size_t sizes[RC_NSIZES];
	int n = rc_sizes(rc, rc->o.buf_size - RC_GUARD - ROFF, sizes);

	for (int i = 0; i < n; i++) {
		size_t len = sizes[i];
		struct rc_wr w;

		rc_step(rc, "read %zu bytes", len);
		memset(rc->buf, RC_CANARY, len + RC_GUARD);
		rc_wr(rc, &w, IBV_WR_RDMA_READ, 0x200 + i, 0, len, ROFF);
		rc_sync(rc);
		rc_post_send(rc, 0, &w.wr);
		rc_wait(rc, rc->scq, 0x200 + i, IBV_WC_RDMA_READ, NULL);
		rc_check(rc, rc->buf, len, 3000 + (uint32_t)i, "read data");
		rc_check_const(rc, rc->buf + len, RC_GUARD, RC_CANARY, "bytes past the read");
		rc_sync(rc);
	}
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_read");

	return rc_run(&o, server, client);
}
