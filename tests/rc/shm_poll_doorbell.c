/* shm_poll_doorbell: the inbox flag that tells ring peers to ring a doorbell follows who reads
 * the rings. An idle engine thread asleep on its socket raises it; an application's empty CQ poll
 * lowers it (its polls read the rings; urnic_progress lowers it in the call itself, so that peers
 * stop ringing before the woken engine thread gets a CPU); once the application stops polling,
 * the engine thread goes back to the socket and raises it again, so that a peer's next packet
 * rings and none waits unread. What this cannot show: the old code lowered the flag only once the
 * woken engine thread ran, and here, idle, it runs at once. Over rings in ib_send_lat, where it
 * waited behind the polling application, that was some 10,000 doorbells per 20,000 round trips
 * (docs/PERFORMANCE.md); the benchmark shows it. Single process: reads its own device's inbox,
 * /dev/shm/urnic-inbox-NETNS-ADDR. */
#include "rc_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "net/shm_layout.h"

#define SETTLE_US 5000 /* after the flag goes up, until the engine thread surely sleeps */
#define TRIES 3	       /* a try whose engine thread was not yet asleep judges nothing */

static const volatile struct shm_inbox *map_inbox(struct rc *rc)
{
	union ibv_gid gid;
	struct stat ns;
	char name[128];
	uint32_t addr;

	rc_step(rc, "find this device's inbox");
	RC_CHECK(rc, ibv_query_gid(rc->ctx, 1, 0, &gid) == 0, "ibv_query_gid: %s", strerror(errno));
	memcpy(&addr, &gid.raw[12], sizeof(addr));
	RC_CHECK(rc, stat("/proc/self/ns/net", &ns) == 0, "stat /proc/self/ns/net: %s",
		 strerror(errno));
	snprintf(name, sizeof(name), "/dev/shm/urnic-inbox-%lu-%08x", (unsigned long)ns.st_ino,
		 (unsigned)ntohl(addr));
	int fd = open(name, O_RDONLY);

	RC_CHECK(rc, fd >= 0, "open %s: %s", name, strerror(errno));
	void *p = mmap(NULL, sizeof(struct shm_inbox), PROT_READ, MAP_SHARED, fd, 0);

	close(fd);
	RC_CHECK(rc, p != MAP_FAILED, "mmap %s: %s", name, strerror(errno));
	return p;
}

static uint32_t flag(const volatile struct shm_inbox *in)
{
	return atomic_load((_Atomic uint32_t *)&in->sleeping);
}

/* Waits, without polling any CQ, until the flag reads want; false after ms milliseconds. */
static bool wait_flag(const volatile struct shm_inbox *in, uint32_t want, unsigned ms)
{
	for (unsigned i = 0; i < ms; i++) {
		if (flag(in) == want)
			return true;
		usleep(1000);
	}
	return flag(in) == want;
}

static int test(struct rc *rc)
{
	const volatile struct shm_inbox *in = map_inbox(rc);
	struct ibv_wc wc;
	int tries = 0;
	uint32_t after = 1;

	for (; tries < TRIES && after; tries++) {
		rc_step(rc, "the idle engine thread sleeps on its socket (try %d)", tries + 1);
		RC_CHECK(rc, wait_flag(in, 1, 3000), "the inbox flag never went up in 3 s");
		usleep(SETTLE_US);
		rc_step(rc, "one empty poll lowers the flag before it returns");
		RC_CHECK(rc, ibv_poll_cq(rc->rcq, 1, &wc) == 0, "the CQ should be empty");
		after = flag(in);
		if (after)
			wait_flag(in, 0, 100); /* let the woken engine thread settle before the next try */
	}
	RC_CHECK(rc, after == 0, "the flag was still up after the poll in each of %d tries", TRIES);
	rc_step(rc, "no more polls: the engine thread goes back to the socket and raises the flag");
	RC_CHECK(rc, wait_flag(in, 1, 3000), "the flag stayed down for 3 s after the last poll");
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("shm_poll_doorbell");

	setenv("URNIC_SHM", "1", 1);
	o.nqp = 1;
	o.alarm_s = 30;
	return rc_run_local(&o, test);
}
