/* test_shm_renew: a device keeps its ring route to an address whose urnic process died and was
 * replaced by a new one there (a restarted server). Connecting a QP to that address again must
 * find the new process: the route notices the dead reader, makes a new ring, and a packet sent
 * then reaches the new process through it. Before the fix it went into the dead process's ring
 * and nobody ever read it. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/net.h"
#include "net/shm.h"
#include "wire/wire.h"
#include "check.h"

#define WAIT_MS 5000
static const uint8_t payload[12] = "urnic-renew";

/* A process at addr: opens the device, tells fd, then (expect) waits for one ring packet
 * carrying payload and exits 0 if it came, or sleeps until killed. */
static int peer(uint32_t addr, int fd, bool expect)
{
	struct urnic_net n;
	struct urnic_net_tally t = {0};

	if (urnic_net_open(&n, addr) != 0)
		return 2;
	if (write(fd, "r", 1) != 1)
		return 2;
	if (!expect)
		for (;;)
			pause();
	for (int ms = 0; ms < WAIT_MS; ms++) {
		int got = urnic_net_recv(&n, n.rx_pkts, &t, 0);

		for (int i = 0; i < got; i++)
			if (n.rx_pkts[i].local && n.rx_pkts[i].len == sizeof(payload) &&
			    memcmp(n.rx_pkts[i].data, payload, sizeof(payload)) == 0) {
				urnic_net_close(&n);
				return 0;
			}
		urnic_net_recv_done(&n);
		usleep(1000);
	}
	return 1;
}

static pid_t start_peer(uint32_t addr, bool expect)
{
	int p[2];
	char c;

	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();

	if (pid == 0) {
		close(p[0]);
		_exit(peer(addr, p[1], expect));
	}
	close(p[1]);
	if (pid > 0 && read(p[0], &c, 1) != 1) /* it died before its device was open */
		pid = -1;
	close(p[0]);
	return pid;
}

int main(void)
{
	uint32_t me = addr_of("127.88.0.1"), there = addr_of("127.88.0.2");
	struct urnic_net a;
	struct urnic_txpkt p = {0};
	struct urnic_net_tally t = {0};
	int status;

	setenv("URNIC_SHM", "1", 1);
	pid_t first = start_peer(there, false);

	CHECK(first > 0, "the first peer did not start");
	CHECK(urnic_net_open(&a, me) == 0, "open the device at 127.88.0.1");
	CHECK(urnic_shm_reaches(&a, there), "the first peer is not reached through a ring");
	kill(first, SIGKILL);
	waitpid(first, NULL, 0);

	pid_t second = start_peer(there, true);

	CHECK(second > 0, "the second peer did not start");
	CHECK(urnic_shm_reaches(&a, there), "the second peer is not reached through a ring");
	p.daddr = there;
	memcpy(p.hdr, payload, sizeof(payload));
	p.iov[0] = (struct iovec){.iov_base = p.hdr, .iov_len = sizeof(payload)};
	p.iovcnt = 1;
	p.len = sizeof(payload);
	CHECK(urnic_net_send(&a, &p, 1, &t, NULL) >= 0, "send");
	waitpid(second, &status, 0);
	urnic_net_close(&a);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the second peer got no packet through a new ring (exit %d)",
	      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return 0;
}
