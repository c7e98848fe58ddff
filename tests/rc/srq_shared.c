/* srq_shared: two RC QPs draw receives from one SRQ; each SEND lands in the next SRQ WQE, the
 * completion names the QP it arrived on; IBV_EVENT_SRQ_LIMIT_REACHED fires once the SRQ holds
 * fewer WQEs than the armed limit; an SRQ in use cannot be destroyed (EBUSY). One process. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop_qp.h"

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "srq_shared: " __VA_ARGS__);                                       \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

#define NRECV 6
#define LIMIT 3
#define MSG 100

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static enum ibv_mtu mtu;

static struct ibv_qp *make_qp(struct ibv_srq *srq)
{
	struct ibv_qp_init_attr init = {.send_cq = cq, .recv_cq = cq, .srq = srq,
					.qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = 8, .max_recv_wr = 8,
						.max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);

	if (!qp)
		FAIL("create_qp: %s", strerror(errno));
	return qp;
}

static void connect_qp(struct ibv_qp *qp, uint32_t dest)
{
	const char *step = loop_qp_connect(qp, dest, &gid, mtu, 0);

	if (step)
		FAIL("%s: %s", step, strerror(errno));
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	static uint8_t buf[NRECV * MSG * 2];

	alarm(120);
	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	struct ibv_port_attr port;

	if (!ctx || ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, 0, &gid))
		FAIL("no device");
	mtu = port.active_mtu;
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = NRECV, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);

	if (!pd || !cq || !mr || !srq)
		FAIL("setup: %s", strerror(errno));
	struct ibv_qp *rx[2] = {make_qp(srq), make_qp(srq)}, *tx[2] = {make_qp(NULL), make_qp(NULL)};

	for (int i = 0; i < 2; i++) {
		connect_qp(rx[i], tx[i]->qp_num);
		connect_qp(tx[i], rx[i]->qp_num);
	}
	for (int i = 0; i < NRECV; i++) {
		struct ibv_sge sge = {.addr = (uintptr_t)buf + (uint64_t)i * MSG, .length = MSG,
				      .lkey = mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = 100 + (uint64_t)i, .sg_list = &sge, .num_sge = 1},
				   *bad;

		if (ibv_post_srq_recv(srq, &wr, &bad))
			FAIL("post_srq_recv");
	}
	struct ibv_srq_attr lim = {.srq_limit = LIMIT};

	if (ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT))
		FAIL("arm the limit");
	/* messages alternate between the two QPs; SRQ WQEs are consumed in post order */
	for (int m = 0; m < NRECV; m++) {
		uint8_t *src = buf + NRECV * MSG + (size_t)m * MSG;
		struct ibv_wc wc[2];

		memset(src, 0x30 + m, MSG);
		struct ibv_sge sge = {.addr = (uintptr_t)src, .length = MSG, .lkey = mr->lkey};
		struct ibv_send_wr wr = {.wr_id = (uint64_t)m, .sg_list = &sge, .num_sge = 1,
					 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		if (ibv_post_send(tx[m & 1], &wr, &bad))
			FAIL("post_send");
		int got = loop_qp_poll(cq, 2, wc, 20000);

		if (got < 2)
			FAIL("message %d: %d completions%s%s (opcode %d)", m, got,
			     got ? ", the first: " : "", got ? ibv_wc_status_str(wc[0].status) : "",
			     got ? (int)wc[0].opcode : -1);
		struct ibv_wc *r = wc[0].opcode == IBV_WC_RECV ? &wc[0] : &wc[1];

		if (r->status != IBV_WC_SUCCESS || r->opcode != IBV_WC_RECV ||
		    r->wr_id != 100 + (uint64_t)m || r->qp_num != rx[m & 1]->qp_num ||
		    r->byte_len != MSG)
			FAIL("message %d: wr_id %llu on qp %#x, status %s", m,
			     (unsigned long long)r->wr_id, r->qp_num, ibv_wc_status_str(r->status));
		for (int i = 0; i < MSG; i++)
			if (buf[m * MSG + i] != 0x30 + m)
				FAIL("message %d byte %d", m, i);
	}
	struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
	struct ibv_async_event ev;

	if (poll(&pfd, 1, 1000) != 1 || ibv_get_async_event(ctx, &ev))
		FAIL("no SRQ limit event");
	if (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED || ev.element.srq != srq)
		FAIL("event %s", ibv_event_type_str(ev.event_type));
	ibv_ack_async_event(&ev);
	if (ibv_destroy_srq(srq) != EBUSY)
		FAIL("destroying an SRQ in use did not fail with EBUSY");
	for (int i = 0; i < 2; i++) {
		ibv_destroy_qp(rx[i]);
		ibv_destroy_qp(tx[i]);
	}
	if (ibv_destroy_srq(srq))
		FAIL("destroy_srq once unused");
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("srq_shared: %d messages over 2 QPs from one SRQ, limit event, EBUSY\n", NRECV);
	return 0;
}
