/* loop_qp.c - see loop_qp.h. */
#include "loop_qp.h"

#include "rc_harness.h" /* rc_now_ms: both live in the rc_harness library */

const char *loop_qp_connect(struct ibv_qp *qp, uint32_t dest_qpn, const union ibv_gid *gid,
			    enum ibv_mtu mtu, unsigned access)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = access};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					   IBV_QP_ACCESS_FLAGS))
		return "INIT";
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = mtu,
				 .dest_qp_num = dest_qpn, .rq_psn = 1, .max_dest_rd_atomic = 1,
				 .min_rnr_timer = 1,
				 .ah_attr = {.is_global = 1, .port_num = 1,
					     .grh = {.dgid = *gid, .hop_limit = 64}}};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					   IBV_QP_MIN_RNR_TIMER))
		return "RTR";
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 1, .timeout = 14,
				 .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					   IBV_QP_MAX_QP_RD_ATOMIC))
		return "RTS";
	return NULL;
}

int loop_qp_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc, unsigned ms)
{
	double end = rc_now_ms() + ms;
	int got = 0;

	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			break;
		got += r;
		if (got < n && rc_now_ms() > end)
			break;
	}
	return got;
}

const char *loop_self_open(struct loop_self *l, int cqe, void *buf, size_t len, unsigned access)
{
	struct ibv_port_attr port;
	union ibv_gid gid;

	*l = (struct loop_self){.list = ibv_get_device_list(NULL)};
	l->ctx = l->list && l->list[0] ? ibv_open_device(l->list[0]) : NULL;
	if (!l->ctx)
		return "no device";
	l->pd = ibv_alloc_pd(l->ctx);
	l->cq = ibv_create_cq(l->ctx, cqe, NULL, NULL, 0);
	l->mr = l->pd ? ibv_reg_mr(l->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | access) : NULL;
	struct ibv_qp_init_attr init = {.send_cq = l->cq, .recv_cq = l->cq, .qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = 16, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1}};

	l->qp = l->pd && l->cq ? ibv_create_qp(l->pd, &init) : NULL;
	if (!l->pd || !l->cq || !l->mr || !l->qp || ibv_query_port(l->ctx, 1, &port) ||
	    ibv_query_gid(l->ctx, 1, 0, &gid))
		return "setup";
	return loop_qp_connect(l->qp, l->qp->qp_num, &gid, port.active_mtu, access);
}

void loop_self_close(struct loop_self *l)
{
	if (l->qp)
		ibv_destroy_qp(l->qp);
	if (l->mr)
		ibv_dereg_mr(l->mr);
	if (l->cq)
		ibv_destroy_cq(l->cq);
	if (l->pd)
		ibv_dealloc_pd(l->pd);
	if (l->ctx)
		ibv_close_device(l->ctx);
	if (l->list)
		ibv_free_device_list(l->list);
}
