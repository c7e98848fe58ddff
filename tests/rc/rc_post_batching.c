/* rc_post_batching: WRs posted one ibv_post_send each while earlier ones are still on the wire
 * leave together when an ACK comes back (doorbell batching): 256 small WRITEs take fewer than 128
 * send system calls, and still land byte for byte and complete in order. */
#include "rc_harness.h"

#include <stdlib.h>
#include <string.h>

#include "common/stats.h"

#define NWR 256
#define MSG 8
#define MAX_SYSCALLS (NWR / 2)

static int server(struct rc *rc)
{
	rc_step(rc, "be written %d times", NWR);
	memset(rc->buf, 0, NWR * MSG);
	rc_sync(rc);
	rc_sync(rc); /* all WRITEs completed */
	rc_check(rc, rc->buf, NWR * MSG, 41, "written data");
	return RC_PASS;
}

static int client(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct ibv_wc wc[NWR];
	struct rc_wr w;

	rc_fill(rc->buf, NWR * MSG, 41);
	rc_sync(rc);
	rc_read_counters(rc, before);
	rc_step(rc, "post %d WRITEs of %d bytes, one call each", NWR, MSG);
	for (int i = 0; i < NWR; i++) {
		rc_wr(rc, &w, IBV_WR_RDMA_WRITE, (uint64_t)i, (size_t)i * MSG, MSG, (uint64_t)i * MSG);
		rc_post_send(rc, 0, &w.wr);
	}
	rc_poll(rc, rc->scq, wc, NWR, RC_WAIT_MS);
	rc_read_counters(rc, after);
	for (int i = 0; i < NWR; i++)
		rc_expect(rc, &wc[i], (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	uint64_t calls = after[URNIC_C_tx_syscalls] - before[URNIC_C_tx_syscalls];

	RC_CHECK(rc, calls < MAX_SYSCALLS, "%d WRITEs took %llu send system calls (fewer than %d "
		 "expected: WRs posted behind others wait for an ACK and leave together)", NWR,
		 (unsigned long long)calls, MAX_SYSCALLS);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_post_batching");

	setenv("URNIC_TEST_PATH", "udp", 1); /* counts sendmmsg calls */
	o.sq_depth = NWR;
	o.buf_size = NWR * MSG + RC_GUARD;
	return rc_run(&o, server, client);
}
