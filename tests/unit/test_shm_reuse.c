/* test_shm_reuse: a long-lived device outlives many short-lived peers. It maps at most
 * URNIC_SHM_PEERS rings; once all are taken, the ring of a producer that has died makes room
 * for the next one. URNIC_SHM_PEERS + 8 processes one after the other each send one packet
 * through a ring and die (killed: nothing closed); every packet, the last ones included, must
 * arrive through a ring. Before reuse the 257th peer's ring was never mapped and its packets
 * were lost for good. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/param.h"
#include "net/net.h"
#include "net/shm.h"
#include "check.h"

#define PEERS (URNIC_SHM_PEERS + 8)
#define WAIT_MS 3000

/* The child: a device at from, one packet "peer N" to to, then wait to be killed. */
static void peer(uint32_t from, uint32_t to, int n, int fd)
{
	struct urnic_net b;
	struct urnic_txpkt p = {.daddr = to, .iovcnt = 1};
	struct urnic_net_tally t = {0};

	if (urnic_net_open(&b, from) != 0)
		_exit(2);
	p.len = (uint32_t)snprintf((char *)p.hdr, sizeof(p.hdr), "peer %d", n);
	p.iov[0] = (struct iovec){.iov_base = p.hdr, .iov_len = p.len};
	if (urnic_net_send(&b, &p, 1, &t, NULL) != 1 || write(fd, "s", 1) != 1)
		_exit(2);
	for (;;)
		pause();
}

static bool arrived(struct urnic_net *a, int n)
{
	struct urnic_net_tally t = {0};
	char want[32];
	int len = snprintf(want, sizeof(want), "peer %d", n);

	for (int ms = 0; ms < WAIT_MS; ms++) {
		int got = urnic_net_recv(a, a->rx_pkts, &t, 0);
		bool seen = false;

		for (int k = 0; k < got; k++)
			seen |= a->rx_pkts[k].local && a->rx_pkts[k].len == (uint32_t)len &&
				memcmp(a->rx_pkts[k].data, want, (size_t)len) == 0;
		urnic_net_recv_done(a);
		if (seen)
			return true;
		usleep(1000);
	}
	return false;
}

int main(void)
{
	uint32_t me = addr_of("127.88.3.1"), them = addr_of("127.88.3.2");
	struct urnic_net a;

	setenv("URNIC_SHM", "1", 1);
	if (urnic_net_open(&a, me) != 0) {
		fprintf(stderr, "test_shm_reuse: FAIL: open the long-lived device\n");
		return 1;
	}
	for (int n = 0; n < PEERS; n++) {
		int p[2];
		char c;

		if (pipe(p) != 0)
			return 1;
		pid_t pid = fork();

		if (pid == 0) {
			close(p[0]);
			peer(them, me, n, p[1]);
		}
		close(p[1]);
		bool sent = pid > 0 && read(p[0], &c, 1) == 1;
		bool ok = sent && arrived(&a, n);

		close(p[0]);
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		if (!ok) {
			fprintf(stderr, "test_shm_reuse: FAIL: peer %d of %d: %s\n", n, PEERS,
				sent ? "its packet never came through a ring" : "did not start");
			return 1;
		}
	}
	urnic_net_close(&a);
	return 0;
}
