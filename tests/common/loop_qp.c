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
