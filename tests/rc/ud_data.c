/* ud_data: UD datagrams of 0, 1, MTU-1 and MTU bytes arrive byte for byte behind the 40-byte GRH
 * (RoCEv2 IPv4: the IPv4 header in its last 20 bytes, source address = the sender's), with
 * src_qp, byte_len = 40 + length, IBV_WC_GRH and immediate data; one QP hears two peers; a wrong
 * Q_Key is dropped; a datagram over the MTU and one without an AH are refused at post. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QKEY 0x11111111u
#define BUF 16384

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "ud_data: " __VA_ARGS__);                                          \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

struct end {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static struct ibv_port_attr port;

static void make_end(struct end *e)
{
	e->buf = calloc(1, BUF);
	e->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	e->mr = ibv_reg_mr(pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr init = {.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_UD,
					.cap = {.max_send_wr = 16, .max_recv_wr = 16,
						.max_send_sge = 1, .max_recv_sge = 1}};

	e->qp = ibv_create_qp(pd, &init);
	if (!e->buf || !e->cq || !e->mr || !e->qp)
		FAIL("setup: %s", strerror(errno));
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY};

	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		FAIL("INIT");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE))
		FAIL("RTR");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 7};
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		FAIL("RTS");
}

static void post_recv(struct end *e, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = BUF / 2, .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;

	memset(e->buf, 0xa5, BUF / 2);
	if (ibv_post_recv(e->qp, &wr, &bad))
		FAIL("post_recv");
}

static int post_send(struct end *e, struct ibv_ah *ah, uint32_t dqpn, uint32_t qkey, size_t len,
		     uint32_t seed, bool imm)
{
	uint8_t *src = e->buf + BUF / 2;

	for (size_t i = 0; i < len; i++)
		src[i] = (uint8_t)(seed + i * 7);
	struct ibv_sge sge = {.addr = (uintptr_t)src, .length = (uint32_t)len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = seed, .sg_list = &sge, .num_sge = 1,
				 .opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(seed),
				 .wr.ud = {.ah = ah, .remote_qpn = dqpn, .remote_qkey = qkey}},
			   *bad;

	return ibv_post_send(e->qp, &wr, &bad);
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return 0;
	}
}

/* sender -> receiver, one datagram, checked */
static void one(struct end *tx, struct end *rx, struct ibv_ah *ah, size_t len, uint32_t seed,
		bool imm)
{
	struct ibv_wc wc;

	post_recv(rx, seed);
	if (post_send(tx, ah, rx->qp->qp_num, QKEY, len, seed, imm))
		FAIL("post_send %zu", len);
	if (!poll_one(tx->cq, &wc, 5000) || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND)
		FAIL("send completion for %zu bytes", len);
	if (!poll_one(rx->cq, &wc, 5000))
		FAIL("no datagram of %zu bytes", len);
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.wr_id != seed)
		FAIL("recv completion: %s", ibv_wc_status_str(wc.status));
	if (wc.byte_len != 40 + len || !(wc.wc_flags & IBV_WC_GRH) || wc.src_qp != tx->qp->qp_num)
		FAIL("byte_len %u flags %#x src_qp %#x", wc.byte_len, wc.wc_flags, wc.src_qp);
	if (imm != !!(wc.wc_flags & IBV_WC_WITH_IMM) || (imm && wc.imm_data != htonl(seed)))
		FAIL("immediate data");
	if (rx->buf[20] != 0x45 || memcmp(rx->buf + 32, &gid.raw[12], 4) != 0)
		FAIL("GRH: no IPv4 header with the sender's address at offset 20");
	for (size_t i = 0; i < len; i++)
		if (rx->buf[40 + i] != (uint8_t)(seed + i * 7))
			FAIL("byte %zu of %zu", i, len);
	if (rx->buf[40 + len] != 0xa5)
		FAIL("byte past the datagram written");
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	alarm(60);
	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	if (!ctx)
		FAIL("no device");
	pd = ibv_alloc_pd(ctx);
	if (!pd || ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, 0, &gid))
		FAIL("setup");
	struct end a, b, c;

	make_end(&a);
	make_end(&b);
	make_end(&c);
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .hop_limit = 64}};
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);

	if (!ah)
		FAIL("ibv_create_ah: %s", strerror(errno));
	uint32_t mtu = 128u << port.active_mtu;
	size_t sizes[] = {0, 1, mtu - 1, mtu};

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		one(&b, &a, ah, sizes[i], 100 + i, i & 1);
		one(&c, &a, ah, sizes[i], 200 + i, !(i & 1)); /* a second peer of the same QP */
	}
	struct ibv_wc wc;

	post_recv(&a, 999);
	if (post_send(&b, ah, a.qp->qp_num, QKEY ^ 1, 8, 999, false))
		FAIL("post with another Q_Key");
	if (poll_one(a.cq, &wc, 200))
		FAIL("a datagram with the wrong Q_Key was delivered");
	poll_one(b.cq, &wc, 1000);
	if (post_send(&b, ah, a.qp->qp_num, QKEY, mtu + 1, 1, false) != EINVAL)
		FAIL("a datagram over the MTU was accepted");
	if (post_send(&b, NULL, a.qp->qp_num, QKEY, 8, 1, false) != EINVAL)
		FAIL("a datagram without an AH was accepted");
	ibv_destroy_ah(ah);
	for (struct end *e = &a; e; e = e == &a ? &b : e == &b ? &c : NULL) {
		ibv_destroy_qp(e->qp);
		ibv_destroy_cq(e->cq);
		ibv_dereg_mr(e->mr);
		free(e->buf);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ud_data: sizes 0..%u from two peers, GRH, Q_Key and limits checked\n", mtu);
	return 0;
}
