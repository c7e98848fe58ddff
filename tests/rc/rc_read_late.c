/* rc_read_late: after the retransmission timer went back over a READ that had several requests
 * out, the late responses to the first requests complete it once, with the right bytes, and the
 * answers to the requests made again, arriving after it completed, disturb nothing: the next
 * READ completes with its own bytes, and no other completion appears.
 *
 * One process: the responder is scripted on a plain UDP socket (script_peer.c). After warm-ups
 * (a round trip of about 8 ms, a timer of about 120 ms), a READ of one window, 128 packets at a
 * 1 KiB MTU, goes as four requests of 32 (rc_read_slices). The responder answers none until the
 * timer expires: the requester goes back with its window cut and asks again for the first 32
 * only. Then the responder sends all 128 responses of the first requests, in order (late, not
 * lost), and answers every request that comes, also after the READ completed; then a 1-packet
 * READ. */
#include <stdlib.h>
#include <string.h>

#include "script_peer.h"

#include "common/param.h"
#include "common/stats.h"

#define SQ_PSN 7000u	 /* the requester's first PSN */
#define SEED 61		 /* the warm-ups' bytes */
#define RESP_SEED 67	 /* the responder's memory */
#define NPKTS 128u	 /* packets of the READ: one window */
#define LOFF (64u << 10) /* where the READ lands in rc->buf, past the warm-ups */
#define QUIET_MS 20	 /* no request this long: the requester waits */
#define EXPIRY_MS 3000	 /* the timer (about 120 ms) must have expired by then */

/* Reads requests without answering until the timer has expired and no request came for
 * QUIET_MS: the last request read, which *len describes. */
static uint32_t requests_until_expiry(struct rc *rc, struct script_peer *p, uint32_t *len)
{
	uint64_t expiries = rc_counter(rc, URNIC_C_rto_expiries), va;
	int64_t last = -1, psn;
	double start = rc_now_ms();

	for (;;) {
		uint32_t l;

		psn = script_peer_recv_read(rc, p, QUIET_MS, &va, &l);
		if (psn >= 0) {
			last = psn;
			*len = l;
			continue;
		}
		if (rc_counter(rc, URNIC_C_rto_expiries) > expiries)
			break;
		RC_CHECK(rc, rc_now_ms() - start < EXPIRY_MS, "no timer expiry in %d ms",
			 EXPIRY_MS);
	}
	RC_CHECK(rc, last >= 0, "no request after the timer expired");
	return (uint32_t)last;
}

/* Polls once (driving progress): true if the READ completed. */
static bool completed(struct rc *rc)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(rc->scq, 1, &wc);

	RC_CHECK(rc, n >= 0, "ibv_poll_cq: %d", n);
	if (n == 1)
		rc_expect(rc, &wc, 9, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	return n == 1;
}

/* Answers each request as it comes until the READ completes. */
static void answer_until_done(struct rc *rc, struct script_peer *p, uint32_t first,
			      const uint8_t *mem)
{
	double start = rc_now_ms();
	uint64_t va;
	uint32_t len;

	for (;;) {
		if (completed(rc))
			return;
		int64_t psn = script_peer_recv_read(rc, p, 1, &va, &len);

		RC_CHECK(rc, rc_now_ms() - start < 5000, "the READ did not complete in 5 s");
		if (psn < 0)
			continue;
		uint32_t i = (uint32_t)psn - first;

		RC_CHECK(rc, i < NPKTS && len % rc->mtu == 0 && i + len / rc->mtu <= NPKTS,
			 "a request at PSN %lld for %u bytes, outside the READ", (long long)psn,
			 len);
		script_peer_send_read_responses(rc, p, (uint32_t)psn, len / rc->mtu,
						mem + (size_t)i * rc->mtu);
	}
}

/* A 1-packet READ at PSN psn of the responder's first packet, into rc->buf at 0: it completes
 * (the only completion) with those bytes. */
static void next_read(struct rc *rc, struct script_peer *p, uint32_t psn, const uint8_t *mem)
{
	struct ibv_wc wc[2];
	struct rc_wr w;
	uint64_t va;
	uint32_t len;

	rc_step(rc, "a 1-packet READ at PSN %u", psn);
	memset(rc->buf, 0, rc->mtu);
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 10, 0, rc->mtu, 0);
	rc_post_send(rc, 0, &w.wr);
	int64_t got = script_peer_recv_read(rc, p, 1000, &va, &len);

	RC_CHECK(rc, got == psn && len == rc->mtu, "request at PSN %lld for %u bytes", (long long)got,
		 len);
	script_peer_send_read_responses(rc, p, psn, 1, mem);
	rc_poll(rc, rc->scq, wc, 1, 5000);
	rc_expect(rc, wc, 10, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	rc_check_from(rc, rc->buf, rc->mtu, RESP_SEED, 0, "second READ data");
	RC_CHECK(rc, ibv_poll_cq(rc->scq, 2, wc) == 0, "another completion");
}

static int test(struct rc *rc)
{
	const uint32_t first = SQ_PSN + SCRIPT_PEER_WARMUPS;
	const uint32_t slice = URNIC_TX_WINDOW / URNIC_READ_SLICES;
	struct script_peer p = {.first_psn = SQ_PSN, .npkts = SCRIPT_PEER_WARMUPS, .seed = SEED};
	uint8_t *mem = malloc((size_t)NPKTS * rc->mtu);
	struct rc_wr w;
	uint64_t va;
	uint32_t len;

	RC_CHECK(rc, mem, "out of memory");
	rc_fill(mem, (size_t)NPKTS * rc->mtu, RESP_SEED);
	script_peer_open(rc, &p, SQ_PSN);
	script_peer_warm_up(rc, &p);

	rc_step(rc, "a %u-packet READ, unanswered until the timer expires", NPKTS);
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 9, LOFF, (size_t)NPKTS * rc->mtu, 0);
	rc_post_send(rc, 0, &w.wr);
	uint32_t again = requests_until_expiry(rc, &p, &len);

	RC_CHECK(rc, again == first && len == slice * rc->mtu,
		 "after the expiry: a request at PSN %u for %u bytes, expected %u for %u", again,
		 len, first, slice * rc->mtu);
	rc_step(rc, "asked again for PSN %u..%u; all %u responses of the first requests", first,
		first + slice - 1, NPKTS);
	script_peer_send_read_responses(rc, &p, first, NPKTS, mem);
	answer_until_done(rc, &p, first, mem);
	rc_check_from(rc, rc->buf + LOFF, (size_t)NPKTS * rc->mtu, RESP_SEED, 0, "READ data");
	rc_step(rc, "the READ completed; answering what was asked again");
	for (int64_t psn; (psn = script_peer_recv_read(rc, &p, QUIET_MS, &va, &len)) >= 0;) {
		uint32_t i = (uint32_t)psn - first;

		RC_CHECK(rc, i < NPKTS && i + len / rc->mtu <= NPKTS,
			 "a request at PSN %lld for %u bytes, outside the READ", (long long)psn, len);
		script_peer_send_read_responses(rc, &p, (uint32_t)psn, len / rc->mtu,
						mem + (size_t)i * rc->mtu);
	}
	next_read(rc, &p, first + NPKTS, mem);
	script_peer_close(&p);
	free(mem);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = script_peer_defaults("rc_read_late");

	return rc_run_local(&o, test);
}
