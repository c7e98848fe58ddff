/* rc_shm_direct: between ring peers, an RDMA WRITE or READ into the responder's registered
 * memory is one-sided: the requester's thread checks it against the responder's board and copies
 * it, and it needs no CPU of the responder's. Here the server is stopped (SIGSTOP) while the
 * client WRITEs 4 KiB and 1 MiB, READs 64 KiB, and makes a fetch-and-add and a compare-and-swap:
 * all complete while it is stopped, and the bytes are checked byte for byte once it runs again
 * (with URNIC_SHM_DIRECT=0 none completes while it is stopped). Cases where the responder would refuse go by packets, and get the
 * responder's answer:
 * - dereg: after a first WRITE went one-sided (the server's pages are mapped), the server
 *   deregisters its MR (and registers the same pages again, under a new key): a WRITE with the
 *   old key completes with IBV_WC_REM_ACCESS_ERR and writes nothing;
 * - qp_error: the same, with the server's QP moved to the error state: the WRITE lands nowhere
 *   and completes with IBV_WC_RETRY_EXC_ERR (a QP in error drops requests silently, as the
 *   wire's does). */
#include "rc_harness.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"

#define SMALL 4096u
#define LARGE RC_MIB
#define READ_LEN (64u << 10)
#define READ_AT (2 * RC_MIB) /* where the server's bytes the client READs are */
#define ATOMIC_AT (READ_AT + READ_LEN) /* the server's 8-byte counter */
#define ATOMIC_SINK (ATOMIC_AT + 64)	/* where the client's original values land */
#define COUNTER0 1000u
#define ADD 5u
#define SWAP 77u
#define BUF (3 * RC_MIB)

enum { CASE_STOPPED, CASE_DEREG, CASE_QP_ERROR, NCASES };
static int c;

/* The server takes its MR or its QP away from the client (CASE_DEREG, CASE_QP_ERROR). */
static void refuse(struct rc *rc)
{
	if (c == CASE_DEREG) {
		rc_step(rc, "deregister the MR, register its pages again under a new key");
		RC_CHECK(rc, ibv_dereg_mr(rc->mr) == 0, "ibv_dereg_mr");
		rc->mr = ibv_reg_mr(rc->pd, rc->buf, BUF,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					    IBV_ACCESS_REMOTE_READ);
		RC_CHECK(rc, rc->mr != NULL, "ibv_reg_mr again");
	} else {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

		rc_step(rc, "move the QP to the error state");
		rc_modify(rc, rc->qp[0], &a, IBV_QP_STATE);
	}
}

static int server(struct rc *rc)
{
	memset(rc->buf, 0, BUF);
	rc_fill(rc->buf + READ_AT, READ_LEN, 41);
	*(uint64_t *)(void *)(rc->buf + ATOMIC_AT) = COUNTER0;
	rc_sync(rc);
	rc_sync(rc); /* the client's first operations are done */
	if (c != CASE_STOPPED)
		refuse(rc);
	rc_sync(rc);
	rc_sync(rc); /* the client is done */
	if (c == CASE_STOPPED) {
		rc_step(rc, "check what was written while stopped");
		rc_check(rc, rc->buf, SMALL, 31, "the 4 KiB WRITE");
		rc_check(rc, rc->buf + SMALL, LARGE, 37, "the 1 MiB WRITE");
		RC_CHECK(rc, *(uint64_t *)(void *)(rc->buf + ATOMIC_AT) == SWAP,
			 "the counter after fetch-and-add and compare-and-swap: %llu, want %u",
			 (unsigned long long)*(uint64_t *)(void *)(rc->buf + ATOMIC_AT), SWAP);
	} else {
		rc_check(rc, rc->buf, SMALL, 31, "the WRITE before the refusal");
		rc_check_const(rc, rc->buf + SMALL, SMALL, 0, "memory the refused WRITE targeted");
	}
	rc_check_const(rc, rc->buf + BUF, RC_GUARD, RC_CANARY, "bytes past the MR");
	rc_sync(rc);
	return RC_PASS;
}

static void client_stopped(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct ibv_wc wc[5];
	struct rc_wr w[5];
	uint64_t *sink = (uint64_t *)(void *)(rc->buf + ATOMIC_SINK);
	static const int wc_op[5] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
				     IBV_WC_FETCH_ADD, IBV_WC_COMP_SWAP};

	rc_fill(rc->buf, SMALL, 31);
	rc_fill(rc->buf + SMALL, LARGE, 37);
	memset(rc->buf + READ_AT, 0, READ_LEN);
	rc_read_counters(rc, before);
	rc_step(rc, "stop the server; WRITE 4 KiB and 1 MiB, READ 64 KiB, add, swap");
	rc_stop_peer(rc);
	rc_wr(rc, &w[0], IBV_WR_RDMA_WRITE, 1, 0, SMALL, 0);
	rc_wr(rc, &w[1], IBV_WR_RDMA_WRITE, 2, SMALL, LARGE, SMALL);
	rc_wr(rc, &w[2], IBV_WR_RDMA_READ, 3, READ_AT, READ_LEN, READ_AT);
	rc_wr(rc, &w[3], IBV_WR_ATOMIC_FETCH_AND_ADD, 4, ATOMIC_SINK, 8, ATOMIC_AT);
	w[3].wr.wr.atomic.compare_add = ADD;
	rc_wr(rc, &w[4], IBV_WR_ATOMIC_CMP_AND_SWP, 5, ATOMIC_SINK + 8, 8, ATOMIC_AT);
	w[4].wr.wr.atomic.compare_add = COUNTER0 + ADD;
	w[4].wr.wr.atomic.swap = SWAP;
	for (int i = 0; i < 5; i++) {
		rc_post_send(rc, 0, &w[i].wr);
		rc_poll(rc, rc->scq, &wc[i], 1, 2000); /* the server cannot answer */
		rc_expect(rc, &wc[i], (uint64_t)i + 1, IBV_WC_SUCCESS, wc_op[i]);
	}
	rc_check(rc, rc->buf + READ_AT, READ_LEN, 41, "the READ's bytes");
	RC_CHECK(rc, sink[0] == COUNTER0 && sink[1] == COUNTER0 + ADD,
		 "original values %llu and %llu, want %u and %u", (unsigned long long)sink[0],
		 (unsigned long long)sink[1], COUNTER0, COUNTER0 + ADD);
	rc_read_counters(rc, after);
	RC_CHECK(rc, kill(rc->child, SIGCONT) == 0, "SIGCONT the server");
	rc_step(rc, "count: %llu one-sided WRITEs, %llu READs, %llu atomics, %llu bytes, %llu "
		"packets sent",
		(unsigned long long)(after[URNIC_C_direct_writes] - before[URNIC_C_direct_writes]),
		(unsigned long long)(after[URNIC_C_direct_reads] - before[URNIC_C_direct_reads]),
		(unsigned long long)(after[URNIC_C_direct_atomics] - before[URNIC_C_direct_atomics]),
		(unsigned long long)(after[URNIC_C_direct_bytes] - before[URNIC_C_direct_bytes]),
		(unsigned long long)(after[URNIC_C_tx_packets] - before[URNIC_C_tx_packets]));
	RC_CHECK(rc, after[URNIC_C_direct_writes] - before[URNIC_C_direct_writes] == 2 &&
			     after[URNIC_C_direct_reads] - before[URNIC_C_direct_reads] == 1 &&
			     after[URNIC_C_direct_atomics] - before[URNIC_C_direct_atomics] == 2 &&
			     after[URNIC_C_direct_bytes] - before[URNIC_C_direct_bytes] ==
				     SMALL + LARGE + READ_LEN + 16,
		 "the counters miss the one-sided operations");
}

static uint64_t one_sided(const uint64_t *before, const uint64_t *after)
{
	return after[URNIC_C_direct_writes] - before[URNIC_C_direct_writes];
}

/* A WRITE goes one-sided first (the client now has the server's pages mapped), then the server
 * refuses, and the next WRITE, to the next 4 KiB, gets the responder's answer, not the pages. */
static void client_refused(struct rc *rc, bool refused)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	enum ibv_wc_status want = c == CASE_DEREG ? IBV_WC_REM_ACCESS_ERR : IBV_WC_RETRY_EXC_ERR;
	struct ibv_wc wc;
	struct rc_wr w;

	rc_fill(rc->buf, 2 * SMALL, 31);
	rc_read_counters(rc, before);
	rc_step(rc, refused ? "WRITE 4 KiB where the responder refuses it" : "WRITE 4 KiB");
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, refused ? 9 : 8, refused ? SMALL : 0, SMALL,
	      refused ? SMALL : 0);
	rc_post_send(rc, 0, &w.wr);
	rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
	rc_expect(rc, &wc, refused ? 9 : 8, refused ? want : IBV_WC_SUCCESS, -1);
	rc_read_counters(rc, after);
	RC_CHECK(rc, one_sided(before, after) == (refused ? 0 : 1),
		 refused ? "a WRITE the responder refuses went one-sided"
			 : "the WRITE before the refusal did not go one-sided");
}

static int client(struct rc *rc)
{
	rc_sync(rc);
	if (c == CASE_STOPPED)
		client_stopped(rc);
	else
		client_refused(rc, false);
	rc_sync(rc);
	rc_sync(rc); /* the server has refused */
	if (c != CASE_STOPPED)
		client_refused(rc, true);
	rc_sync(rc);
	rc_sync(rc);
	return RC_PASS;
}

static void adjust(struct rc_opts *o, int k)
{
	if (k == CASE_QP_ERROR) { /* 4.096 us * 2^12 = 17 ms, twice */
		o->timeout = 12;
		o->retry_cnt = 1;
	}
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_shm_direct");

	setenv("URNIC_TEST_PATH", "shm", 1);
	setenv("URNIC_SHM", "1", 1);
	o.buf_size = BUF;
	o.alarm_s = 30;
	return rc_run_cases(&o, NCASES, &c, adjust, server, client);
}
