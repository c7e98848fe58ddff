/* cq.c - writing completions, raising completion events, and flushing a QP that went to ERR. */
#include <unistd.h>

#include "engine/engine.h"

void urnic_async_event(struct ibv_context *ctx, const struct ibv_async_event *ev)
{
	if (write(to_uctx(ctx)->async_wfd, ev, sizeof(*ev)) != sizeof(*ev))
		urnic_count(ctx_dev(ctx), URNIC_C_cq_overflow, 1);
}

void urnic_cq_push(struct urnic_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	bool notify = false;

	pthread_mutex_lock(&cq->lock);
	if (cq->tail - cq->head >= cq->size) {
		/* overrun: the CQE is lost and the CQ is in error, as on hardware */
		bool first = !cq->overflowed;

		cq->overflowed = true;
		pthread_mutex_unlock(&cq->lock);
		urnic_count(ctx_dev(cq->ibv.context), URNIC_C_cq_overflow, 1);
		if (first) {
			struct ibv_async_event ev = {.element.cq = &cq->ibv,
						     .event_type = IBV_EVENT_CQ_ERR};

			urnic_async_event(cq->ibv.context, &ev);
		}
		return;
	}
	cq->ring[cq->tail & (cq->size - 1)] = *wc;
	cq->tail++;
	if (cq->armed == 1 || (cq->armed == 2 && (solicited || wc->status != IBV_WC_SUCCESS))) {
		cq->armed = 0;
		notify = true;
	}
	pthread_mutex_unlock(&cq->lock);
	if (notify && cq->ibv.channel) {
		struct urnic_channel *ch = container_of(cq->ibv.channel, struct urnic_channel, ibv);
		struct ibv_cq *ptr = &cq->ibv;

		if (write(ch->wfd, &ptr, sizeof(ptr)) != sizeof(ptr))
			urnic_count(ctx_dev(cq->ibv.context), URNIC_C_cq_overflow, 1);
	}
}

void urnic_qp_flush(struct urnic_qp *qp)
{
	while (qp->sq_cons != qp->sq_prod) {
		struct urnic_swqe *w = sq_at(qp, qp->sq_cons++);

		if (w->state != URNIC_WQE_DONE)
			urnic_complete_send(qp, w, IBV_WC_WR_FLUSH_ERR);
	}
	qp->sq_next = qp->sq_prod;
	while (qp->rq_cons != qp->rq_prod) {
		struct urnic_rwqe *r = rq_at(qp, qp->rq_cons++);
		struct ibv_wc wc = {.wr_id = r->wr_id,
				    .status = IBV_WC_WR_FLUSH_ERR,
				    .opcode = IBV_WC_RECV,
				    .qp_num = qp->ibv.qp_num};

		urnic_cq_push(to_ucq(qp->ibv.recv_cq), &wc, false);
	}
}

void urnic_qp_error(struct urnic_qp *qp)
{
	qp->ibv.state = IBV_QPS_ERR;
	if (qp->stats)
		qp->stats->state = IBV_QPS_ERR;
	qp->ack_deadline = qp->rnr_deadline = 0;
	qp->in_send = qp->in_write = qp->recv_taken = false;
	qp->rd_count = 0;
	urnic_qp_flush(qp);
}
