/* rc_unsignaled: with sq_sig_all = 0 only WRs posted with IBV_SEND_SIGNALED produce send
 * completions, and a signaled completion retires every unsignaled WR before it: rounds that
 * fill the whole send queue keep fitting. The unsignaled WRITEs still land. */
#include "rc_harness.h"

#include <string.h>

#define ROUNDS 8

static size_t region(struct rc *rc, int k)
{
	return (size_t)k * 2 * rc->mtu;
}

static int server(struct rc *rc)
{
	int per_round = (int)rc_get(rc);

	for (int r = 0; r < ROUNDS; r++) {
		rc_step(rc, "round %d", r);
		memset(rc->buf, RC_CANARY, region(rc, per_round));
		rc_post_recv(rc, 0, 0x100 + r, region(rc, per_round), 64);
		rc_sync(rc);
		/* The closing SEND completes after every WRITE before it has landed. */
		rc_wait(rc, rc->rcq, 0x100 + r, IBV_WC_RECV, NULL);
		for (int k = 0; k < per_round - 1; k++)
			rc_check(rc, rc->buf + region(rc, k), rc->mtu + 1,
				 (uint32_t)(7000 + r * 100 + k), "unsignaled WRITE data");
		rc_sync(rc);
	}
	return RC_PASS;
}

static int client(struct rc *rc)
{
	/* Exactly a full send queue per round: WRITEs, then one signaled SEND. */
	int per_round = (int)rc->cap.max_send_wr;
	struct ibv_wc wc[2];

	RC_CHECK(rc, region(rc, per_round) + 64 <= rc->o.buf_size, "send queue too deep: %d",
		 per_round);
	rc_put(rc, (uint64_t)per_round);
	for (int r = 0; r < ROUNDS; r++) {
		bool mid = r % 2; /* odd rounds also signal one WRITE in the middle */
		int mid_k = per_round / 2;

		rc_step(rc, "round %d: %d WRs, %s", r, per_round,
			mid ? "one signaled WRITE in the middle" : "only the last signaled");
		rc_sync(rc);
		for (int k = 0; k < per_round - 1; k++) {
			struct rc_wr w;

			rc_fill(rc->buf + region(rc, k), rc->mtu + 1,
				(uint32_t)(7000 + r * 100 + k));
			rc_wr(rc, &w, IBV_WR_RDMA_WRITE, (uint64_t)(r * 1000 + k), region(rc, k),
			      rc->mtu + 1, region(rc, k));
			w.wr.send_flags = mid && k == mid_k ? IBV_SEND_SIGNALED : 0;
			rc_post_send(rc, 0, &w.wr);
		}
		struct rc_wr s;
		rc_wr(rc, &s, IBV_WR_SEND, (uint64_t)(r * 1000 + 999), 0, 64, 0);
		rc_post_send(rc, 0, &s.wr);

		rc_poll(rc, rc->scq, wc, mid ? 2 : 1, RC_WAIT_MS);
		if (mid)
			rc_expect(rc, &wc[0], (uint64_t)(r * 1000 + mid_k), IBV_WC_SUCCESS,
				  IBV_WC_RDMA_WRITE);
		rc_expect(rc, &wc[mid ? 1 : 0], s.wr.wr_id, IBV_WC_SUCCESS, IBV_WC_SEND);
		rc_expect_empty(rc, rc->scq, 50);
		rc_sync(rc);
	}
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_unsignaled");

	o.sq_sig_all = false;
	o.sq_depth = 16;
	o.buf_size = 16 * RC_MIB;
	return rc_run(&o, server, client);
}
