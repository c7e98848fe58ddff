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
 * Silences: a peer that stalls (a guest without its CPU, a responder streaming a long READ from a
 * busy host) goes quiet for longer than its round trip while nothing is lost. Going back then
 * does harm: a responder answers the repeated READ request with a second response stream beside
 * the first, and the next stall is longer still. So the requester also times each silence that
 * ends in progress with no retransmission inside it (Karn's rule again), keeps the longest, halved
 * every URNIC_SILENCE_HALF_NS, and never times out before URNIC_RTO_SILENCE_MULT times it.
 *
 * NAKs: the responder repeats its PSN-sequence NAK for every out-of-sequence packet that asks
 * for an ACK (the first NAK may have been lost), so packets already in flight when the requester
 * went back can bring NAKs for the PSN it went back to. One that arrives within a round trip of
 * that go-back may be stale, or may answer the retransmission and mean it was lost too: the two
 * look alike. So it is held, not acted on: a round trip after the go-back (srtt + 4 rttvar) the
 * requester goes back again unless an ACK of the retransmitted PSN came first. The NAK proves
 * the responder alive and waiting, so that wait is the round trip alone, not the timer with its
 * floor and its allowance for silences (under 5% loss those made a lost retransmission cost 5 to
 * 11 ms, most of the transfer's time). A NAK later than a round trip is acted on at once. A
 * READ's response gap is the same sign for a READ asked again from its first missing response:
 * responses past it still arrive, from the first request or from the second, and the missing
 * one has not come; it is held the same way.
 *
 * Tail loss probes: when the packets still unacknowledged are the last the requester can send
 * (its window is full, or its send queue holds no more), a lost packet near their end, or the
 * one ACK or NAK the responder answered them with, leaves nothing to bring a NAK: only the timer
 * would tell, after its floor and its allowance for silences. So two round trips (2 srtt, as
 * RFC 8985's probe timeout) without progress send the last packet again, asking for an ACK
 * (requester.c): the responder answers a duplicate with an ACK of all it holds, and a packet
 * past a gap with its NAK, so one packet tells the requester where to go on from. A READ's
 * lost tail (its last responses) is as silent: its probe asks again from the first missing
 * response, as the timer would, without the timer's 2 ms floor, back-off or window cut; but not
 * within the silence floor, since a stalled responder would answer it with a second response
 * stream (see Silences), nor while recovering from a go-back. An atomic is never the probe (a
 * READ's probe resends one between snd_una and the READ: the responder replays it from its
 * cache). No probe past the window.
 * Once per progress, timed from it or from the last go-back (a send after either arms it); no
 * round-trip sample crosses it. A probe into a stalled responder costs one packet (a READ: a
 * slice of responses sent twice); the timer still decides.
 *
 * Rings: over the intra-host path a request is lost only once its reader has taken it, so a
 * probe or timer that finds the QP's last request still unread in the peer's ring
 * (net/shm.h, urnic_shm_behind) waits another timeout rather than send anything again.
 *
 * Congestion: many QPs towards one receiver can send more than its socket buffer holds (1024
 * QPs with two 64 KiB WRITEs each put 128 MiB in flight; the kernel drops what does not fit).
 * Going back to the whole window then keeps the buffer overflowing, until the IB timer spends
 * retry_cnt. So a timer expiry, the sign that the path held less than was sent, also cuts the
 * QP's congestion window to URNIC_CWND_MIN packets and sets the threshold to half of what it was
 * (once per silence); each acknowledged packet then opens it by one up to the threshold (slow
 * start) and by one per window above it, until it is the whole window again. A sequence NAK,
 * the sign of a packet lost while the rest flowed (random loss), leaves the window alone. While
 * the window is small the requester asks for an ACK twice per window (requester.c), so a cut
 * inside a long message still brings the ACKs that open it.
 *
 * Spurious go-backs: a timer that ran out on a delay, not a loss (a receiver descheduled, a deep
 * queue of other QPs' packets ahead), shows itself when an ACK arrives for a PSN the requester
 * has not sent again since it went back: only the first sending can have brought it, and the
 * responder holds everything before it. The requester then skips ahead to the highest PSN it
 * ever sent (the rest of the first sending is still on its way; a loss in it brings a NAK or
 * the timer), the cut is undone, and the silence is timed like any other, so the next timeout
 * waits at least twice as long (the response of RFC 4015's Eifel algorithm, detected without
 * timestamps).
 */
#include "engine/engine.h"
#include "net/shm.h"

#define RTO_INITIAL_NS 10000000ull /* before the first sample */
#define RTO_NO_IB_TIMEOUT_CAP_NS 1000000000ull /* timeout 0 (wait forever): back off to 1 s */

void urnic_rtx_reset(struct urnic_qp *qp)
{
	qp->rtx = (struct urnic_rtx){0};
}

/* Something is outstanding that an ACK, not an RNR wait, will answer (never in ERR: a timer
 * armed there would keep the engine scanning for nothing). */
static bool awaiting_ack(const struct urnic_qp *qp)
{
	return qp->ibv.state == IBV_QPS_RTS && qp->snd_una != qp->snd_nxt && !qp->rnr_deadline;
}

/* now - t, or 0 if t is later: times come from several threads, and from a receive batch's
 * clock (urnic_clock_ns), so one taken under the QP lock after another may still be earlier. */
static uint64_t since(uint64_t now, uint64_t t)
{
	return now > t ? now - t : 0;
}

/* The longest recent silence, halved for each URNIC_SILENCE_HALF_NS since it was last halved. */
static uint64_t decayed_silence(struct urnic_rtx *r, uint64_t now)
{
	uint64_t halvings = since(now, r->silence_at_ns) / URNIC_SILENCE_HALF_NS;

	if (halvings) {
		r->silence_ns = halvings < 64 ? r->silence_ns >> halvings : 0;
		r->silence_at_ns += halvings * URNIC_SILENCE_HALF_NS;
	}
	return r->silence_ns;
}

/* Progress ended a silence: keep it if no retransmission fell inside it. */
static void time_silence(struct urnic_rtx *r, uint64_t now)
{
	if (r->quiet_since_ns && !r->recovering) {
		uint64_t quiet = since(now, r->quiet_since_ns);

		if (quiet > decayed_silence(r, now)) {
			r->silence_ns = quiet;
			r->silence_at_ns = now;
		}
	}
	r->quiet_since_ns = now;
}

/* The timeout, backed off, and never beyond cap. */
static uint64_t rto_ns(struct urnic_rtx *r, uint64_t cap, uint64_t now)
{
	uint64_t rto = r->srtt_ns ? r->srtt_ns + 4 * r->rttvar_ns : RTO_INITIAL_NS;
	uint64_t quiet = URNIC_RTO_SILENCE_MULT * decayed_silence(r, now);

	if (rto < quiet)
		rto = quiet;
	if (rto < URNIC_RTO_MIN_NS)
		rto = URNIC_RTO_MIN_NS;
	for (unsigned i = 0; i < r->backoff && rto < cap; i++)
		rto *= 2;
	return rto < cap ? rto : cap;
}

/* When a probe may go, counting from r->probe_from: two round trips, at least
 * urnic_probe_min_ns() (a READ's, no sooner than the timer's silence floor, and not while a
 * go-back is being recovered from); 0 when none may (no round trip known, one went since the
 * last progress, nothing to probe with). */
static uint64_t probe_time(struct urnic_qp *qp, uint64_t now)
{
	struct urnic_rtx *r = &qp->rtx;
	enum urnic_probe kind = r->srtt_ns && !r->probed ? urnic_req_probe_kind(qp)
							  : URNIC_PROBE_NONE;
	uint64_t floor = urnic_probe_min_ns();
	uint64_t wait = 2 * r->srtt_ns > floor ? 2 * r->srtt_ns : floor;
	uint64_t quiet = URNIC_RTO_SILENCE_MULT * decayed_silence(r, now);

	if (kind == URNIC_PROBE_READ && r->recovering)
		return 0; /* gone back already: a READ asked again once is enough until it ends */
	if (kind == URNIC_PROBE_READ && wait < quiet)
		wait = quiet;
	return kind == URNIC_PROBE_NONE ? 0 : r->probe_from + wait;
}

/* Schedules the probe, if one may go before the timer. */
static void arm_probe(struct urnic_qp *qp, uint64_t now)
{
	struct urnic_rtx *r = &qp->rtx;
	uint64_t at = probe_time(qp, now);

	r->probe_at = at && at < r->deadline ? at : 0;
	if (r->probe_at)
		urnic_engine_deadline(qp->dev, r->probe_at);
}

void urnic_rtx_sent_more(struct urnic_qp *qp)
{
	if (!qp->rtx.probe_at && qp->rtx.deadline)
		arm_probe(qp, urnic_clock_ns());
}

void urnic_rtx_arm(struct urnic_qp *qp)
{
	uint64_t ib = urnic_ack_timeout_ns(qp->attr.timeout);
	uint64_t cap = ib ? ib / 2 : RTO_NO_IB_TIMEOUT_CAP_NS;

	qp->rtx.deadline = 0;
	qp->rtx.probe_at = 0;
	if (!awaiting_ack(qp) || cap < URNIC_RTO_MIN_NS)
		return; /* nothing to wait for, or the IB timer alone is short enough */
	uint64_t now = urnic_clock_ns();

	qp->rtx.deadline = now + rto_ns(&qp->rtx, cap, now);
	urnic_engine_deadline(qp->dev, qp->rtx.deadline);
	qp->rtx.probe_from = now;
	arm_probe(qp, now);
}

void urnic_rtx_sent(struct urnic_qp *qp, uint32_t psn)
{
	struct urnic_rtx *r = &qp->rtx;

	if (!r->quiet_since_ns)
		r->quiet_since_ns = urnic_clock_ns(); /* into an idle QP: the wait starts now */
	if (r->sample_sent_ns || r->recovering || r->probed)
		return;
	r->sample_psn = psn;
	r->sample_sent_ns = urnic_clock_ns();
}

void urnic_rtx_unsent(struct urnic_qp *qp, uint32_t psn)
{
	struct urnic_rtx *r = &qp->rtx;

	if (r->sample_sent_ns && psn_diff(r->sample_psn, psn) >= 0)
		r->sample_sent_ns = 0; /* it never left: no round trip to time */
	if (qp->snd_una == qp->snd_nxt)
		r->quiet_since_ns = 0; /* nothing outstanding: waiting for room is no silence */
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

uint32_t urnic_rtx_window(const struct urnic_qp *qp)
{
	uint32_t c = qp->rtx.cwnd;

	return c && c < qp->window ? c : qp->window;
}

/* Slow start up to the threshold, then one packet per window acknowledged. */
static void open_cwnd(struct urnic_qp *qp, uint32_t acked)
{
	struct urnic_rtx *r = &qp->rtx;

	r->window_cut = false;
	if (!r->cwnd)
		return;
	if (r->cwnd < r->ssthresh) {
		r->cwnd += acked;
	} else {
		r->cwnd_acked += acked;
		while (r->cwnd_acked >= r->cwnd) {
			r->cwnd_acked -= r->cwnd;
			r->cwnd++;
		}
	}
	if (r->cwnd >= qp->window)
		r->cwnd = r->cwnd_acked = 0;
}

void urnic_rtx_congested(struct urnic_qp *qp)
{
	struct urnic_rtx *r = &qp->rtx;
	uint32_t floor = URNIC_CWND_MIN < qp->window ? URNIC_CWND_MIN : qp->window;

	if (!r->window_cut) { /* once per silence: the threshold halves */
		uint32_t half = urnic_rtx_window(qp) / 2;

		r->cwnd_prior = r->cwnd;
		r->ssthresh_prior = r->ssthresh;
		r->ssthresh = half > floor ? half : floor;
		r->window_cut = true;
		urnic_qp_count(qp, URNIC_C_cwnd_cuts, 1);
	}
	r->cwnd = floor;
	r->cwnd_acked = 0;
}

bool urnic_rtx_spurious(struct urnic_qp *qp)
{
	struct urnic_rtx *r = &qp->rtx;

	if (!r->recovering)
		return false;
	urnic_qp_count(qp, URNIC_C_spurious_gobacks, 1);
	if (r->window_cut) {
		r->cwnd = r->cwnd_prior;
		r->ssthresh = r->ssthresh_prior;
		r->cwnd_acked = 0;
		r->window_cut = false;
	}
	r->recovering = false; /* the silence that ended here was a delay: it is timed */
	return true;
}

void urnic_rtx_acked(struct urnic_qp *qp, uint32_t una, uint32_t acked)
{
	struct urnic_rtx *r = &qp->rtx;

	r->backoff = 0;
	open_cwnd(qp, acked);
	/* timed even across a probe: one packet, answered with where the responder stands, ends a
	 * silence no sooner than the responder could have; a go-back's silence stays untimed */
	time_silence(r, urnic_clock_ns());
	r->probed = false;
	if (una == qp->snd_nxt)
		r->quiet_since_ns = 0; /* idle: the time until the next send is no silence */
	if (r->recovering && psn_diff(una, r->recover_psn) >= 0)
		r->recovering = false;
	if (r->sample_sent_ns && psn_diff(una, r->sample_psn) > 0) {
		take_sample(r, since(urnic_clock_ns(), r->sample_sent_ns));
		r->sample_sent_ns = 0;
	}
}

/* The round trip that tells a stale NAK, and its variation: under steady loss the requester is
 * recovering most of the time and Karn's rule may leave it without a sample; until one comes,
 * a quarter of the timer's floor (a loopback or LAN round trip with room to spare), varying
 * by half of it as RFC 6298 starts. */
static uint64_t nak_rtt_ns(const struct urnic_rtx *r)
{
	return r->srtt_ns ? r->srtt_ns : URNIC_RTO_MIN_NS / 4;
}

static uint64_t nak_rttvar_ns(const struct urnic_rtx *r)
{
	return r->srtt_ns ? r->rttvar_ns : URNIC_RTO_MIN_NS / 8;
}

/* A NAK maybe stale, or a READ response gap after a go-back, naming psn: judged a round trip
 * after the go-back (once per go-back), by the latest PSN held. */
static void hold_nak(struct urnic_qp *qp, bool read_gap, uint32_t psn)
{
	struct urnic_rtx *r = &qp->rtx;

	if (r->nak_held_at) {
		if (psn_diff(psn, r->held_psn) > 0)
			r->held_psn = psn;
		return;
	}
	r->held_read_gap = read_gap;
	r->held_psn = psn;
	r->nak_held_at = r->goback_ns + nak_rtt_ns(r) + 4 * nak_rttvar_ns(r);
	urnic_engine_deadline(qp->dev, r->nak_held_at);
}

bool urnic_rtx_nak_is_stale(struct urnic_qp *qp, uint32_t psn)
{
	const struct urnic_rtx *r = &qp->rtx;
	bool stale = r->goback_ns && since(urnic_clock_ns(), r->goback_ns) < nak_rtt_ns(r) &&
		     (psn == r->goback_psn || urnic_req_goback_to(qp, psn) == r->goback_to);

	if (stale)
		hold_nak(qp, false, psn);
	return stale;
}

void urnic_rtx_read_gap(struct urnic_qp *qp, uint32_t expected)
{
	if (qp->rtx.goback_ns && expected == qp->rtx.goback_to)
		hold_nak(qp, true, expected);
}

bool urnic_rtx_read_gap_answered(struct urnic_qp *qp, uint32_t expected)
{
	const struct urnic_rtx *r = &qp->rtx;
	bool answered = r->goback_ns && expected == r->goback_to &&
			since(urnic_clock_ns(), r->goback_ns) < nak_rtt_ns(r);

	if (answered)
		hold_nak(qp, true, expected);
	return answered;
}

bool urnic_rtx_held_nak_due(struct urnic_qp *qp, uint64_t now)
{
	struct urnic_rtx *r = &qp->rtx;

	if (!r->nak_held_at || now < r->nak_held_at)
		return false;
	r->nak_held_at = 0;
	/* the PSN held still unacknowledged: the NAK was for the retransmission (a READ's go-back
	 * may start before it: what it asked for up to there may have come, and the rest not) */
	return awaiting_ack(qp) && psn_diff(qp->snd_una, r->held_psn) <= 0;
}

void urnic_rtx_retransmitting(struct urnic_qp *qp, uint32_t psn, uint32_t to)
{
	struct urnic_rtx *r = &qp->rtx;

	r->sample_sent_ns = 0;
	r->goback_psn = psn;
	r->goback_to = to;
	r->goback_ns = urnic_clock_ns();
	r->nak_held_at = 0; /* a NAK held for the last go-back is answered by this one */
	r->probe_at = 0; /* what it sends re-arms the probe, two round trips from now */
	r->probe_from = r->goback_ns;
	if (!r->recovering || psn_diff(qp->snd_nxt, r->recover_psn) > 0)
		r->recover_psn = qp->snd_nxt;
	r->recovering = true;
}

/* The QP's last request may still wait, unread, in its peer's ring: the reader is behind (a
 * deep queue of other QPs' packets ahead of it, a process descheduled or stopped), nothing is
 * lost, and going back or probing would only queue the same packets again behind it. The
 * probe is spent (one per silence, as if sent) and the timer waits another timeout, without
 * backing off or cutting the window; the reader's doorbell rings instead of theirs (net/shm.c).
 * The IB timer runs on and still spends retry_cnt on a reader that never comes back. Counted
 * per wait. */
static bool waits_for_ring_reader(struct urnic_qp *qp, uint64_t now)
{
	if (!qp->rtx.ring_mark ||
	    !urnic_shm_behind(&qp->dev->net, qp->peer_addr, qp->rtx.ring_mark, now))
		return false;
	urnic_qp_count(qp, URNIC_C_ring_waits, 1);
	return true;
}

bool urnic_rtx_probe_due(struct urnic_qp *qp, uint64_t now)
{
	struct urnic_rtx *r = &qp->rtx;

	if (!r->probe_at || now < r->probe_at)
		return false;
	uint64_t at = probe_time(qp, now); /* what is last sent may have changed since */

	r->probe_at = 0;
	if (at > now) { /* later, or not at all */
		arm_probe(qp, now);
		return false;
	}
	if (!at || !awaiting_ack(qp))
		return false;
	if (waits_for_ring_reader(qp, now)) {
		r->probed = true;
		return false;
	}
	return true;
}

void urnic_rtx_probing(struct urnic_qp *qp)
{
	qp->rtx.probed = true;
	qp->rtx.sample_sent_ns = 0; /* Karn: its ACK may answer the probe or the first sending */
}

bool urnic_rtx_expired(struct urnic_qp *qp, uint64_t now)
{
	if (!qp->rtx.deadline || now < qp->rtx.deadline)
		return false;
	qp->rtx.deadline = 0;
	if (!awaiting_ack(qp))
		return false;
	if (waits_for_ring_reader(qp, now)) {
		urnic_rtx_arm(qp);
		return false;
	}
	qp->rtx.backoff++;
	urnic_rtx_congested(qp);
	return true;
}
