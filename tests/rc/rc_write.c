/* rc_write: RDMA WRITE (or, with --imm, WRITE_WITH_IMM) of every size lands intact at the
 * remote address and nowhere else. A plain WRITE consumes no receive WR and makes no responder
 * completion; WRITE_WITH_IMM consumes one and completes it as RECV_RDMA_WITH_IMM with
 * byte_len = the write's length and the immediate. */
#include "rc_harness.h"

#include <arpa/inet.h>
#include <string.h>

#define ROFF 7 /* odd remote offset: the responder must honour remote_addr exactly */

static bool with_imm;

static uint32_t imm_of(int i)
{
	return htonl(0xabc00000u + (uint32_t)i);
}

static int server(struct rc *rc)
{
	size_t sizes[RC_NSIZES];
	int n = rc_sizes(rc, rc->o.buf_size - RC_GUARD - ROFF, sizes);
	size_t last = rc->o.buf_size - RC_GUARD; /* small region for the closing SEND */

	if (!with_imm)
		rc_post_recv(rc, 0, 0x77, last, RC_GUARD); /* must survive every plain WRITE */
	for (int i = 0; i < n; i++) {
		size_t len = sizes[i];
		struct ibv_wc wc;

		rc_step(rc, "be written %zu bytes", len);
		memset(rc->buf, RC_CANARY, ROFF + len + RC_GUARD);
		if (with_imm)
			rc_post_recv(rc, 0, 0x100 + i, 0, 0); /* no SGE: data goes to the MR */
		rc_sync(rc);
		if (with_imm) {
			rc_wait(rc, rc->rcq, 0x100 + i, IBV_WC_RECV_RDMA_WITH_IMM, &wc);
			RC_CHECK(rc, wc.byte_len == len,
				 "byte_len %u, expected the write length %zu", wc.byte_len, len);
			RC_CHECK(rc, wc.wc_flags & IBV_WC_WITH_IMM, "IBV_WC_WITH_IMM not set");
			RC_CHECK(rc, wc.imm_data == imm_of(i), "imm_data %#x, expected %#x",
				 wc.imm_data, imm_of(i));
			RC_CHECK(rc, wc.qp_num == rc->qp[0]->qp_num, "qp_num %#x", wc.qp_num);
		}
		rc_sync(rc); /* the client saw its completion */
		if (!with_imm)
			rc_expect_empty(rc, rc->rcq, 0);
		rc_check_const(rc, rc->buf, ROFF, RC_CANARY, "bytes before the target");
		rc_check(rc, rc->buf + ROFF, len, 2000 + (uint32_t)i, "written data");
		rc_check_const(rc, rc->buf + ROFF + len, RC_GUARD, RC_CANARY,
			       "bytes past the target");
	}
	if (!with_imm) {
		rc_step(rc, "the receive posted first is still there");
		rc_sync(rc);
		rc_wait(rc, rc->rcq, 0x77, IBV_WC_RECV, NULL);
	}
	rc_expect_empty(rc, rc->rcq, 10);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	size_t sizes[RC_NSIZES];
	int n = rc_sizes(rc, rc->o.buf_size - RC_GUARD - ROFF, sizes);

	for (int i = 0; i < n; i++) {
		size_t len = sizes[i];
		struct rc_wr w;

		rc_step(rc, "write %zu bytes", len);
		rc_fill(rc->buf, len, 2000 + (uint32_t)i);
		rc_wr(rc, &w, with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, 0x200 + i,
		      0, len, ROFF);
		w.wr.imm_data = imm_of(i);
		rc_sync(rc);
		rc_post_send(rc, 0, &w.wr);
		rc_wait(rc, rc->scq, 0x200 + i, IBV_WC_RDMA_WRITE, NULL);
		rc_sync(rc);
	}
	if (!with_imm) {
		struct rc_wr w;

		rc_step(rc, "closing SEND");
		rc_wr(rc, &w, IBV_WR_SEND, 0x300, 0, 1, 0);
		rc_sync(rc);
		rc_post_send(rc, 0, &w.wr);
		rc_wait(rc, rc->scq, 0x300, IBV_WC_SEND, NULL);
	}
	return RC_PASS;
}

int main(int argc, char **argv)
{
	with_imm = argc > 1 && strcmp(argv[1], "--imm") == 0;
	struct rc_opts o = rc_defaults(with_imm ? "rc_write_imm" : "rc_write");

	return rc_run(&o, server, client);
}
