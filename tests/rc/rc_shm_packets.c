/* rc_shm_packets: between ring peers an RC message travels in packets of URNIC_SHM_MTU, not of
 * the path MTU: a WRITE and a READ of each size take ceil(size / URNIC_SHM_MTU) packets (a zero-length
 * one takes one), counted at the requester, and land byte for byte, including sizes one byte
 * either side of a packet boundary. */
#include "rc_harness.h"

#include <stdlib.h>
#include <string.h>

#include "common/param.h"
#include "common/stats.h"

#define NSIZE 7
static const size_t sizes[NSIZE] = {
	1, URNIC_SHM_MTU - 1, URNIC_SHM_MTU, URNIC_SHM_MTU + 1, 3 * URNIC_SHM_MTU + 7, RC_MIB,
	RC_MIB + 5,
};
#define REGION (2 * RC_MIB) /* server: WRITE lands in [0, REGION), READ reads [REGION, 2 REGION) */

static uint64_t packets(size_t len)
{
	return len ? (len + URNIC_SHM_MTU - 1) / URNIC_SHM_MTU : 1;
}

static int server(struct rc *rc)
{
	rc_fill(rc->buf + REGION, REGION, 77);
	rc_sync(rc);
	for (int i = 0; i < NSIZE; i++) {
		rc_sync(rc); /* the WRITE of sizes[i] completed */
		rc_check(rc, rc->buf, sizes[i], 1000u + (uint32_t)i, "written data");
		rc_check_const(rc, rc->buf + sizes[i], REGION - sizes[i], 0, "past the WRITE");
		memset(rc->buf, 0, REGION);
		rc_sync(rc);
		rc_sync(rc); /* the READ completed: this side's counters are still when it returns */
	}
	return RC_PASS;
}

/* Posts one WR and checks its completion and how many packets the counter delta c shows; only
 * a floor if resent_before (the WR before it had packets sent again, so the peer may answer a
 * duplicate with an ACK that arrives now). Returns the packets resent. */
static uint64_t run_one(struct rc *rc, enum ibv_wr_opcode op, size_t len, enum urnic_counter c,
			uint64_t resent_before)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct rc_wr w;

	rc_read_counters(rc, before);
	rc_wr(rc, &w, op, len, 0, len, op == IBV_WR_RDMA_READ ? REGION : 0);
	rc_post_send(rc, 0, &w.wr);
	rc_wait(rc, rc->scq, len, op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE,
		NULL);
	rc_read_counters(rc, after);
	uint64_t got = after[c] - before[c];
	uint64_t resent = after[URNIC_C_retransmits] - before[URNIC_C_retransmits];

	/* a retransmission (a late ACK on a loaded machine) adds packets: only a floor then */
	RC_CHECK(rc, resent || resent_before ? got >= packets(len) : got == packets(len),
		 "%s of %zu bytes took %llu ring packets, want %llu (%llu resent, %llu before)",
		 op == IBV_WR_RDMA_READ ? "READ" : "WRITE", len, (unsigned long long)got,
		 (unsigned long long)packets(len), (unsigned long long)resent,
		 (unsigned long long)resent_before);
	return resent;
}

static int client(struct rc *rc)
{
	rc_sync(rc);
	for (int i = 0; i < NSIZE; i++) {
		size_t len = sizes[i];

		rc_step(rc, "WRITE and READ %zu bytes", len);
		rc_fill(rc->buf, len, 1000u + (uint32_t)i);
		uint64_t resent = run_one(rc, IBV_WR_RDMA_WRITE, len, URNIC_C_shm_tx_packets, 0);

		rc_sync(rc);
		rc_sync(rc);
		memset(rc->buf, 0, REGION);
		/* counted on receipt: a duplicate of the WRITE's (a tail loss probe) draws an ACK
		 * that may arrive behind the READ's responses */
		run_one(rc, IBV_WR_RDMA_READ, len, URNIC_C_shm_rx_packets, resent);
		rc_check_from(rc, rc->buf, len, 77, 0, "read data");
		rc_check_const(rc, rc->buf + len, REGION - len, 0, "past the READ");
		rc_sync(rc);
	}
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_shm_packets");

	setenv("URNIC_TEST_PATH", "shm", 1);
	setenv("URNIC_SHM_DIRECT", "0", 1); /* WRITEs and READs as packets (not one-sided) */
	o.buf_size = 2 * REGION + RC_GUARD;
	return rc_run(&o, server, client);
}
