/* rc_spurious_goback: a responder that stalls (stopped, nothing lost) makes the requester's
 * retransmission timer expire and go back. Once it runs again, the ACK of the first sending
 * covers packets not yet sent again: the requester takes the go-back as spurious, moves on
 * without sending the rest again, and the responder sees at most a few duplicates, not the
 * whole window once per expiry. Four WRITEs complete in order and land byte for byte. */
#include "rc_harness.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"

#define NWR 4
#define PKTS_PER_WR 16
#define STOPPED_MS 40 /* past the retransmission timer, short of the IB timeout (67 ms) */

static size_t wr_len(const struct rc *rc)
{
	return (size_t)PKTS_PER_WR * rc->mtu;
}

static int server(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	size_t len = NWR * wr_len(rc);

	rc_step(rc, "be written %d x %zu bytes while stopped", NWR, wr_len(rc));
	memset(rc->buf, 0, len + RC_GUARD);
	rc_read_counters(rc, before);
	rc_sync(rc);
	rc_sync(rc); /* every WRITE completed */
	rc_check(rc, rc->buf, len, 77, "written data");
	rc_check_const(rc, rc->buf + len, RC_GUARD, 0, "bytes past the WRITEs");
	rc_read_counters(rc, after);
	rc_put(rc, after[URNIC_C_dup_requests] - before[URNIC_C_dup_requests]);
	rc_sync(rc);
	return RC_PASS;
}

static void write_all(struct rc *rc)
{
	struct rc_wr w[NWR];

	for (int i = 0; i < NWR; i++) {
		rc_wr(rc, &w[i], IBV_WR_RDMA_WRITE, (uint64_t)i, i * wr_len(rc), wr_len(rc),
		      i * wr_len(rc));
		if (i + 1 < NWR)
			w[i].wr.next = &w[i + 1].wr;
	}
	rc_post_send(rc, 0, &w[0].wr);
}

static int client(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct ibv_wc wc[NWR];

	rc_fill(rc->buf, NWR * wr_len(rc), 77);
	rc_sync(rc);
	rc_read_counters(rc, before);
	rc_step(rc, "stop the server for %d ms while %d WRITEs are in flight", STOPPED_MS, NWR);
	rc_stop_peer(rc);
	write_all(rc);
	rc_sleep_ms(STOPPED_MS);
	RC_CHECK(rc, kill(rc->child, SIGCONT) == 0, "SIGCONT the server");
	rc_poll(rc, rc->scq, wc, NWR, RC_WAIT_MS);
	for (int i = 0; i < NWR; i++)
		rc_expect(rc, &wc[i], (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	rc_read_counters(rc, after);
	rc_sync(rc);

	uint64_t expiries = after[URNIC_C_rto_expiries] - before[URNIC_C_rto_expiries] +
			    after[URNIC_C_timeouts] - before[URNIC_C_timeouts];
	uint64_t spurious = after[URNIC_C_spurious_gobacks] - before[URNIC_C_spurious_gobacks];
	uint64_t dups = rc_get(rc);

	rc_step(rc, "count: %llu timer expiries, %llu spurious go-backs, %llu duplicates",
		(unsigned long long)expiries, (unsigned long long)spurious,
		(unsigned long long)dups);
	RC_CHECK(rc, expiries > 0, "the stall never made a timer expire");
	RC_CHECK(rc, spurious > 0, "no go-back was found spurious");
	/* each expiry sends what a cut window holds; sending the rest again would be the window */
	RC_CHECK(rc, dups < PKTS_PER_WR, "%llu duplicate requests after %llu expiries",
		 (unsigned long long)dups, (unsigned long long)expiries);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_spurious_goback");

	setenv("URNIC_TEST_PATH", "udp", 1);
	setenv("URNIC_SHM", "0", 1);
	o.buf_size = (size_t)NWR * PKTS_PER_WR * 4096 + RC_GUARD;
	return rc_run(&o, server, client);
}
