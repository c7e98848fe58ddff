/* engine.h - the transport engine's stages: requester, responder, completer, receive dispatch,
 * timers and the progress thread. No sockets here: packets go through net.h. */
#ifndef URNIC_ENGINE_H
#define URNIC_ENGINE_H

#include <assert.h>

#include "urnic.h"

/* Who built a packet of a batch: where the net layer holds one back (a full ring or socket
 * buffer), an RC QP's requester (urnic_req_held) or READ responder (urnic_resp_held) takes it
 * back; others are lost. */
struct urnic_txsrc {
	struct urnic_qp *qp;
	uint32_t psn;
	uint8_t opcode;
};

/* Packets assembled by one stage turn, sent in one batched call. */
struct urnic_txbatch {
	struct urnic_dev *dev;
	int n;
	struct urnic_txpkt pkts[URNIC_TX_BATCH];
	struct urnic_txsrc src[URNIC_TX_BATCH];
	bool held[URNIC_TX_BATCH];
};

/* pkt.c: URNIC_TRACE=1 prints every packet sent and received on stderr */
extern bool urnic_trace;
/* engine.c: a tail loss probe's least wait in ns (URNIC_PROBE_MIN_NS; URNIC_PROBE_MIN_US sets
 * it, up to the retransmission timer's floor), read from the environment once */
uint64_t urnic_probe_min_ns(void);
/* engine.c: a peer's WRITE without immediate or atomic has landed in this device's memory */
void urnic_engine_landed(struct urnic_dev *dev);
void urnic_trace_pkt(const char *dir, const struct urnic_dev *dev, const uint8_t *bth,
		     uint32_t len, uint32_t peer);

/* pkt.c: building packets */
void urnic_tx_init(struct urnic_txbatch *b, struct urnic_dev *dev);
struct urnic_txpkt *urnic_tx_begin(struct urnic_txbatch *b, struct urnic_qp *qp, uint8_t opcode,
				   uint32_t psn, bool ackreq, bool se);
/* Payload iovecs are already appended after iov[0]; adds pad and ICRC. */
void urnic_tx_finish(struct urnic_qp *qp, struct urnic_txpkt *p, uint32_t payload_len);
void urnic_tx_flush(struct urnic_txbatch *b);
static inline uint8_t *urnic_tx_ext(struct urnic_txpkt *p, unsigned off)
{
	return p->hdr + off;
}

/* requester.c: turns send WQEs into request packets while the window allows. QP lock held. */
void urnic_req_run(struct urnic_qp *qp, struct urnic_txbatch *b);
/* urnic_req_run for a post: its stamps share one clock, its timers another (engine.c) */
void urnic_post_run(struct urnic_qp *qp, struct urnic_txbatch *b);
/* Within urnic_post_run, has its clock read again when next needed; elsewhere nothing. */
void urnic_clock_renew(void);
/* Go back to psn (NAK, timeout, implicit NAK) and send again from there. */
void urnic_req_retransmit_from(struct urnic_qp *qp, uint32_t psn);
/* Where a go-back for psn puts the send cursor: psn, or a READ's first missing response. */
uint32_t urnic_req_goback_to(struct urnic_qp *qp, uint32_t psn);
/* What a tail loss probe would send now (the cursor at the highest PSN sent, something
 * outstanding): the last packet again, asking for an ACK (a SEND's or WRITE's, if the window
 * lets it go), a READ request from the first missing response, or nothing (an atomic). */
enum urnic_probe { URNIC_PROBE_NONE, URNIC_PROBE_PACKET, URNIC_PROBE_READ };
enum urnic_probe urnic_req_probe_kind(struct urnic_qp *qp);
/* Moves the cursor back for the probe urnic_req_probe_kind names; false, and nothing moved,
 * when none. The caller runs the requester. */
bool urnic_req_probe(struct urnic_qp *qp);
/* After a go-back, the responder proved to hold every PSN before psn: move on to psn without
 * sending again the SENDs and WRITEs it has (a READ or atomic waits for its responses). */
void urnic_req_skip_to(struct urnic_qp *qp, uint32_t psn);
/* The net layer held back this request packet (no room on the local path now): it never left.
 * The requester goes back to it without counting a loss and sends it again on the next ACK or
 * at the held-retry time urnic_tx_flush sets. Called by urnic_tx_flush, QP lock held. */
void urnic_req_held(struct urnic_qp *qp, uint32_t psn, uint8_t opcode);

/* completer.c: ACKs and responses for this QP's requests; retry and RNR timers. */
void urnic_comp_rx(struct urnic_qp *qp, const struct urnic_rxpkt *pkt, struct urnic_txbatch *b);
void urnic_comp_timers(struct urnic_qp *qp, uint64_t now, struct urnic_txbatch *b);
void urnic_comp_arm_timer(struct urnic_qp *qp);

/* retransmit.c: round-trip estimate and the fast retransmission timer. QP lock held. */
void urnic_rtx_reset(struct urnic_qp *qp);
/* (Re)starts the timer if packets are outstanding and it would fire before the IB timeout. */
void urnic_rtx_arm(struct urnic_qp *qp);
/* A request asking for an ACK left with this PSN: a round-trip sample may start. */
void urnic_rtx_sent(struct urnic_qp *qp, uint32_t psn);
/* The requester took back what it had counted as sent from psn on (held back, never left). */
void urnic_rtx_unsent(struct urnic_qp *qp, uint32_t psn);
/* The acknowledged PSN moved forward to una, by acked packets. */
void urnic_rtx_acked(struct urnic_qp *qp, uint32_t una, uint32_t acked);
/* How many packets the requester may have unacknowledged now: the congestion window. */
uint32_t urnic_rtx_window(const struct urnic_qp *qp);
/* A timer ran out with packets outstanding: the congestion window closes. */
void urnic_rtx_congested(struct urnic_qp *qp);
/* An ACK covers packets first sent before the go-back: nothing was lost, the cut is undone. */
bool urnic_rtx_spurious(struct urnic_qp *qp);

/* The requester is about to go back for psn, to the PSN to (before snd_nxt is rewound): no
 * sample across it. */
void urnic_rtx_retransmitting(struct urnic_qp *qp, uint32_t psn, uint32_t to);
/* A PSN-sequence NAK for psn may repeat one the requester already went back for: it is held
 * (see urnic_rtx_held_nak_due) and not acted on now. */
bool urnic_rtx_nak_is_stale(struct urnic_qp *qp, uint32_t psn);
/* A READ response past the expected one arrived: if the requester went back to expected, held
 * as a NAK would be. */
void urnic_rtx_read_gap(struct urnic_qp *qp, uint32_t expected);
/* A READ response gap at expected, less than a round trip after the requester went back to
 * it (for a NAK, or for an earlier gap): what it sent then may answer it, so it is held; false
 * if it is a new loss. */
bool urnic_rtx_read_gap_answered(struct urnic_qp *qp, uint32_t expected);
/* A held NAK's round trip is over and the retransmission it named is still unacknowledged:
 * the caller goes back to snd_una. */
bool urnic_rtx_held_nak_due(struct urnic_qp *qp, uint64_t now);
/* The requester sent more with the timer running: the tail loss probe may be due now. */
void urnic_rtx_sent_more(struct urnic_qp *qp);
/* Two round trips without progress: the caller sends a tail loss probe (urnic_req_probe). */
bool urnic_rtx_probe_due(struct urnic_qp *qp, uint64_t now);
/* A probe goes now: no round-trip sample until the next progress, and no other probe. */
void urnic_rtx_probing(struct urnic_qp *qp);
/* The timer ran out with packets outstanding: the caller goes back to snd_una. */
bool urnic_rtx_expired(struct urnic_qp *qp, uint64_t now);

/* responder.c: executes incoming requests, answers with ACKs and READ/atomic responses. */
void urnic_resp_rx(struct urnic_qp *qp, const struct urnic_rxpkt *pkt, struct urnic_txbatch *b);
/* Sends pending READ responses (a burst) and a pending ACK. Returns true if more remain. */
bool urnic_resp_tx(struct urnic_qp *qp, struct urnic_txbatch *b);
/* The net layer held back this READ response packet: the resource answering it goes back to it
 * and sends it again from the next engine scan. Called by urnic_tx_flush, QP lock held. */
void urnic_resp_held(struct urnic_qp *qp, uint32_t psn);
/* Sends the ACK or NAK the QP owes, if any (not ahead of READ and atomic responses still due);
 * true if it did. QP lock held. */
bool urnic_resp_send_ack(struct urnic_qp *qp, struct urnic_txbatch *b);
/* Sends the ACK or NAK the QP owes at once, in a flush of its own, while its state still sends
 * one: before the application destroys or moves the QP. QP lock held. */
void urnic_resp_ack_now(struct urnic_qp *qp);

/* recv.c: validates a packet and hands it to the responder or completer. */
void urnic_recv_packet(struct urnic_dev *dev, const struct urnic_rxpkt *pkt,
		       struct urnic_txbatch *b);

/* cq.c (engine side) and qp error handling */
void urnic_cq_push(struct urnic_cq *cq, const struct ibv_wc *wc, bool solicited);
/* Queues an asynchronous event for ibv_get_async_event (never blocks). */
void urnic_async_event(struct ibv_context *ctx, const struct ibv_async_event *ev);
void urnic_complete_send(struct urnic_qp *qp, struct urnic_swqe *w, enum ibv_wc_status st);
/* Moves the QP to ERR and flushes both queues. QP lock held. */
void urnic_qp_error(struct urnic_qp *qp);
void urnic_qp_flush(struct urnic_qp *qp);

/* engine.c: the progress thread */
int urnic_engine_start(struct urnic_dev *dev);
void urnic_engine_stop(struct urnic_dev *dev);
/* Sends at once the ACKs application turns left owed for the next turn and those held for a
 * request to carry (engine.c, acks_may_wait and hold_ack): before the device closes or the
 * process exits. */
void urnic_engine_flush_acks(struct urnic_dev *dev);
void urnic_engine_wake(struct urnic_dev *dev);
/* Called after setting a QP deadline: wakes the engine if it sleeps past it. */
void urnic_engine_deadline(struct urnic_dev *dev, uint64_t deadline);
/* When a QP whose packets were just held back tries again: one time shared by every QP held
 * back meanwhile, URNIC_TX_HELD_RETRY_NS on, so that they wake the engine once, not each. */
uint64_t urnic_engine_held_retry(struct urnic_dev *dev);
/* Runs one engine turn in the calling application thread (from an empty poll_cq); returns the
 * clock it read as it began, or 0 if the turn sent more than a ring packet's worth (and so may
 * have taken a while). */
uint64_t urnic_progress(struct urnic_dev *dev);
/* Runs n packets through the receive path as if they had just arrived (the ACKs they owe and
 * the READ responses they start included), holding progress_lock: for the fuzz target. */
void urnic_engine_inject(struct urnic_dev *dev, struct urnic_rxpkt *pkts, int n);
/* An application poll emptied a CQ: the application may now wait on memory rather than on the
 * CQ (perftest's write latency loop does), so the engine thread stops standing back, unless the
 * application has been coming back to poll at once (URNIC_APP_RETURN_NS). now: the clock of
 * the poll's engine turn, or 0 to read it. */
void urnic_progress_leave(struct urnic_dev *dev, uint64_t now);
/* The application is about to block: the engine thread takes over at once. */
void urnic_progress_idle(struct urnic_dev *dev);

/* True if the calling thread holds m, where that can be told (glibc's mutex records its owner);
 * debug builds check with it that a QP's counters, written with plain adds, are written under
 * the QP's lock. */
static inline bool urnic_mutex_mine(pthread_mutex_t *m)
{
#if defined(__GLIBC__) && !defined(NDEBUG)
	return m->__data.__owner == urnic_thread_id();
#else
	(void)m;
	return true;
#endif
}

static inline void urnic_qp_count(struct urnic_qp *qp, enum urnic_counter c, uint64_t n)
{
	urnic_count(qp->dev, c, n);
	if (qp->stats) {
		assert(urnic_mutex_mine(&qp->lock));
		urnic_stats_qp_add(qp->stats, c, n);
	}
}

static inline struct urnic_swqe *sq_at(struct urnic_qp *qp, uint32_t idx)
{
	return &qp->sq[idx & (qp->sq_size - 1)];
}
/* rq.c glue: takes the next receive WQE for a message into qp->cur_recv (no-op if one is
 * already taken); false when the queue is empty. Raises SRQ_LIMIT_REACHED when crossed. */
bool urnic_qp_take_recv(struct urnic_qp *qp);
/* Whether a QP in this state takes request packets (RTR or later, short of SQD: recv.c), and
 * so a peer's one-sided operation (direct.c): the two must agree. */
static inline bool urnic_state_takes_requests(enum ibv_qp_state s)
{
	return s == IBV_QPS_RTR || s == IBV_QPS_RTS;
}
static inline bool wqe_is_rd_atomic(const struct urnic_swqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}
static inline bool wqe_is_atomic(const struct urnic_swqe *w)
{
	return w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* IB "timeout" attribute: 4.096 us * 2^t; 0 means infinite. */
static inline uint64_t urnic_ack_timeout_ns(uint8_t t)
{
	return t ? 4096ull << (t > 31 ? 31 : t) : 0;
}
uint64_t urnic_rnr_timer_ns(unsigned code);

#endif
