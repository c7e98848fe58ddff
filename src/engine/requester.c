/* requester.c - turns send WQEs into request packets, in order, as far as the window allows. */
#include <errno.h>
#include <string.h>

#include "engine/engine.h"
#include "mem/mr.h"

enum req_step {
	REQ_SENT_PACKET, /* one packet went out; go on */
	REQ_WQE_DONE,    /* the WQE has no packets left */
	REQ_BLOCKED,     /* window, rd/atomic limit, fence or RNR wait: resume later */
	REQ_ERROR,       /* local error: the QP went to ERR */
};

/* Opcode of packet i of n for a SEND or WRITE, from the FIRST/MIDDLE/LAST/ONLY family. */
static uint8_t rc_data_opcode(const struct urnic_swqe *w, uint32_t i, uint32_t n)
{
	bool write = w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	if (n == 1)
		return write ? (imm ? URNIC_OP_WRITE_ONLY_IMM : URNIC_OP_WRITE_ONLY)
			     : (imm ? URNIC_OP_SEND_ONLY_IMM : URNIC_OP_SEND_ONLY);
	if (i == 0)
		return write ? URNIC_OP_WRITE_FIRST : URNIC_OP_SEND_FIRST;
	if (i + 1 < n)
		return write ? URNIC_OP_WRITE_MIDDLE : URNIC_OP_SEND_MIDDLE;
	return write ? (imm ? URNIC_OP_WRITE_LAST_IMM : URNIC_OP_WRITE_LAST)
		     : (imm ? URNIC_OP_SEND_LAST_IMM : URNIC_OP_SEND_LAST);
}

/* UC uses RC's SEND and WRITE opcodes with the transport bits of UC. */
static uint8_t data_opcode(const struct urnic_qp *qp, const struct urnic_swqe *w, uint32_t i,
			   uint32_t n)
{
	uint8_t transport = qp->ibv.qp_type == IBV_QPT_UC ? URNIC_OP_UC : URNIC_OP_RC;

	return (uint8_t)(transport | rc_data_opcode(w, i, n));
}

static uint32_t inflight(const struct urnic_qp *qp)
{
	return (uint32_t)psn_diff(qp->snd_nxt, qp->snd_una);
}

/* Packet p with these n PSNs is built; one below snd_max went before (a go-back or a probe
 * sends it again). */
static void note_psns(struct urnic_qp *qp, struct urnic_txpkt *p, uint32_t psn, uint32_t n)
{
	uint32_t end = psn_add(psn, n);

	if (psn_diff(psn, qp->snd_max) < 0) {
		urnic_qp_count(qp, URNIC_C_retransmits, 1);
		p->again = true;
	}
	if (psn_diff(end, qp->snd_nxt) > 0)
		qp->snd_nxt = end;
	if (psn_diff(end, qp->snd_max) > 0)
		qp->snd_max = end;
	if (qp->ibv.qp_type != IBV_QPT_RC) /* nothing is ever outstanding */
		qp->snd_una = qp->snd_nxt;
}

/* Payload of a packet: straight from the MR (or the WQE's inline copy), no staging copy. */
static int add_payload(struct urnic_qp *qp, struct urnic_swqe *w, struct urnic_txpkt *p,
		       uint64_t off, uint32_t len)
{
	int n;

	if (len == 0)
		return 0;
	if (w->is_inline) { /* copied at post time: no key to check */
		p->iov[p->iovcnt++] = (struct iovec){.iov_base = w->inline_buf + off,
						     .iov_len = len};
		return 0;
	}
	n = urnic_sge_to_iov(qp->dev, to_upd(qp->ibv.pd), w->sge, w->num_sge, off, len,
			     p->iov + p->iovcnt, URNIC_TX_MAX_IOV - 2);
	if (n < 0)
		return n;
	p->iovcnt += (uint16_t)n;
	return 0;
}

/* AckReq at least every URNIC_ACKREQ_EVERY packets, and four times per congestion window, so a
 * window cut to a few packets inside a long message still brings the ACKs that open it, and
 * the sender has three quarters of its window to send while an ACK comes back (with half, a
 * ring QP's 24-packet window ran dry every 12 packets). */
static uint32_t ackreq_every(const struct urnic_qp *qp)
{
	uint32_t quarter = urnic_rtx_window(qp) / 4;

	return quarter == 0 ? 1 : quarter < URNIC_ACKREQ_EVERY ? quarter : URNIC_ACKREQ_EVERY;
}

static enum req_step send_data_packet(struct urnic_qp *qp, struct urnic_swqe *w,
				      struct urnic_txbatch *b)
{
	uint32_t i = w->sent, psn = psn_add(w->first_psn, i);
	uint64_t off = (uint64_t)i * qp->mtu;
	uint32_t len = w->length - off < qp->mtu ? (uint32_t)(w->length - off) : qp->mtu;
	uint8_t opcode = data_opcode(qp, w, i, w->npkts);
	const struct urnic_opcode_info *op = urnic_op(opcode);
	bool last = op->mask & URNIC_M_LAST;
	bool uc = qp->ibv.qp_type == IBV_QPT_UC;
	bool ackreq = !uc && (last || psn_diff(psn, qp->last_ackreq) >= (int32_t)ackreq_every(qp));
	struct urnic_txpkt *p = urnic_tx_begin(b, qp, opcode, psn, ackreq,
					       last && (w->send_flags & IBV_SEND_SOLICITED));

	if (op->reth)
		reth_build(urnic_tx_ext(p, op->reth), w->raddr, w->rkey, w->length);
	if (op->immdt)
		memcpy(urnic_tx_ext(p, op->immdt), &w->imm, 4);
	if (add_payload(qp, w, p, off, len) != 0) {
		b->n--; /* never sent */
		urnic_complete_send(qp, w, IBV_WC_LOC_PROT_ERR);
		urnic_qp_error(qp);
		return REQ_ERROR;
	}
	urnic_tx_finish(qp, p, len);
	if (ackreq) {
		qp->last_ackreq = psn;
		urnic_rtx_sent(qp, psn);
	}
	w->sent++;
	note_psns(qp, p, psn, 1);
	return w->sent == w->npkts ? REQ_WQE_DONE : REQ_SENT_PACKET;
}

static int max_rd_atomic(const struct urnic_qp *qp)
{
	return qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;
}

/* Response packets one READ request asks for: a slice of the window, so that several fit it
 * (as many as max_rd_atomic lets go at once) and requests overlap responses. */
static uint32_t read_slice(const struct urnic_qp *qp)
{
	uint32_t slices = (uint32_t)max_rd_atomic(qp) < URNIC_READ_SLICES
				  ? (uint32_t)max_rd_atomic(qp)
				  : URNIC_READ_SLICES;

	return qp->window > slices ? qp->window / slices : 1;
}

/* One READ request asks for at most a slice of response packets: the responder has no flow
 * control of its own, so the requester bounds what can be in flight towards it. Requests cover
 * fixed slices of the WQE, so a retried request (from the first missing response) ends where
 * the original did and the responder's expected PSN stays where both sides think it is. */
static enum req_step send_read_request(struct urnic_qp *qp, struct urnic_swqe *w,
				       struct urnic_txbatch *b)
{
	if (!w->read_slice)
		w->read_slice = read_slice(qp);
	uint32_t slice_end = (w->sent / w->read_slice + 1) * w->read_slice;
	uint32_t chunk = (slice_end < w->npkts ? slice_end : w->npkts) - w->sent;

	if (inflight(qp) > 0 && inflight(qp) + chunk > urnic_rtx_window(qp))
		return REQ_BLOCKED;
	uint64_t off = (uint64_t)w->sent * qp->mtu;
	uint64_t left = w->length - off;
	uint32_t len = left < (uint64_t)chunk * qp->mtu ? (uint32_t)left : chunk * qp->mtu;
	uint32_t psn = psn_add(w->first_psn, w->sent);
	const struct urnic_opcode_info *op = urnic_op(URNIC_OP_READ_REQUEST);
	struct urnic_txpkt *p = urnic_tx_begin(b, qp, URNIC_OP_READ_REQUEST, psn, true, false);

	reth_build(urnic_tx_ext(p, op->reth), w->raddr + off, w->rkey, len);
	urnic_tx_finish(qp, p, 0);
	urnic_rtx_sent(qp, psn);
	w->sent += chunk;
	qp->rd_outstanding++;
	note_psns(qp, p, psn, chunk);
	return w->sent == w->npkts ? REQ_WQE_DONE : REQ_SENT_PACKET;
}

static enum req_step send_atomic(struct urnic_qp *qp, struct urnic_swqe *w,
				 struct urnic_txbatch *b)
{
	uint8_t opcode = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? URNIC_OP_CMP_SWAP
								: URNIC_OP_FETCH_ADD;
	const struct urnic_opcode_info *op = urnic_op(opcode);
	struct urnic_txpkt *p = urnic_tx_begin(b, qp, opcode, w->first_psn, true, false);
	uint64_t swap_add = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->swap : w->compare_add;
	uint64_t compare = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->compare_add : 0;

	atomiceth_build(urnic_tx_ext(p, op->atomiceth), w->raddr, w->rkey, swap_add, compare);
	urnic_tx_finish(qp, p, 0);
	urnic_rtx_sent(qp, w->first_psn);
	w->sent = 1;
	qp->rd_outstanding++;
	note_psns(qp, p, w->first_psn, 1);
	return REQ_WQE_DONE;
}

/* UD: one datagram, addressed by the WQE's address handle, with a DETH naming us. */
static enum req_step send_datagram(struct urnic_qp *qp, struct urnic_swqe *w,
				   struct urnic_txbatch *b)
{
	uint8_t opcode = w->opcode == IBV_WR_SEND_WITH_IMM ? (URNIC_OP_UD | URNIC_OP_SEND_ONLY_IMM)
							   : (URNIC_OP_UD | URNIC_OP_SEND_ONLY);
	const struct urnic_opcode_info *op = urnic_op(opcode);
	struct urnic_txpkt *p = urnic_tx_begin(b, qp, opcode, qp->snd_nxt, false,
					       w->send_flags & IBV_SEND_SOLICITED);
	uint8_t *deth = urnic_tx_ext(p, op->deth);

	p->daddr = w->ud_daddr;
	urnic_put24(p->hdr + 5, w->ud_dqpn);
	urnic_put32(deth, w->ud_qkey);
	urnic_put24(deth + 5, qp->ibv.qp_num);
	if (op->immdt)
		memcpy(urnic_tx_ext(p, op->immdt), &w->imm, 4);
	if (add_payload(qp, w, p, 0, w->length) != 0) {
		b->n--;
		urnic_complete_send(qp, w, IBV_WC_LOC_PROT_ERR);
		urnic_qp_error(qp);
		return REQ_ERROR;
	}
	urnic_tx_finish(qp, p, w->length);
	w->sent = 1;
	note_psns(qp, p, qp->snd_nxt, 1);
	return REQ_WQE_DONE;
}

static enum req_step step(struct urnic_qp *qp, struct urnic_swqe *w, struct urnic_txbatch *b)
{
	if (w->sent == 0 && w->state == URNIC_WQE_POSTED) {
		/* FENCE: wait for every earlier READ and atomic to complete */
		if ((w->send_flags & IBV_SEND_FENCE) && qp->rd_outstanding > 0)
			return REQ_BLOCKED;
		w->first_psn = qp->snd_nxt;
	}
	if (qp->ibv.qp_type == IBV_QPT_UD)
		return send_datagram(qp, w, b);
	if (inflight(qp) >= urnic_rtx_window(qp))
		return REQ_BLOCKED;
	if (wqe_is_rd_atomic(w) && qp->rd_outstanding >= max_rd_atomic(qp))
		return REQ_BLOCKED;
	if (w->opcode == IBV_WR_RDMA_READ)
		return send_read_request(qp, w, b);
	if (wqe_is_atomic(w))
		return send_atomic(qp, w, b);
	return send_data_packet(qp, w, b);
}

/* UC, UD: no ACKs. A WQE is complete once its last packet has left. */
static void complete_unacknowledged(struct urnic_qp *qp)
{
	while (qp->sq_cons != qp->sq_next)
		urnic_complete_send(qp, sq_at(qp, qp->sq_cons++), IBV_WC_SUCCESS);
	qp->snd_una = qp->snd_nxt;
}

/* Sends the batch. False if the net layer held some of this QP's packets back: the cursor is
 * back at the first of them (urnic_req_held), and snd_max where the packets that left put it;
 * *max is snd_max as of the last flush before this one, and after it. */
static bool flush(struct urnic_qp *qp, struct urnic_txbatch *b, uint32_t *max)
{
	urnic_tx_flush(b);
	if (!qp->tx_held) {
		*max = qp->snd_max;
		return true;
	}
	qp->tx_held = false;
	qp->snd_max = psn_diff(qp->snd_nxt, *max) > 0 ? qp->snd_nxt : *max;
	return false;
}

/* One WQE queued, of one packet at most. */
static bool lone_small_request(struct urnic_qp *qp)
{
	return qp->ibv.qp_type == IBV_QPT_RC && qp->sq_prod - qp->sq_next == 1 &&
	       sq_at(qp, qp->sq_next)->length <= qp->mtu;
}

void urnic_req_run(struct urnic_qp *qp, struct urnic_txbatch *b)
{
	uint32_t nxt = qp->snd_nxt, max = qp->snd_max;

	if (qp->ibv.state != IBV_QPS_RTS || qp->rnr_deadline)
		return;
	if (qp->sq_next == qp->sq_prod && b->n == 0)
		return; /* nothing to send (an ACK's run, mostly), nothing built to flush */
	qp->held_until = 0; /* trying now; a packet held again sets it again */
	/* An ACK this QP owes (left for the next turn or held: engine.c, acks_may_wait and
	 * hold_ack) goes in the same flush as the requests: behind a lone one-packet request,
	 * which then leaves with it in one UDP GSO send (the peer takes both in one receive;
	 * ahead of it, the peer's engine thread could be woken by the ACK alone and the request
	 * find it gone), but ahead of anything more, behind which it would reach the peer late
	 * while the peer's window waited for it. */
	bool ack_after = lone_small_request(qp);
	bool acked = qp->ibv.qp_type == IBV_QPT_RC && qp->sq_next != qp->sq_prod &&
		     !ack_after && urnic_resp_send_ack(qp, b);

	pthread_rwlock_rdlock(&qp->dev->mr_lock);
	while (qp->sq_next != qp->sq_prod) {
		struct urnic_swqe *w = sq_at(qp, qp->sq_next);

		/* this QP's packets leave in flushes of its own, so what the net layer holds back
		 * is the tail of what was built, and the cursor can go back to it */
		if (b->n == URNIC_TX_BATCH && !flush(qp, b, &max))
			break;
		enum req_step s = step(qp, w, b);

		if (s == REQ_BLOCKED || s == REQ_ERROR)
			break;
		if (s == REQ_WQE_DONE) {
			w->state = URNIC_WQE_SENT;
			qp->sq_next++;
		}
	}
	bool sent_any = qp->snd_nxt != nxt;

	if (sent_any)
		qp->req_sent_ns = urnic_clock_ns();
	if (ack_after && sent_any && urnic_resp_send_ack(qp, b))
		acked = true;
	if (acked && sent_any)
		urnic_qp_count(qp, URNIC_C_acks_with_requests, 1);
	/* the payload iovecs point into MRs: send before dereg may run */
	flush(qp, b, &max);
	pthread_rwlock_unlock(&qp->dev->mr_lock);
	if (sent_any) /* its timers start once the packets are out */
		urnic_clock_renew();
	if (qp->ibv.qp_type != IBV_QPT_RC)
		complete_unacknowledged(qp);
	else if (sent_any && !qp->ack_deadline)
		urnic_comp_arm_timer(qp);
	else if (sent_any && !qp->rtx.deadline)
		urnic_rtx_arm(qp);
	else if (sent_any)
		urnic_rtx_sent_more(qp);
}

/* The WQE a go-back for psn resumes: the first not complete whose PSNs reach past psn, or
 * the partly sent one; *end: one past the last WQE that goes back (sq_next or the one after). */
static uint32_t goback_wqe(struct urnic_qp *qp, uint32_t psn, uint32_t *end)
{
	uint32_t idx = qp->sq_cons;

	*end = qp->sq_next;
	while (idx != *end) { /* every WQE before the one holding psn is complete */
		struct urnic_swqe *w = sq_at(qp, idx);

		if (w->state != URNIC_WQE_DONE &&
		    psn_diff(psn, psn_add(w->first_psn, w->npkts)) < 0)
			break;
		idx++;
	}
	if (*end != qp->sq_prod && sq_at(qp, *end)->sent > 0)
		(*end)++; /* the partly sent WQE goes back too */
	return idx;
}

/* Where a go-back for psn that resumes WQE idx (goback_wqe) puts the cursor. */
static uint32_t goback_psn_at(struct urnic_qp *qp, uint32_t psn, uint32_t idx, uint32_t end)
{
	if (idx == end || sq_at(qp, idx)->opcode != IBV_WR_RDMA_READ)
		return psn;
	return psn_add(sq_at(qp, idx)->first_psn, sq_at(qp, idx)->rcvd);
}

uint32_t urnic_req_goback_to(struct urnic_qp *qp, uint32_t psn)
{
	uint32_t end, idx = goback_wqe(qp, psn, &end);

	return goback_psn_at(qp, psn, idx, end);
}

/* Moves the send cursor back to psn, where the go-back that goback_wqe found (idx, end) resumes
 * (for a READ, goback_psn_at's answer): WQE idx goes on from psn, those after it up to end, the
 * partly sent one included, from their start.
 * The cursor and the WQE's count of packets sent must agree: a READ gone back to its first
 * response while the cursor stayed at a NAK's PSN a slice later was given that PSN as its first
 * again once nothing of it counted as sent; its old responses then matched the new numbers, and
 * 128 KiB of a READ landed a slice early (rc_read_lossy, seed 188). */
static void rewind_wqes(struct urnic_qp *qp, uint32_t psn, uint32_t idx, uint32_t end)
{
	for (uint32_t i = idx; i != end; i++) {
		sq_at(qp, i)->state = URNIC_WQE_POSTED;
		sq_at(qp, i)->sent = 0;
	}
	if (idx != end)
		sq_at(qp, idx)->sent = (uint32_t)psn_diff(psn, sq_at(qp, idx)->first_psn);
	qp->sq_next = idx;
	qp->snd_nxt = psn;
}

/* The cursor back to psn itself, which was built but not acknowledged. */
static void rewind_to(struct urnic_qp *qp, uint32_t psn)
{
	uint32_t end, idx = goback_wqe(qp, psn, &end);

	rewind_wqes(qp, psn, idx, end);
}

/* psn, which the last flush built, did not leave: the cursor goes back to it. */
static void unsend_from(struct urnic_qp *qp, uint32_t psn)
{
	rewind_to(qp, psn);
	if (psn_diff(qp->last_ackreq, psn) >= 0) /* the AckReq did not leave: ask again */
		qp->last_ackreq = psn_add(psn, URNIC_PSN_MASK - URNIC_ACKREQ_EVERY);
	urnic_rtx_unsent(qp, psn);
}

void urnic_req_held(struct urnic_qp *qp, uint32_t psn, uint8_t opcode)
{
	if (urnic_op(opcode)->mask & (URNIC_M_READ | URNIC_M_ATOMIC))
		qp->rd_outstanding--; /* counted when it was built */
	qp->tx_held = true;
	if (psn_diff(psn, qp->snd_nxt) < 0) /* the first held: later ones are behind it already */
		unsend_from(qp, psn);
}

void urnic_req_skip_to(struct urnic_qp *qp, uint32_t psn)
{
	while (psn_diff(psn, qp->snd_nxt) > 0 && qp->sq_next != qp->sq_prod) {
		struct urnic_swqe *w = sq_at(qp, qp->sq_next);
		uint32_t left = w->npkts - w->sent, n = (uint32_t)psn_diff(psn, qp->snd_nxt);

		if (wqe_is_rd_atomic(w) || qp->ibv.qp_type != IBV_QPT_RC)
			return; /* only its responses complete it */
		if (w->sent == 0)
			w->first_psn = qp->snd_nxt;
		w->sent += n < left ? n : left;
		qp->snd_nxt = psn_add(qp->snd_nxt, n < left ? n : left);
		if (w->sent == w->npkts) {
			w->state = URNIC_WQE_SENT;
			qp->sq_next++;
		}
	}
}

/* The WQE that holds the last packet sent, when the cursor stands at snd_max. */
static struct urnic_swqe *last_sent_wqe(struct urnic_qp *qp)
{
	if (qp->snd_nxt != qp->snd_max || qp->snd_una == qp->snd_nxt)
		return NULL;
	if (qp->sq_next != qp->sq_prod && sq_at(qp, qp->sq_next)->sent > 0)
		return sq_at(qp, qp->sq_next); /* partly sent */
	return qp->sq_next != qp->sq_cons ? sq_at(qp, qp->sq_next - 1) : NULL;
}

enum urnic_probe urnic_req_probe_kind(struct urnic_qp *qp)
{
	struct urnic_swqe *w = last_sent_wqe(qp);

	if (!w || wqe_is_atomic(w) || qp->ibv.qp_type != IBV_QPT_RC)
		return URNIC_PROBE_NONE;
	if (w->opcode == IBV_WR_RDMA_READ)
		return URNIC_PROBE_READ;
	/* sent again, the last packet must fit the window (its first sending counted in it) */
	return inflight(qp) - 1 < urnic_rtx_window(qp) ? URNIC_PROBE_PACKET : URNIC_PROBE_NONE;
}

bool urnic_req_probe(struct urnic_qp *qp)
{
	uint32_t last = psn_add(qp->snd_max, URNIC_PSN_MASK);

	switch (urnic_req_probe_kind(qp)) {
	case URNIC_PROBE_NONE:
		return false;
	case URNIC_PROBE_READ: /* ask again from the first missing response */
		urnic_req_retransmit_from(qp, qp->snd_una);
		return true;
	case URNIC_PROBE_PACKET:
		rewind_to(qp, last);
		qp->last_ackreq = psn_add(last, URNIC_PSN_MASK - URNIC_ACKREQ_EVERY);
		return true;
	}
	return false;
}

void urnic_req_retransmit_from(struct urnic_qp *qp, uint32_t psn)
{
	if (psn_diff(psn, qp->snd_una) < 0) /* never behind what the peer acknowledged */
		psn = qp->snd_una;
	uint32_t end, idx = goback_wqe(qp, psn, &end);
	uint32_t to = goback_psn_at(qp, psn, idx, end);

	urnic_rtx_retransmitting(qp, psn, to); /* before the cursor moves: it reads snd_nxt */
	rewind_wqes(qp, to, idx, end);
	qp->rd_outstanding = 0;
	qp->last_ackreq = psn_add(to, URNIC_PSN_MASK - URNIC_ACKREQ_EVERY); /* ask for an ACK */
}
