/* rc_fence: a SEND posted with IBV_SEND_FENCE right behind an RDMA READ, gathering from the
 * READ's destination, carries the data the READ brought (the fence holds the SEND until the
 * READ completed). The pattern changes every iteration, so stale bytes show. */
#include "rc_harness.h"

#include <string.h>

#define ITERS 10
#define RECV_OFF (4 * RC_MIB)

static size_t len_of(struct rc *rc, int s)
{
	const size_t lens[] = {1, rc->mtu + 1, RC_MIB};

	return lens[s];
}

static uint32_t seed(int s, int it)
{
	return 9000 + (uint32_t)(s * 100 + it);
}

static int server(struct rc *rc)
{
	for (int s = 0; s < 3; s++) {
		for (int it = 0; it < ITERS; it++) {
			size_t len = len_of(rc, s);
			struct ibv_wc wc;

			rc_step(rc, "%zu bytes, iteration %d", len, it);
			rc_fill(rc->buf, len, seed(s, it));
			memset(rc->buf + RECV_OFF, RC_CANARY, len);
			rc_post_recv(rc, 0, 0x100, RECV_OFF, len);
			rc_sync(rc);
			rc_wait(rc, rc->rcq, 0x100, IBV_WC_RECV, &wc);
			RC_CHECK(rc, wc.byte_len == len, "byte_len %u, expected %zu", wc.byte_len,
				 len);
			rc_check(rc, rc->buf + RECV_OFF, len, seed(s, it),
				 "fenced SEND data (must be what the READ fetched)");
			rc_sync(rc);
		}
	}
	return RC_PASS;
}

static int client(struct rc *rc)
{
	for (int s = 0; s < 3; s++) {
		for (int it = 0; it < ITERS; it++) {
			size_t len = len_of(rc, s);
			struct rc_wr rd, snd;
			struct ibv_wc wc[2];

			rc_step(rc, "%zu bytes, iteration %d", len, it);
			memset(rc->buf, RC_CANARY, len);
			rc_wr(rc, &rd, IBV_WR_RDMA_READ, 1, 0, len, 0);
			rc_wr(rc, &snd, IBV_WR_SEND, 2, 0, len, 0);
			snd.wr.send_flags |= IBV_SEND_FENCE;
			rd.wr.next = &snd.wr;
			rc_sync(rc);
			rc_post_send(rc, 0, &rd.wr);
			rc_poll(rc, rc->scq, wc, 2, RC_WAIT_MS);
			rc_expect(rc, &wc[0], 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
			rc_expect(rc, &wc[1], 2, IBV_WC_SUCCESS, IBV_WC_SEND);
			rc_check(rc, rc->buf, len, seed(s, it), "read data");
			rc_sync(rc);
		}
	}
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_fence");

	o.buf_size = 8 * RC_MIB;
	return rc_run(&o, server, client);
}
