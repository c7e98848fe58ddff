/* rc_shm_place_refused: a ring peer that cannot map the other's pages (here: the server is not
 * dumpable, so the client may not open its /proc/PID/fd) says so once, in the ring, and from then
 * on gets its payloads in the ring. The client's READ of 1 MiB, whose first responses named the
 * server's pages, still completes byte for byte (the responses it could not read are lost, and
 * the READ is resent); a second READ takes no payload by place; shm_place_refused counts 1. The
 * other way, the server still reads the client's WRITE in place. Run as root, both processes
 * first become nobody: root may open any process's fds. */
#include "rc_harness.h"

#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/param.h"
#include "common/stats.h"

#define LEN RC_MIB
#define SRC (2 * RC_MIB)
#define NOBODY 65534

static uint64_t since(struct rc *rc, const uint64_t *before, enum urnic_counter c)
{
	uint64_t now[URNIC_C_COUNT];

	rc_read_counters(rc, now);
	return now[c] - before[c];
}

static int server(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT];

	RC_CHECK(rc, prctl(PR_SET_DUMPABLE, 0) == 0, "PR_SET_DUMPABLE");
	rc_fill(rc->buf + SRC, LEN, 2);
	memset(rc->buf, 0, LEN);
	rc_step(rc, "be written in place");
	rc_read_counters(rc, before);
	rc_sync(rc);
	rc_sync(rc);
	rc_check(rc, rc->buf, LEN, 1, "written data");
	RC_CHECK(rc, since(rc, before, URNIC_C_shm_rx_placed) >= LEN / URNIC_SHM_MTU,
		 "the client's pages were not read in place");
	rc_sync(rc); /* both READs done */
	return RC_PASS;
}

static void read_once(struct rc *rc, uint64_t id)
{
	struct rc_wr w;

	memset(rc->buf + SRC, 0, LEN);
	rc_wr(rc, &w, IBV_WR_RDMA_READ, id, SRC, LEN, SRC);
	rc_post_send(rc, 0, &w.wr);
	rc_wait(rc, rc->scq, id, IBV_WC_RDMA_READ, NULL);
	rc_check(rc, rc->buf + SRC, LEN, 2, "read data");
}

static int client(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT];
	struct rc_wr w;

	RC_CHECK(rc, prctl(PR_SET_DUMPABLE, 1) == 0, "PR_SET_DUMPABLE");
	rc_step(rc, "WRITE %zu bytes", (size_t)LEN);
	rc_fill(rc->buf, LEN, 1);
	rc_sync(rc);
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, 1, 0, LEN, 0);
	rc_post_send(rc, 0, &w.wr);
	rc_wait(rc, rc->scq, 1, IBV_WC_RDMA_WRITE, NULL);
	rc_sync(rc);

	rc_step(rc, "READ %zu bytes from pages it cannot map", (size_t)LEN);
	rc_read_counters(rc, before);
	read_once(rc, 2);
	RC_CHECK(rc, since(rc, before, URNIC_C_shm_place_refused) == 1,
		 "shm_place_refused counted %llu, want 1",
		 (unsigned long long)since(rc, before, URNIC_C_shm_place_refused));

	rc_step(rc, "READ again: payloads in the ring");
	rc_read_counters(rc, before);
	read_once(rc, 3);
	RC_CHECK(rc, since(rc, before, URNIC_C_shm_rx_placed) == 0 &&
			     since(rc, before, URNIC_C_shm_place_refused) == 0,
		 "after the refusal: %llu payloads in place, %llu refusals",
		 (unsigned long long)since(rc, before, URNIC_C_shm_rx_placed),
		 (unsigned long long)since(rc, before, URNIC_C_shm_place_refused));
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_shm_place_refused");

	setenv("URNIC_TEST_PATH", "shm", 1);
	if (geteuid() == 0) {
		/* no config file to read as nobody (root's home is not readable) */
		setenv("URNIC_CONFIG", "/nonexistent/urnic.conf", 1);
		if (setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) != 0)
			return RC_SKIP;
	}
	o.buf_size = 4 * RC_MIB;
	return rc_run(&o, server, client);
}
