/* uc_data: on UC, SEND, SEND_WITH_IMM, RDMA WRITE and WRITE_WITH_IMM of every size arrive byte
 * for byte (loopback loses nothing), completions carry the right opcode and length, and READ
 * and atomics are refused at post time (UC has neither). Sizes stop at 1 MiB: UC has no
 * retransmission, and a 64 MiB message is 16384 datagrams with no flow control, which a loaded
 * receiver may legitimately lose in part (and UC then drops the whole message). */
#include "rc_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#define OPS 4
static const enum ibv_wr_opcode ops[OPS] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
					    IBV_WR_RDMA_WRITE_WITH_IMM};

static const char *const op_names[OPS] = {"SEND", "SEND_WITH_IMM", "RDMA_WRITE",
					  "RDMA_WRITE_WITH_IMM"};
#define UC_MAX_SIZE (RC_MIB + 1)

static bool is_write(int op)
{
	return ops[op] == IBV_WR_RDMA_WRITE || ops[op] == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static bool has_imm(int op)
{
	return ops[op] == IBV_WR_SEND_WITH_IMM || ops[op] == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static uint32_t seed_of(int op, int i)
{
	return 5000u + (uint32_t)(op * 16 + i);
}

static int server(struct rc *rc)
{
	size_t sizes[RC_NSIZES];
	int n = rc_sizes(rc, UC_MAX_SIZE, sizes);

	for (int op = 0; op < OPS; op++) {
		for (int i = 0; i < n; i++) {
			size_t len = sizes[i];
			struct ibv_wc wc;

			rc_step(rc, "receive %s of %zu bytes", op_names[op], len);
			memset(rc->buf, RC_CANARY, len + RC_GUARD);
			if (!is_write(op) || has_imm(op))
				rc_post_recv(rc, 0, 0x100 + i, 0, is_write(op) ? 0 : len);
			else /* a 0-byte SEND follows the WRITE: same QP, so it lands after it */
				rc_post_recv(rc, 0, 0x900 + i, 0, 0);
			rc_sync(rc);
			rc_sync(rc); /* sent */
			if (!is_write(op) || has_imm(op)) {
				rc_poll(rc, rc->rcq, &wc, 1, RC_WAIT_MS);
				rc_expect(rc, &wc, 0x100 + i, IBV_WC_SUCCESS,
					  is_write(op) ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV);
				RC_CHECK(rc, wc.byte_len == len, "byte_len %u, expected %zu",
					 wc.byte_len, len);
				RC_CHECK(rc, !has_imm(op) || wc.imm_data == htonl(seed_of(op, i)),
					 "imm_data %#x", wc.imm_data);
			} else {
				rc_wait(rc, rc->rcq, 0x900 + i, IBV_WC_RECV, NULL);
			}
			rc_check(rc, rc->buf, len, seed_of(op, i), "data");
			rc_check_const(rc, rc->buf + len, RC_GUARD, RC_CANARY, "bytes past it");
			rc_sync(rc);
		}
	}
	return RC_PASS;
}

static int client(struct rc *rc)
{
	size_t sizes[RC_NSIZES];
	int n = rc_sizes(rc, UC_MAX_SIZE, sizes);
	struct rc_wr w;
	struct ibv_send_wr *bad;

	rc_step(rc, "READ and atomics are refused on UC");
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 1, 0, 8, 0);
	rc_expect_errno(rc, ibv_post_send(rc->qp[0], &w.wr, &bad), EINVAL, "post READ on UC");
	rc_wr(rc, &w, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, 8, 0);
	rc_expect_errno(rc, ibv_post_send(rc->qp[0], &w.wr, &bad), EINVAL, "post FADD on UC");
	for (int op = 0; op < OPS; op++) {
		for (int i = 0; i < n; i++) {
			size_t len = sizes[i];

			rc_step(rc, "%s of %zu bytes", op_names[op], len);
			rc_fill(rc->buf, len, seed_of(op, i));
			rc_wr(rc, &w, ops[op], 0x200 + i, 0, len, 0);
			w.wr.imm_data = htonl(seed_of(op, i));
			rc_sync(rc);
			rc_post_send(rc, 0, &w.wr);
			rc_wait(rc, rc->scq, 0x200 + i,
				is_write(op) ? IBV_WC_RDMA_WRITE : IBV_WC_SEND, NULL);
			if (is_write(op) && !has_imm(op)) {
				rc_wr(rc, &w, IBV_WR_SEND, 0x300 + i, 0, 0, 0);
				rc_post_send(rc, 0, &w.wr);
				rc_wait(rc, rc->scq, 0x300 + i, IBV_WC_SEND, NULL);
			}
			rc_sync(rc);
			rc_sync(rc);
		}
	}
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("uc_data");

	o.uc = true;
	o.buf_size = 2 * RC_MIB;
	return rc_run(&o, server, client);
}
