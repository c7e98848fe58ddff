/* rc_shm_reader_stopped: a ring peer that is stopped (SIGSTOP) for 20 ms, past the requester's
 * retransmission timer (2 ms after a round trip has been timed) and its tail loss probe (250 us),
 * leaves its requests unread in the ring, not lost. The requester sees its last request still
 * waiting there and waits (retransmit_waits_for_ring_reader) instead of probing or going back:
 * no timer expiry, no probe, no packet sent again, no duplicate at the responder. WRITEs of 4 KiB
 * (carried in the ring) and of 64 KiB (read in place) then complete in order and land byte for
 * byte once the responder runs again. Before, each expiry went back and sent the window again
 * into the same ring, behind the first sending (30 ms: 4 expiries, 1 probe, 9 packets again). */
#include "rc_harness.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"

#define SMALL 4096u
#define LARGE (64u << 10)
#define NWR 4 /* small, large, small, large */
#define STOPPED_MS 20 /* past the fast timer and the probe, short of the IB timeout (67 ms) */

static size_t wr_len(int i)
{
	return i % 2 ? LARGE : SMALL;
}

static size_t total_len(void)
{
	size_t len = 0;

	for (int i = 0; i < NWR; i++)
		len += wr_len(i);
	return len;
}

static int server(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];

	rc_step(rc, "be written %d times while stopped for %d ms", NWR, STOPPED_MS);
	memset(rc->buf, 0, total_len() + RC_GUARD);
	rc_sync(rc);
	rc_sync(rc); /* the round trip that times the path */
	rc_read_counters(rc, before);
	rc_sync(rc);
	rc_sync(rc); /* every WRITE completed */
	rc_check(rc, rc->buf, total_len(), 29, "written data");
	rc_check_const(rc, rc->buf + total_len(), RC_GUARD, 0, "bytes past the WRITEs");
	rc_read_counters(rc, after);
	rc_put(rc, after[URNIC_C_dup_requests] - before[URNIC_C_dup_requests]);
	rc_sync(rc);
	return RC_PASS;
}

static uint64_t moved(const uint64_t *before, const uint64_t *after, unsigned c)
{
	return after[c] - before[c];
}

static int client(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct ibv_wc wc[NWR];
	struct rc_wr w[NWR];
	size_t off = 0;

	rc_fill(rc->buf, total_len(), 29);
	rc_sync(rc);
	rc_step(rc, "one WRITE first: a timed round trip puts the timer at its 2 ms floor");
	rc_wr(rc, &w[0], IBV_WR_RDMA_WRITE, 100, 0, SMALL, 0);
	rc_post_send(rc, 0, &w[0].wr);
	rc_poll(rc, rc->scq, wc, 1, RC_WAIT_MS);
	rc_expect(rc, &wc[0], 100, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	rc_sync(rc);
	rc_sync(rc); /* the server has read its counters */

	rc_read_counters(rc, before);
	rc_step(rc, "stop the server, write %d times, let it run again after %d ms", NWR,
		STOPPED_MS);
	rc_stop_peer(rc);
	for (int i = 0; i < NWR; off += wr_len(i), i++) {
		rc_wr(rc, &w[i], IBV_WR_RDMA_WRITE, (uint64_t)i, off, wr_len(i), off);
		rc_post_send(rc, 0, &w[i].wr);
	}
	rc_expect_empty(rc, rc->scq, STOPPED_MS); /* no WRITE completes while it is stopped */
	RC_CHECK(rc, kill(rc->child, SIGCONT) == 0, "SIGCONT the server");
	rc_poll(rc, rc->scq, wc, NWR, RC_WAIT_MS);
	for (int i = 0; i < NWR; i++)
		rc_expect(rc, &wc[i], (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	rc_read_counters(rc, after);
	rc_sync(rc);

	uint64_t dups = rc_get(rc);

	rc_step(rc, "count: %llu waits for the ring's reader, %llu expiries, %llu probes, %llu "
		"packets sent again, %llu duplicates at the server",
		(unsigned long long)moved(before, after, URNIC_C_ring_waits),
		(unsigned long long)moved(before, after, URNIC_C_rto_expiries),
		(unsigned long long)moved(before, after, URNIC_C_tail_probes),
		(unsigned long long)moved(before, after, URNIC_C_retransmits),
		(unsigned long long)dups);
	RC_CHECK(rc, moved(before, after, URNIC_C_ring_waits) > 0,
		 "the timers never found the requests waiting in the ring");
	RC_CHECK(rc, moved(before, after, URNIC_C_rto_expiries) == 0,
		 "the retransmission timer expired on requests still in the ring");
	RC_CHECK(rc, moved(before, after, URNIC_C_tail_probes) == 0,
		 "a tail loss probe went after requests still in the ring");
	RC_CHECK(rc, moved(before, after, URNIC_C_retransmits) == 0 && dups == 0,
		 "%llu packets sent again, %llu duplicates at the server",
		 (unsigned long long)moved(before, after, URNIC_C_retransmits),
		 (unsigned long long)dups);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_shm_reader_stopped");

	setenv("URNIC_TEST_PATH", "shm", 1);
	setenv("URNIC_SHM_DIRECT", "0", 1); /* WRITEs and READs as packets (not one-sided) */
	setenv("URNIC_SHM", "1", 1);
	o.buf_size = total_len() + RC_GUARD;
	return rc_run(&o, server, client);
}
