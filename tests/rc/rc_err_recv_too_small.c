/* rc_err_recv_too_small: a SEND longer than the posted receive buffer completes with
 * IBV_WC_REM_INV_REQ_ERR at the requester and the receive WR with IBV_WC_LOC_LEN_ERR at the
 * responder; single- and multi-packet messages, and a receive with no SGE at all. */
#include "rc_harness.h"

static int c;

static void sizes(struct rc *rc, size_t *recv, size_t *send)
{
	const size_t r[] = {100, 2 * (size_t)rc->mtu, 0};

	*recv = r[c];
	*send = r[c] + 1;
}

static int server(struct rc *rc)
{
	size_t recv, send;
	struct ibv_wc wc;

	sizes(rc, &recv, &send);
	rc_step(rc, "receive %zu bytes into %zu", send, recv);
	rc_post_recv(rc, 0, 0x10, 0, recv);
	rc_sync(rc);
	rc_poll(rc, rc->rcq, &wc, 1, RC_WAIT_MS);
	/* IBTA 11.6.2 Local Length Error: the inbound message exceeds the receive buffers.
	 * (rxe reports IBV_WC_REM_INV_REQ_ERR here; mlx5 and the spec say LOC_LEN_ERR.) */
	rc_expect(rc, &wc, 0x10, IBV_WC_LOC_LEN_ERR, -1);
	rc_sync(rc);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	size_t recv, send;
	struct rc_wr w;
	struct ibv_wc wc;

	sizes(rc, &recv, &send);
	rc_step(rc, "send %zu bytes into %zu", send, recv);
	rc_fill(rc->buf, send, 1);
	rc_wr(rc, &w, IBV_WR_SEND, 0x20, 0, send, 0);
	rc_sync(rc);
	rc_post_send(rc, 0, &w.wr);
	rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
	/* IBTA C9: a length error at the responder is NAK Invalid Request. */
	rc_expect(rc, &wc, 0x20, IBV_WC_REM_INV_REQ_ERR, -1);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_err_recv_too_small");

	o.buf_size = RC_MIB;
	o.alarm_s = 30;
	return rc_run_cases(&o, 3, &c, NULL, server, client);
}
