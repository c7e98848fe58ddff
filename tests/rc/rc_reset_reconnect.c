/* rc_reset_reconnect: QPs driven into ERR (by a bad-rkey WRITE on the client, by
 * ibv_modify_qp on the server) flush what they hold, then go RESET -> INIT -> RTR -> RTS with
 * new PSNs and carry SEND, WRITE and READ traffic both ways again. */
#include "rc_harness.h"

#include <string.h>

#define LEN (RC_MIB + 3)
#define MSG_OFF (2 * RC_MIB)
#define READ_OFF (4 * RC_MIB)

static void expect_state(struct rc *rc, enum ibv_qp_state want)
{
	enum ibv_qp_state st = rc_qp_state(rc, rc->qp[0]);

	RC_CHECK(rc, st == want, "QP state %d, expected %d", st, want);
}

/* Both sides: RESET, then a fresh connection with new PSNs. */
static void reconnect(struct rc *rc)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};

	rc_step(rc, "ERR -> RESET");
	rc_modify(rc, rc->qp[0], &a, IBV_QP_STATE);
	expect_state(rc, IBV_QPS_RESET);
	rc_expect_empty(rc, rc->scq, 10);
	rc_expect_empty(rc, rc->rcq, 10);
	rc->me.psn[0] = (rc->me.psn[0] + 0x123457) & 0xffffff;
	rc_exchange(rc);
	rc_connect(rc);
	expect_state(rc, IBV_QPS_RTS);
}

static int server(struct rc *rc)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	struct ibv_wc wc[2];

	rc_step(rc, "first connection works");
	rc_post_recv(rc, 0, 1, MSG_OFF, 64);
	rc_sync(rc);
	rc_wait(rc, rc->rcq, 1, IBV_WC_RECV, NULL);

	rc_step(rc, "to ERR: posted receives flush");
	rc_post_recv(rc, 0, 2, MSG_OFF, 64);
	rc_post_recv(rc, 0, 3, MSG_OFF, 64);
	rc_sync(rc); /* the client's QP is in ERR */
	rc_modify(rc, rc->qp[0], &a, IBV_QP_STATE);
	expect_state(rc, IBV_QPS_ERR);
	rc_poll(rc, rc->rcq, wc, 2, RC_WAIT_MS);
	rc_expect(rc, &wc[0], 2, IBV_WC_WR_FLUSH_ERR, -1);
	rc_expect(rc, &wc[1], 3, IBV_WC_WR_FLUSH_ERR, -1);
	rc_sync(rc);

	reconnect(rc);

	rc_step(rc, "traffic after reconnect");
	memset(rc->buf, RC_CANARY, MSG_OFF + 64);
	rc_fill(rc->buf + READ_OFF, LEN, 22);
	rc_post_recv(rc, 0, 4, MSG_OFF, 64);
	rc_sync(rc);
	rc_wait(rc, rc->rcq, 4, IBV_WC_RECV, NULL); /* SEND after the WRITE: the WRITE landed */
	rc_check(rc, rc->buf + MSG_OFF, 64, 23, "SEND data");
	rc_check(rc, rc->buf, LEN, 21, "WRITE data");
	rc_check_const(rc, rc->buf + LEN, 64, RC_CANARY, "bytes past the WRITE");
	rc_fill(rc->buf + MSG_OFF, 64, 24);
	struct rc_wr w;
	rc_wr(rc, &w, IBV_WR_SEND, 5, MSG_OFF, 64, 0);
	rc_post_send(rc, 0, &w.wr);
	rc_wait(rc, rc->scq, 5, IBV_WC_SEND, NULL);
	rc_sync(rc);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	struct rc_wr w[3];
	struct ibv_wc wc;

	rc_step(rc, "first connection works");
	rc_wr(rc, &w[0], IBV_WR_SEND, 1, 0, 64, 0);
	rc_sync(rc);
	rc_post_send(rc, 0, &w[0].wr);
	rc_wait(rc, rc->scq, 1, IBV_WC_SEND, NULL);

	rc_step(rc, "to ERR through a bad-rkey WRITE");
	rc_wr(rc, &w[0], IBV_WR_RDMA_WRITE, 2, 0, 64, 0);
	w[0].wr.wr.rdma.rkey = rc->peer.rkey ^ 0x5a;
	rc_post_send(rc, 0, &w[0].wr);
	rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
	rc_expect(rc, &wc, 2, IBV_WC_REM_ACCESS_ERR, -1);
	expect_state(rc, IBV_QPS_ERR);
	rc_sync(rc);
	rc_sync(rc);

	reconnect(rc);

	rc_step(rc, "traffic after reconnect");
	rc_fill(rc->buf, LEN, 21);
	rc_fill(rc->buf + MSG_OFF, 64, 23);
	memset(rc->buf + READ_OFF, RC_CANARY, LEN + 64);
	rc_post_recv(rc, 0, 6, MSG_OFF + 64, 64);
	rc_wr(rc, &w[0], IBV_WR_RDMA_WRITE, 3, 0, LEN, 0);
	rc_wr(rc, &w[1], IBV_WR_SEND, 4, MSG_OFF, 64, 0);
	rc_wr(rc, &w[2], IBV_WR_RDMA_READ, 5, READ_OFF, LEN, READ_OFF);
	w[0].wr.next = &w[1].wr;
	w[1].wr.next = &w[2].wr;
	rc_sync(rc);
	rc_post_send(rc, 0, &w[0].wr);
	rc_wait(rc, rc->scq, 3, IBV_WC_RDMA_WRITE, NULL);
	rc_wait(rc, rc->scq, 4, IBV_WC_SEND, NULL);
	rc_wait(rc, rc->scq, 5, IBV_WC_RDMA_READ, NULL);
	rc_check(rc, rc->buf + READ_OFF, LEN, 22, "READ data");
	rc_check_const(rc, rc->buf + READ_OFF + LEN, 64, RC_CANARY, "bytes past the READ");
	rc_wait(rc, rc->rcq, 6, IBV_WC_RECV, NULL);
	rc_check(rc, rc->buf + MSG_OFF + 64, 64, 24, "SEND from the server");
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_reset_reconnect");

	o.buf_size = 8 * RC_MIB;
	return rc_run(&o, server, client);
}
