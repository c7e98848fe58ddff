/* rc_shm_full: with the receiving process stopped, 16 QPs' WRITEs fill its 4 MiB shared-memory
 * ring. The packets that do not fit are held back, not lost: each requester takes them back and
 * sends them once the ring has room, so the responder never sees a PSN gap (no sequence NAK),
 * and every WRITE completes and lands byte for byte. */
#include "rc_harness.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"

#define NQP 16
#define LEN RC_MIB
#define STOPPED_MS 2 /* the ring fills in well under 1 ms; the first timeout is 10 ms */

static int server(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];

	rc_step(rc, "be written %d x %zu bytes while stopped", NQP, (size_t)LEN);
	memset(rc->buf, 0, (size_t)NQP * LEN + RC_GUARD);
	rc_read_counters(rc, before);
	rc_sync(rc);
	rc_sync(rc); /* every WRITE completed */
	rc_check(rc, rc->buf, (size_t)NQP * LEN, 51, "written data");
	rc_check_const(rc, rc->buf + (size_t)NQP * LEN, RC_GUARD, 0, "bytes past the WRITEs");
	rc_read_counters(rc, after);
	rc_put(rc, after[URNIC_C_out_of_seq] - before[URNIC_C_out_of_seq]);
	rc_sync(rc);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct ibv_wc wc[NQP];
	struct rc_wr w;

	rc_fill(rc->buf, (size_t)NQP * LEN, 51);
	rc_sync(rc);
	rc_read_counters(rc, before);
	rc_step(rc, "stop the server, write %d MiB on %d QPs, let it run again", NQP, NQP);
	rc_stop_peer(rc);
	for (int q = 0; q < NQP; q++) {
		rc_wr(rc, &w, IBV_WR_RDMA_WRITE, (uint64_t)q, (size_t)q * LEN, LEN, (uint64_t)q * LEN);
		rc_post_send(rc, q, &w.wr);
	}
	rc_sleep_ms(STOPPED_MS);
	RC_CHECK(rc, kill(rc->child, SIGCONT) == 0, "SIGCONT the server");
	rc_poll(rc, rc->scq, wc, NQP, RC_WAIT_MS);
	for (int i = 0; i < NQP; i++)
		RC_CHECK(rc, wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RDMA_WRITE,
			 "WRITE %llu: %s", (unsigned long long)wc[i].wr_id,
			 ibv_wc_status_str(wc[i].status));
	rc_read_counters(rc, after);
	rc_sync(rc);

	uint64_t held = after[URNIC_C_tx_held] - before[URNIC_C_tx_held];
	uint64_t naks = after[URNIC_C_nak_seq_rcvd] - before[URNIC_C_nak_seq_rcvd];
	uint64_t gaps = rc_get(rc);

	rc_step(rc, "count: %llu packets held back, %llu out-of-sequence at the server, %llu NAKs",
		(unsigned long long)held, (unsigned long long)gaps, (unsigned long long)naks);
	RC_CHECK(rc, after[URNIC_C_shm_ring_full] > before[URNIC_C_shm_ring_full],
		 "the ring never filled (%llu packets through it)",
		 (unsigned long long)(after[URNIC_C_shm_tx_packets] - before[URNIC_C_shm_tx_packets]));
	RC_CHECK(rc, held > 0, "a full ring held no request back");
	/* a packet lost to the full ring would leave a gap behind it for the next to find */
	RC_CHECK(rc, gaps == 0 && naks == 0, "%llu requests out of sequence, %llu sequence NAKs",
		 (unsigned long long)gaps, (unsigned long long)naks);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_shm_full");

	setenv("URNIC_TEST_PATH", "shm", 1);
	setenv("URNIC_SHM_MR", "0", 1); /* payloads in the ring, to fill it (not by place) */
	o.nqp = NQP;
	o.buf_size = (size_t)NQP * LEN + RC_GUARD;
	return rc_run(&o, server, client);
}
