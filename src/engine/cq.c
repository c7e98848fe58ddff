/* cq.c - writing completions, raising completion events, and flushing a QP that went to ERR. */
#include <string.h>
#include <unistd.h>

#include "engine/direct.h"
#include "engine/engine.h"

void urnic_async_event(struct ibv_context *ctx, const struct ibv_async_event *ev)
{
	struct ibv_async_event out;

	/* field by field into a zeroed copy: the struct's padding must not carry stack bytes */
	memset(&out, 0, sizeof(out));
	out.element = ev->element;
	out.event_type = ev->event_type;
	if (write(to_uctx(ctx)->async_wfd, &out, sizeof(out)) != sizeof(out))
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
	atomic_store_explicit(&cq->ready, cq->tail - cq->head, memory_order_relaxed);
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
	/* the WQE a message was landing in is the oldest; an SRQ keeps its WQEs for other QPs */
	struct ibv_wc wc = {.status = IBV_WC_WR_FLUSH_ERR,
			    .opcode = IBV_WC_RECV,
			    .qp_num = qp->ibv.qp_num};
	bool limit_hit;
	struct ibv_sge sge[URNIC_MAX_SGE];
	int nsge;

	if (qp->cur_recv.taken) {
		wc.wr_id = qp->cur_recv.wr_id;
		qp->cur_recv.taken = false;
		urnic_cq_push(to_ucq(qp->ibv.recv_cq), &wc, false);
	}
	while (!qp->srq && urnic_rq_pop(qp->rq, &wc.wr_id, &nsge, sge, &limit_hit))
		urnic_cq_push(to_ucq(qp->ibv.recv_cq), &wc, false);
}

bool urnic_qp_take_recv(struct urnic_qp *qp)
{
	struct urnic_cur_recv *r = &qp->cur_recv;
	bool limit_hit = false;

	if (r->taken)
		return true;
	if (!urnic_rq_pop(qp->rq, &r->wr_id, &r->num_sge, r->sge, &limit_hit))
		return false;
	r->taken = true;
	if (limit_hit) {
		struct ibv_async_event ev = {.element.srq = &qp->srq->ibv,
					     .event_type = IBV_EVENT_SRQ_LIMIT_REACHED};

		urnic_async_event(qp->ibv.context, &ev);
	}
	return true;
}

void urnic_qp_error(struct urnic_qp *qp)
{
	qp->ibv.state = IBV_QPS_ERR;
	if (qp->stats)
		qp->stats->state = IBV_QPS_ERR;
	urnic_direct_publish_qp(qp, false);
	qp->ack_deadline = qp->rnr_deadline = qp->held_until = qp->ack_hold_until = 0;
	urnic_rtx_reset(qp); /* a timer left running would keep the engine scanning for nothing */
	qp->in_send = qp->in_write = false;
	qp->rd_count = 0;
	urnic_qp_flush(qp);
	if (qp->srq) { /* IBTA: tells the owner no more WQEs of the SRQ will be used by it */
		struct ibv_async_event ev = {.element.qp = &qp->ibv,
					     .event_type = IBV_EVENT_QP_LAST_WQE_REACHED};

		urnic_async_event(qp->ibv.context, &ev);
	}
}
