/* rc_send: SEND (or, with --imm, SEND_WITH_IMM) of every size lands intact and the receive
 * completion describes it: opcode RECV, byte_len, qp_num, src_qp, wr_id, and the immediate. */
#include "rc_harness.h"

#include <arpa/inet.h>
#include <string.h>

static bool with_imm;

static uint32_t imm_of(int i)
{
	return htonl(0x5eed0000u + (uint32_t)i);
}

static int server(struct rc *rc)
{
	size_t sizes[RC_NSIZES];
	int n = rc_sizes(rc, rc->o.buf_size - RC_GUARD, sizes);

	for (int i = 0; i < n; i++) {
		size_t len = sizes[i];
		struct ibv_wc wc;

		rc_step(rc, "receive %zu bytes", len);
		memset(rc->buf, RC_CANARY, len + RC_GUARD);
		/* The buffer is larger than the message: byte_len must say the message's length. */
		rc_post_recv(rc, 0, 0x100 + i, 0, len + RC_GUARD);
		rc_sync(rc);
		rc_wait(rc, rc->rcq, 0x100 + i, IBV_WC_RECV, &wc);
		RC_CHECK(rc, wc.byte_len == len, "byte_len %u, expected %zu", wc.byte_len, len);
		RC_CHECK(rc, wc.qp_num == rc->qp[0]->qp_num, "qp_num %#x, expected %#x", wc.qp_num,
			 rc->qp[0]->qp_num);
		/* ibv_poll_cq(3) documents src_qp for UD; urnic promises the peer's QPN for RC too.
		 */
		RC_CHECK(rc, wc.src_qp == rc->peer.qpn[0],
			 "src_qp %#x, expected the peer's QPN %#x", wc.src_qp, rc->peer.qpn[0]);
		if (with_imm) {
			RC_CHECK(rc, wc.wc_flags & IBV_WC_WITH_IMM,
				 "IBV_WC_WITH_IMM not set (flags %#x)", wc.wc_flags);
			/* imm_data is passed through in network order, untouched (ibv_poll_cq(3)).
			 */
			RC_CHECK(rc, wc.imm_data == imm_of(i), "imm_data %#x, expected %#x",
				 wc.imm_data, imm_of(i));
		} else {
			RC_CHECK(rc, !(wc.wc_flags & IBV_WC_WITH_IMM),
				 "IBV_WC_WITH_IMM set on a plain SEND (flags %#x)", wc.wc_flags);
		}
		rc_check(rc, rc->buf, len, 1000 + (uint32_t)i, "received data");
		rc_check_const(rc, rc->buf + len, RC_GUARD, RC_CANARY, "bytes past the message");
		rc_sync(rc);
	}
	rc_expect_empty(rc, rc->rcq, 10);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	size_t sizes[RC_NSIZES];
	int n = rc_sizes(rc, rc->o.buf_size - RC_GUARD, sizes);

	for (int i = 0; i < n; i++) {
		size_t len = sizes[i];
		struct rc_wr w;

		rc_step(rc, "send %zu bytes", len);
		rc_fill(rc->buf, len, 1000 + (uint32_t)i);
		rc_wr(rc, &w, with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, 0x200 + i, 0, len, 0);
		w.wr.imm_data = imm_of(i);
		rc_sync(rc); /* the receive is posted */
		rc_post_send(rc, 0, &w.wr);
		rc_wait(rc, rc->scq, 0x200 + i, IBV_WC_SEND, NULL);
		rc_sync(rc);
	}
	return RC_PASS;
}

int main(int argc, char **argv)
{
	with_imm = argc > 1 && strcmp(argv[1], "--imm") == 0;
	struct rc_opts o = rc_defaults(with_imm ? "rc_send_imm" : "rc_send");

	return rc_run(&o, server, client);
}
