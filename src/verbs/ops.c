/* ops.c - wiring urnic's functions into the ops tables that the verbs header's inline functions
 * call, so that ibv_post_send, ibv_poll_cq and friends reach urnic without a library call. */
#include <errno.h>

#include "verbs/verbs_ops.h"

void urnic_verbs_set_ops(struct urnic_context *uctx)
{
	struct ibv_context_ops *ops = &uctx->vctx.context.ops;

	ops->poll_cq = urnic_poll_cq;
	ops->req_notify_cq = urnic_req_notify_cq;
	ops->post_send = urnic_post_send;
	ops->post_recv = urnic_post_recv;
	ops->post_srq_recv = urnic_post_srq_recv;
	uctx->vctx.sz = sizeof(struct verbs_context);
	uctx->vctx.query_port = urnic_query_port_ex;
}
