/* rc_atomic_contention: NQP QPs hammer one remote 8-byte counter with K fetch-and-adds each,
 * all in flight together: the final value is exact and the returned originals are exactly
 * initial, initial+1, ..., each once (no lost or duplicated update). */
#include "rc_harness.h"

#include <stdlib.h>
#include <string.h>

#define NQP 4
#define K 1000
#define AOFF 0
#define INITIAL (0x100000000ull - 1500) /* the run crosses the 32-bit boundary */

static int server(struct rc *rc)
{
	uint64_t v = INITIAL;

	rc_step(rc, "set the counter");
	memcpy(rc->buf + AOFF, &v, 8);
	rc_sync(rc);
	rc_step(rc, "counter after %d x %d adds", NQP, K);
	rc_sync(rc);
	memcpy(&v, rc->buf + AOFF, 8);
	RC_CHECK(rc, v == INITIAL + NQP * K, "counter %#llx, expected %#llx", (unsigned long long)v,
		 (unsigned long long)(INITIAL + NQP * K));
	return RC_PASS;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int client(struct rc *rc)
{
	int posted[NQP] = {0}, outstanding[NQP] = {0}, done = 0;
	int depth = (int)rc->cap.max_send_wr;
	struct ibv_wc wc[64];

	rc_sync(rc);
	rc_step(rc, "post and reap %d fetch-and-adds on %d QPs", NQP * K, NQP);
	while (done < NQP * K) {
		for (int q = 0; q < NQP; q++) {
			while (posted[q] < K && outstanding[q] < depth) {
				uint64_t slot = (uint64_t)q * K + (uint64_t)posted[q];
				struct rc_wr w;

				rc_wr(rc, &w, IBV_WR_ATOMIC_FETCH_AND_ADD, slot, 64 + slot * 8, 8,
				      AOFF);
				w.wr.wr.atomic.compare_add = 1;
				rc_post_send(rc, q, &w.wr);
				posted[q]++;
				outstanding[q]++;
			}
		}
		int n = ibv_poll_cq(rc->scq, 64, wc);
		RC_CHECK(rc, n >= 0, "ibv_poll_cq: %d", n);
		if (n == 0) {
			/* Block briefly for one, with the harness's deadline. */
			rc_poll(rc, rc->scq, wc, 1, RC_WAIT_MS);
			n = 1;
		}
		for (int j = 0; j < n; j++) {
			rc_expect(rc, &wc[j], wc[j].wr_id, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
			RC_CHECK(rc, wc[j].wr_id < NQP * K, "stray wr_id %#llx",
				 (unsigned long long)wc[j].wr_id);
			outstanding[wc[j].wr_id / K]--;
			done++;
		}
	}
	rc_step(rc, "every original value returned exactly once");
	uint64_t *orig = malloc(NQP * K * sizeof(*orig));
	RC_CHECK(rc, orig, "malloc");
	memcpy(orig, rc->buf + 64, NQP * K * sizeof(*orig));
	qsort(orig, NQP * K, sizeof(*orig), cmp_u64);
	for (uint64_t j = 0; j < NQP * K; j++)
		RC_CHECK(rc, orig[j] == INITIAL + j,
			 "sorted originals[%llu] is %#llx, expected %#llx (%s)",
			 (unsigned long long)j, (unsigned long long)orig[j],
			 (unsigned long long)(INITIAL + j),
			 j && orig[j] == orig[j - 1] ? "duplicate" : "gap");
	free(orig);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_atomic_contention");

	o.nqp = NQP;
	o.buf_size = RC_MIB;
	o.sq_depth = 64;
	return rc_run(&o, server, client);
}
