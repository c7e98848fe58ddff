/* rc_read_gap_held: a READ whose first response is lost, and lost again after the requester
 * asked for it again, is asked for a third time a round trip after that go-back, not after the
 * retransmission timer; the go-back is counted as a held READ response gap
 * (read_response_gaps_held), not as a held sequence NAK (nak_psn_seq_err_held, which counted
 * both before).
 *
 * One process: the responder is scripted on a plain UDP socket (script_peer.c). After warm-ups
 * (a round trip of about 8 ms, a timer of about 120 ms), a 4-packet READ: the responder sends
 * its responses but the first. The requester asks again from the first (the gap), and the rest
 * of the first responses, past the gap, are held; the responder leaves that request unanswered.
 * The next request for the first response must come, as a held gap's go-back; answered in full,
 * the READ completes with the responder's bytes. */
#include <stdlib.h>

#include "script_peer.h"

#include "common/stats.h"

#define SQ_PSN 8000u	 /* the requester's first PSN */
#define SEED 71		 /* the warm-ups' bytes */
#define RESP_SEED 73	 /* the responder's memory */
#define NPKTS 4u	 /* packets of the READ: one request */
#define LOFF (64u << 10) /* where the READ lands in rc->buf, past the warm-ups */

/* The next READ request: it must ask for the whole READ from PSN first. */
static void expect_request(struct rc *rc, struct script_peer *p, uint32_t first, const char *what)
{
	uint64_t va;
	uint32_t len;
	int64_t psn = script_peer_recv_read(rc, p, 1000, &va, &len);

	RC_CHECK(rc, psn == first && len == NPKTS * rc->mtu,
		 "%s: a request at PSN %lld for %u bytes, expected %u for %u", what, (long long)psn,
		 len, first, NPKTS * rc->mtu);
}

static int test(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	const uint32_t first = SQ_PSN + SCRIPT_PEER_WARMUPS;
	struct script_peer p = {.first_psn = SQ_PSN, .npkts = SCRIPT_PEER_WARMUPS, .seed = SEED};
	uint8_t *mem = malloc((size_t)NPKTS * rc->mtu);
	struct ibv_wc wc;
	struct rc_wr w;

	RC_CHECK(rc, mem, "out of memory");
	rc_fill(mem, (size_t)NPKTS * rc->mtu, RESP_SEED);
	script_peer_open(rc, &p, SQ_PSN);
	script_peer_warm_up(rc, &p);
	rc_read_counters(rc, before);

	rc_step(rc, "a %u-packet READ; its responses but the first", NPKTS);
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 9, LOFF, (size_t)NPKTS * rc->mtu, 0);
	rc_post_send(rc, 0, &w.wr);
	expect_request(rc, &p, first, "the READ");
	for (uint32_t k = 1; k < NPKTS; k++)
		script_peer_send_read_response(rc, &p,
					       k + 1 < NPKTS ? URNIC_OP_READ_RESP_MIDDLE
							     : URNIC_OP_READ_RESP_LAST,
					       first + k, mem + (size_t)k * rc->mtu, rc->mtu);
	rc_step(rc, "the gap asks again from PSN %u: left unanswered", first);
	expect_request(rc, &p, first, "after the gap");
	rc_step(rc, "the held gap goes back again");
	double t0 = rc_now_ms();

	expect_request(rc, &p, first, "after the held gap");
	double again_ms = rc_now_ms() - t0;

	rc_step(rc, "asked a third time %.1f ms later; answered in full", again_ms);
	script_peer_send_read_responses(rc, &p, first, NPKTS, mem);
	rc_poll(rc, rc->scq, &wc, 1, 5000);
	rc_expect(rc, &wc, 9, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	rc_check_from(rc, rc->buf + LOFF, (size_t)NPKTS * rc->mtu, RESP_SEED, 0, "READ data");
	rc_read_counters(rc, after);
	uint64_t gaps = after[URNIC_C_held_read_gaps] - before[URNIC_C_held_read_gaps];
	uint64_t naks = after[URNIC_C_held_naks] - before[URNIC_C_held_naks];
	uint64_t expiries = after[URNIC_C_rto_expiries] - before[URNIC_C_rto_expiries];

	rc_step(rc, "counters: %llu held gaps, %llu held NAKs, %llu timer expiries",
		(unsigned long long)gaps, (unsigned long long)naks, (unsigned long long)expiries);
	RC_CHECK(rc, expiries == 0, "the retransmission timer expired: the held gap did not act");
	RC_CHECK(rc, gaps == 1, "read_response_gaps_held moved by %llu, expected 1",
		 (unsigned long long)gaps);
	RC_CHECK(rc, naks == 0, "nak_psn_seq_err_held moved by %llu, expected 0",
		 (unsigned long long)naks);
	script_peer_close(&p);
	free(mem);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = script_peer_defaults("rc_read_gap_held");

	return rc_run_local(&o, test);
}
