/* qp_state_machine: ibv_modify_qp enforces the IBTA RC state table. Skipped states, missing
 * required attributes and attributes a transition does not allow fail with EINVAL and change
 * nothing; valid transitions succeed and ibv_query_qp returns what was set; ibv_post_send fails
 * before RTS and ibv_post_recv before INIT. Single process. */
#include "rc_harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Source for every EINVAL below: the kernel's ib_modify_qp_is_ok() table (IBTA 10.3, required
 * and optional attributes per transition), which every provider's modify_qp applies. */

#define RTR_REQ                                                                                    \
	(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |                           \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RTS_REQ                                                                                    \
	(IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |                    \
	 IBV_QP_MAX_QP_RD_ATOMIC)
#define INIT_REQ (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)

static const struct {
	int bit;
	const char *name;
} attrs[] = {
    {IBV_QP_PKEY_INDEX, "PKEY_INDEX"},
    {IBV_QP_PORT, "PORT"},
    {IBV_QP_ACCESS_FLAGS, "ACCESS_FLAGS"},
    {IBV_QP_AV, "AV"},
    {IBV_QP_PATH_MTU, "PATH_MTU"},
    {IBV_QP_DEST_QPN, "DEST_QPN"},
    {IBV_QP_RQ_PSN, "RQ_PSN"},
    {IBV_QP_MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC"},
    {IBV_QP_MIN_RNR_TIMER, "MIN_RNR_TIMER"},
    {IBV_QP_SQ_PSN, "SQ_PSN"},
    {IBV_QP_TIMEOUT, "TIMEOUT"},
    {IBV_QP_RETRY_CNT, "RETRY_CNT"},
    {IBV_QP_RNR_RETRY, "RNR_RETRY"},
    {IBV_QP_MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC"},
};

static struct ibv_qp_attr want; /* one attribute set for every transition */

static void expect_state(struct rc *rc, enum ibv_qp_state st)
{
	enum ibv_qp_state got = rc_qp_state(rc, rc->qp[0]);

	RC_CHECK(rc, got == st, "state %d, expected %d", got, st);
}

static void expect_modify(struct rc *rc, enum ibv_qp_state to, int mask, int err, const char *what)
{
	struct ibv_qp_attr a = want;
	char buf[160];

	a.qp_state = to;
	snprintf(buf, sizeof(buf), "ibv_modify_qp: %s", what);
	rc_expect_errno(rc, ibv_modify_qp(rc->qp[0], &a, IBV_QP_STATE | mask), err, buf);
}

/* Each required attribute left out in turn: EINVAL, state unchanged. */
static void each_missing(struct rc *rc, enum ibv_qp_state from, enum ibv_qp_state to, int req)
{
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		char what[96];

		if (!(req & attrs[i].bit))
			continue;
		snprintf(what, sizeof(what), "%d -> %d without IBV_QP_%s", from, to, attrs[i].name);
		rc_step(rc, "%s", what);
		expect_modify(rc, to, req & ~attrs[i].bit, EINVAL, what);
		expect_state(rc, from);
	}
}

static void expect_post_send(struct rc *rc, int err, const char *what)
{
	struct rc_wr w;
	struct ibv_send_wr *bad = NULL;

	rc_wr(rc, &w, IBV_WR_SEND, 1, 0, 8, 0);
	int r = ibv_post_send(rc->qp[0], &w.wr, &bad);
	rc_expect_errno(rc, r, err, what);
	RC_CHECK(rc, !r || bad == &w.wr, "%s: bad_wr not set", what);
}

static void expect_post_recv(struct rc *rc, int err, const char *what)
{
	struct ibv_sge sge = {.addr = (uintptr_t)rc->buf, .length = 8, .lkey = rc->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1}, *bad = NULL;

	rc_expect_errno(rc, ibv_post_recv(rc->qp[0], &wr, &bad), err, what);
}

static void check_queried(struct rc *rc, int mask)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	memset(&a, 0xff, sizeof(a));
	rc_expect_errno(rc, ibv_query_qp(rc->qp[0], &a, mask, &ia), 0, "ibv_query_qp");
#define SAME(field, bit)                                                                           \
	RC_CHECK(rc, !(mask & (bit)) || a.field == want.field,                                     \
		 "queried " #field " %llu, set %llu", (unsigned long long)a.field,                 \
		 (unsigned long long)want.field)
	SAME(pkey_index, IBV_QP_PKEY_INDEX);
	SAME(port_num, IBV_QP_PORT);
	SAME(qp_access_flags, IBV_QP_ACCESS_FLAGS);
	SAME(path_mtu, IBV_QP_PATH_MTU);
	SAME(dest_qp_num, IBV_QP_DEST_QPN);
	SAME(rq_psn, IBV_QP_RQ_PSN);
	SAME(max_dest_rd_atomic, IBV_QP_MAX_DEST_RD_ATOMIC);
	SAME(min_rnr_timer, IBV_QP_MIN_RNR_TIMER);
	SAME(sq_psn, IBV_QP_SQ_PSN);
	SAME(timeout, IBV_QP_TIMEOUT);
	SAME(retry_cnt, IBV_QP_RETRY_CNT);
	SAME(rnr_retry, IBV_QP_RNR_RETRY);
	SAME(max_rd_atomic, IBV_QP_MAX_QP_RD_ATOMIC);
	SAME(ah_attr.is_global, IBV_QP_AV);
	SAME(ah_attr.port_num, IBV_QP_AV);
	SAME(ah_attr.grh.sgid_index, IBV_QP_AV);
#undef SAME
	RC_CHECK(rc,
		 !(mask & IBV_QP_AV) || !memcmp(&a.ah_attr.grh.dgid, &want.ah_attr.grh.dgid, 16),
		 "queried dgid differs from the one set");
}

static int test(struct rc *rc)
{
	uint8_t rd = rc->rd_atomic >= 4 ? 4 : rc->rd_atomic; /* a power of two: rxe rounds up */

	rc->peer = rc->me; /* QP 0 points at QP 1 of this process */
	want = (struct ibv_qp_attr){
	    .pkey_index = 0,
	    .port_num = 1,
	    .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	    .path_mtu = rc->o.path_mtu,
	    .dest_qp_num = rc->qp[1]->qp_num,
	    .rq_psn = 0x123456,
	    .max_dest_rd_atomic = rd,
	    .min_rnr_timer = 12,
	    .sq_psn = 0x654321,
	    .timeout = 17,
	    .retry_cnt = 6,
	    .rnr_retry = 5,
	    .max_rd_atomic = rd,
	};
	rc_fill_ah(rc, &want.ah_attr, &rc->me);

	rc_step(rc, "RESET");
	expect_state(rc, IBV_QPS_RESET);
	expect_modify(rc, IBV_QPS_RTR, INIT_REQ | RTR_REQ, EINVAL, "RESET -> RTR");
	expect_modify(rc, IBV_QPS_RTS, INIT_REQ | RTR_REQ | RTS_REQ, EINVAL, "RESET -> RTS");
	expect_state(rc, IBV_QPS_RESET);
	/* rxe: post_send needs RTS (kernel rxe_post_send), post_recv INIT (C10-97.2.1). */
	expect_post_send(rc, EINVAL, "ibv_post_send in RESET");
	expect_post_recv(rc, EINVAL, "ibv_post_recv in RESET");

	each_missing(rc, IBV_QPS_RESET, IBV_QPS_INIT, INIT_REQ);
	rc_step(rc, "RESET -> INIT with SQ_PSN (not allowed)");
	expect_modify(rc, IBV_QPS_INIT, INIT_REQ | IBV_QP_SQ_PSN, EINVAL,
		      "RESET -> INIT with IBV_QP_SQ_PSN");
	expect_state(rc, IBV_QPS_RESET);
	rc_step(rc, "RESET -> INIT");
	expect_modify(rc, IBV_QPS_INIT, INIT_REQ, 0, "RESET -> INIT");
	expect_state(rc, IBV_QPS_INIT);
	check_queried(rc, INIT_REQ);
	expect_post_send(rc, EINVAL, "ibv_post_send in INIT");
	expect_post_recv(rc, 0, "ibv_post_recv in INIT"); /* IBTA: receives may be posted in INIT */

	each_missing(rc, IBV_QPS_INIT, IBV_QPS_RTR, RTR_REQ);
	rc_step(rc, "INIT -> RTR with TIMEOUT (not allowed)");
	expect_modify(rc, IBV_QPS_RTR, RTR_REQ | IBV_QP_TIMEOUT, EINVAL,
		      "INIT -> RTR with IBV_QP_TIMEOUT");
	expect_modify(rc, IBV_QPS_RTS, RTR_REQ | RTS_REQ, EINVAL, "INIT -> RTS");
	expect_state(rc, IBV_QPS_INIT);
	rc_step(rc, "INIT -> RTR");
	expect_modify(rc, IBV_QPS_RTR, RTR_REQ, 0, "INIT -> RTR");
	expect_state(rc, IBV_QPS_RTR);
	check_queried(rc, INIT_REQ | RTR_REQ);

	each_missing(rc, IBV_QPS_RTR, IBV_QPS_RTS, RTS_REQ);
	rc_step(rc, "RTR -> RTS");
	expect_modify(rc, IBV_QPS_RTS, RTS_REQ, 0, "RTR -> RTS");
	expect_state(rc, IBV_QPS_RTS);
	check_queried(rc, INIT_REQ | RTR_REQ | RTS_REQ);

	rc_step(rc, "RTS -> RTS");
	expect_modify(rc, IBV_QPS_RTS, IBV_QP_DEST_QPN, EINVAL, "RTS -> RTS with IBV_QP_DEST_QPN");
	expect_modify(rc, IBV_QPS_RTS, IBV_QP_PATH_MTU, EINVAL, "RTS -> RTS with IBV_QP_PATH_MTU");
	want.min_rnr_timer = 14;
	expect_modify(rc, IBV_QPS_RTS, IBV_QP_MIN_RNR_TIMER, 0, "RTS -> RTS with MIN_RNR_TIMER");
	check_queried(rc, IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN | IBV_QP_DEST_QPN);
	expect_modify(rc, IBV_QPS_INIT, 0, EINVAL, "RTS -> INIT");
	expect_modify(rc, IBV_QPS_RTR, 0, EINVAL, "RTS -> RTR");
	expect_state(rc, IBV_QPS_RTS);

	rc_step(rc, "ERR and back to RESET");
	expect_modify(rc, IBV_QPS_ERR, 0, 0, "RTS -> ERR");
	expect_state(rc, IBV_QPS_ERR);
	expect_modify(rc, IBV_QPS_RTS, RTS_REQ, EINVAL, "ERR -> RTS");
	expect_modify(rc, IBV_QPS_INIT, INIT_REQ, EINVAL, "ERR -> INIT");
	expect_state(rc, IBV_QPS_ERR);
	/* The receive posted in INIT flushes in ERR (reaped before RESET discards WQEs). */
	struct ibv_wc wc;
	rc_poll(rc, rc->rcq, &wc, 1, RC_WAIT_MS);
	rc_expect(rc, &wc, 2, IBV_WC_WR_FLUSH_ERR, -1);
	expect_modify(rc, IBV_QPS_RESET, 0, 0, "ERR -> RESET");
	expect_state(rc, IBV_QPS_RESET);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("qp_state_machine");

	o.nqp = 2;
	o.buf_size = RC_MIB;
	o.alarm_s = 20;
	return rc_run_local(&o, test);
}
