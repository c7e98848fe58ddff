/* marshall.c - the kernel-ABI face of libibverbs: conversions between the kernel's uverbs/SA
 * structs and the verbs structs (librdmacm uses them), P_Key lookup, and the private provider ABI
 * (IBVERBS_PRIVATE_34) that provider libraries linked into a program resolve at load time. */
#include <errno.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <stdbool.h>
#include <string.h>

#include "urnic.h"

/* rdma-core's <infiniband/marshall.h>, which Debian does not install */
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);

/* ---- kernel struct <-> verbs struct ---- */

URNIC_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

/* qp_state stays as the caller set it: librdmacm picks the state and asks the kernel for the
 * attributes that go with it, as rdma-core's conversion also leaves it. */
URNIC_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;

	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;

	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

/* Path records keep the wire byte order on both sides (dlid, slid, flow_label, pkey are __be). */
URNIC_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					      struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

URNIC_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					    struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->reversible = src->reversible;
	dst->mtu = src->mtu;
	dst->pkey = src->pkey;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->numb_path = src->numb_path;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

/* ---- P_Key lookup ---- */

/* Walks the table through ibv_query_pkey; the P_Key is compared in network order, as given.
 * Returns the index, or -1 with errno as the failing query left it (past the table's end). */
URNIC_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	for (int i = 0;; i++) {
		__be16 entry;

		if (ibv_query_pkey(context, port_num, i, &entry))
			return -1;
		if (entry == pkey)
			return i;
	}
}

/* ---- the private provider ABI ----
 *
 * A program may link provider libraries directly (perftest links libmlx5 and libefa, BIND_NOW).
 * They import rdma-core's private ABI, so each of these names must resolve at load time; a
 * provider's constructor also registers itself.  urnic never hands a device or context to a
 * provider, so past registration none of these is ever reached.  They share three bodies, one per
 * return convention, since their real parameters (rdma-core's driver.h) are never read. */

URNIC_EXPORT bool verbs_allow_disassociate_destroy; /* a variable in rdma-core, read by providers */

static int provider_cmd_unsupported(void) /* ibv_cmd_*, execute_ioctl: return an errno */
{
	return EOPNOTSUPP;
}

static void *provider_alloc_unsupported(void) /* constructors: return NULL with errno */
{
	errno = EOPNOTSUPP;
	return NULL;
}

static void provider_ignored(void) /* registration, logging, context set-up: nothing to do */
{
}

#define PROVIDER_ABI(body, name)                                                                   \
	URNIC_EXPORT extern __typeof__(body) name __attribute__((alias(#body)))

PROVIDER_ABI(provider_ignored, verbs_register_driver_34);
PROVIDER_ABI(provider_ignored, __verbs_log);
PROVIDER_ABI(provider_ignored, verbs_init_cq);
PROVIDER_ABI(provider_ignored, verbs_set_ops);
PROVIDER_ABI(provider_ignored, verbs_uninit_context);
PROVIDER_ABI(provider_alloc_unsupported, _verbs_init_and_alloc_context);
PROVIDER_ABI(provider_alloc_unsupported, verbs_open_device);
PROVIDER_ABI(provider_cmd_unsupported, execute_ioctl);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_advise_mr);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_alloc_dm);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_alloc_mw);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_alloc_pd);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_attach_mcast);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_close_xrcd);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_ah);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_counters);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_cq_ex);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_flow);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_flow_action_esp);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_qp_ex);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_qp_ex2);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_rwq_ind_table);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_srq);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_srq_ex);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_create_wq);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_dealloc_mw);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_dealloc_pd);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_dereg_mr);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_destroy_ah);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_destroy_counters);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_destroy_cq);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_destroy_flow);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_destroy_flow_action);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_destroy_qp);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_destroy_rwq_ind_table);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_destroy_srq);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_destroy_wq);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_detach_mcast);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_free_dm);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_get_context);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_modify_cq);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_modify_flow_action_esp);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_modify_qp);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_modify_qp_ex);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_modify_srq);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_modify_wq);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_open_qp);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_open_xrcd);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_query_context);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_query_device_any);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_query_mr);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_query_port);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_query_qp);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_query_srq);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_read_counters);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_reg_dm_mr);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_reg_dmabuf_mr);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_reg_mr);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_rereg_mr);
PROVIDER_ABI(provider_cmd_unsupported, ibv_cmd_resize_cq);
