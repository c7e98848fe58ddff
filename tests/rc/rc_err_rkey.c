/* rc_err_rkey: an RDMA WRITE with a wrong rkey completes with IBV_WC_REM_ACCESS_ERR, writes
 * nothing, and moves the requester to ERR: WRs behind it and WRs posted afterwards complete
 * with IBV_WC_WR_FLUSH_ERR, in order. */
#include "rc_harness.h"

#include <string.h>

#define AREA (64 * 1024)

static int server(struct rc *rc)
{
	memset(rc->buf, RC_CANARY, AREA);
	rc_sync(rc);
	rc_step(rc, "nothing landed");
	rc_sync(rc);
	/* IBTA C9 responder class C error: NAK, no data placed, responder QP to Error, so the
	 * WRITE pipelined behind the bad one is not executed either. */
	rc_check_const(rc, rc->buf, AREA, RC_CANARY, "responder memory");
	return RC_PASS;
}

static int client(struct rc *rc)
{
	struct rc_wr w[3];
	struct ibv_wc wc[3];

	rc_fill(rc->buf, AREA, 1);
	rc_sync(rc);

	rc_step(rc, "bad-rkey WRITE with two WRs behind it");
	rc_wr(rc, &w[0], IBV_WR_RDMA_WRITE, 1, 0, rc->mtu + 1, 0);
	w[0].wr.wr.rdma.rkey =
	    rc->peer.rkey ^ 0x5a; /* the server has one MR: any other key is bad */
	rc_wr(rc, &w[1], IBV_WR_RDMA_WRITE, 2, 0, rc->mtu + 1, 0);
	rc_wr(rc, &w[2], IBV_WR_SEND, 3, 0, 16, 0);
	w[0].wr.next = &w[1].wr;
	w[1].wr.next = &w[2].wr;
	rc_post_send(rc, 0, &w[0].wr);
	rc_poll(rc, rc->scq, wc, 3, RC_WAIT_MS);
	rc_expect(rc, &wc[0], 1, IBV_WC_REM_ACCESS_ERR, -1); /* IBTA NAK remote access error */
	rc_expect(rc, &wc[1], 2, IBV_WC_WR_FLUSH_ERR, -1);   /* IBTA: the QP is in Error */
	rc_expect(rc, &wc[2], 3, IBV_WC_WR_FLUSH_ERR, -1);

	rc_step(rc, "the QP is in ERR");
	enum ibv_qp_state st = rc_qp_state(rc, rc->qp[0]);
	RC_CHECK(rc, st == IBV_QPS_ERR, "state %d after a completion error, expected ERR (%d)", st,
		 IBV_QPS_ERR);

	rc_step(rc, "WRs posted in ERR flush");
	rc_wr(rc, &w[0], IBV_WR_RDMA_WRITE, 4, 0, 8, 0);
	rc_wr(rc, &w[1], IBV_WR_SEND, 5, 0, 8, 0);
	rc_wr(rc, &w[2], IBV_WR_RDMA_READ, 6, 0, 8, 0);
	w[0].wr.next = &w[1].wr;
	w[1].wr.next = &w[2].wr;
	rc_post_send(rc, 0, &w[0].wr); /* IBTA: posting to an Error QP succeeds, then flushes */
	rc_poll(rc, rc->scq, wc, 3, RC_WAIT_MS);
	for (int i = 0; i < 3; i++)
		rc_expect(rc, &wc[i], 4 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR, -1);
	rc_expect_empty(rc, rc->scq, 20);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_err_rkey");

	o.buf_size = RC_MIB;
	return rc_run(&o, server, client);
}
