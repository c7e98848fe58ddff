/* post.c - ibv_post_send and ibv_post_recv: validate, copy the WR into the queue, and run the
 * requester right away in the caller's thread (no system call but the packets' own send). */
#include <errno.h>
#include <string.h>

#include "engine/direct.h"
#include "engine/engine.h"
#include "mem/mr.h"
#include "verbs/verbs_ops.h"

static uint64_t urnic_sge_total_wr(const struct ibv_send_wr *wr)
{
	return wr->num_sge > 0 ? urnic_sge_total(wr->sg_list, wr->num_sge) : 0;
}

static bool opcode_supported(enum ibv_qp_type type, enum ibv_wr_opcode op)
{
	if (type == IBV_QPT_UD) /* datagrams: SEND only */
		return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
	switch (op) {
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return type == IBV_QPT_RC; /* UC has no READ or atomics */
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return true;
	default:
		return false;
	}
}

static int check_send_wr(const struct urnic_qp *qp, const struct ibv_send_wr *wr)
{
	uint64_t len = urnic_sge_total_wr(wr);
	bool atomic = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		      wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;

	if (!opcode_supported(qp->ibv.qp_type, wr->opcode) || wr->num_sge < 0 ||
	    (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	if (len > URNIC_MAX_MSG_SIZE)
		return EINVAL;
	if (qp->ibv.qp_type == IBV_QPT_UD && (!wr->wr.ud.ah || len > qp->mtu))
		return EINVAL; /* a datagram needs an address and fits in one packet */
	if (atomic && (wr->num_sge != 1 || wr->sg_list[0].length < 8))
		return EINVAL;
	if ((wr->send_flags & IBV_SEND_INLINE) && !atomic && wr->opcode != IBV_WR_RDMA_READ &&
	    len > qp->cap.max_inline_data)
		return EINVAL;
	return 0;
}

static void fill_swqe(struct urnic_qp *qp, struct urnic_swqe *w, const struct ibv_send_wr *wr)
{
	bool atomic = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		      wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
	uint64_t len = urnic_sge_total_wr(wr);

	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags;
	w->imm = wr->imm_data;
	w->length = atomic ? 8 : (uint32_t)len;
	w->state = URNIC_WQE_POSTED;
	w->sent = w->rcvd = w->read_slice = 0;
	w->is_inline = (wr->send_flags & IBV_SEND_INLINE) && !atomic &&
		       wr->opcode != IBV_WR_RDMA_READ;
	if (qp->ibv.qp_type == IBV_QPT_UD) {
		w->ud_daddr = to_uah(wr->wr.ud.ah)->daddr;
		w->ud_dqpn = wr->wr.ud.remote_qpn & URNIC_QPN_MASK;
		/* IBTA: a Q_Key with the high bit set means "use the QP's own" */
		w->ud_qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey
								     : wr->wr.ud.remote_qkey;
		w->npkts = 1;
	} else if (atomic) {
		w->raddr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
		w->npkts = 1;
	} else {
		w->raddr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		uint32_t mtu = qp->mtu ? qp->mtu : 4096; /* 0 only in ERR, where nothing is sent */

		w->npkts = w->length ? (w->length + mtu - 1) / mtu : 1;
	}
	if (w->is_inline) {
		/* the application may reuse its buffer as soon as we return */
		uint32_t off = 0;

		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(w->inline_buf + off, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
		w->num_sge = 0;
	} else {
		if (wr->num_sge > 0)
			memcpy(w->sge, wr->sg_list, sizeof(*w->sge) * (size_t)wr->num_sge);
		w->num_sge = wr->num_sge;
		if (atomic)
			w->sge[0].length = 8;
	}
}

int urnic_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	static _Thread_local struct urnic_txbatch b;
	struct urnic_qp *qp = to_uqp(ibqp);
	int err = 0;

	pthread_mutex_lock(&qp->lock);
	if (ibqp->state != IBV_QPS_RTS && ibqp->state != IBV_QPS_ERR)
		err = EINVAL;
	for (; wr && !err; wr = wr->next) {
		err = check_send_wr(qp, wr);
		if (!err && qp->sq_prod - qp->sq_cons >= qp->cap.max_send_wr)
			err = ENOMEM;
		if (err)
			break;
		struct urnic_swqe *w = sq_at(qp, qp->sq_prod);

		fill_swqe(qp, w, wr);
		qp->sq_prod++;
		urnic_direct_run(qp, w); /* done at once, one-sided, where it can be */
	}
	if (err)
		*bad_wr = wr;
	if (ibqp->state == IBV_QPS_ERR) {
		urnic_qp_flush(qp);
	} else if (psn_diff(qp->snd_nxt, qp->snd_una) < URNIC_POST_DEFER_INFLIGHT) {
		urnic_tx_init(&b, qp->dev);
		urnic_post_run(qp, &b);
	}
	/* Otherwise packets are on the wire: the next ACK runs the requester (or the timer does, if
	 * it is lost) and sends what was posted meanwhile in one batch, one system call (and GSO
	 * send) for many WRs instead of one each. An idle QP sends at once: a lone request waits
	 * for nothing; one posted behind another waits at most for the first one's ACK. */
	pthread_mutex_unlock(&qp->lock);
	return err;
}

int urnic_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct urnic_qp *qp = to_uqp(ibqp);
	int err;

	if (qp->srq) { /* its receives come from the SRQ */
		*bad_wr = wr;
		return EINVAL;
	}
	pthread_mutex_lock(&qp->lock);
	if (ibqp->state == IBV_QPS_RESET) {
		*bad_wr = wr;
		err = EINVAL;
	} else {
		err = urnic_rq_post(qp->rq, wr, bad_wr);
	}
	if (ibqp->state == IBV_QPS_ERR)
		urnic_qp_flush(qp);
	pthread_mutex_unlock(&qp->lock);
	return err;
}
