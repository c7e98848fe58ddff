/* responder.c - executes incoming RC requests in PSN order: places SEND and WRITE data, answers
 * READs and atomics, ACKs (coalesced per receive batch), NAKs and duplicates. Engine thread. */
#include <errno.h>
#include <string.h>

#include "common/dma.h"
#include "engine/engine.h"
#include "mem/mr.h"

/* What a request packet led to; each outcome is one small action below. */
enum resp_outcome {
	RESP_DONE,      /* executed; ACK if asked */
	RESP_RNR,       /* no receive WQE: RNR NAK, PSN not consumed */
	RESP_NAK_INV,   /* invalid request: NAK, QP to ERR */
	RESP_NAK_ACC,   /* remote access error: NAK, QP to ERR */
	RESP_NAK_OP,    /* remote operational error: NAK, QP to ERR */
};

struct resp_pkt {
	const uint8_t *bth;
	const struct urnic_opcode_info *op;
	uint32_t psn;
	const uint8_t *payload;
	uint32_t payload_len;
};

static struct urnic_pd *qp_pd(struct urnic_qp *qp)
{
	return to_upd(qp->ibv.pd);
}

static void send_aeth(struct urnic_qp *qp, struct urnic_txbatch *b, uint32_t psn,
		      enum urnic_aeth_type type, unsigned value, uint32_t msn)
{
	struct urnic_txpkt *p = urnic_tx_begin(b, qp, URNIC_OP_ACK, psn, false, false);

	aeth_build(urnic_tx_ext(p, urnic_op(URNIC_OP_ACK)->aeth), type, value, msn);
	urnic_tx_finish(qp, p, 0);
}

static void owe_answer(struct urnic_qp *qp)
{
	if (!qp->on_ack_list) {
		qp->on_ack_list = true;
		qp->ack_next = qp->dev->ack_list;
		qp->dev->ack_list = qp;
	}
}

static void queue_ack(struct urnic_qp *qp, uint32_t psn)
{
	if (!qp->ack_pending || psn_diff(psn, qp->ack_psn) > 0) {
		qp->ack_psn = psn;
		qp->ack_msn = qp->msn;
	}
	qp->ack_pending = true;
	owe_answer(qp);
}

/* A PSN-sequence or RNR NAK waits, like an ACK, behind READ and atomic responses still due:
 * it acknowledges everything before epsn, and overtaking them would make the requester take
 * them for lost. It supersedes a pending ACK. */
static void queue_nak(struct urnic_qp *qp, enum urnic_aeth_type type, unsigned value)
{
	qp->nak_pending = true;
	qp->nak_type = (uint8_t)type;
	qp->nak_value = (uint8_t)value;
	qp->nak_psn = qp->epsn;
	qp->nak_msn = qp->msn;
	qp->nak_sent = true;
	owe_answer(qp);
}

static const enum urnic_counter nak_sent_counter[] = {
	[URNIC_NAK_PSN_SEQ_ERR] = URNIC_C_nak_seq_sent,
	[URNIC_NAK_INVALID_REQ] = URNIC_C_nak_inv_sent,
	[URNIC_NAK_REM_ACCESS_ERR] = URNIC_C_nak_acc_sent,
	[URNIC_NAK_REM_OP_ERR] = URNIC_C_nak_op_sent,
};

static void send_nak(struct urnic_qp *qp, struct urnic_txbatch *b, enum urnic_nak_code code)
{
	send_aeth(qp, b, qp->epsn, URNIC_AETH_NAK, code, qp->msn);
	urnic_qp_count(qp, nak_sent_counter[code], 1);
	qp->nak_sent = true;
}

static void nak_sequence(struct urnic_qp *qp)
{
	queue_nak(qp, URNIC_AETH_NAK, URNIC_NAK_PSN_SEQ_ERR);
	urnic_qp_count(qp, URNIC_C_nak_seq_sent, 1);
}

/* ---- receive WQEs ---- */

static void complete_recv(struct urnic_qp *qp, const struct resp_pkt *rp, enum ibv_wc_status st,
			  enum ibv_wc_opcode opcode, uint32_t byte_len)
{
	struct ibv_wc wc = {
		.wr_id = qp->cur_recv.wr_id,
		.status = st,
		.opcode = opcode,
		.byte_len = byte_len,
		.qp_num = qp->ibv.qp_num,
		.src_qp = qp->attr.dest_qp_num,
	};

	if (rp->op->immdt) {
		memcpy(&wc.imm_data, rp->bth + rp->op->immdt, 4);
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	qp->cur_recv.taken = false;
	urnic_cq_push(to_ucq(qp->ibv.recv_cq), &wc, bth_se(rp->bth) || st != IBV_WC_SUCCESS);
}

/* ---- SEND ---- */

static enum resp_outcome exec_send(struct urnic_qp *qp, const struct resp_pkt *rp)
{
	uint32_t mask = rp->op->mask;

	if (mask & URNIC_M_FIRST) {
		if (!urnic_qp_take_recv(qp))
			return RESP_RNR;
		qp->recv_off = 0;
	}
	struct urnic_cur_recv *r = &qp->cur_recv;

	pthread_rwlock_rdlock(&qp->dev->mr_lock);
	int err = urnic_sge_scatter(qp->dev, qp_pd(qp), r->sge, r->num_sge, qp->recv_off,
				    rp->payload, rp->payload_len);
	pthread_rwlock_unlock(&qp->dev->mr_lock);
	if (err) {
		bool too_long = err == -EMSGSIZE;

		complete_recv(qp, rp, too_long ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR,
			      IBV_WC_RECV, qp->recv_off);
		return too_long ? RESP_NAK_INV : RESP_NAK_OP;
	}
	qp->recv_off += rp->payload_len;
	qp->in_send = !(mask & URNIC_M_LAST);
	if (mask & URNIC_M_LAST)
		complete_recv(qp, rp, IBV_WC_SUCCESS, IBV_WC_RECV, qp->recv_off);
	return RESP_DONE;
}

/* ---- RDMA WRITE ---- */

static enum resp_outcome write_start(struct urnic_qp *qp, const struct resp_pkt *rp)
{
	const uint8_t *reth = rp->bth + rp->op->reth;
	uint32_t len = reth_len(reth);
	bool only = (rp->op->mask & URNIC_M_ONLY) == URNIC_M_ONLY;

	if (len > URNIC_MAX_MSG_SIZE || (only ? rp->payload_len != len : len <= qp->mtu))
		return RESP_NAK_INV;
	qp->write_va = reth_va(reth);
	qp->write_rkey = reth_rkey(reth);
	qp->write_len = qp->write_left = len;
	/* a zero-length WRITE names no memory, so its key is not checked */
	if (len && !urnic_mr_find(qp->dev, qp_pd(qp), qp->write_rkey, qp->write_va, len,
				  IBV_ACCESS_REMOTE_WRITE))
		return RESP_NAK_ACC;
	return RESP_DONE;
}

static enum resp_outcome exec_write(struct urnic_qp *qp, const struct resp_pkt *rp)
{
	uint32_t mask = rp->op->mask;
	enum resp_outcome out = RESP_DONE;

	/* WRITE WITH IMM consumes a receive WQE: find it before touching memory */
	if ((mask & URNIC_M_LAST) && rp->op->immdt && !urnic_qp_take_recv(qp))
		return RESP_RNR;
	pthread_rwlock_rdlock(&qp->dev->mr_lock);
	if (mask & URNIC_M_FIRST)
		out = write_start(qp, rp);
	if (out == RESP_DONE && (rp->payload_len > qp->write_left ||
				 ((mask & URNIC_M_LAST) && rp->payload_len != qp->write_left)))
		out = RESP_NAK_INV;
	if (out == RESP_DONE && rp->payload_len) {
		/* checked on every packet: the MR may have gone since the first */
		struct urnic_mr *mr = urnic_mr_find(qp->dev, qp_pd(qp), qp->write_rkey, qp->write_va,
						    rp->payload_len, IBV_ACCESS_REMOTE_WRITE);

		if (mr) {
			URNIC_DMA_BEGIN();
			memcpy(urnic_mr_ptr(mr, qp->write_va), rp->payload, rp->payload_len);
			URNIC_DMA_END();
		} else
			out = RESP_NAK_ACC;
	}
	pthread_rwlock_unlock(&qp->dev->mr_lock);
	if (out != RESP_DONE)
		return out;
	qp->write_va += rp->payload_len;
	qp->write_left -= rp->payload_len;
	qp->in_write = !(mask & URNIC_M_LAST);
	if ((mask & URNIC_M_LAST) && rp->op->immdt)
		complete_recv(qp, rp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, qp->write_len);
	else if (mask & URNIC_M_LAST)
		urnic_engine_landed(qp->dev);
	return RESP_DONE;
}

/* ---- READ and atomics: responder resources ---- */

static struct urnic_rd_res *rd_at(struct urnic_qp *qp, int i)
{
	return &qp->rd[(qp->rd_head + i) % qp->rd_size];
}

/* A new resource; the oldest is recycled once answered, or when it is only answering a
 * duplicate again (a new request shows the requester has moved past it). NULL if the oldest
 * still owes its first answer: more outstanding than max_dest_rd_atomic. */
static struct urnic_rd_res *rd_alloc(struct urnic_qp *qp)
{
	if (qp->rd_count == qp->rd_size) {
		if (rd_at(qp, 0)->busy && !rd_at(qp, 0)->replay)
			return NULL;
		qp->rd_head = (qp->rd_head + 1) % qp->rd_size;
		qp->rd_count--;
	}
	struct urnic_rd_res *r = rd_at(qp, qp->rd_count++);

	memset(r, 0, sizeof(*r));
	return r;
}

static uint32_t read_npkts(const struct urnic_qp *qp, uint32_t len)
{
	return len ? (len + qp->mtu - 1) / qp->mtu : 1;
}

/* A READ request's RETH against the MRs: RESP_DONE, or the NAK it earns. */
static enum resp_outcome check_read(struct urnic_qp *qp, const struct resp_pkt *rp)
{
	const uint8_t *reth = rp->bth + rp->op->reth;
	uint32_t len = reth_len(reth);

	if (len > URNIC_MAX_MSG_SIZE)
		return RESP_NAK_INV;
	pthread_rwlock_rdlock(&qp->dev->mr_lock);
	bool ok = !len || urnic_mr_find(qp->dev, qp_pd(qp), reth_rkey(reth), reth_va(reth), len,
					IBV_ACCESS_REMOTE_READ);
	pthread_rwlock_unlock(&qp->dev->mr_lock);
	return ok ? RESP_DONE : RESP_NAK_ACC;
}

/* Arms a resource to answer the READ in rp, from its PSN with its RETH. */
static void arm_read(struct urnic_qp *qp, struct urnic_rd_res *r, const struct resp_pkt *rp,
		     bool replay)
{
	const uint8_t *reth = rp->bth + rp->op->reth;

	*r = (struct urnic_rd_res){.busy = true,
				   .replay = replay,
				   .psn = rp->psn,
				   .npkts = read_npkts(qp, reth_len(reth)),
				   .va = reth_va(reth),
				   .rkey = reth_rkey(reth),
				   .length = reth_len(reth)};
	qp->dev->tx_pending = true;
}

static enum resp_outcome start_read(struct urnic_qp *qp, const struct resp_pkt *rp)
{
	enum resp_outcome out = check_read(qp, rp);

	if (out != RESP_DONE)
		return out;
	struct urnic_rd_res *r = rd_alloc(qp);

	if (!r)
		return RESP_NAK_INV; /* more READs/atomics in flight than max_dest_rd_atomic */
	arm_read(qp, r, rp, false);
	return RESP_DONE;
}

/* The responder resource whose PSN range holds psn (a retried READ starts inside its
 * original's range), or NULL if it has been recycled. */
static struct urnic_rd_res *rd_find(struct urnic_qp *qp, uint32_t psn)
{
	for (int i = qp->rd_count - 1; i >= 0; i--) {
		struct urnic_rd_res *r = rd_at(qp, i);

		if (psn_diff(psn, r->psn) >= 0 && psn_diff(psn, psn_add(r->psn, r->npkts)) < 0)
			return r;
	}
	return NULL;
}

/* A retried READ: checked again like a new one, answered from its PSN with its RETH. A retry
 * cannot gain rights the original lacked: a failing one is dropped. */
static void restart_read(struct urnic_qp *qp, struct urnic_rd_res *r, const struct resp_pkt *rp)
{
	if (check_read(qp, rp) == RESP_DONE)
		arm_read(qp, r, rp, true);
}

static void send_atomic_ack(struct urnic_qp *qp, struct urnic_txbatch *b, uint32_t psn,
			    uint64_t orig)
{
	const struct urnic_opcode_info *op = urnic_op(URNIC_OP_ATOMIC_ACK);
	struct urnic_txpkt *p = urnic_tx_begin(b, qp, URNIC_OP_ATOMIC_ACK, psn, false, false);

	aeth_build(urnic_tx_ext(p, op->aeth), URNIC_AETH_ACK, URNIC_AETH_CREDITS_INVALID, qp->msn);
	urnic_put64(urnic_tx_ext(p, op->atomicacketh), orig);
	urnic_tx_finish(qp, p, 0);
}

static enum resp_outcome exec_atomic(struct urnic_qp *qp, const struct resp_pkt *rp)
{
	const uint8_t *a = rp->bth + rp->op->atomiceth;
	uint64_t va = atomiceth_va(a), operand = atomiceth_swap_add(a);
	uint64_t compare = atomiceth_compare(a), orig;

	if (va & 7)
		return RESP_NAK_INV; /* IBTA: a misaligned atomic is an invalid request */
	struct urnic_rd_res *r = rd_alloc(qp);

	if (!r)
		return RESP_NAK_INV; /* more READs/atomics in flight than max_dest_rd_atomic */
	pthread_rwlock_rdlock(&qp->dev->mr_lock);
	struct urnic_mr *mr = urnic_mr_find(qp->dev, qp_pd(qp), atomiceth_rkey(a), va, 8,
					    IBV_ACCESS_REMOTE_ATOMIC);

	if (!mr) {
		pthread_rwlock_unlock(&qp->dev->mr_lock);
		qp->rd_count--; /* the resource just taken */
		return RESP_NAK_ACC;
	}
	uint64_t *target = (uint64_t *)(void *)urnic_mr_ptr(mr, va);

	URNIC_DMA_BEGIN();
	if (bth_opcode(rp->bth) == URNIC_OP_FETCH_ADD) {
		orig = __atomic_fetch_add(target, operand, __ATOMIC_SEQ_CST);
	} else {
		orig = compare;
		__atomic_compare_exchange_n(target, &orig, operand, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	}
	URNIC_DMA_END();
	pthread_rwlock_unlock(&qp->dev->mr_lock);
	urnic_engine_landed(qp->dev);
	/* answered in PSN order behind any READ still being answered; kept afterwards so that a
	 * duplicate gets the same answer, not a second execution */
	*r = (struct urnic_rd_res){
		.busy = true, .atomic = true, .psn = rp->psn, .npkts = 1, .orig = orig};
	qp->msn = psn_add(qp->msn, 1);
	qp->dev->tx_pending = true;
	return RESP_DONE;
}

/* ---- sequencing ---- */

/* A FIRST/ONLY may only start a message, a MIDDLE/LAST only continue one of its kind. */
static bool opcode_in_sequence(const struct urnic_qp *qp, uint32_t mask)
{
	bool starts = mask & URNIC_M_FIRST;

	if (qp->in_send)
		return !starts && (mask & URNIC_M_SEND);
	if (qp->in_write)
		return !starts && (mask & URNIC_M_WRITE);
	return starts;
}

static bool payload_fits_mtu(const struct urnic_qp *qp, const struct resp_pkt *rp)
{
	uint32_t mask = rp->op->mask;

	if (!(mask & URNIC_M_PAYLOAD))
		return rp->payload_len == 0;
	if (mask & URNIC_M_LAST)
		return rp->payload_len <= qp->mtu;
	return rp->payload_len == qp->mtu;
}

static enum resp_outcome execute(struct urnic_qp *qp, const struct resp_pkt *rp,
				 struct urnic_txbatch *b)
{
	uint32_t mask = rp->op->mask;

	if (!opcode_in_sequence(qp, mask) || !payload_fits_mtu(qp, rp))
		return RESP_NAK_INV;
	if (mask & URNIC_M_SEND)
		return exec_send(qp, rp);
	if (mask & URNIC_M_WRITE)
		return exec_write(qp, rp);
	if (mask & URNIC_M_READ)
		return start_read(qp, rp);
	if (mask & URNIC_M_ATOMIC)
		return exec_atomic(qp, rp);
	return RESP_NAK_INV;
}

static void advance(struct urnic_qp *qp, const struct resp_pkt *rp)
{
	uint32_t mask = rp->op->mask;
	uint32_t n = 1;

	if (mask & URNIC_M_READ)
		n = read_npkts(qp, reth_len(rp->bth + rp->op->reth));
	qp->epsn = psn_add(qp->epsn, n);
	if ((mask & URNIC_M_LAST) && !(mask & URNIC_M_ATOMIC))
		qp->msn = psn_add(qp->msn, 1);
	if ((mask & (URNIC_M_SEND | URNIC_M_WRITE)) && (bth_ackreq(rp->bth) || (mask & URNIC_M_LAST)))
		queue_ack(qp, rp->psn);
}

static void fatal(struct urnic_qp *qp, struct urnic_txbatch *b, enum urnic_nak_code code)
{
	send_nak(qp, b, code);
	urnic_qp_error(qp);
}

static void act(struct urnic_qp *qp, const struct resp_pkt *rp, enum resp_outcome out,
		struct urnic_txbatch *b)
{
	switch (out) {
	case RESP_DONE:
		advance(qp, rp);
		break;
	case RESP_RNR:
		queue_nak(qp, URNIC_AETH_RNR_NAK, qp->attr.min_rnr_timer);
		urnic_qp_count(qp, URNIC_C_rnr_nak_sent, 1);
		break;
	case RESP_NAK_INV:
		fatal(qp, b, URNIC_NAK_INVALID_REQ);
		break;
	case RESP_NAK_ACC:
		fatal(qp, b, URNIC_NAK_REM_ACCESS_ERR);
		break;
	case RESP_NAK_OP:
		fatal(qp, b, URNIC_NAK_REM_OP_ERR);
		break;
	}
}

/* ---- duplicates (PSN behind epsn): answer again, never execute again ---- */

static void duplicate(struct urnic_qp *qp, const struct resp_pkt *rp, struct urnic_txbatch *b)
{
	uint32_t mask = rp->op->mask;

	urnic_qp_count(qp, URNIC_C_dup_requests, 1);
	if (mask & (URNIC_M_ATOMIC | URNIC_M_READ)) {
		struct urnic_rd_res *r = rd_find(qp, rp->psn);

		/* Older than every resource: not a retry the requester can still be making (it has
		 * at most max_dest_rd_atomic unanswered, and the resources hold the latest that
		 * many), but a copy the network delayed. Answering it would take a resource, and
		 * recycle the oldest record a real retry may still need. */
		if (!r || r->atomic != !!(mask & URNIC_M_ATOMIC)) {
			urnic_qp_count(qp, URNIC_C_drop_stale_rd_atomic, 1);
			return;
		}
		if (r->atomic) { /* answered again from the record, behind what is still due */
			r->busy = r->replay = true;
			qp->dev->tx_pending = true;
			return;
		}
		/* the requester went back: answers still queued beyond this PSN are stale */
		for (int i = 0; i < qp->rd_count; i++) {
			struct urnic_rd_res *later = rd_at(qp, i);

			if (later->busy && !later->atomic && psn_diff(later->psn, rp->psn) > 0)
				later->busy = false;
		}
		restart_read(qp, r, rp); /* the original's resource answers the retry */
		return;
	}
	/* SEND/WRITE: everything up to this PSN did arrive; say so */
	queue_ack(qp, rp->psn);
}

/* ---- UC: no ACK, no NAK, no retransmission; a lost packet loses its message ---- */

static void uc_abandon_message(struct urnic_qp *qp, uint32_t mask)
{
	qp->in_send = qp->in_write = false;
	/* a receive WQE already taken stays in cur_recv and serves the next message */
	qp->uc_dropping = !(mask & URNIC_M_LAST);
	urnic_qp_count(qp, URNIC_C_uc_dropped_msgs, 1);
}

static void uc_rx(struct urnic_qp *qp, const struct resp_pkt *rp)
{
	uint32_t mask = rp->op->mask;

	if (rp->psn != qp->epsn && (qp->in_send || qp->in_write))
		uc_abandon_message(qp, URNIC_M_FIRST); /* drop until the next FIRST/ONLY */
	qp->epsn = psn_add(rp->psn, 1); /* UC resynchronises on whatever arrives */
	if (qp->uc_dropping) {
		if (!(mask & URNIC_M_FIRST))
			return;
		qp->uc_dropping = false;
	}
	if (!opcode_in_sequence(qp, mask) || !payload_fits_mtu(qp, rp)) {
		uc_abandon_message(qp, mask);
		return;
	}
	enum resp_outcome out = (mask & URNIC_M_SEND) ? exec_send(qp, rp) : exec_write(qp, rp);

	switch (out) {
	case RESP_DONE:
		if (mask & URNIC_M_LAST)
			qp->msn = psn_add(qp->msn, 1);
		break;
	case RESP_NAK_INV: /* the receive WQE completed in error: a local error, QP to ERR */
	case RESP_NAK_OP:
		urnic_qp_error(qp);
		break;
	default: /* no receive WQE, or an R_Key violation: silently dropped on UC */
		uc_abandon_message(qp, mask);
		break;
	}
}

/* ---- UD: datagrams; the 40 bytes before the payload are the GRH the verbs promise ---- */

/* For RoCEv2 over IPv4 the GRH area carries 20 unused bytes, then the IPv4 header. */
static void build_grh(uint8_t grh[40], const struct urnic_rxpkt *pkt)
{
	uint8_t *ip = grh + 20;
	uint32_t sum = 0;

	memset(grh, 0, 40);
	ip[0] = 0x45;
	urnic_put16(ip + 2, (uint16_t)(20 + 8 + pkt->len));
	urnic_put16(ip + 6, 0x4000); /* DF */
	ip[8] = 64;
	ip[9] = 17; /* UDP */
	memcpy(ip + 12, &pkt->saddr, 4);
	memcpy(ip + 16, &pkt->daddr, 4);
	for (int i = 0; i < 20; i += 2)
		sum += urnic_get16(ip + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	urnic_put16(ip + 10, (uint16_t)~sum);
}

static void ud_rx(struct urnic_qp *qp, const struct urnic_rxpkt *pkt, const struct resp_pkt *rp)
{
	const uint8_t *deth = rp->bth + rp->op->deth;
	uint8_t grh[40];

	if (deth_qkey(deth) != qp->attr.qkey) {
		urnic_qp_count(qp, URNIC_C_drop_qkey, 1);
		return;
	}
	if (rp->payload_len > qp->mtu) {
		urnic_qp_count(qp, URNIC_C_drop_length, 1);
		return;
	}
	if (!urnic_qp_take_recv(qp)) { /* UD has no RNR: the datagram is lost */
		urnic_qp_count(qp, URNIC_C_drop_no_recv, 1);
		return;
	}
	struct urnic_cur_recv *r = &qp->cur_recv;

	build_grh(grh, pkt);
	pthread_rwlock_rdlock(&qp->dev->mr_lock);
	int err = urnic_sge_scatter(qp->dev, qp_pd(qp), r->sge, r->num_sge, 0, grh, sizeof(grh));

	if (!err)
		err = urnic_sge_scatter(qp->dev, qp_pd(qp), r->sge, r->num_sge, sizeof(grh),
					rp->payload, rp->payload_len);
	pthread_rwlock_unlock(&qp->dev->mr_lock);
	struct ibv_wc wc = {
		.wr_id = r->wr_id,
		.status = !err ? IBV_WC_SUCCESS
			  : err == -EMSGSIZE ? IBV_WC_LOC_LEN_ERR
					     : IBV_WC_LOC_PROT_ERR,
		.opcode = IBV_WC_RECV,
		.byte_len = (uint32_t)sizeof(grh) + rp->payload_len,
		.qp_num = qp->ibv.qp_num,
		.src_qp = deth_srcqp(deth),
		.wc_flags = IBV_WC_GRH,
	};

	if (rp->op->immdt) {
		memcpy(&wc.imm_data, rp->bth + rp->op->immdt, 4);
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	r->taken = false;
	urnic_cq_push(to_ucq(qp->ibv.recv_cq), &wc, bth_se(rp->bth) || err);
}

/* Only a sequence NAK is repeated: an RNR NAK still waiting must not be overwritten by one, or
 * the requester would resend at once instead of waiting, and never see its RNR retries run out. */
static bool repeats_sequence_nak(const struct urnic_qp *qp)
{
	return qp->nak_type == URNIC_AETH_NAK && qp->nak_value == URNIC_NAK_PSN_SEQ_ERR;
}

void urnic_resp_rx(struct urnic_qp *qp, const struct urnic_rxpkt *pkt, struct urnic_txbatch *b)
{
	const uint8_t *bth = pkt->data;
	const struct urnic_opcode_info *op = urnic_op(bth_opcode(bth));
	struct resp_pkt rp = {
		.bth = bth,
		.op = op,
		.psn = bth_psn(bth),
		.payload = pkt->payload ? pkt->payload : bth + op->hdr_len,
		.payload_len = pkt->len - op->hdr_len - URNIC_ICRC_LEN - bth_padcnt(bth),
	};
	if (qp->ibv.qp_type == IBV_QPT_UC) {
		uc_rx(qp, &rp);
		return;
	}
	if (qp->ibv.qp_type == IBV_QPT_UD) {
		ud_rx(qp, pkt, &rp);
		return;
	}
	int32_t d = psn_diff(rp.psn, qp->epsn);

	if (d < 0) {
		duplicate(qp, &rp, b);
		return;
	}
	if (d > URNIC_RESP_PSN_WINDOW) { /* no requester is this far ahead: forged or corrupt */
		urnic_qp_count(qp, URNIC_C_drop_psn, 1);
		return;
	}
	if (d > 0) { /* a gap: NAK, then wait for the retransmission */
		/* Quietly, except that a packet asking for an ACK gets the NAK again: the first one
		 * may have been lost, and the requester ignores a repeat it has already acted on. */
		if (!qp->nak_sent || (bth_ackreq(bth) && repeats_sequence_nak(qp)))
			nak_sequence(qp);
		else /* a valid request behind a lost one: the requester will send it again */
			urnic_qp_count(qp, URNIC_C_out_of_seq, 1);
		return;
	}
	qp->nak_sent = false;
	act(qp, &rp, execute(qp, &rp, b), b);
}

/* ---- transmit side: ACKs and READ responses ---- */

static bool responses_pending(struct urnic_qp *qp)
{
	for (int i = 0; i < qp->rd_count; i++)
		if (rd_at(qp, i)->busy)
			return true;
	return false;
}

/* Responses leave in PSN order: an ACK for a later request waits for the READ and atomic
 * responses before it, or the requester would take them for lost. */
bool urnic_resp_send_ack(struct urnic_qp *qp, struct urnic_txbatch *b)
{
	if ((!qp->ack_pending && !qp->nak_pending) || responses_pending(qp))
		return false;
	qp->ack_hold_until = 0;
	if (qp->nak_pending) {
		qp->nak_pending = qp->ack_pending = false;
		send_aeth(qp, b, qp->nak_psn, (enum urnic_aeth_type)qp->nak_type, qp->nak_value,
			  qp->nak_msn);
		return true;
	}
	qp->ack_pending = false;
	send_aeth(qp, b, qp->ack_psn, URNIC_AETH_ACK, URNIC_AETH_CREDITS_INVALID, qp->ack_msn);
	urnic_qp_count(qp, URNIC_C_acks_sent, 1);
	return true;
}

void urnic_resp_ack_now(struct urnic_qp *qp)
{
	static _Thread_local struct urnic_txbatch b;
	enum ibv_qp_state st = qp->ibv.state;

	if (qp->ibv.qp_type != IBV_QPT_RC ||
	    (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD))
		return;
	urnic_tx_init(&b, qp->dev);
	if (urnic_resp_send_ack(qp, &b))
		urnic_tx_flush(&b);
}

static uint8_t read_resp_opcode(uint32_t i, uint32_t n)
{
	if (n == 1)
		return URNIC_OP_READ_RESP_ONLY;
	if (i == 0)
		return URNIC_OP_READ_RESP_FIRST;
	return i + 1 < n ? URNIC_OP_READ_RESP_MIDDLE : URNIC_OP_READ_RESP_LAST;
}

/* One READ response packet, payload straight from the MR. False if the MR went away. */
static bool send_read_packet(struct urnic_qp *qp, struct urnic_rd_res *r, struct urnic_txbatch *b)
{
	uint32_t i = r->sent;
	uint64_t off = (uint64_t)i * qp->mtu;
	uint32_t len = r->length - off < qp->mtu ? (uint32_t)(r->length - off) : qp->mtu;
	uint8_t opcode = read_resp_opcode(i, r->npkts);
	const struct urnic_opcode_info *op = urnic_op(opcode);
	struct urnic_mr *mr = NULL;

	if (len) {
		mr = urnic_mr_find(qp->dev, qp_pd(qp), r->rkey, r->va + off, len,
				   IBV_ACCESS_REMOTE_READ);
		if (!mr)
			return false;
	}
	struct urnic_txpkt *p = urnic_tx_begin(b, qp, opcode, psn_add(r->psn, i), false, false);

	if (op->aeth)
		aeth_build(urnic_tx_ext(p, op->aeth), URNIC_AETH_ACK, URNIC_AETH_CREDITS_INVALID,
			   qp->msn);
	if (len)
		p->iov[p->iovcnt++] =
			(struct iovec){.iov_base = urnic_mr_ptr(mr, r->va + off), .iov_len = len};
	urnic_tx_finish(qp, p, len);
	r->sent++;
	return true;
}

void urnic_resp_held(struct urnic_qp *qp, uint32_t psn)
{
	struct urnic_rd_res *r = rd_find(qp, psn);

	qp->resp_held = true;
	if (r && !r->atomic && psn_diff(psn, psn_add(r->psn, r->sent)) < 0) {
		/* the first held of r: from here again */
		r->sent = (uint32_t)psn_diff(psn, r->psn);
		r->busy = true;
	}
}

bool urnic_resp_tx(struct urnic_qp *qp, struct urnic_txbatch *b)
{
	int budget = URNIC_RESP_BURST_BYTES > qp->mtu ? (int)(URNIC_RESP_BURST_BYTES / qp->mtu) : 1;
	bool lost_mr = false;

	if (qp->ibv.state != IBV_QPS_RTS && qp->ibv.state != IBV_QPS_RTR)
		return false;
	pthread_rwlock_rdlock(&qp->dev->mr_lock);
	for (int i = 0; i < qp->rd_count && budget > 0 && !lost_mr; i++) {
		struct urnic_rd_res *r = rd_at(qp, i);

		/* flushed here, between packets, so that a held one is taken back while no packet
		 * is half built; after one is held, nothing later may pass it: this turn ends */
		if (b->n == URNIC_TX_BATCH && (urnic_tx_flush(b), qp->resp_held))
			break;
		if (r->busy && r->atomic) {
			send_atomic_ack(qp, b, r->psn, r->orig);
			r->busy = false;
			budget--;
		}
		while (r->busy && budget > 0) {
			if (b->n == URNIC_TX_BATCH && (urnic_tx_flush(b), qp->resp_held))
				break;
			if (!send_read_packet(qp, r, b)) {
				lost_mr = true;
				break;
			}
			budget--;
			r->busy = r->sent < r->npkts;
		}
		if (qp->resp_held)
			break;
	}
	if (!qp->resp_held) /* an ACK held behind responses waits for them */
		urnic_resp_send_ack(qp, b);
	urnic_tx_flush(b); /* payload iovecs point into MRs */
	pthread_rwlock_unlock(&qp->dev->mr_lock);
	if (lost_mr) { /* deregistered while being read */
		fatal(qp, b, URNIC_NAK_REM_ACCESS_ERR);
		urnic_tx_flush(b);
		return false;
	}
	if (qp->resp_held) { /* no room now: the held timer brings the next scan, not a spin */
		qp->resp_held = false;
		return false;
	}
	return budget == 0;
}
