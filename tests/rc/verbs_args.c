/* verbs_args: bad arguments fail with the errno rdma-core and the kernel give, and the good
 * work before a bad WR in a list is still posted. Single process. */
#include "rc_harness.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int ptr_errno(void *p)
{
	return p ? 0 : errno;
}

static void reg_mr_access(struct rc *rc)
{
	/* Kernel ib_check_mr_access(): remote write or atomic needs local write -> EINVAL. */
	static const int bad[] = {IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_ATOMIC};

	for (int i = 0; i < 2; i++) {
		rc_step(rc, "ibv_reg_mr(access %#x)", bad[i]);
		errno = 0;
		struct ibv_mr *mr = ibv_reg_mr(rc->pd, rc->buf, 4096, bad[i]);
		int e = ptr_errno(mr);
		if (mr)
			ibv_dereg_mr(mr);
		rc_expect_errno(rc, e, EINVAL,
				"ibv_reg_mr: remote write/atomic without local write");
	}
}

static void create_cq_too_big(struct rc *rc)
{
	rc_step(rc, "ibv_create_cq(max_cqe + 1)");
	if (rc->dev.max_cqe == INT_MAX)
		return;
	errno = 0;
	struct ibv_cq *cq = ibv_create_cq(rc->ctx, rc->dev.max_cqe + 1, NULL, NULL, 0);
	int e = ptr_errno(cq);
	if (cq)
		ibv_destroy_cq(cq);
	/* rxe_cq_chk_attr / mlx5_create_cq: cqe above max_cqe -> EINVAL. */
	rc_expect_errno(rc, e, EINVAL, "ibv_create_cq with cqe > max_cqe");
}

static void create_qp_over(struct rc *rc, const char *what, struct ibv_qp_cap cap)
{
	struct ibv_qp_init_attr a = {
	    .send_cq = rc->scq, .recv_cq = rc->rcq, .cap = cap, .qp_type = IBV_QPT_RC};

	rc_step(rc, "ibv_create_qp with %s", what);
	errno = 0;
	struct ibv_qp *qp = ibv_create_qp(rc->pd, &a);
	int e = ptr_errno(qp);
	if (qp)
		ibv_destroy_qp(qp);
	/* rxe_qp_chk_cap: a cap above the device limit -> EINVAL. */
	rc_expect_errno(rc, e, EINVAL, what);
}

static void create_qp_caps(struct rc *rc)
{
	const struct ibv_qp_cap ok = {
	    .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1};
	struct ibv_qp_cap c[4] = {ok, ok, ok, ok};

	c[0].max_send_wr = (uint32_t)rc->dev.max_qp_wr + 1;
	c[1].max_recv_wr = (uint32_t)rc->dev.max_qp_wr + 1;
	c[2].max_send_sge = (uint32_t)rc->dev.max_sge + 1;
	c[3].max_recv_sge = (uint32_t)rc->dev.max_sge + 1;
	create_qp_over(rc, "max_send_wr = max_qp_wr + 1", c[0]);
	create_qp_over(rc, "max_recv_wr = max_qp_wr + 1", c[1]);
	create_qp_over(rc, "max_send_sge = max_sge + 1", c[2]);
	create_qp_over(rc, "max_recv_sge = max_sge + 1", c[3]);
}

/* QP 0 and QP 1 of this process, connected to each other. */
static void connect_pair(struct rc *rc)
{
	rc->peer = rc->me;
	for (int i = 0; i < 2; i++) {
		rc_qp_init(rc, rc->qp[i]);
		rc_qp_rtr(rc, rc->qp[i], &rc->me, 1 - i);
		rc_qp_rts(rc, rc->qp[i], rc->me.psn[i]);
	}
}

static void post_too_many_sge(struct rc *rc)
{
	int n = (int)rc->cap.max_send_sge + 1;
	struct ibv_sge *sge = calloc((size_t)n, sizeof(*sge));
	struct rc_wr good;
	struct ibv_wc wc;

	rc_step(rc, "ibv_post_send of [good SEND, SEND with max_send_sge + 1 SGEs]");
	RC_CHECK(rc, sge, "calloc");
	for (int i = 0; i < n; i++)
		sge[i] = (struct ibv_sge){
		    .addr = (uintptr_t)(rc->buf + 64 * i), .length = 8, .lkey = rc->mr->lkey};
	struct ibv_send_wr bad_wr = {.wr_id = 2,
				     .sg_list = sge,
				     .num_sge = n,
				     .opcode = IBV_WR_SEND,
				     .send_flags = IBV_SEND_SIGNALED};
	rc_wr(rc, &good, IBV_WR_SEND, 1, 0, 8, 0);
	good.wr.next = &bad_wr;
	rc_post_recv(rc, 1, 3, 4096, 64);

	struct ibv_send_wr *bad = NULL;
	int r = ibv_post_send(rc->qp[0], &good.wr, &bad);
	/* ibv_post_send(3): stops at the first failing WR and returns it in bad_wr;
	 * rxe validate_send_wr / mlx5: num_sge > max_send_sge -> EINVAL. */
	rc_expect_errno(rc, r, EINVAL, "ibv_post_send with num_sge > max_send_sge");
	RC_CHECK(rc, bad == &bad_wr, "bad_wr %p, expected the second WR %p", (void *)bad,
		 (void *)&bad_wr);
	rc_wait(rc, rc->scq, 1, IBV_WC_SEND, NULL); /* the WR before it was posted */
	rc_poll(rc, rc->rcq, &wc, 1, RC_WAIT_MS);
	rc_expect(rc, &wc, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
	rc_expect_empty(rc, rc->scq, 20);
	free(sge);
}

static void query_out_of_range(struct rc *rc)
{
	struct ibv_port_attr pa;
	union ibv_gid gid;

	rc_step(rc, "ibv_query_port(port %d)", rc->dev.phys_port_cnt + 1);
	/* Kernel ib_query_port: !rdma_is_port_valid -> EINVAL. */
	rc_expect_errno(rc, ibv_query_port(rc->ctx, (uint8_t)(rc->dev.phys_port_cnt + 1), &pa),
			EINVAL, "ibv_query_port past the last port");

	rc_step(rc, "ibv_query_gid(index gid_tbl_len = %d)", rc->port.gid_tbl_len);
	errno = 0;
	int r = ibv_query_gid(rc->ctx, 1, rc->port.gid_tbl_len, &gid);
	/* ibv_query_gid(3) returns -1; kernel rdma_get_gid_attr: index >= table size -> EINVAL. */
	RC_CHECK(rc, r == -1, "ibv_query_gid past the table returned %d, expected -1", r);
	rc_expect_errno(rc, errno, EINVAL, "ibv_query_gid past the table: errno");
}

static void busy_objects(struct rc *rc)
{
	struct ibv_pd *pd = ibv_alloc_pd(rc->ctx);

	RC_CHECK(rc, pd, "ibv_alloc_pd: %s", strerror(errno));
	rc_step(rc, "ibv_dealloc_pd with an MR on it");
	struct ibv_mr *mr = ibv_reg_mr(pd, rc->buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	RC_CHECK(rc, mr, "ibv_reg_mr: %s", strerror(errno));
	/* Kernel uverbs: ib_destroy_usecnt() on a PD still in use -> EBUSY. */
	rc_expect_errno(rc, ibv_dealloc_pd(pd), EBUSY, "ibv_dealloc_pd with an MR");
	rc_expect_errno(rc, ibv_dereg_mr(mr), 0, "ibv_dereg_mr");

	rc_step(rc, "ibv_destroy_cq with a QP on it");
	struct ibv_cq *cq = ibv_create_cq(rc->ctx, 8, NULL, NULL, 0);
	RC_CHECK(rc, cq, "ibv_create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr a = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	RC_CHECK(rc, qp, "ibv_create_qp: %s", strerror(errno));
	/* Kernel uverbs: ib_destroy_usecnt() on a CQ still in use -> EBUSY. */
	rc_expect_errno(rc, ibv_destroy_cq(cq), EBUSY, "ibv_destroy_cq with a QP");
	rc_expect_errno(rc, ibv_dealloc_pd(pd), EBUSY, "ibv_dealloc_pd with a QP");
	rc_expect_errno(rc, ibv_destroy_qp(qp), 0, "ibv_destroy_qp");
	rc_expect_errno(rc, ibv_destroy_cq(cq), 0, "ibv_destroy_cq once free");
	rc_expect_errno(rc, ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd once free");
}

static int test(struct rc *rc)
{
	reg_mr_access(rc);
	create_cq_too_big(rc);
	create_qp_caps(rc);
	connect_pair(rc);
	post_too_many_sge(rc);
	query_out_of_range(rc);
	busy_objects(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("verbs_args");

	o.nqp = 2;
	o.buf_size = RC_MIB;
	o.alarm_s = 20;
	return rc_run_local(&o, test);
}
