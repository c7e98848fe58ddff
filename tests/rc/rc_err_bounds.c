/* rc_err_bounds: requests that reach outside the remote MR fail without touching memory: a
 * WRITE or READ ending one byte past its end, a WRITE one byte before its start ->
 * IBV_WC_REM_ACCESS_ERR; a FETCH_ADD on an address that is not 8-byte aligned -> an Invalid
 * Request. One fresh connection per case. */
#include "rc_harness.h"

#include <errno.h>
#include <string.h>

enum { WRITE_PAST_END, READ_PAST_END, WRITE_BEFORE_START, ATOMIC_UNALIGNED, NCASES };
static const char *names[NCASES] = {"WRITE ending one byte past the MR",
				    "READ ending one byte past the MR",
				    "WRITE one byte before the MR", "FETCH_ADD at MR + 12"};
static int c;

static int server(struct rc *rc)
{
	size_t size = rc->o.buf_size;

	rc_step(rc, "%s", names[c]);
	memset(rc->buf, RC_CANARY, size); /* the unregistered guard after it is canary too */
	rc_sync(rc);
	rc_sync(rc);
	rc_check_const(rc, rc->buf, size, RC_CANARY, "responder MR");
	rc_check_const(rc, rc->buf + size, RC_GUARD, RC_CANARY, "memory right after the MR");
	return RC_PASS;
}

static int client(struct rc *rc)
{
	uint64_t size = rc->peer.size, len = rc->mtu + 1;
	struct rc_wr w;
	struct ibv_wc wc;

	rc_step(rc, "%s", names[c]);
	memset(rc->buf, RC_CANARY, len + 64);
	switch (c) {
	case WRITE_PAST_END:
		rc_wr(rc, &w, IBV_WR_RDMA_WRITE, 1, 0, len, size - len + 1);
		break;
	case READ_PAST_END:
		rc_wr(rc, &w, IBV_WR_RDMA_READ, 1, 0, len, size - len + 1);
		break;
	case WRITE_BEFORE_START:
		rc_wr(rc, &w, IBV_WR_RDMA_WRITE, 1, 0, 1, (uint64_t)-1);
		break;
	default:
		rc_wr(rc, &w, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 64, 8, 12);
		w.wr.wr.atomic.compare_add = 1;
	}
	rc_sync(rc);
	struct ibv_send_wr *bad = NULL;
	int r = ibv_post_send(rc->qp[0], &w.wr, &bad);
	if (c == ATOMIC_UNALIGNED && r == EINVAL) {
		/* rdma-core's rxe provider rejects a misaligned atomic at post time (EINVAL,
		 * validate_send_wr); hardware posts it and the responder NAKs it. */
		RC_CHECK(rc, bad == &w.wr, "bad_wr not set");
	} else {
		RC_CHECK(rc, r == 0, "ibv_post_send: %s", strerror(r));
		rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
		/* IBTA C9: VA/length outside the R_Key's region -> NAK Remote Access Error;
		 * a misaligned atomic VA -> NAK Invalid Request (rxe: RESPST_ERR_MISALIGNED_ATOMIC,
		 * class C). */
		rc_expect(rc, &wc, 1,
			  c == ATOMIC_UNALIGNED ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_ACCESS_ERR,
			  -1);
	}
	if (c == READ_PAST_END)
		rc_check_const(rc, rc->buf, len + 64, RC_CANARY, "local buffer (no response data)");
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_err_bounds");

	o.buf_size = RC_MIB;
	o.alarm_s = 30;
	return rc_run_cases(&o, NCASES, &c, NULL, server, client);
}
