/* udp.c - RoCEv2 over UDP sockets: one receive socket on port 4791, a pool of send sockets. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/dma.h"
#include "net/fault.h"
#include "net/net.h"

static void set_buffers(int fd)
{
	int sz = URNIC_SOCK_BUF;

	/* FORCE works for a privileged process; otherwise the plain request is capped by rmem_max */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
}

static int open_socket(uint32_t addr, uint16_t port, uint16_t *bound_port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
	socklen_t slen = sizeof(sin);
	/* DF on, and so IPv4 ID 0 on an unconnected socket: the ICRC is computed assuming both */
	int pmtu = IP_PMTUDISC_DO;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	sin.sin_addr.s_addr = addr;
	if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &slen) != 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	set_buffers(fd);
	if (bound_port)
		*bound_port = ntohs(sin.sin_port);
	return fd;
}

int urnic_net_open(struct urnic_net *net, uint32_t addr)
{
	memset(net, 0, sizeof(*net));
	net->addr = addr;
	net->rx_fd = -1;
	for (int i = 0; i < URNIC_TX_SOCKETS; i++)
		net->tx_fd[i] = -1;
	net->rx_fd = open_socket(addr, URNIC_ROCEV2_PORT, NULL);
	if (net->rx_fd < 0)
		return net->rx_fd;
	for (int i = 0; i < URNIC_TX_SOCKETS; i++) {
		net->tx_fd[i] = open_socket(addr, 0, &net->tx_port[i]);
		if (net->tx_fd[i] < 0) {
			int err = net->tx_fd[i];

			urnic_net_close(net);
			return err;
		}
		shutdown(net->tx_fd[i], SHUT_RD);
	}
	const char *spec = getenv("URNIC_FAULT");

	if (spec && *spec) {
		net->fault = malloc(sizeof(*net->fault));
		if (!net->fault || urnic_fault_config(net->fault, spec) != 0) {
			urnic_net_close(net);
			return -EINVAL;
		}
	}
	net->rx_bufs = malloc((size_t)URNIC_RX_BATCH * URNIC_RX_BUF_LEN);
	if (!net->rx_bufs) {
		urnic_net_close(net);
		return -ENOMEM;
	}
	for (int i = 0; i < URNIC_RX_BATCH; i++) {
		net->rx_iov[i].iov_base = net->rx_bufs + (size_t)i * URNIC_RX_BUF_LEN;
		net->rx_iov[i].iov_len = URNIC_RX_BUF_LEN;
	}
	return 0;
}

void urnic_net_close(struct urnic_net *net)
{
	if (net->rx_fd >= 0)
		close(net->rx_fd);
	for (int i = 0; i < URNIC_TX_SOCKETS; i++)
		if (net->tx_fd[i] >= 0)
			close(net->tx_fd[i]);
	free(net->rx_bufs);
	free(net->fault);
	net->fault = NULL;
	net->rx_fd = -1;
	net->rx_bufs = NULL;
}

uint16_t urnic_net_sport(const struct urnic_net *net, unsigned idx)
{
	return net->tx_port[idx % URNIC_TX_SOCKETS];
}

/* Sends pkts[0..n) that share one source socket. */
static int send_run(int fd, struct urnic_txpkt *pkts, int n, uint64_t *syscalls)
{
	struct mmsghdr msgs[URNIC_TX_BATCH];
	struct sockaddr_in dst[URNIC_TX_BATCH];
	int done = 0;

	while (done < n) {
		int k = n - done < URNIC_TX_BATCH ? n - done : URNIC_TX_BATCH;

		for (int i = 0; i < k; i++) {
			struct urnic_txpkt *p = &pkts[done + i];

			dst[i] = (struct sockaddr_in){.sin_family = AF_INET,
						      .sin_port = htons(URNIC_ROCEV2_PORT),
						      .sin_addr.s_addr = p->daddr};
			msgs[i].msg_hdr = (struct msghdr){.msg_name = &dst[i],
							  .msg_namelen = sizeof(dst[i]),
							  .msg_iov = p->iov,
							  .msg_iovlen = p->iovcnt};
		}
		URNIC_DMA_BEGIN(); /* the payload iovecs point into MRs */
		int r = sendmmsg(fd, msgs, (unsigned)k, 0);
		URNIC_DMA_END();

		(*syscalls)++;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			/* a full socket buffer is loss on the wire: the transport retransmits */
			return done;
		}
		done += r;
		if (r < k)
			return done;
	}
	return done;
}

int urnic_net_send(struct urnic_net *net, struct urnic_txpkt *pkts, int n, uint64_t *syscalls)
{
	int sent = 0, start = 0;

	for (int i = 1; i <= n; i++) {
		if (i < n && pkts[i].sport_idx == pkts[start].sport_idx)
			continue;
		int fd = net->tx_fd[pkts[start].sport_idx % URNIC_TX_SOCKETS];

		sent += send_run(fd, pkts + start, i - start, syscalls);
		start = i;
	}
	return sent;
}

int urnic_net_recv(struct urnic_net *net, struct urnic_rxpkt *out)
{
	struct mmsghdr msgs[URNIC_RX_BATCH];
	int r;

	for (int i = 0; i < URNIC_RX_BATCH; i++)
		msgs[i].msg_hdr = (struct msghdr){.msg_name = &net->rx_from[i],
						  .msg_namelen = sizeof(net->rx_from[i]),
						  .msg_iov = &net->rx_iov[i],
						  .msg_iovlen = 1};
	do {
		r = recvmmsg(net->rx_fd, msgs, URNIC_RX_BATCH, MSG_DONTWAIT, NULL);
	} while (r < 0 && errno == EINTR);
	if (r <= 0)
		return 0;
	for (int i = 0; i < r; i++) {
		out[i] = (struct urnic_rxpkt){
			.saddr = net->rx_from[i].sin_addr.s_addr,
			.daddr = net->addr,
			.sport = ntohs(net->rx_from[i].sin_port),
			/* a truncated datagram is reported at its full length: clamp, then drop it */
			.len = (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ? 0 : msgs[i].msg_len,
			.data = net->rx_iov[i].iov_base,
		};
	}
	if (net->fault)
		r = urnic_fault_apply(net->fault, out, r, URNIC_RX_BATCH);
	return r;
}
