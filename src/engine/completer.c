/* completer.c - the requester's receive side: ACKs, NAKs, READ and atomic responses turned into
 * completions, plus the retry and RNR timers that drive retransmission. */
#include <string.h>

#include "engine/engine.h"
#include "mem/mr.h"

/* IBTA table 45: RNR NAK timer field -> microseconds, times 100. Code 0 is 655.36 ms. */
static const uint32_t rnr_timer_10us[32] = {
	65536, 1,    2,    3,    4,    6,    8,     12,    16,    24,   32,
	48,    64,   96,   128,  192,  256,  384,   512,   768,   1024, 1536,
	2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

uint64_t urnic_rnr_timer_ns(unsigned code)
{
	return (uint64_t)rnr_timer_10us[code & 31] * 10000;
}

static const enum ibv_wc_opcode send_wc_opcode[] = {
	[IBV_WR_RDMA_WRITE] = IBV_WC_RDMA_WRITE,
	[IBV_WR_RDMA_WRITE_WITH_IMM] = IBV_WC_RDMA_WRITE,
	[IBV_WR_SEND] = IBV_WC_SEND,
	[IBV_WR_SEND_WITH_IMM] = IBV_WC_SEND,
	[IBV_WR_RDMA_READ] = IBV_WC_RDMA_READ,
	[IBV_WR_ATOMIC_CMP_AND_SWP] = IBV_WC_COMP_SWAP,
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = IBV_WC_FETCH_ADD,
};

void urnic_complete_send(struct urnic_qp *qp, struct urnic_swqe *w, enum ibv_wc_status st)
{
	w->state = URNIC_WQE_DONE;
	if (st == IBV_WC_SUCCESS && !qp->sq_sig_all && !(w->send_flags & IBV_SEND_SIGNALED))
		return;
	struct ibv_wc wc = {
		.wr_id = w->wr_id,
		.status = st,
		.opcode = send_wc_opcode[w->opcode],
		.qp_num = qp->ibv.qp_num,
		.byte_len = w->opcode == IBV_WR_RDMA_READ ? w->length
			    : wqe_is_atomic(w)	      ? 8
						      : w->length,
	};

	urnic_cq_push(to_ucq(qp->ibv.send_cq), &wc, false);
}

/* The IB timer runs while anything sent is unacknowledged: up to snd_max, not the cursor, which
 * a go-back whose packets a full ring held (net/shm.c) leaves at snd_una. Timed to the cursor, a
 * reader that stopped with its ring full was never given up on (no IBV_WC_RETRY_EXC_ERR in 20 s
 * where 268 ms were due: rc_retry_exc_stopped). */
void urnic_comp_arm_timer(struct urnic_qp *qp)
{
	uint64_t t = urnic_ack_timeout_ns(qp->attr.timeout);

	urnic_rtx_arm(qp);
	if (qp->snd_una == qp->snd_max || t == 0 || qp->rnr_deadline) {
		qp->ack_deadline = 0;
		return;
	}
	qp->ack_deadline = urnic_clock_ns() + t;
	urnic_engine_deadline(qp->dev, qp->ack_deadline);
}

/* Fails the oldest unfinished WQE with st and takes the QP to ERR (flushing the rest). */
static void fail_oldest(struct urnic_qp *qp, enum ibv_wc_status st)
{
	if (qp->sq_cons != qp->sq_prod) {
		urnic_complete_send(qp, sq_at(qp, qp->sq_cons), st);
		qp->sq_cons++;
	}
	urnic_qp_error(qp);
}

static void progress(struct urnic_qp *qp, uint32_t una)
{
	if (psn_diff(una, qp->snd_una) > 0 && psn_diff(una, qp->snd_nxt) <= 0) {
		uint32_t acked = (uint32_t)psn_diff(una, qp->snd_una);

		qp->snd_una = una;
		urnic_rtx_acked(qp, una, acked);
		qp->retry_left = qp->attr.retry_cnt;
		qp->rnr_left = qp->attr.rnr_retry;
	}
}

/* The oldest WQE with packets on the wire: fully sent, or the one being sent (sq_next). */
static struct urnic_swqe *oldest_outstanding(struct urnic_qp *qp)
{
	if (qp->sq_cons == qp->sq_prod)
		return NULL;
	struct urnic_swqe *w = sq_at(qp, qp->sq_cons);

	return qp->sq_cons != qp->sq_next || w->sent > 0 ? w : NULL;
}

/* Whether an acknowledgement through psn says nothing of what the requester lacks: a READ or
 * atomic sent before it lacks a response within psn. The responder took the request, but its
 * responses are what went missing: a go-back for them was no mistake (a stale NAK after a
 * timer's go-back undid the window's cut and counted a spurious go-back). The WQEs' PSNs are
 * counted on from the oldest's: one not sent again since the go-back keeps no first PSN of its
 * own that this could trust. */
static bool responses_due_within(struct urnic_qp *qp, uint32_t psn)
{
	struct urnic_swqe *oldest = oldest_outstanding(qp);

	if (!oldest)
		return false;
	uint32_t first = oldest->first_psn;

	for (uint32_t i = qp->sq_cons; i != qp->sq_prod; i++) {
		struct urnic_swqe *w = sq_at(qp, i);

		if (psn_diff(first, psn) > 0 || psn_diff(first, qp->snd_max) >= 0)
			return false;
		if (wqe_is_rd_atomic(w) && w->rcvd < w->npkts &&
		    psn_diff(psn, psn_add(first, w->rcvd)) >= 0)
			return true;
		first = psn_add(first, w->npkts);
	}
	return false;
}

/* Every request PSN up to and including psn is acknowledged. A READ or atomic is only done by
 * its responses: acknowledgement stops at its first missing response, and one that the ACK
 * covers entirely was lost (implicit NAK), so it goes again and this returns false.
 * After a go-back the requester may not yet have sent again what an ACK of the first sending
 * covers: it skips ahead over what the responder has (never past what was ever sent) and
 * counts only up to where it stands; a READ or atomic in the way is asked again. */
static bool ack_through(struct urnic_qp *qp, uint32_t psn)
{
	if (psn_diff(psn, qp->snd_nxt) >= 0 && psn_diff(psn, qp->snd_max) < 0 &&
	    !responses_due_within(qp, psn) && urnic_rtx_spurious(qp))
		urnic_req_skip_to(qp, qp->snd_max); /* the first sending is still on its way */
	if (psn_diff(psn, qp->snd_nxt) >= 0)
		psn = psn_add(qp->snd_nxt, URNIC_PSN_MASK);
	for (struct urnic_swqe *w; (w = oldest_outstanding(qp));) {
		uint32_t last = psn_add(w->first_psn, w->npkts - 1);

		if (wqe_is_rd_atomic(w)) {
			uint32_t missing = psn_add(w->first_psn, w->rcvd);

			if (psn_diff(psn, missing) < 0)
				break;
			progress(qp, missing);
			if (psn_diff(psn, last) < 0)
				return true; /* a response is still due */
			urnic_req_retransmit_from(qp, missing);
			return false;
		}
		if (psn_diff(psn, last) < 0)
			break;
		urnic_complete_send(qp, w, IBV_WC_SUCCESS);
		qp->sq_cons++;
	}
	progress(qp, psn_add(psn, 1));
	return true;
}

static enum ibv_wc_status nak_status(unsigned code)
{
	switch (code) {
	case URNIC_NAK_INVALID_REQ:
		return IBV_WC_REM_INV_REQ_ERR;
	case URNIC_NAK_REM_ACCESS_ERR:
		return IBV_WC_REM_ACCESS_ERR;
	case URNIC_NAK_INVALID_RD_REQ:
		return IBV_WC_REM_INV_RD_REQ_ERR;
	default:
		return IBV_WC_REM_OP_ERR;
	}
}

static const enum urnic_counter nak_rcvd_counter[] = {
	[URNIC_NAK_PSN_SEQ_ERR] = URNIC_C_nak_seq_rcvd,
	[URNIC_NAK_INVALID_REQ] = URNIC_C_nak_inv_rcvd,
	[URNIC_NAK_REM_ACCESS_ERR] = URNIC_C_nak_acc_rcvd,
	[URNIC_NAK_REM_OP_ERR] = URNIC_C_nak_op_rcvd,
	[URNIC_NAK_INVALID_RD_REQ] = URNIC_C_nak_inv_rcvd,
};

/* The IB timeout (its only caller): a retry that retry_cnt pays for. A PSN-sequence NAK or a
 * READ's response gap does not pay: each proves the responder alive, and the IB timer, re-armed
 * by progress and by its own expiries only, still ends a QP whose responder answers but never
 * moves on, after the time timeout and retry_cnt imply (a gap that paid ended a READ in
 * milliseconds: see on_read_response). */
static void retry(struct urnic_qp *qp, uint32_t psn)
{
	if (qp->retry_left == 0) {
		fail_oldest(qp, IBV_WC_RETRY_EXC_ERR);
		return;
	}
	qp->retry_left--;
	urnic_req_retransmit_from(qp, psn);
}

static void on_rnr_nak(struct urnic_qp *qp, uint32_t psn, unsigned timer)
{
	urnic_qp_count(qp, URNIC_C_rnr_nak_rcvd, 1);
	if (qp->attr.rnr_retry != 7) {
		if (qp->rnr_left == 0) {
			fail_oldest(qp, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		qp->rnr_left--;
	}
	urnic_req_retransmit_from(qp, psn);
	qp->ack_deadline = 0;
	qp->rnr_deadline = urnic_clock_ns() + urnic_rnr_timer_ns(timer);
	urnic_engine_deadline(qp->dev, qp->rnr_deadline);
}

/* A NAK names the PSN the responder expects: it holds everything before it. After a go-back that
 * PSN can lie ahead of the send cursor, up to the highest PSN ever sent (the first sending got
 * there); behind what is acknowledged or beyond anything sent, it is stale (reordered,
 * duplicated) or bogus. */
static bool nak_in_window(const struct urnic_qp *qp, uint32_t psn)
{
	return psn_diff(psn, qp->snd_una) >= 0 && psn_diff(psn, qp->snd_max) <= 0;
}

static void on_nak(struct urnic_qp *qp, uint32_t psn, unsigned type, unsigned value)
{
	bool fatal = type == URNIC_AETH_NAK && value != URNIC_NAK_PSN_SEQ_ERR;

	if (type == URNIC_AETH_NAK && value <= URNIC_NAK_INVALID_RD_REQ)
		urnic_qp_count(qp, nak_rcvd_counter[value], 1);
	if (!ack_through(qp, psn_add(psn, URNIC_PSN_MASK)))
		return;
	/* still behind psn (no skip ahead was proven): the requester is sending again what the
	 * responder has, and will be acknowledged past it; there is nothing to go back to */
	bool ahead = psn_diff(psn, qp->snd_nxt) > 0;

	if (fatal)
		fail_oldest(qp, nak_status(value));
	else if (ahead || (type == URNIC_AETH_NAK && urnic_rtx_nak_is_stale(qp, psn)))
		urnic_qp_count(qp, URNIC_C_stale_naks, 1);
	else if (type == URNIC_AETH_RNR_NAK)
		on_rnr_nak(qp, psn, value);
	else /* the responder is alive: retry_cnt is for silence */
		urnic_req_retransmit_from(qp, psn);
}

static void on_aeth(struct urnic_qp *qp, uint32_t psn, const uint8_t *aeth)
{
	unsigned type = aeth_type(aeth);

	if (type == URNIC_AETH_ACK) {
		urnic_qp_count(qp, URNIC_C_acks_rcvd, 1);
		ack_through(qp, psn);
	} else if (type != URNIC_AETH_RNR_NAK && type != URNIC_AETH_NAK) {
		return; /* reserved AETH type */
	} else if (!nak_in_window(qp, psn)) {
		urnic_qp_count(qp, URNIC_C_drop_psn, 1);
	} else {
		on_nak(qp, psn, type, aeth_value(aeth));
	}
}

/* The WQE a response with this PSN answers, once everything before it is acknowledged. */
static struct urnic_swqe *response_target(struct urnic_qp *qp, uint32_t psn)
{
	if (!ack_through(qp, psn_add(psn, URNIC_PSN_MASK)))
		return NULL;
	struct urnic_swqe *w = oldest_outstanding(qp);

	return w && wqe_is_rd_atomic(w) ? w : NULL;
}

static void finish_rd_atomic(struct urnic_qp *qp, struct urnic_swqe *w)
{
	urnic_complete_send(qp, w, IBV_WC_SUCCESS);
	qp->sq_cons++;
}

static void on_read_response(struct urnic_qp *qp, const struct urnic_rxpkt *pkt,
			     const struct urnic_opcode_info *op, uint32_t payload_len)
{
	uint32_t psn = bth_psn(pkt->data);
	struct urnic_swqe *w = response_target(qp, psn);

	if (!w || w->opcode != IBV_WR_RDMA_READ)
		return;
	uint32_t expected = psn_add(w->first_psn, w->rcvd);
	int32_t d = psn_diff(psn, expected);

	if (d < 0) /* duplicate */
		return;
	/* A response packet went missing: ask again from there, once per go-back (the gaps that
	 * follow are held, see retransmit.c). Not a retry that retry_cnt pays for: over a ring
	 * whose reader fell behind, responses to earlier requests came a queue's delay late,
	 * each gap after a go-back looked like a lost retransmission and paid, and a 64 MiB READ
	 * failed with IBV_WC_RETRY_EXC_ERR (rc_read_lossy_shm in CI; traced under 10% loss, 8
	 * go-backs in 6 ms; rc_read_gap_timer stages it). */
	if (d > 0) {
		urnic_qp_count(qp, URNIC_C_read_gaps, 1);
		if (urnic_rtx_read_gap_answered(qp, expected))
			return;
		if (!qp->read_gap_asked && psn_diff(psn, psn_add(w->first_psn, w->sent)) < 0) {
			qp->read_gap_asked = true;
			urnic_req_retransmit_from(qp, expected);
		} else {
			urnic_rtx_read_gap(qp, expected);
		}
		return;
	}
	if (psn_diff(psn, psn_add(w->first_psn, w->sent)) >= 0)
		return; /* answers a request not made again since a go-back: asked for later */
	qp->read_gap_asked = false;
	uint64_t off = (uint64_t)w->rcvd * qp->mtu;
	bool last = op->mask & URNIC_M_LAST;
	bool bad_len = last ? payload_len > qp->mtu || off + payload_len > w->length
			    : payload_len != qp->mtu || off + payload_len >= w->length;

	if (bad_len) {
		urnic_qp_count(qp, URNIC_C_drop_length, 1);
		return;
	}
	pthread_rwlock_rdlock(&qp->dev->mr_lock);
	int err = urnic_sge_scatter(qp->dev, to_upd(qp->ibv.pd), w->sge, w->num_sge, off,
				    pkt->payload ? pkt->payload : pkt->data + op->hdr_len,
				    payload_len);
	pthread_rwlock_unlock(&qp->dev->mr_lock);
	if (err) {
		fail_oldest(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	w->rcvd++;
	progress(qp, psn_add(psn, 1));
	if (last)
		qp->rd_outstanding--;
	if (w->rcvd == w->npkts)
		finish_rd_atomic(qp, w);
}

static void on_atomic_ack(struct urnic_qp *qp, const struct urnic_rxpkt *pkt,
			  const struct urnic_opcode_info *op)
{
	uint32_t psn = bth_psn(pkt->data);
	struct urnic_swqe *w = response_target(qp, psn);

	if (!w || !wqe_is_atomic(w) || w->first_psn != psn || w->rcvd)
		return;
	uint64_t orig = atomicacketh_orig(pkt->data + op->atomicacketh);

	pthread_rwlock_rdlock(&qp->dev->mr_lock);
	int err = urnic_sge_scatter(qp->dev, to_upd(qp->ibv.pd), w->sge, w->num_sge, 0,
				    (const uint8_t *)&orig, sizeof(orig));
	pthread_rwlock_unlock(&qp->dev->mr_lock);
	if (err) {
		fail_oldest(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	w->rcvd = 1;
	progress(qp, psn_add(psn, 1));
	qp->rd_outstanding--;
	finish_rd_atomic(qp, w);
}

void urnic_comp_rx(struct urnic_qp *qp, const struct urnic_rxpkt *pkt, struct urnic_txbatch *b)
{
	const uint8_t *bth = pkt->data;
	const struct urnic_opcode_info *op = urnic_op(bth_opcode(bth));
	uint32_t payload_len = pkt->len - op->hdr_len - URNIC_ICRC_LEN - bth_padcnt(bth);
	uint32_t una = qp->snd_una;

	if (op->mask & URNIC_M_READ) {
		/* AETH on FIRST/LAST/ONLY: a NAK can only come as a plain ACK packet */
		on_read_response(qp, pkt, op, payload_len);
	} else if (op->mask & URNIC_M_ATOMICACKETH) {
		on_atomic_ack(qp, pkt, op);
	} else {
		on_aeth(qp, bth_psn(bth), bth + op->aeth);
	}
	if (qp->ibv.state != IBV_QPS_RTS)
		return;
	if (qp->snd_una != una)
		urnic_comp_arm_timer(qp);
	urnic_req_run(qp, b);
}

/* A go-back to the oldest unacknowledged PSN that retry_cnt does not pay for (retransmit.c: a
 * held NAK found right, or the fast timer), counted under why. */
static void go_back_free(struct urnic_qp *qp, struct urnic_txbatch *b, enum urnic_counter why)
{
	qp->read_gap_asked = false;
	urnic_qp_count(qp, why, 1);
	urnic_req_retransmit_from(qp, qp->snd_una);
	urnic_req_run(qp, b);
	urnic_rtx_arm(qp);
}

void urnic_comp_timers(struct urnic_qp *qp, uint64_t now, struct urnic_txbatch *b)
{
	/* packets held back: is there room now? (READ responses try again in this same scan) */
	bool held_due = qp->held_until && now >= qp->held_until;

	if (held_due)
		qp->held_until = 0;
	if (qp->ibv.state != IBV_QPS_RTS)
		return;
	if (qp->rnr_deadline && now >= qp->rnr_deadline) {
		qp->rnr_deadline = 0;
		urnic_req_run(qp, b);
	}
	if (held_due)
		urnic_req_run(qp, b);
	if (qp->ack_deadline && now >= qp->ack_deadline) {
		qp->ack_deadline = 0;
		if (qp->snd_una == qp->snd_max)
			return;
		qp->read_gap_asked = false;
		urnic_qp_count(qp, URNIC_C_timeouts, 1);
		urnic_rtx_congested(qp);
		retry(qp, qp->snd_una);
		if (qp->ibv.state == IBV_QPS_RTS)
			urnic_req_run(qp, b);
		/* the run arms it if it built a packet; one held before it built any did not */
		if (qp->ibv.state == IBV_QPS_RTS && !qp->ack_deadline)
			urnic_comp_arm_timer(qp);
		return;
	}
	if (urnic_rtx_probe_due(qp, now) && urnic_req_probe(qp)) {
		qp->read_gap_asked = false;
		urnic_qp_count(qp, URNIC_C_tail_probes, 1);
		urnic_rtx_probing(qp);
		urnic_req_run(qp, b);
	}
	/* (none of the rtx timers is due, and none arms, once the QP is in ERR) */
	if (urnic_rtx_held_nak_due(qp, now)) /* the retransmission was lost too */
		go_back_free(qp, b, qp->rtx.held_read_gap ? URNIC_C_held_read_gaps
							 : URNIC_C_held_naks);
	if (urnic_rtx_expired(qp, now))
		go_back_free(qp, b, URNIC_C_rto_expiries);
}
