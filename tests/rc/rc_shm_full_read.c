/* rc_shm_full_read: 16 QPs READ 1 MiB each at once through the shared-memory path, and the
 * reader stops itself as soon as the requests are out, while 16 MiB of responses head for its
 * 4 MiB ring. The responder's packets that do not fit are held back, not lost: its resources go
 * back to them and send them once the ring has room, so the reader never sees a gap in a
 * response stream, and every READ completes and lands byte for byte. */
#include "rc_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/stats.h"

#define NQP 16
#define LEN RC_MIB
#define STOPPED_MS 5 /* the ring fills in well under 1 ms */

static bool stopped(pid_t pid)
{
	char path[64], stat[256];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY);
	n = fd >= 0 ? read(fd, stat, sizeof(stat) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	stat[n] = 0;
	const char *end = strrchr(stat, ')'); /* "pid (comm) S ..." */

	return end && end[1] == ' ' && end[2] == 'T';
}

/* Stops this whole process (every thread, the engine's too) for STOPPED_MS: a helper process
 * waits until it is stopped, then lets it run again. */
static void stop_self(struct rc *rc)
{
	pid_t self = getpid(), helper = fork();

	RC_CHECK(rc, helper >= 0, "fork");
	if (helper == 0) {
		for (int i = 0; i < 100000 && !stopped(self); i++)
			usleep(10);
		usleep(STOPPED_MS * 1000);
		kill(self, SIGCONT);
		_exit(0);
	}
	raise(SIGSTOP);
	RC_CHECK(rc, waitpid(helper, NULL, 0) == helper, "wait for the helper");
}

static int server(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];

	rc_step(rc, "be read %d x %zu bytes", NQP, (size_t)LEN);
	rc_fill(rc->buf, (size_t)NQP * LEN, 63);
	rc_sync(rc);
	rc_sync(rc); /* warmed up */
	rc_read_counters(rc, before);
	rc_sync(rc);
	rc_sync(rc); /* every READ completed */
	rc_read_counters(rc, after);
	rc_put(rc, after[URNIC_C_tx_held] - before[URNIC_C_tx_held]);
	rc_put(rc, after[URNIC_C_dup_requests] - before[URNIC_C_dup_requests]);
	rc_sync(rc);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct ibv_wc wc[NQP];
	struct rc_wr w;

	rc_sync(rc);
	/* the rings' first use (made, mapped, their pages touched) is not what this is about */
	rc_step(rc, "warm up: READ 4 MiB on one QP");
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 99, 0, 4 * LEN, 0);
	rc_post_send(rc, 0, &w.wr);
	rc_poll(rc, rc->scq, wc, 1, RC_WAIT_MS);
	RC_CHECK(rc, wc[0].status == IBV_WC_SUCCESS, "warm-up READ: %s",
		 ibv_wc_status_str(wc[0].status));
	memset(rc->buf, 0, (size_t)NQP * LEN + RC_GUARD);
	rc_sync(rc);
	rc_read_counters(rc, before);
	rc_sync(rc);
	rc_step(rc, "read %d MiB on %d QPs at once, stopped for %d ms", NQP, NQP, STOPPED_MS);
	for (int q = 0; q < NQP; q++) {
		rc_wr(rc, &w, IBV_WR_RDMA_READ, (uint64_t)q, (size_t)q * LEN, LEN,
		      (uint64_t)q * LEN);
		rc_post_send(rc, q, &w.wr); /* an idle QP sends at once */
	}
	stop_self(rc);
	rc_poll(rc, rc->scq, wc, NQP, RC_WAIT_MS);
	for (int i = 0; i < NQP; i++)
		RC_CHECK(rc, wc[i].status == IBV_WC_SUCCESS && wc[i].opcode == IBV_WC_RDMA_READ,
			 "READ %llu: %s", (unsigned long long)wc[i].wr_id,
			 ibv_wc_status_str(wc[i].status));
	rc_check(rc, rc->buf, (size_t)NQP * LEN, 63, "read data");
	rc_check_const(rc, rc->buf + (size_t)NQP * LEN, RC_GUARD, 0, "bytes past the READs");
	rc_read_counters(rc, after);
	rc_sync(rc);

	uint64_t held = rc_get(rc), dups = rc_get(rc);
	uint64_t gaps = after[URNIC_C_read_gaps] - before[URNIC_C_read_gaps];

	rc_step(rc, "count: %llu responses held back, %llu gaps seen, %llu READs asked again",
		(unsigned long long)held, (unsigned long long)gaps, (unsigned long long)dups);
	RC_CHECK(rc, held > 0, "a full ring held no READ response back");
	/* A response lost to the full ring leaves a gap in its stream. (A READ may still be asked
	 * again by a retransmission timer that ran out while this process was stopped: that one
	 * repeats, it skips nothing.) */
	RC_CHECK(rc, gaps == 0, "%llu gaps in the response streams", (unsigned long long)gaps);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_shm_full_read");

	setenv("URNIC_TEST_PATH", "shm", 1);
	setenv("URNIC_SHM_MR", "0", 1); /* payloads in the ring, to fill it (not by place) */
	o.nqp = NQP;
	o.buf_size = (size_t)NQP * LEN + RC_GUARD;
	return rc_run(&o, server, client);
}
