/* rc_probe_floor: a tail loss probe waits at least its floor (URNIC_PROBE_MIN_NS, 250 us, or
 * URNIC_PROBE_MIN_US), however short the round trip the requester has learnt.
 *
 * Two round trips alone were a few microseconds between two processes of one host, less than
 * one wake-up of the peer's engine thread here: ib_send_lat over the rings sent a probe every
 * 10 to 40 messages for nothing.
 *
 * One process: the responder is scripted on a plain UDP socket (script_peer.c). Warm-ups ACKed
 * at once teach the requester the shortest round trip this process can make (2 srtt: about
 * 0.1 ms here). The floor is set to 0.8 ms, so that what this machine adds to the observation
 * (a timer's overshoot, this thread's wake-up: another 0.1-0.15 ms) cannot hide a probe sent at
 * 2 srtt. Then an 8-packet WRITE: the responder ACKs all but its last packet and waits. The last
 * packet comes again, as one probe, not within 0.8 ms of that ACK; ACKed, the WRITE completes.
 * An attempt where a probe went before the ACK could be sent (this thread held up by the
 * scheduler) judges nothing, and another WRITE tries again. */
#include "script_peer.h"

#include <stdlib.h>

#include "common/stats.h"

#define SQ_PSN 5000u /* the requester's first PSN */
#define SEED 61
#define WARMUPS 64
#define NPKTS 8 /* packets of the WRITE */
#define FLOOR_US 800 /* URNIC_PROBE_MIN_US: below the retransmission timer's 2 ms floor */
#define ATTEMPTS 5 /* an attempt held up past the floor before its ACK judges nothing */

/* one-packet WRITEs, each ACKed at once: the shortest round trip this process can make */
static void warm_up_fast(struct rc *rc, struct script_peer *p)
{
	struct rc_wr w;
	struct ibv_wc wc;

	rc_step(rc, "%d one-packet WRITEs, each ACKed as soon as the post returns", WARMUPS);
	for (uint32_t k = 0; k < WARMUPS; k++) {
		rc_wr(rc, &w, IBV_WR_RDMA_WRITE, k, (size_t)k * rc->mtu, rc->mtu,
		      (size_t)k * rc->mtu);
		rc_post_send(rc, 0, &w.wr); /* an idle QP sends in the call */
		script_peer_send_aeth(rc, p, URNIC_AETH_ACK, p->first_psn + k);
		rc_poll(rc, rc->scq, &wc, 1, 5000);
		rc_expect(rc, &wc, k, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		int64_t psn;

		do /* a warm-up the scheduler stalled past the floor may have drawn a probe */
			psn = script_peer_recv(rc, p, 2000);
		while (psn >= p->first_psn && psn < p->first_psn + k);
		RC_CHECK(rc, psn == p->first_psn + k, "warm-up %u: PSN %lld", k, (long long)psn);
	}
	script_peer_drain(rc, p, 20); /* a probe of a warm-up, if one was slow */
}

static uint64_t moved(const uint64_t *before, const uint64_t *after, enum urnic_counter c)
{
	return after[c] - before[c];
}

/* One 8-packet WRITE from PSN first whose last packet is lost: true when judged (the packet
 * came again, a probe, not within the floor); false when a probe went before the test could
 * even send its ACK (this thread held up past the floor: nothing to judge). */
static bool lost_tail(struct rc *rc, struct script_peer *p, uint32_t first, uint64_t wr_id)
{
	uint64_t before[URNIC_C_COUNT], mid[URNIC_C_COUNT], after[URNIC_C_COUNT];
	const uint32_t last = first + NPKTS - 1;
	struct ibv_wc wc;

	rc_read_counters(rc, before);
	script_peer_write(rc, p, wr_id, first, NPKTS);
	rc_step(rc, "ACK PSN %u: the last one, %u, is lost", last - 1, last);
	double ack_ms = rc_now_ms();

	rc_read_counters(rc, mid);
	bool judged = moved(before, mid, URNIC_C_tail_probes) == 0;

	script_peer_send_aeth(rc, p, URNIC_AETH_ACK, last - 1);
	int64_t psn = script_peer_recv(rc, p, 1000);
	double again_ms = rc_now_ms() - ack_ms;

	RC_CHECK(rc, psn == last, "after the ACK: PSN %lld, not the lost %u", (long long)psn, last);
	rc_read_counters(rc, after);
	rc_step(rc, "PSN %u again %.3f ms after the ACK (%llu probes, %llu timer expiries)", last,
		again_ms, (unsigned long long)moved(before, after, URNIC_C_tail_probes),
		(unsigned long long)moved(before, after, URNIC_C_rto_expiries));
	if (judged) {
		RC_CHECK(rc, again_ms >= FLOOR_US / 1000.0,
			 "PSN %u came again %.3f ms after the ACK, before %.3f", last, again_ms,
			 FLOOR_US / 1000.0);
		RC_CHECK(rc, moved(before, after, URNIC_C_tail_probes) == 1 &&
				     moved(before, after, URNIC_C_rto_expiries) == 0,
			 "PSN %u came again, but not as one probe", last);
	}
	script_peer_send_aeth(rc, p, URNIC_AETH_ACK, last);
	rc_poll(rc, rc->scq, &wc, 1, 5000);
	rc_expect(rc, &wc, wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	script_peer_drain(rc, p, 5); /* what a probe before the ACK left behind */
	return judged;
}

static int test(struct rc *rc)
{
	struct script_peer p = {
		.first_psn = SQ_PSN, .npkts = WARMUPS + ATTEMPTS * NPKTS, .seed = SEED};
	int k = 0;

	script_peer_open(rc, &p, SQ_PSN);
	rc_fill(rc->buf, (size_t)p.npkts * rc->mtu, p.seed);
	warm_up_fast(rc, &p);
	while (!lost_tail(rc, &p, SQ_PSN + WARMUPS + k * NPKTS, 100 + k))
		RC_CHECK(rc, ++k < ATTEMPTS, "%d attempts, each held up past the floor", ATTEMPTS);
	script_peer_close(&p);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = script_peer_defaults("rc_probe_floor");

	setenv("URNIC_PROBE_MIN_US", "800", 1); /* FLOOR_US, read when the device opens */
	return rc_run_local(&o, test);
}
