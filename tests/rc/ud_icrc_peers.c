/* ud_icrc_peers: a UD QP follows each sender's IPv4 IDs apart. The ICRC covers the sender's IPv4
 * ID, which a UDP socket never sees, so the receiver recovers it from what it knows of the
 * sender: a urnic peer stamps 0 (or a GSO segment's number), an rxe peer a counter of its own.
 * With one record for the whole QP, the first datagram of an rxe peer after a urnic peer's was
 * dropped as corrupt, and so was a urnic peer's segment number after an rxe peer's.
 *
 * Datagrams are forged on plain UDP sockets at loopback addresses next to the device's and
 * sealed for the IDs such peers stamp, interleaved: a urnic-like sender (IDs 0, 3, 5), and two
 * rxe-like ones counting from 30000 and from 1000. Each must arrive byte for byte, with its
 * sender's address in the GRH and its source QPN. Then:
 *   - corrupt datagrams from eight new addresses take no sender's record: a datagram of the
 *     first rxe-like sender far outside its window (only an unknown sender's passes) is still
 *     dropped;
 *   - eight new senders whose datagrams pass take every slot: the first two senders are
 *     unknown again, and IDs their old records refused (far from the counter; 40000 from the
 *     urnic-like one) now pass. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/ip.h> /* IP_DF */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/net.h"
#include "wire/wire.h"

#define QKEY 0x11111111u
#define BUF 8192
#define LEN 64	      /* payload of each datagram */
#define GRH 40
#define SENDERS 11    /* the three, then eight to take every slot */
#define SRC_QPN 0x300 /* sender k's QPN: SRC_QPN + k */
#define WAIT_MS 2000
#define QUIET_MS 200 /* nothing delivered this long: it was dropped */

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "ud_icrc_peers: " __VA_ARGS__);                                    \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

struct sender {
	int fd;
	uint32_t addr; /* network order */
	uint16_t port;
};

static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static uint8_t *buf;
static uint32_t daddr;
static struct sender senders[SENDERS];

/* A socket at a loopback address next to the device's, after the one bound before (x_from on). */
static uint32_t bind_next(struct sender *s, uint32_t x_from)
{
	s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		FAIL("socket: %s", strerror(errno));
	for (uint32_t x = x_from; x < 256; x++) {
		struct sockaddr_in sin = {.sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(ntohl(daddr) ^ x)};
		socklen_t len = sizeof(sin);

		if (bind(s->fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
			continue;
		if (getsockname(s->fd, (struct sockaddr *)&sin, &len) != 0)
			FAIL("getsockname: %s", strerror(errno));
		s->addr = sin.sin_addr.s_addr;
		s->port = ntohs(sin.sin_port);
		return x + 1;
	}
	fprintf(stderr, "ud_icrc_peers: no free loopback address next to the device's\n");
	exit(77); /* a device on another address: the test's premise is loopback */
}

static void setup(struct ibv_context *ctx)
{
	union ibv_gid gid;

	pd = ibv_alloc_pd(ctx);
	buf = calloc(1, BUF);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !buf || !cq || ibv_query_gid(ctx, 1, 0, &gid))
		FAIL("setup: %s", strerror(errno));
	memcpy(&daddr, gid.raw + 12, 4); /* an IPv4-mapped GID */
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr init = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
					.cap = {.max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1}};

	qp = mr ? ibv_create_qp(pd, &init) : NULL;
	if (!qp)
		FAIL("setup: %s", strerror(errno));
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		FAIL("INIT");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		FAIL("RTR");
}

/* A SEND ONLY datagram from sender k, sealed for IPv4 ID ip_id (with DF, as both kinds send);
 * corrupt: then a payload bit flipped, one that no ID makes pass as an unknown sender's. */
static void forge(int k, uint16_t ip_id, uint8_t seed, bool corrupt)
{
	const struct sender *s = &senders[k];
	uint8_t pkt[URNIC_BTH_LEN + URNIC_DETH_LEN + LEN + URNIC_ICRC_LEN];
	const size_t body = sizeof(pkt) - URNIC_ICRC_LEN;
	const struct urnic_bth_fields f = {.opcode = URNIC_OP_UD | URNIC_OP_SEND_ONLY,
					   .pkey = URNIC_DEFAULT_PKEY,
					   .dqpn = qp->qp_num,
					   .psn = seed};
	const struct urnic_ip4_flow flow = {
		.saddr = s->addr, .daddr = daddr, .sport = s->port, .dport = URNIC_ROCEV2_PORT};
	const struct iovec iov = {.iov_base = pkt, .iov_len = body};
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(URNIC_ROCEV2_PORT),
				 .sin_addr.s_addr = daddr};

	urnic_bth_build(pkt, &f);
	urnic_put32(pkt + URNIC_BTH_LEN, QKEY);
	pkt[URNIC_BTH_LEN + 4] = 0;
	urnic_put24(pkt + URNIC_BTH_LEN + 5, SRC_QPN + (uint32_t)k);
	for (int i = 0; i < LEN; i++)
		pkt[URNIC_BTH_LEN + URNIC_DETH_LEN + i] = (uint8_t)(seed + i * 13);
	urnic_icrc_compute_ipid(&flow, ip_id, IP_DF, &iov, 1, body, pkt + body);
	for (int bit = 0; corrupt; bit++) {
		struct urnic_ip_id_track unknown = {0};

		pkt[URNIC_BTH_LEN + URNIC_DETH_LEN + bit / 8] ^= (uint8_t)(1u << (bit % 8));
		corrupt = urnic_icrc_check_track(&flow, pkt, sizeof(pkt), 0, &unknown);
	}
	if (sendto(s->fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&to, sizeof(to)) !=
	    (ssize_t)sizeof(pkt))
		FAIL("sendto: %s", strerror(errno));
}

static bool poll_within(struct ibv_wc *wc, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (ibv_poll_cq(cq, 1, wc) > 0)
			return true;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return false;
		usleep(100);
	}
}

static uint8_t seed = 1; /* the next datagram's, and the wr_id of the receive for it */
static bool posted;	 /* a receive is posted, its wr_id the seed it was posted with */
static uint8_t posted_id;

static void post_one(void)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = BUF, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = seed, .sg_list = &sge, .num_sge = 1}, *bad;

	if (posted)
		return;
	memset(buf, 0xa5, BUF);
	if (ibv_post_recv(qp, &wr, &bad))
		FAIL("post_recv");
	posted = true;
	posted_id = seed;
}

/* Sender k's datagram sealed for ip_id arrives, and is the one sent. */
static void deliver(int k, uint16_t ip_id, const char *what)
{
	struct ibv_wc wc;

	post_one();
	forge(k, ip_id, seed, false);
	if (!poll_within(&wc, WAIT_MS))
		FAIL("sender %d's datagram (%s, IPv4 ID %u) not delivered in %d ms: dropped as "
		     "corrupt, checked against another sender's IDs?",
		     k, what, ip_id, WAIT_MS);
	posted = false;
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != posted_id || wc.byte_len != GRH + LEN)
		FAIL("sender %d: %s, wr_id %llu, %u bytes", k, ibv_wc_status_str(wc.status),
		     (unsigned long long)wc.wr_id, wc.byte_len);
	if (wc.src_qp != SRC_QPN + (uint32_t)k || memcmp(buf + 32, &senders[k].addr, 4) != 0)
		FAIL("sender %d: source QPN %#x or the GRH's source address wrong", k, wc.src_qp);
	for (int i = 0; i < LEN; i++)
		if (buf[GRH + i] != (uint8_t)(seed + i * 13))
			FAIL("sender %d: byte %d of %d is %#x", k, i, LEN, buf[GRH + i]);
	if (buf[GRH + LEN] != 0xa5)
		FAIL("sender %d: a byte past the datagram written", k);
	seed++;
}

/* Sender k's datagram (sealed for ip_id, corrupt or not) is dropped. */
static void dropped(int k, uint16_t ip_id, bool corrupt, const char *what)
{
	struct ibv_wc wc;

	post_one();
	forge(k, ip_id, seed++, corrupt);
	if (poll_within(&wc, QUIET_MS))
		FAIL("sender %d's datagram (%s, IPv4 ID %u) was delivered", k, what, ip_id);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	uint32_t x = 1;

	alarm(25);
	if (!ctx)
		FAIL("no device");
	setup(ctx);
	for (int k = 0; k < SENDERS; k++)
		x = bind_next(&senders[k], x);

	deliver(0, 0, "urnic-like, ID 0");
	deliver(1, 30000, "rxe-like, its first");
	deliver(0, 3, "urnic-like, a GSO segment's number");
	deliver(1, 30001, "rxe-like");
	deliver(2, 1000, "a second rxe-like, its first");
	deliver(0, 5, "urnic-like, a GSO segment's number");
	deliver(2, 1001, "the second rxe-like");
	deliver(1, 30002, "rxe-like");
	for (int k = 3; k < SENDERS; k++)
		dropped(k, 0, true, "corrupt, from a new address");
	dropped(1, 60000, false, "rxe-like, far outside its window: its record was kept");
	deliver(1, 30003, "rxe-like, back in its window");
	for (int k = 3; k < SENDERS; k++) /* every slot taken: the first three are forgotten */
		deliver(k, 0, "urnic-like, one of eight more");
	deliver(1, 50000, "rxe-like, forgotten: unknown again");
	deliver(0, 40000, "urnic-like, forgotten: unknown again");

	for (int k = 0; k < SENDERS; k++)
		close(senders[k].fd);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	free(buf);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ud_icrc_peers: %d senders of both kinds of IPv4 IDs heard by one UD QP\n", SENDERS);
	return 0;
}
