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

#endif
