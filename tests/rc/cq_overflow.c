/* cq_overflow: more completions than a CQ holds raise IBV_EVENT_CQ_ERR on the async fd, and
 * nothing beyond the CQ's entries is written. One process, a QP connected to itself. */
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop_qp.h"

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "cq_overflow: " __VA_ARGS__);                                      \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

int main(void)
{
	static char buf[4096];
	struct loop_self l;

	alarm(30);
	const char *step = loop_self_open(&l, 1, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE);

	if (step)
		FAIL("%s", step);
	struct ibv_context *ctx = l.ctx;
	struct ibv_cq *cq = l.cq;
	struct ibv_mr *mr = l.mr;
	struct ibv_qp *qp = l.qp;
	int n = cq->cqe + 3;

	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
		struct ibv_send_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED,
					 .wr.rdma = {.remote_addr = (uintptr_t)buf + 64,
						     .rkey = mr->rkey}},
				   *bad;

		if (ibv_post_send(qp, &wr, &bad))
			FAIL("post %d", i);
	}
	struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};
	struct ibv_wc wc[64];
	int got = 0;

	/* the engine completes into the CQ on its own; wait for the event without consuming */
	poll(&pfd, 1, 20000);
	struct ibv_async_event ev;

	if (!(pfd.revents & POLLIN) || ibv_get_async_event(ctx, &ev))
		FAIL("no async event after %d completions into a %d-entry CQ", n, cq->cqe);
	if (ev.event_type != IBV_EVENT_CQ_ERR || ev.element.cq != cq)
		FAIL("event %s, expected CQ error on our CQ", ibv_event_type_str(ev.event_type));
	ibv_ack_async_event(&ev);
	got = ibv_poll_cq(cq, 64, wc);
	if (got != cq->cqe)
		FAIL("%d completions in a %d-entry CQ", got, cq->cqe);
	printf("cq_overflow: %d completions into a %d-entry CQ: IBV_EVENT_CQ_ERR, %d kept\n", n,
	       cq->cqe, got);
	loop_self_close(&l);
	return 0;
}
