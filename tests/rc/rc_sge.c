/* rc_sge: a SEND gathered from the QP's maximum number of SGEs, of odd lengths at odd
 * addresses, arrives as one message scattered over the receiver's maximum number of SGEs of
 * other odd lengths: the concatenations match byte for byte and the gaps stay untouched. */
#include "rc_harness.h"

#include <stdlib.h>
#include <string.h>

enum { SMALL, STRADDLE, LARGE, NROUNDS };

static uint32_t piece_len(struct rc *rc, int round, int k)
{
	switch (round) {
	case SMALL:
		return 2u * (uint32_t)k + 1;
	case STRADDLE:
		return k % 2 ? rc->mtu + 1 : rc->mtu - 1;
	default: {
		/* Large pieces, kept within 16 MiB in all whatever the SGE count. */
		uint32_t big = (uint32_t)(16 * RC_MIB / (size_t)rc->cap.max_send_sge);

		return (big > 65535u ? 65535u : big | 1u) + 2u * (uint32_t)k;
	}
	}
}

static int client(struct rc *rc)
{
	int n = (int)rc->cap.max_send_sge;
	struct ibv_sge *sge = calloc((size_t)n, sizeof(*sge));

	RC_CHECK(rc, sge, "calloc");
	for (int round = 0; round < NROUNDS; round++) {
		size_t off = 1, total = 0;

		rc_step(rc, "round %d: gather from %d SGEs", round, n);
		for (int k = 0; k < n; k++) {
			uint32_t len = piece_len(rc, round, k);

			RC_CHECK(rc, off + len < rc->o.buf_size, "round %d does not fit", round);
			sge[k] = (struct ibv_sge){.addr = (uintptr_t)(rc->buf + off),
						  .length = len,
						  .lkey = rc->mr->lkey};
			rc_fill_from(rc->buf + off, len, 4000 + (uint32_t)round, total);
			total += len;
			off +=
			    len + 3 + (size_t)(k % 5) * 2; /* odd gaps keep every piece unaligned */
		}
		struct ibv_send_wr wr = {.wr_id = 0x100 + (uint64_t)round,
					 .sg_list = sge,
					 .num_sge = n,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED};
		rc_put(rc, total);
		rc_sync(rc); /* the receive is posted */
		rc_post_send(rc, 0, &wr);
		rc_wait(rc, rc->scq, wr.wr_id, IBV_WC_SEND, NULL);
		rc_sync(rc);
	}
	free(sge);
	return RC_PASS;
}

static int server(struct rc *rc)
{
	int n = (int)rc->cap.max_recv_sge;
	struct ibv_sge *sge = calloc((size_t)n, sizeof(*sge));

	RC_CHECK(rc, sge, "calloc");
	for (int round = 0; round < NROUNDS; round++) {
		size_t total = rc_get(rc), base = total / (size_t)n | 1, off = 2;
		struct ibv_recv_wr *bad,
		    wr = {.wr_id = 0x200 + (uint64_t)round, .sg_list = sge, .num_sge = n};
		struct ibv_wc wc;

		rc_step(rc, "round %d: scatter %zu bytes over %d SGEs", round, total, n);
		memset(rc->buf, RC_CANARY, rc->o.buf_size);
		/* Odd lengths that differ from the sender's; the last SGE takes what is left of
		 * the message plus a little slack, so the capacity is the message + 9 bytes. */
		size_t need = total + 9;
		for (int k = 0; k < n; k++) {
			size_t len = base + 2 * (size_t)(k % 3);

			if (k == n - 1 || len > need)
				len = need;
			if (len == 0)
				len = 1;
			need -= len < need ? len : need;
			sge[k] = (struct ibv_sge){.addr = (uintptr_t)(rc->buf + off),
						  .length = (uint32_t)len,
						  .lkey = rc->mr->lkey};
			off += len + 5;
		}
		RC_CHECK(rc, off < rc->o.buf_size, "round %d does not fit", round);
		int r = ibv_post_recv(rc->qp[0], &wr, &bad);
		RC_CHECK(rc, r == 0, "ibv_post_recv with %d SGEs: %s", n, strerror(r));
		rc_sync(rc);
		rc_wait(rc, rc->rcq, wr.wr_id, IBV_WC_RECV, &wc);
		RC_CHECK(rc, wc.byte_len == total, "byte_len %u, expected %zu", wc.byte_len, total);

		size_t at = 0;
		uint8_t *prev_end = rc->buf;
		for (int k = 0; k < n; k++) {
			uint8_t *p = (uint8_t *)(uintptr_t)sge[k].addr;
			size_t len = sge[k].length, data = at < total ? total - at : 0;

			if (data > len)
				data = len;
			rc_check_const(rc, prev_end, (size_t)(p - prev_end), RC_CANARY,
				       "gap between SGEs");
			rc_check_from(rc, p, data, 4000 + (uint32_t)round, at, "scattered data");
			rc_check_const(rc, p + data, len - data, RC_CANARY,
				       "SGE bytes past the message");
			at += data;
			prev_end = p + len;
		}
		rc_check_const(rc, prev_end, 64, RC_CANARY, "bytes after the last SGE");
		rc_sync(rc);
	}
	free(sge);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_sge");

	o.max_sge = RC_DEVICE_MAX;
	o.buf_size = 40 * RC_MIB;
	return rc_run(&o, server, client);
}
