/* rc_inline: IBV_SEND_INLINE SENDs and WRITEs of 1 .. max_inline_data bytes arrive intact even
 * though the source is unregistered (its lkey is not checked, ibv_post_send(3)) and is
 * overwritten right after ibv_post_send returns. */
#include "rc_harness.h"

#include <stdlib.h>
#include <string.h>

#define ROFF 3

static int nsizes(struct rc *rc, size_t *s)
{
	size_t max = rc->cap.max_inline_data;
	size_t all[] = {1, 2, 7, max / 2 + 1, max - 1, max};
	int n = 0;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i] >= 1 && all[i] <= max && (n == 0 || all[i] > s[n - 1]))
			s[n++] = all[i];
	return n;
}

static int server(struct rc *rc)
{
	int n = (int)rc_get(rc);

	for (int i = 0; i < n; i++) {
		size_t len = rc_get(rc);
		struct ibv_wc wc;

		rc_step(rc, "inline SEND of %zu bytes", len);
		memset(rc->buf, RC_CANARY, ROFF + len + RC_GUARD);
		rc_post_recv(rc, 0, 0x100 + i, 0, len + RC_GUARD);
		rc_sync(rc);
		rc_wait(rc, rc->rcq, 0x100 + i, IBV_WC_RECV, &wc);
		RC_CHECK(rc, wc.byte_len == len, "byte_len %u, expected %zu", wc.byte_len, len);
		rc_check(rc, rc->buf, len, 5000 + (uint32_t)i, "inline SEND data");
		rc_check_const(rc, rc->buf + len, RC_GUARD, RC_CANARY, "bytes past the SEND");

		rc_step(rc, "inline WRITE of %zu bytes", len);
		memset(rc->buf, RC_CANARY, ROFF + len + RC_GUARD);
		rc_sync(rc);
		rc_sync(rc);
		rc_check_const(rc, rc->buf, ROFF, RC_CANARY, "bytes before the WRITE");
		rc_check(rc, rc->buf + ROFF, len, 6000 + (uint32_t)i, "inline WRITE data");
		rc_check_const(rc, rc->buf + ROFF + len, RC_GUARD, RC_CANARY,
			       "bytes past the WRITE");
	}
	return RC_PASS;
}

static void post_inline(struct rc *rc, uint8_t *src, size_t len, enum ibv_wr_opcode op,
			uint64_t wr_id, uint32_t seed)
{
	struct ibv_sge sge = {.addr = (uintptr_t)src, .length = (uint32_t)len, .lkey = 0xbadc0de};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};

	wr.wr.rdma.remote_addr = rc->peer.addr + ROFF;
	wr.wr.rdma.rkey = rc->peer.rkey;
	rc_fill(src, len, seed);
	rc_post_send(rc, 0, &wr);
	memset(src, 0x3c, len); /* the data was copied at post time */
	rc_wait(rc, rc->scq, wr_id, op == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE, NULL);
}

static int client(struct rc *rc)
{
	size_t s[8];
	int n;
	uint8_t *src;

	if (rc->cap.max_inline_data == 0) {
		rc_put(rc, 0);
		return RC_SKIP;
	}
	n = nsizes(rc, s);
	src = malloc(rc->cap.max_inline_data);
	RC_CHECK(rc, src, "malloc");
	rc_put(rc, (uint64_t)n);
	for (int i = 0; i < n; i++) {
		rc_put(rc, s[i]);
		rc_step(rc, "inline SEND of %zu bytes (max_inline_data %u)", s[i],
			rc->cap.max_inline_data);
		rc_sync(rc);
		post_inline(rc, src, s[i], IBV_WR_SEND, 0x200 + i, 5000 + (uint32_t)i);
		rc_step(rc, "inline WRITE of %zu bytes", s[i]);
		rc_sync(rc);
		post_inline(rc, src, s[i], IBV_WR_RDMA_WRITE, 0x300 + i, 6000 + (uint32_t)i);
		rc_sync(rc);
	}
	free(src);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_inline");

	o.max_inline = 256;
	o.buf_size = RC_MIB;
	return rc_run(&o, server, client);
}
