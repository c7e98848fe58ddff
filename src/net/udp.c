/* udp.c - RoCEv2 over UDP sockets: one receive socket on port 4791, a pool of send sockets. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/dma.h"
#include "net/fault.h"
#include "net/net.h"
#include "net/shm.h"

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

/* GSO where the kernel has it (Linux 4.18) and URNIC_GSO is not 0; GRO on the receive socket
 * whenever the kernel has it (5.0), since coalesced datagrams may come from any peer. */
static void offload_setup(struct urnic_net *net)
{
	const char *env = getenv("URNIC_GSO");
	int off = 0, on = 1;

	net->gso = !(env && env[0] == '0');
	for (int i = 0; i < URNIC_TX_SOCKETS && net->gso; i++)
		net->gso = setsockopt(net->tx_fd[i], SOL_UDP, UDP_SEGMENT, &off, sizeof(off)) == 0;
	net->gro = setsockopt(net->rx_fd, SOL_UDP, UDP_GRO, &on, sizeof(on)) == 0;
}

int urnic_net_open(struct urnic_net *net, uint32_t addr)
{
	memset(net, 0, sizeof(*net));
	net->addr = addr;
	net->sock_poll_gap_ns = URNIC_SOCK_POLL_NS;
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
	net->rx_bufs = malloc((size_t)URNIC_RX_SLOTS * URNIC_RX_SLOT_LEN);
	net->rx_pkts = calloc(URNIC_RX_BATCH, sizeof(*net->rx_pkts));
	if (!net->rx_bufs || !net->rx_pkts) {
		urnic_net_close(net);
		return -ENOMEM;
	}
	for (int i = 0; i < URNIC_RX_SLOTS; i++) {
		net->rx_iov[i].iov_base = net->rx_bufs + (size_t)i * URNIC_RX_SLOT_LEN;
		net->rx_iov[i].iov_len = URNIC_RX_SLOT_LEN;
	}
	offload_setup(net);
	return urnic_shm_open(net);
}

void urnic_net_close(struct urnic_net *net)
{
	urnic_shm_close(net);
	if (net->rx_fd >= 0)
		close(net->rx_fd);
	for (int i = 0; i < URNIC_TX_SOCKETS; i++)
		if (net->tx_fd[i] >= 0)
			close(net->tx_fd[i]);
	free(net->rx_bufs);
	free(net->rx_pkts);
	net->rx_pkts = NULL;
	free(net->fault);
	net->fault = NULL;
	net->rx_fd = -1;
	net->rx_bufs = NULL;
}

uint16_t urnic_net_sport(const struct urnic_net *net, unsigned idx)
{
	return net->tx_port[idx % URNIC_TX_SOCKETS];
}

/* A packet's ICRC: the last 4 bytes of its trailer iovec. */
static uint8_t *icrc_of(struct urnic_txpkt *p)
{
	struct iovec *trailer = &p->iov[p->iovcnt - 1];

	return (uint8_t *)trailer->iov_base + trailer->iov_len - URNIC_ICRC_LEN;
}

/* Computes a packet's ICRC for IP ID 0. */
static void seal(const struct urnic_net *net, struct urnic_txpkt *p)
{
	struct urnic_ip4_flow flow = {
		.saddr = net->addr,
		.daddr = p->daddr,
		.sport = urnic_net_sport(net, p->sport_idx),
		.dport = URNIC_ROCEV2_PORT,
	};

	URNIC_DMA_BEGIN(); /* the payload iovec points into an MR */
	urnic_icrc_compute(&flow, p->iov, p->iovcnt, p->len - URNIC_ICRC_LEN, icrc_of(p));
	URNIC_DMA_END();
	p->ip_id = 0;
}

/* How many of pkts[0..n) (one source socket) can leave in one GSO send: a run to one address
 * of packets the size of the first, of which only the last may be shorter. */
static int gso_run(const struct urnic_txpkt *pkts, int n)
{
	uint32_t size = pkts[0].len, total = size;
	int k = 1;

	while (k < n && k < URNIC_GSO_MAX_SEGS && pkts[k].daddr == pkts[0].daddr &&
	       pkts[k].len <= size && total + pkts[k].len <= URNIC_GSO_MAX_BYTES) {
		total += pkts[k].len;
		if (pkts[k++].len < size)
			break;
	}
	return k;
}

/* The kernel gives segment k of a GSO send the IPv4 ID k (the first has ID 0, as DF packets of
 * an unconnected socket do): each packet's ICRC has to be computed for its own. */
static void stamp_ip_id(struct urnic_txpkt *p, uint16_t id)
{
	urnic_icrc_move_ip_id(icrc_of(p), p->len, p->ip_id, id);
	p->ip_id = id;
}

#define SEND_IOVS 512 /* iovecs of one sendmmsg call, all messages together */

struct send_msgs {
	struct mmsghdr msgs[URNIC_TX_BATCH];
	struct sockaddr_in dst[URNIC_TX_BATCH];
	struct iovec iov[SEND_IOVS];
	union {
		struct cmsghdr hdr;
		uint8_t buf[CMSG_SPACE(sizeof(uint16_t))];
	} ctl[URNIC_TX_BATCH];
	int pkts_in[URNIC_TX_BATCH]; /* packets each message carries */
};

/* Message i carries pkts[0..k): one datagram, or a GSO send of k segments. */
static void build_msg(struct send_msgs *m, int i, int *iovs, struct urnic_txpkt *pkts, int k)
{
	struct iovec *iov = &m->iov[*iovs];
	size_t niov = 0;

	for (int j = 0; j < k; j++) {
		if (k > 1 || pkts[j].ip_id)
			stamp_ip_id(&pkts[j], (uint16_t)j);
		for (int v = 0; v < pkts[j].iovcnt; v++)
			iov[niov++] = pkts[j].iov[v];
	}
	*iovs += (int)niov;
	m->dst[i] = (struct sockaddr_in){.sin_family = AF_INET,
					 .sin_port = htons(URNIC_ROCEV2_PORT),
					 .sin_addr.s_addr = pkts[0].daddr};
	m->msgs[i].msg_hdr = (struct msghdr){.msg_name = &m->dst[i],
					     .msg_namelen = sizeof(m->dst[i]),
					     .msg_iov = iov,
					     .msg_iovlen = niov};
	m->pkts_in[i] = k;
	if (k == 1)
		return;
	struct cmsghdr *c = &m->ctl[i].hdr;

	memset(m->ctl[i].buf, 0, sizeof(m->ctl[i].buf));
	c->cmsg_level = SOL_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
	uint16_t gso_size = (uint16_t)pkts[0].len;

	memcpy(CMSG_DATA(c), &gso_size, sizeof(gso_size));
	m->msgs[i].msg_hdr.msg_control = m->ctl[i].buf;
	m->msgs[i].msg_hdr.msg_controllen = sizeof(m->ctl[i].buf);
}

/* pkts[0..n) were not sent because the socket had no room: held for their senders (see
 * urnic_net_send), where the caller takes them back; lost otherwise. */
static void hold(const struct urnic_txpkt *pkts, int n, bool *held)
{
	for (int i = 0; held && i < n; i++)
		held[pkts[i].slot] = true;
}

/* Sends pkts[0..n) that share one source socket. */
static int send_run(struct urnic_net *net, int fd, struct urnic_txpkt *pkts, int n,
		    struct urnic_net_tally *t, bool *held)
{
	struct send_msgs m;
	int done = 0;

	while (done < n) {
		int nmsg = 0, iovs = 0, covered = 0;

		while (done + covered < n && nmsg < URNIC_TX_BATCH) {
			struct urnic_txpkt *next = pkts + done + covered;
			int k = net->gso ? gso_run(next, n - done - covered) : 1, need = 0;

			for (int j = 0; j < k; j++)
				need += next[j].iovcnt;
			while (k > 1 && iovs + need > SEND_IOVS)
				need -= next[--k].iovcnt;
			if (iovs + need > SEND_IOVS)
				break; /* the next call takes it */
			build_msg(&m, nmsg++, &iovs, next, k);
			covered += k;
		}
		URNIC_DMA_BEGIN(); /* the payload iovecs point into MRs */
		int r = sendmmsg(fd, m.msgs, (unsigned)nmsg, 0);
		URNIC_DMA_END();

		t->syscalls++;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && m.pkts_in[0] > 1 && (errno == EINVAL || errno == EIO ||
						   errno == EOPNOTSUPP || errno == EMSGSIZE)) {
			net->gso = false; /* this route cannot segment: one datagram per packet */
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == ENOBUFS)) {
			hold(pkts + done, n - done, held); /* a full socket buffer or queue */
			return done;
		}
		if (r <= 0) /* refused (a firewall, no route): loss, the transport retransmits */
			return done;
		for (int i = 0; i < r; i++) {
			done += m.pkts_in[i];
			t->gso_sends += m.pkts_in[i] > 1;
		}
		/* a short count: the next call starts at the message that failed and learns why */
	}
	return done;
}

int urnic_net_send(struct urnic_net *net, struct urnic_txpkt *pkts, int n,
		   struct urnic_net_tally *t, bool *held)
{
	int sent = 0, start = 0;

	for (int i = 0; i < n; i++) {
		pkts[i].slot = (uint16_t)i;
		if (held)
			held[i] = false;
	}
	if (net->shm) { /* packets for peers on this host take their rings; the rest stays here */
		int udp = urnic_shm_divert(net, pkts, n, held);

		sent = n - udp;
		n = udp;
	}
	for (int i = 0; i < n; i++)
		seal(net, &pkts[i]);
	for (int i = 1; i <= n; i++) {
		if (i < n && pkts[i].sport_idx == pkts[start].sport_idx)
			continue;
		int fd = net->tx_fd[pkts[start].sport_idx % URNIC_TX_SOCKETS];

		sent += send_run(net, fd, pkts + start, i - start, t, held);
		start = i;
	}
	return sent;
}

/* The segment size of a coalesced datagram, or 0 for a plain one. */
static uint32_t gro_size(struct msghdr *h)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			int size;

			memcpy(&size, CMSG_DATA(c), sizeof(size));
			return size > 0 ? (uint32_t)size : 0;
		}
	}
	return 0;
}

/* The packets in datagram i. One longer than any packet can be, or cut short, is passed on at
 * length 0 for the receive path to drop and count. */
static int split_datagram(struct urnic_net *net, int i, struct mmsghdr *m, struct urnic_rxpkt *out,
			  struct urnic_net_tally *t)
{
	struct urnic_rxpkt pkt = {
		.saddr = net->rx_from[i].sin_addr.s_addr,
		.daddr = net->addr,
		.sport = ntohs(net->rx_from[i].sin_port),
		.data = net->rx_iov[i].iov_base,
	};
	uint32_t len = m->msg_len, seg = gro_size(&m->msg_hdr);
	bool whole = !(m->msg_hdr.msg_flags & MSG_TRUNC);

	if (whole && !seg && urnic_shm_control(net, pkt.data, len, pkt.saddr))
		return 0;
	if (!seg || seg >= len || !whole) {
		pkt.len = whole && len <= URNIC_RX_BUF_LEN ? len : 0;
		out[0] = pkt;
		return 1;
	}
	if (seg > URNIC_RX_BUF_LEN) { /* segments no packet can be */
		out[0] = pkt;
		out[0].len = 0;
		return 1;
	}
	uint32_t nseg = (len + seg - 1) / seg, n = nseg < URNIC_GSO_MAX_SEGS ? nseg : URNIC_GSO_MAX_SEGS;

	for (uint32_t k = 0; k < n; k++) {
		out[k] = pkt;
		out[k].data += (size_t)k * seg;
		out[k].len = len - k * seg < seg ? len - k * seg : seg;
		out[k].seg = (uint16_t)k;
	}
	t->gro_receives++;
	t->gro_excess += nseg - n;
	return (int)n;
}

/* Whether a receive (clock now, or 0 to read it) leaves the socket for later: rings carry this
 * device's busy peers, and an empty recvmmsg costs more than a ring round trip (1.5 us here:
 * made every 20 us, it delayed one ring round trip in seven by that much).
 * The engine thread's turns keep the gap too: streaming 1 MiB WRITEs through a ring, the
 * receiving engine thread made one per 256 KiB batch, 9% of its CPU. Not when it has just seen
 * the socket readable or slept on it. */
static bool socket_can_wait(struct urnic_net *net, uint64_t now)
{
	if (!urnic_shm_rings_in(net))
		return false;
	if (!now)
		now = urnic_mono_ns();
	bool due = atomic_load_explicit(&net->sock_due, memory_order_relaxed) &&
		   atomic_exchange_explicit(&net->sock_due, false, memory_order_relaxed);

	if (!due && now - net->sock_polled_ns < net->sock_poll_gap_ns)
		return true;
	net->sock_polled_ns = now;
	return false;
}

/* A recvmmsg that found nothing doubles the gap to the next, up to URNIC_SOCK_POLL_MAX_NS; one
 * that found a datagram brings it back to URNIC_SOCK_POLL_NS. */
static void socket_polled(struct urnic_net *net, bool found)
{
	uint64_t gap = net->sock_poll_gap_ns * 2;

	net->sock_poll_gap_ns = found || gap < URNIC_SOCK_POLL_NS ? URNIC_SOCK_POLL_NS
				: gap > URNIC_SOCK_POLL_MAX_NS ? URNIC_SOCK_POLL_MAX_NS
							       : gap;
}

static int recv_socket(struct urnic_net *net, struct urnic_rxpkt *out, struct urnic_net_tally *t)
{
	struct mmsghdr msgs[URNIC_RX_SLOTS];
	int r, n = 0;

	for (int i = 0; i < URNIC_RX_SLOTS; i++) {
		msgs[i].msg_hdr = (struct msghdr){.msg_name = &net->rx_from[i],
						  .msg_namelen = sizeof(net->rx_from[i]),
						  .msg_iov = &net->rx_iov[i],
						  .msg_iovlen = 1};
		if (net->gro) {
			msgs[i].msg_hdr.msg_control = net->rx_ctl[i].buf;
			msgs[i].msg_hdr.msg_controllen = sizeof(net->rx_ctl[i].buf);
		}
	}
	do {
		r = recvmmsg(net->rx_fd, msgs, URNIC_RX_SLOTS, MSG_DONTWAIT, NULL);
	} while (r < 0 && errno == EINTR);
	t->syscalls += r > 0; /* calls that brought datagrams */
	for (int i = 0; i < r; i++)
		n += split_datagram(net, i, &msgs[i], out + n, t);
	return n;
}

int urnic_net_recv(struct urnic_net *net, struct urnic_rxpkt *out, struct urnic_net_tally *t,
		   uint64_t now)
{
	int n = 0;

	if (!socket_can_wait(net, now)) {
		n = recv_socket(net, out, t);
		socket_polled(net, n > 0);
		t->sock_packets += (uint64_t)n;
	}

	if (net->shm) {
		int local = urnic_shm_recv(net, out + n, URNIC_RX_BATCH - n);

		t->shm_packets += (uint64_t)local;
		n += local;
	}
	if (net->fault && (n > 0 || urnic_fault_due_ns(net->fault) != UINT64_MAX))
		n = urnic_fault_apply(net->fault, out, n, URNIC_RX_BATCH);
	return n;
}

uint64_t urnic_net_fault_due(const struct urnic_net *net)
{
	return net->fault ? urnic_fault_due_ns(net->fault) : UINT64_MAX;
}

void urnic_net_recv_done(struct urnic_net *net)
{
	if (net->shm)
		urnic_shm_release(net);
}
