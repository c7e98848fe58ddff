/* rc_nak_ahead: a PSN-sequence NAK that names a PSN ahead of the requester's send cursor, but
 * not beyond anything it ever sent, is a NAK of the first sending and is acted on.
 *
 * After a timer expiry the requester goes back to its oldest unacknowledged PSN and, with its
 * window cut, sends only the first packets again. A NAK from the responder that was on its way
 * then names a PSN past them: the responder holds everything before it. Seen with rdma_rxe under
 * 2% loss (ib_write_bw, urnic the client), such a NAK was dropped as out of the window and the
 * requester sent again what the responder already had. It must instead skip ahead (a spurious
 * go-back), take the NAK as the acknowledgement of everything before its PSN, and go back to
 * that PSN; a NAK beyond the highest PSN ever sent stays a drop.
 *
 * One process: the responder is scripted on a plain UDP socket at another loopback address,
 * which reads the requester's packets, checks their payload byte for byte, and answers with
 * forged NAKs and ACKs. */
#include "script_peer.h"


#include "common/stats.h"

#define NPKTS 8	    /* packets of the WRITE */
#define NAK_AT 5    /* the responder holds packets 0..NAK_AT-1 of the first sending */
#define SQ_PSN 5000u /* the requester's first PSN */
#define SEED 41

/* Reads the first sending, then waits for the timer's go-back to resend PSN SQ_PSN; returns the
 * highest PSN seen again in the next 20 ms (the cut window allows only the first few). */
static uint32_t first_sending_and_goback(struct rc *rc, struct script_peer *r)
{
	rc_step(rc, "the first sending: %d packets, unanswered", NPKTS);
	for (uint32_t i = 0; i < NPKTS; i++) {
		int64_t psn = script_peer_recv(rc, r, 2000);

		RC_CHECK(rc, psn == SQ_PSN + i, "packet %u of the first sending: PSN %lld", i,
			 (long long)psn);
	}
	rc_step(rc, "the timer goes back to PSN %u", SQ_PSN);
	int64_t psn = script_peer_recv(rc, r, 2000);

	RC_CHECK(rc, psn == SQ_PSN, "first packet after the first sending: PSN %lld",
		 (long long)psn);
	uint32_t highest = SQ_PSN;

	while ((psn = script_peer_recv(rc, r, 20)) >= 0)
		if (psn_diff((uint32_t)psn, highest) > 0)
			highest = (uint32_t)psn;
	RC_CHECK(rc, psn_diff(SQ_PSN + NAK_AT, highest) > 0,
		 "the go-back sent PSN %u again within 20 ms: the window was not cut, this test "
		 "needs the cursor behind PSN %u",
		 highest, SQ_PSN + NAK_AT);
	return highest;
}

static int test(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct script_peer r = {.first_psn = SQ_PSN, .npkts = NPKTS, .seed = SEED};
	struct rc_wr w;
	struct ibv_wc wc;

	script_peer_open(rc, &r, SQ_PSN);
	rc_fill(rc->buf, NPKTS * rc->mtu, SEED);
	rc_read_counters(rc, before);
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, 7, 0, NPKTS * rc->mtu, 0);
	rc_post_send(rc, 0, &w.wr);
	uint32_t highest = first_sending_and_goback(rc, &r);

	rc_step(rc, "a NAK beyond anything sent (PSN %u) is dropped", SQ_PSN + NPKTS + 1);
	script_peer_send_aeth(rc, &r, URNIC_AETH_NAK, SQ_PSN + NPKTS + 1);
	rc_step(rc, "a NAK of the first sending for PSN %u, ahead of the cursor (%u resent)",
		SQ_PSN + NAK_AT, highest);
	script_peer_send_aeth(rc, &r, URNIC_AETH_NAK, SQ_PSN + NAK_AT);
	for (int64_t psn;;) {
		psn = script_peer_recv(rc, &r, 1000);
		RC_CHECK(rc, psn >= 0, "no packet within 1 s of the NAK: PSN %u never sent again",
			 SQ_PSN + NAK_AT);
		if (psn == SQ_PSN + NAK_AT)
			break;
		/* a timer's resend may have left before the NAK was read; nothing the responder
		 * already holds past it may go again */
		RC_CHECK(rc, psn_diff((uint32_t)psn, highest) <= 0,
			 "PSN %lld sent again: the responder holds everything before PSN %u",
			 (long long)psn, SQ_PSN + NAK_AT);
	}
	rc_step(rc, "ACK the whole WRITE");
	script_peer_send_aeth(rc, &r, URNIC_AETH_ACK, SQ_PSN + NPKTS - 1);
	rc_poll(rc, rc->scq, &wc, 1, 5000);
	rc_expect(rc, &wc, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);

	script_peer_drain(rc, &r, 20); /* a timer's resend still on its way */
	rc_read_counters(rc, after);
	uint64_t dropped = after[URNIC_C_drop_psn] - before[URNIC_C_drop_psn];
	uint64_t spurious = after[URNIC_C_spurious_gobacks] - before[URNIC_C_spurious_gobacks];
	uint64_t resent = after[URNIC_C_retransmits] - before[URNIC_C_retransmits];

	rc_step(rc, "counters: %llu dropped for their PSN, %llu spurious go-backs, %llu packets "
		    "counted as resent, %u seen again",
		(unsigned long long)dropped, (unsigned long long)spurious,
		(unsigned long long)resent, r.received - NPKTS);
	RC_CHECK(rc, resent == r.received - NPKTS,
		 "retransmitted_packets moved by %llu; the responder read %u packets again",
		 (unsigned long long)resent, r.received - NPKTS);
	RC_CHECK(rc, dropped == 1,
		 "drop_psn_out_of_window moved by %llu, expected 1 (the NAK beyond anything sent)",
		 (unsigned long long)dropped);
	RC_CHECK(rc, spurious >= 1, "the NAK ahead of the cursor proved no go-back spurious");
	script_peer_close(&r);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = script_peer_defaults("rc_nak_ahead");

	return rc_run_local(&o, test);
}
