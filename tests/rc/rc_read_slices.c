/* rc_read_slices: a long READ goes as several requests, each for a slice of the window, and the
 * next leaves while the responses to those before it are still due: the requester does not wait
 * for its window to empty between requests (it did: one request per window, and ib_read_bw -s 1M
 * reached 0.6 of WRITE's bandwidth). With --one (max_rd_atomic 1) one request at a time, each
 * for the whole window.
 *
 * One process: the responder is scripted on a plain UDP socket (script_peer.c). After warm-ups
 * (a round trip of about 8 ms, a timer of about 120 ms), a READ of 256 packets at a 1 KiB MTU:
 *   - the requests that come before any answer: back to back, window / min(URNIC_READ_SLICES,
 *     max_rd_atomic) packets each, as many as fill the window, and no more within 5 ms;
 *   - the first request answered in full: exactly one more request comes;
 *   - then each request is answered in turn. The READ completes with the responder's bytes,
 *     byte for byte; no request came twice and no timer expired. */
#include <stdlib.h>
#include <string.h>

#include "script_peer.h"

#include "common/param.h"
#include "common/stats.h"

#define SQ_PSN 5000u	     /* the requester's first PSN */
#define SEED 53		     /* the warm-ups' bytes */
#define RESP_SEED 59	     /* the responder's memory */
#define NPKTS 256u	     /* packets of the READ */
#define LOFF (64u << 10)     /* where the READ lands in rc->buf, past the warm-ups */
#define ROFF (4u << 10)	     /* where it reads in the responder's memory */
#define QUIET_MS 5	     /* nothing more may come this long after a full window */
#define MAX_REQUESTS NPKTS   /* one per packet at most */

struct request {
	uint32_t psn, npkts;
};

struct reader {
	struct script_peer p;
	uint8_t *mem; /* the responder's memory: ROFF + NPKTS packets */
	uint32_t first_psn, slice;
	struct request req[MAX_REQUESTS];
	unsigned nreq, answered; /* requests read, and answered in full */
};

/* The next request within ms, checked to be the one after the last: it starts where that one
 * ended, asks for the bytes its PSNs stand for and for a slice (or what is left). */
static bool read_request(struct rc *rc, struct reader *r, unsigned ms)
{
	uint64_t va;
	uint32_t len;
	int64_t psn = script_peer_recv_read(rc, &r->p, ms, &va, &len);

	if (psn < 0)
		return false;
	uint32_t at = r->nreq ? r->req[r->nreq - 1].psn + r->req[r->nreq - 1].npkts : r->first_psn;
	uint32_t i = at - r->first_psn, left = NPKTS - i;
	uint32_t want = left < r->slice ? left : r->slice;

	RC_CHECK(rc, r->nreq < MAX_REQUESTS && psn == at, "READ request at PSN %lld, expected %u",
		 (long long)psn, at);
	RC_CHECK(rc, va == rc->peer.addr + ROFF + (uint64_t)i * rc->mtu,
		 "request at PSN %u reads at %#llx", at, (unsigned long long)va);
	RC_CHECK(rc, len == want * rc->mtu, "request at PSN %u asks for %u bytes, not %u", at, len,
		 want * rc->mtu);
	r->req[r->nreq++] = (struct request){.psn = at, .npkts = want};
	return true;
}

/* Requests until none comes for QUIET_MS (the first within 1 s): how many. */
static unsigned read_requests(struct rc *rc, struct reader *r)
{
	unsigned n = 0;

	while (read_request(rc, r, n ? QUIET_MS : 1000))
		n++;
	return n;
}

static void answer_next(struct rc *rc, struct reader *r)
{
	const struct request *q = &r->req[r->answered++];
	size_t off = ROFF + (size_t)(q->psn - r->first_psn) * rc->mtu;

	script_peer_send_read_responses(rc, &r->p, q->psn, q->npkts, r->mem + off);
}

static uint32_t expected_slice(const struct rc *rc)
{
	uint32_t slices = rc->rd_atomic < URNIC_READ_SLICES ? rc->rd_atomic : URNIC_READ_SLICES;

	return URNIC_TX_WINDOW / slices;
}

static int test(struct rc *rc)
{
	static struct reader r;
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct rc_wr w;
	struct ibv_wc wc;

	r.p = (struct script_peer){.first_psn = SQ_PSN, .npkts = SCRIPT_PEER_WARMUPS, .seed = SEED};
	r.first_psn = SQ_PSN + SCRIPT_PEER_WARMUPS;
	r.slice = expected_slice(rc);
	r.mem = malloc(ROFF + (size_t)NPKTS * rc->mtu);
	RC_CHECK(rc, r.mem, "out of memory");
	rc_fill(r.mem, ROFF + (size_t)NPKTS * rc->mtu, RESP_SEED);
	script_peer_open(rc, &r.p, SQ_PSN);
	script_peer_warm_up(rc, &r.p);
	rc_read_counters(rc, before);

	rc_step(rc, "a %u-packet READ, max_rd_atomic %u: requests for %u packets each expected",
		NPKTS, rc->rd_atomic, r.slice);
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 7, LOFF, (size_t)NPKTS * rc->mtu, ROFF);
	rc_post_send(rc, 0, &w.wr);
	unsigned first = read_requests(rc, &r);

	rc_step(rc, "%u requests before any answer", first);
	RC_CHECK(rc, first == URNIC_TX_WINDOW / r.slice,
		 "%u requests before any answer, expected %u (a window of %u packets)", first,
		 URNIC_TX_WINDOW / r.slice, URNIC_TX_WINDOW);
	answer_next(rc, &r);
	unsigned next = read_requests(rc, &r);

	rc_step(rc, "first request answered: %u more", next);
	RC_CHECK(rc, next == 1, "%u requests after the first was answered, expected 1", next);
	while (r.answered < r.nreq) {
		answer_next(rc, &r);
		if (r.answered == r.nreq && r.req[r.nreq - 1].psn + r.req[r.nreq - 1].npkts !=
						r.first_psn + NPKTS)
			RC_CHECK(rc, read_request(rc, &r, 1000), "no request after PSN %u",
				 r.req[r.nreq - 1].psn);
		while (read_request(rc, &r, 0))
			;
	}
	rc_poll(rc, rc->scq, &wc, 1, 5000);
	rc_expect(rc, &wc, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	rc_check_from(rc, rc->buf + LOFF, (size_t)NPKTS * rc->mtu, RESP_SEED, ROFF, "READ data");
	uint64_t va;
	uint32_t len;

	RC_CHECK(rc, script_peer_recv_read(rc, &r.p, 50, &va, &len) < 0,
		 "a request after the READ completed");
	rc_read_counters(rc, after);
	uint64_t expiries = after[URNIC_C_rto_expiries] - before[URNIC_C_rto_expiries];

	rc_step(rc, "%u requests, all answered; %llu timer expiries", r.nreq,
		(unsigned long long)expiries);
	RC_CHECK(rc, r.nreq == (NPKTS + r.slice - 1) / r.slice, "%u requests for %u packets",
		 r.nreq, NPKTS);
	RC_CHECK(rc, expiries == 0, "the retransmission timer expired");
	script_peer_close(&r.p);
	free(r.mem);
	return RC_PASS;
}

int main(int argc, char **argv)
{
	bool one = argc > 1 && strcmp(argv[1], "--one") == 0;
	struct rc_opts o = script_peer_defaults(one ? "rc_read_slices_one" : "rc_read_slices");

	o.max_rd_atomic = one ? 1 : 16;
	return rc_run_local(&o, test);
}
