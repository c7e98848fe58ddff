/* rc_read_gap_timer: a READ whose first response never comes, while the responder answers
 * every request with the rest, is asked again at each gap, and ends in IBV_WC_RETRY_EXC_ERR no
 * earlier than 90% of the (1 + retry_cnt) IB timeouts that its attributes imply: a response gap
 * proves the responder alive, as a sequence NAK does, and spends no retry. Gaps that spent one
 * made a 64 MiB READ over the rings fail in milliseconds under loss (rc_read_lossy_shm in CI):
 * responses to earlier requests, queued behind a slow reader, kept showing gaps after go-backs.
 *
 * One process: the responder is scripted on a plain UDP socket (script_peer.c). A 2-packet READ
 * with timeout 12 (16.8 ms) and retry_cnt 3; every request for it gets its LAST response alone,
 * 1 ms later: so late that the gap after each go-back looks like its retransmission was lost
 * (the requester has no round-trip sample, and allows 0.5 ms). Against a requester whose gaps
 * paid, the error came after 9.0-9.5 ms and 7 requests. */
#include <stdio.h>
#include <stdlib.h>

#include "script_peer.h"

#include "common/stats.h"

#define SQ_PSN 4000u	/* the requester's first PSN: the READ's */
#define RESP_SEED 79	/* the responder's memory */
#define NPKTS 2u	/* packets of the READ */
#define TIMEOUT 12	/* 4.096 us * 2^12: 16.8 ms */
#define RETRY_CNT 3	/* 1 + 3 tries: 67 ms */
#define LIMIT_MS 3000.0 /* the test's own bound on the wait */
#define ANSWER_MS 1.0	/* each answer's delay: past the round trip a go-back allows */
#define MAX_DUE 64	/* requests waiting for their answer */

static int test(struct rc *rc)
{
	const double implied_ms = (1 + RETRY_CNT) * 4.096e-3 * (double)(1u << TIMEOUT);
	struct script_peer p = {.first_psn = SQ_PSN};
	uint8_t *mem = malloc((size_t)NPKTS * rc->mtu);
	unsigned requests = 0, answered = 0;
	double due[MAX_DUE];
	struct ibv_wc wc;
	struct rc_wr w;
	int got = 0;

	RC_CHECK(rc, mem, "out of memory");
	rc_fill(mem, (size_t)NPKTS * rc->mtu, RESP_SEED);
	script_peer_open(rc, &p, SQ_PSN);
	uint64_t gaps0 = rc_counter(rc, URNIC_C_read_gaps);
	uint64_t timeouts0 = rc_counter(rc, URNIC_C_timeouts);

	rc_step(rc, "a %u-packet READ; every request for it gets its LAST response alone", NPKTS);
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 11, 0, (size_t)NPKTS * rc->mtu, 0);
	double t0 = rc_now_ms();

	rc_post_send(rc, 0, &w.wr);
	while (got == 0 && rc_now_ms() - t0 < LIMIT_MS) {
		uint64_t va;
		uint32_t len;
		int64_t psn = script_peer_recv_read(rc, &p, 0, &va, &len);

		if (psn >= 0) {
			RC_CHECK(rc, psn == SQ_PSN && len == NPKTS * rc->mtu,
				 "request %u: PSN %lld for %u bytes, expected %u for %u",
				 requests + 1, (long long)psn, len, SQ_PSN, NPKTS * rc->mtu);
			RC_CHECK(rc, requests - answered < MAX_DUE, "%u requests unanswered",
				 requests - answered);
			due[requests++ % MAX_DUE] = rc_now_ms() + ANSWER_MS;
		}
		if (answered < requests && rc_now_ms() >= due[answered % MAX_DUE]) {
			script_peer_send_read_response(rc, &p, URNIC_OP_READ_RESP_LAST, SQ_PSN + 1,
						       mem + rc->mtu, rc->mtu);
			answered++;
		}
		got = ibv_poll_cq(rc->scq, 1, &wc);
		RC_CHECK(rc, got >= 0, "ibv_poll_cq returned %d", got);
	}
	double took_ms = rc_now_ms() - t0;
	uint64_t gaps = rc_counter(rc, URNIC_C_read_gaps) - gaps0;
	uint64_t timeouts = rc_counter(rc, URNIC_C_timeouts) - timeouts0;

	RC_CHECK(rc, got == 1, "no completion in %.0f ms (%u requests)", LIMIT_MS, requests);
	rc_step(rc, "completed after %.1f ms: %u requests, %llu gaps (timeout %d, retry_cnt %d "
		    "imply %.1f ms)",
		took_ms, requests, (unsigned long long)gaps, TIMEOUT, RETRY_CNT, implied_ms);
	rc_expect(rc, &wc, 11, IBV_WC_RETRY_EXC_ERR, -1);
	RC_CHECK(rc, took_ms >= 0.9 * implied_ms && took_ms < 3 * implied_ms + 200,
		 "IBV_WC_RETRY_EXC_ERR after %.1f ms; timeout %d and retry_cnt %d imply %.1f ms",
		 took_ms, TIMEOUT, RETRY_CNT, implied_ms);
	/* the IB timer ended it, each expiry a try; before, the gaps' go-backs spent them all */
	RC_CHECK(rc, timeouts == 1 + RETRY_CNT, "%llu IB timeouts, expected %d",
		 (unsigned long long)timeouts, 1 + RETRY_CNT);
	/* the gaps were answered, not waited out: more requests than the IB timer alone makes */
	RC_CHECK(rc, requests > 1 + RETRY_CNT && gaps >= requests - 1,
		 "%u requests and %llu gaps: the gaps did not ask again", requests,
		 (unsigned long long)gaps);
	printf("rc_read_gap_timer: IBV_WC_RETRY_EXC_ERR after %.1f ms, %u requests, %llu gaps "
	       "(timeout %d, retry_cnt %d imply %.1f ms)\n",
	       took_ms, requests, (unsigned long long)gaps, TIMEOUT, RETRY_CNT, implied_ms);
	script_peer_close(&p);
	free(mem);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = script_peer_defaults("rc_read_gap_timer");

	o.timeout = TIMEOUT;
	o.retry_cnt = RETRY_CNT;
	return rc_run_local(&o, test);
}
