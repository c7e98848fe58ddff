/* verbs_ops.h - the provider functions the verbs header reaches through ibv_context ops. */
#ifndef URNIC_VERBS_OPS_H
#define URNIC_VERBS_OPS_H

#include "urnic.h"

void urnic_verbs_set_ops(struct urnic_context *uctx);

int urnic_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
int urnic_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int urnic_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int urnic_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int urnic_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int urnic_query_port_ex(struct ibv_context *context, uint8_t port, struct ibv_port_attr *a,
			size_t len);

#endif
