/* rc_nak_held: a PSN-sequence NAK that arrives within a round trip of the go-back it names is
 * held, not dropped: if the retransmission's ACK has not come a round trip after the go-back,
 * the requester goes back again at once, without waiting for its retransmission timer.
 *
 * After a go-back to PSN X, NAKs for X keep coming for a while from packets of the first sending
 * that were already on their way; and if X is lost again, the retransmission's packets bring NAKs
 * for X too. The two look alike. Under 5% loss the requester ignored both, and every lost
 * retransmission cost a timer expiry (at least 2 ms, 5 to 11 ms in bench/loss.sh's runs): most of
 * the transfer's time.
 *
 * One process: the responder is scripted on a plain UDP socket (script_peer.c). Its ACK delays
 * first teach the requester a round trip of a few milliseconds and a long silence, so that its
 * retransmission timer (at least twice the longest silence) stands well after the held NAK's
 * round trip. Then an 8-packet WRITE: the responder NAKs PSN X = 2 of it, and NAKs X again as
 * soon as the first packet of the retransmission arrives.
 *   lost (default): nothing more; the requester must send X a third time, by the held NAK and
 *                   not by a timer expiry.
 *   --acked:        the responder ACKs X right after that NAK, and the rest of the WRITE 60 ms
 *                   later; the held NAK must come to nothing: X not sent a third time. */
#include "script_peer.h"

#include <string.h>

#include "common/stats.h"

#define SQ_PSN 7000u /* the requester's first PSN */
#define SEED 43
#define NPKTS 8	 /* packets of the WRITE */
#define NAK_AT 2 /* the PSN offset the responder NAKs, twice */

/* Reads packets until PSN x comes again; every one must lie in [x, last]. */
static void read_until(struct rc *rc, struct script_peer *p, uint32_t x, uint32_t last,
		       const char *what)
{
	for (;;) {
		int64_t psn = script_peer_recv(rc, p, 1000);

		RC_CHECK(rc, psn >= 0, "no packet within 1 s: %s never came", what);
		if (psn == x)
			return;
		RC_CHECK(rc, psn_diff((uint32_t)psn, x) > 0 && psn_diff((uint32_t)psn, last) <= 0,
			 "PSN %lld before %s", (long long)psn, what);
	}
}

static int test(struct rc *rc, bool acked)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	const uint32_t first = SQ_PSN + SCRIPT_PEER_WARMUPS, x = first + NAK_AT;
	const uint32_t last = first + NPKTS - 1;
	struct script_peer p = {
		.first_psn = SQ_PSN, .npkts = SCRIPT_PEER_WARMUPS + NPKTS, .seed = SEED};
	struct ibv_wc wc;

	script_peer_open(rc, &p, SQ_PSN);
	script_peer_warm_up(rc, &p);
	uint32_t warm_reads = p.received; /* probes of the warm-ups included */

	rc_read_counters(rc, before);
	script_peer_write(rc, &p, 99, first, NPKTS);
	rc_step(rc, "NAK PSN %u: the requester goes back to it", x);
	script_peer_send_aeth(rc, &p, URNIC_AETH_NAK, x);
	int64_t psn = script_peer_recv(rc, &p, 1000);

	RC_CHECK(rc, psn == x, "first packet after the NAK: PSN %lld, not %u", (long long)psn, x);
	rc_step(rc, "NAK PSN %u again at once, within the round trip: held", x);
	script_peer_send_aeth(rc, &p, URNIC_AETH_NAK, x);
	double nak_ms = rc_now_ms();

	if (acked) {
		/* only up to the NAKed PSN: with the rest still outstanding, a held NAK acted on
		 * regardless would send PSN x+1 and on again */
		rc_step(rc, "ACK PSN %u before the held NAK's round trip ends; 60 ms of quiet", x);
		script_peer_send_aeth(rc, &p, URNIC_AETH_ACK, x);
		/* the rest of the retransmission, a probe maybe, and not PSN x again */
		while ((psn = script_peer_recv(rc, &p, 60)) >= 0)
			RC_CHECK(rc, psn != x, "PSN %u sent a third time: its ACK came", x);
		rc_step(rc, "ACK the WRITE");
		script_peer_send_aeth(rc, &p, URNIC_AETH_ACK, last);
		rc_poll(rc, rc->scq, &wc, 1, 5000);
		rc_expect(rc, &wc, 99, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		script_peer_drain(rc, &p, 20);
	} else {
		rc_step(rc, "the requester sends PSN %u a third time", x);
		read_until(rc, &p, x, last, "the third sending of the NAKed PSN");
		rc_step(rc, "third sending %.1f ms after the second NAK; ACK the WRITE",
			rc_now_ms() - nak_ms);
		script_peer_send_aeth(rc, &p, URNIC_AETH_ACK, last);
		rc_poll(rc, rc->scq, &wc, 1, 5000);
		rc_expect(rc, &wc, 99, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		script_peer_drain(rc, &p, 50);
	}
	rc_read_counters(rc, after);
	uint64_t held = after[URNIC_C_held_naks] - before[URNIC_C_held_naks];
	uint64_t stale = after[URNIC_C_stale_naks] - before[URNIC_C_stale_naks];
	uint64_t expiries = after[URNIC_C_rto_expiries] - before[URNIC_C_rto_expiries];
	uint64_t resent = after[URNIC_C_retransmits] - before[URNIC_C_retransmits];
	uint32_t seen = p.received - warm_reads - NPKTS;

	rc_step(rc, "counters: %llu NAKs held as stale, %llu acted on later, %llu timer "
		    "expiries, %llu packets counted as resent, %u read again",
		(unsigned long long)stale, (unsigned long long)held, (unsigned long long)expiries,
		(unsigned long long)resent, seen);
	RC_CHECK(rc, stale == 1,
		 "the second NAK was not taken as maybe stale: the round trip the warm-ups "
		 "taught is shorter than this machine's NAK turnaround");
	RC_CHECK(rc, expiries == 0, "the retransmission timer expired");
	RC_CHECK(rc, held == (acked ? 0 : 1), "nak_psn_seq_err_held moved by %llu, expected %d",
		 (unsigned long long)held, acked ? 0 : 1);
	RC_CHECK(rc, resent == seen, "retransmitted_packets moved by %llu; %u packets read again",
		 (unsigned long long)resent, seen);
	script_peer_close(&p);
	return RC_PASS;
}

static bool acked_mode;

static int run(struct rc *rc)
{
	return test(rc, acked_mode);
}

int main(int argc, char **argv)
{
	struct rc_opts o = script_peer_defaults(
		argc > 1 && !strcmp(argv[1], "--acked") ? "rc_nak_held_acked" : "rc_nak_held");

	acked_mode = argc > 1 && !strcmp(argv[1], "--acked");
	return rc_run_local(&o, run);
}
