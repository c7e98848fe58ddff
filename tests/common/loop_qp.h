/* loop_qp.h - one-process tests: bring an RC QP to RTS towards another QP of the same device. */
#ifndef URNIC_TEST_LOOP_QP_H
#define URNIC_TEST_LOOP_QP_H

#include <infiniband/verbs.h>

/* INIT (with access), RTR to dest_qpn at gid (sq and rq PSN 1), RTS with retries forever.
 * Returns NULL on success, else the name of the transition that failed (errno is set). */
const char *loop_qp_connect(struct ibv_qp *qp, uint32_t dest_qpn, const union ibv_gid *gid,
			    enum ibv_mtu mtu, unsigned access);

/* Poll cq until n completions are in wc or ms milliseconds pass; returns how many arrived.
 * A deadline, not an iteration count: under valgrind a poll costs a hundred times more. */
int loop_qp_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc, unsigned ms);

/* The first device, a PD, one CQ of cqe entries for both queues, len bytes at buf registered
 * with local write and access, and an RC QP (16 sends, 1 receive) connected to itself. */
struct loop_self {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
};

/* Returns NULL on success, else the name of the step that failed. */
const char *loop_self_open(struct loop_self *l, int cqe, void *buf, size_t len, unsigned access);
void loop_self_close(struct loop_self *l);

#endif
