/* retransmit.c - loss recovery below the IB ACK timeout: a round-trip estimate and a fast
 * retransmission timer.
 *
 * The IB `timeout` attribute (4.096 us * 2^timeout, 67 ms for the common 14) is what a QP waits
 * before it counts a retry against `retry_cnt`; waiting that long for every lost tail packet,
 * lost NAK or lost retransmission would make a lossy link crawl. So the requester also keeps a
 * round-trip estimate (RFC 6298's smoothed RTT and variation, Karn's rule: no sample across a
 * retransmission) and, when nothing has been acknowledged for srtt + 4 rttvar (at least
 * URNIC_RTO_MIN_NS), goes back to the oldest unacknowledged PSN and sends again. A responder
 * treats what it already has as duplicates (re-ACKed, READs re-executed, atomics replayed from
 * its cache), so an early retransmission is always safe; it costs bandwidth only. Each expiry
 * without progress doubles the timeout, up to half the IB timeout. The IB timer runs beside it,
 * re-armed only by progress, and alone spends `retry_cnt`: a dead peer still fails after the
 * time that `timeout` and `retry_cnt` imply.
 *
 * NAKs: the responder repeats its PSN-sequence NAK for every out-of-sequence packet that asks
 * for an ACK (the first NAK may have been lost), so packets already in flight when the requester
 * went back can bring NAKs for the PSN it went back to. One that arrives within a round trip of
 * that go-back is stale and ignored; a later one means the retransmission was lost too.
 */
#include "engine/engine.h"

#define RTO_INITIAL_NS 10000000ull /* before the first sample */
#define RTO_NO_IB_TIMEOUT_CAP_NS 1000000000ull /* timeout 0 (wait forever): back off to 1 s */

void urnic_rtx_reset(struct urnic_qp *qp)
{
	qp->rtx = (struct urnic_rtx){0};
}

/* Something is outstanding that an ACK, not an RNR wait, will answer. */
static bool awaiting_ack(const struct urnic_qp *qp)
{
	return qp->snd_una != qp->snd_nxt && !qp->rnr_deadline;
}

/* The timeout, backed off, and never beyond cap. */
static uint64_t rto_ns(const struct urnic_rtx *r, uint64_t cap)
{
	uint64_t rto = r->srtt_ns ? r->srtt_ns + 4 * r->rttvar_ns : RTO_INITIAL_NS;

	if (rto < URNIC_RTO_MIN_NS)
		rto = URNIC_RTO_MIN_NS;
	for (unsigned i = 0; i < r->backoff && rto < cap; i++)
		rto *= 2;
	return rto < cap ? rto : cap;
}

void urnic_rtx_arm(struct urnic_qp *qp)
{
	uint64_t ib = urnic_ack_timeout_ns(qp->attr.timeout);
	uint64_t cap = ib ? ib / 2 : RTO_NO_IB_TIMEOUT_CAP_NS;

	qp->rtx.deadline = 0;
	if (!awaiting_ack(qp) || cap < URNIC_RTO_MIN_NS)
		return; /* nothing to wait for, or the IB timer alone is short enough */
	qp->rtx.deadline = urnic_now_ns() + rto_ns(&qp->rtx, cap);
	urnic_engine_deadline(qp->dev, qp->rtx.deadline);
}

void urnic_rtx_sent(struct urnic_qp *qp, uint32_t psn)
{
	struct urnic_rtx *r = &qp->rtx;

	if (r->sample_sent_ns || r->recovering)
		return;
	r->sample_psn = psn;
	r->sample_sent_ns = urnic_now_ns();
}

static void take_sample(struct urnic_rtx *r, uint64_t rtt)
{
	if (!r->srtt_ns) {
		r->srtt_ns = rtt;
		r->rttvar_ns = rtt / 2;
		return;
	}
	uint64_t err = rtt > r->srtt_ns ? rtt - r->srtt_ns : r->srtt_ns - rtt;

	r->rttvar_ns = (3 * r->rttvar_ns + err) / 4;
	r->srtt_ns = (7 * r->srtt_ns + rtt) / 8;
}

void urnic_rtx_acked(struct urnic_qp *qp, uint32_t una)
{
	struct urnic_rtx *r = &qp->rtx;

	r->backoff = 0;
	if (r->recovering && psn_diff(una, r->recover_psn) >= 0)
		r->recovering = false;
	if (r->sample_sent_ns && psn_diff(una, r->sample_psn) > 0) {
		take_sample(r, urnic_now_ns() - r->sample_sent_ns);
		r->sample_sent_ns = 0;
	}
}

bool urnic_rtx_nak_is_stale(const struct urnic_qp *qp, uint32_t psn)
{
	const struct urnic_rtx *r = &qp->rtx;
	uint64_t rtt = r->srtt_ns ? r->srtt_ns : URNIC_RTO_MIN_NS / 4;

	return r->goback_ns && psn == r->goback_psn && urnic_now_ns() - r->goback_ns < rtt;
}

void urnic_rtx_retransmitting(struct urnic_qp *qp, uint32_t psn)
{
	struct urnic_rtx *r = &qp->rtx;

	r->sample_sent_ns = 0;
	r->goback_psn = psn;
	r->goback_ns = urnic_now_ns();
	if (!r->recovering || psn_diff(qp->snd_nxt, r->recover_psn) > 0)
		r->recover_psn = qp->snd_nxt;
	r->recovering = true;
}

bool urnic_rtx_expired(struct urnic_qp *qp, uint64_t now)
{
	if (!qp->rtx.deadline || now < qp->rtx.deadline)
		return false;
	qp->rtx.deadline = 0;
	if (!awaiting_ack(qp))
		return false;
	qp->rtx.backoff++;
	return true;
}
