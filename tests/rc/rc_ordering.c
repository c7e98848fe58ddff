/* rc_ordering: a long seeded mix of WRITE, SEND, READ and FETCH_ADD posted as one chain
 * completes in post order with the right opcodes; the responder executes them in order (the
 * fetch-and-adds return consecutive values, the SENDs arrive in order) and every byte moved is
 * right. */
#include "rc_harness.h"

#include <string.h>

#define NOPS 200
#define STRIDE ((size_t)128 * 1024)
#define AOFF (NOPS * STRIDE) /* the shared counter */
#define INITIAL 0x0000000100000000ull
#define ADD 3

enum op { OP_WRITE, OP_SEND, OP_READ, OP_FADD };

struct step {
	enum op op;
	size_t len;
};

static struct step plan[NOPS];

static void make_plan(struct rc *rc)
{
	const size_t lens[] = {1, rc->mtu - 1, rc->mtu + 1, 3 * (size_t)rc->mtu + 5, 65537};
	uint32_t x = 20240601;

	for (int i = 0; i < NOPS; i++) {
		x = x * 1103515245u + 12345u;
		plan[i].op = (enum op)((x >> 16) % 4);
		plan[i].len = plan[i].op == OP_FADD ? 8 : lens[(x >> 8) % 5];
	}
}

static uint32_t seed(int i)
{
	return 8000 + (uint32_t)i;
}

static int server(struct rc *rc)
{
	int nfadd = 0;

	make_plan(rc);
	rc_step(rc, "prepare regions and receives");
	memset(rc->buf, RC_CANARY, AOFF);
	for (int i = 0; i < NOPS; i++) {
		if (plan[i].op == OP_READ)
			rc_fill(rc->buf + i * STRIDE, plan[i].len, seed(i));
		if (plan[i].op == OP_SEND)
			rc_post_recv(rc, 0, (uint64_t)i, i * STRIDE, STRIDE);
		nfadd += plan[i].op == OP_FADD;
	}
	uint64_t v = INITIAL;
	memcpy(rc->buf + AOFF, &v, 8);
	rc_sync(rc);

	for (int i = 0; i < NOPS; i++) {
		struct ibv_wc wc;

		if (plan[i].op != OP_SEND)
			continue;
		rc_step(rc, "receive SEND #%d in order", i);
		rc_wait(rc, rc->rcq, (uint64_t)i, IBV_WC_RECV, &wc);
		RC_CHECK(rc, wc.byte_len == plan[i].len, "byte_len %u, expected %zu", wc.byte_len,
			 plan[i].len);
	}
	rc_sync(rc); /* the client has every completion */

	for (int i = 0; i < NOPS; i++) {
		uint8_t *p = rc->buf + i * STRIDE;

		rc_step(rc, "op #%d (%d, %zu bytes) on the responder", i, plan[i].op, plan[i].len);
		if (plan[i].op == OP_WRITE || plan[i].op == OP_SEND || plan[i].op == OP_READ) {
			rc_check(rc, p, plan[i].len, seed(i), "data");
			rc_check_const(rc, p + plan[i].len, 64, RC_CANARY, "bytes past the data");
		}
	}
	memcpy(&v, rc->buf + AOFF, 8);
	RC_CHECK(rc, v == INITIAL + (uint64_t)nfadd * ADD, "counter %#llx after %d adds",
		 (unsigned long long)v, nfadd);
	return RC_PASS;
}

static struct rc_wr wrs[NOPS];
static struct ibv_wc wcs[NOPS];

static int client(struct rc *rc)
{
	static const enum ibv_wr_opcode wr_op[] = {IBV_WR_RDMA_WRITE, IBV_WR_SEND, IBV_WR_RDMA_READ,
						   IBV_WR_ATOMIC_FETCH_AND_ADD};
	static const int wc_op[] = {IBV_WC_RDMA_WRITE, IBV_WC_SEND, IBV_WC_RDMA_READ,
				    IBV_WC_FETCH_ADD};

	make_plan(rc);
	rc_step(rc, "build the chain");
	for (int i = 0; i < NOPS; i++) {
		uint8_t *p = rc->buf + i * STRIDE;

		if (plan[i].op == OP_WRITE || plan[i].op == OP_SEND)
			rc_fill(p, plan[i].len, seed(i));
		else
			memset(p, RC_CANARY, plan[i].len + 64);
		rc_wr(rc, &wrs[i], wr_op[plan[i].op], (uint64_t)i, i * STRIDE, plan[i].len,
		      plan[i].op == OP_FADD ? AOFF : i * STRIDE);
		if (plan[i].op == OP_FADD) /* wr.atomic overlays wr.rdma: set it for atomics only */
			wrs[i].wr.wr.atomic.compare_add = ADD;
		if (i)
			wrs[i - 1].wr.next = &wrs[i].wr;
	}
	rc_sync(rc);
	rc_step(rc, "post %d WRs back to back and reap them", NOPS);
	rc_post_send(rc, 0, &wrs[0].wr);
	rc_poll(rc, rc->scq, wcs, NOPS, RC_WAIT_MS);

	uint64_t next_orig = INITIAL;
	for (int i = 0; i < NOPS; i++) {
		uint8_t *p = rc->buf + i * STRIDE;

		rc_step(rc, "completion #%d (%s, %zu bytes)", i,
			rc_wc_opcode_str(wc_op[plan[i].op]), plan[i].len);
		rc_expect(rc, &wcs[i], (uint64_t)i, IBV_WC_SUCCESS, wc_op[plan[i].op]);
		if (plan[i].op == OP_READ) {
			rc_check(rc, p, plan[i].len, seed(i), "read data");
			rc_check_const(rc, p + plan[i].len, 64, RC_CANARY, "bytes past the read");
		} else if (plan[i].op == OP_FADD) {
			uint64_t orig;

			memcpy(&orig, p, 8);
			RC_CHECK(rc, orig == next_orig,
				 "fetch-and-add returned %#llx, expected %#llx",
				 (unsigned long long)orig, (unsigned long long)next_orig);
			next_orig += ADD;
		}
	}
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_ordering");

	o.sq_depth = 256;
	o.rq_depth = 256;
	o.buf_size = AOFF + RC_MIB;
	return rc_run(&o, server, client);
}
