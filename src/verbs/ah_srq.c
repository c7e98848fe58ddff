/* ah_srq.c - address handles (UD), shared receive queues, the AH of a received datagram, and
 * ECE (declined). */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "urnic.h"
#include "verbs/verbs_ops.h"

/* ---- shared receive queues ---- */

static struct urnic_srq *to_usrq(struct ibv_srq *s)
{
	return container_of(s, struct urnic_srq, ibv);
}

URNIC_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *init)
{
	struct ibv_srq_attr *a = &init->attr;
	struct urnic_srq *srq;

	if (a->max_wr < 1 || a->max_wr > URNIC_MAX_QP_WR || a->max_sge > URNIC_MAX_SGE ||
	    a->srq_limit > a->max_wr) {
		errno = EINVAL;
		return NULL;
	}
	if (!urnic_take(&ctx_dev(pd->context)->nsrq, URNIC_MAX_SRQ))
		return NULL;
	srq = calloc(1, sizeof(*srq));
	if (!srq || urnic_rq_init(&srq->rq, a->max_wr, a->max_sge ? a->max_sge : 1)) {
		free(srq);
		urnic_give(&ctx_dev(pd->context)->nsrq);
		errno = ENOMEM;
		return NULL;
	}
	srq->rq.limit = a->srq_limit;
	srq->ibv.context = pd->context;
	srq->ibv.srq_context = init->srq_context;
	srq->ibv.pd = pd;
	pthread_mutex_init(&srq->ibv.mutex, NULL);
	pthread_cond_init(&srq->ibv.cond, NULL);
	atomic_fetch_add(&to_upd(pd)->users, 1);
	a->max_sge = srq->rq.max_sge;
	return &srq->ibv;
}

/* urnic does not resize an SRQ (no IBV_DEVICE_SRQ_RESIZE); the limit can be armed any time. */
URNIC_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int attr_mask)
{
	struct urnic_srq *srq = to_usrq(ibsrq);

	if (attr_mask & ~IBV_SRQ_LIMIT)
		return EINVAL;
	if ((attr_mask & IBV_SRQ_LIMIT) && attr->srq_limit > srq->rq.max_wr)
		return EINVAL;
	pthread_mutex_lock(&srq->rq.lock);
	if (attr_mask & IBV_SRQ_LIMIT)
		srq->rq.limit = attr->srq_limit;
	pthread_mutex_unlock(&srq->rq.lock);
	return 0;
}

URNIC_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct urnic_srq *srq = to_usrq(ibsrq);

	pthread_mutex_lock(&srq->rq.lock);
	*attr = (struct ibv_srq_attr){
	    .max_wr = srq->rq.max_wr, .max_sge = srq->rq.max_sge, .srq_limit = srq->rq.limit};
	pthread_mutex_unlock(&srq->rq.lock);
	return 0;
}

URNIC_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct urnic_srq *srq = to_usrq(ibsrq);

	if (atomic_load(&srq->users) > 0)
		return EBUSY;
	atomic_fetch_sub(&to_upd(ibsrq->pd)->users, 1);
	urnic_give(&ctx_dev(ibsrq->context)->nsrq);
	urnic_rq_destroy(&srq->rq);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_cond_destroy(&ibsrq->cond);
	free(srq);
	return 0;
}

int urnic_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return urnic_rq_post(&to_usrq(ibsrq)->rq, wr, bad);
}

/* ---- address handles: RoCEv2 over IPv4, so a GRH whose destination GID maps an address ---- */

URNIC_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct urnic_ah *ah;
	uint32_t daddr;

	if (!attr->is_global || attr->grh.sgid_index != 0 || attr->port_num > 1 ||
	    !urnic_gid_to_ipv4(&attr->grh.dgid, &daddr)) {
		errno = EINVAL;
		return NULL;
	}
	if (!urnic_take(&ctx_dev(pd->context)->nah, URNIC_MAX_AH))
		return NULL;
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		urnic_give(&ctx_dev(pd->context)->nah);
		errno = ENOMEM;
		return NULL;
	}
	ah->daddr = daddr;
	ah->ibv.context = pd->context;
	ah->ibv.pd = pd;
	atomic_fetch_add(&to_upd(pd)->users, 1);
	return &ah->ibv;
}

URNIC_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	atomic_fetch_sub(&to_upd(ibah->pd)->users, 1);
	urnic_give(&ctx_dev(ibah->context)->nah);
	free(to_uah(ibah));
	return 0;
}

#define GRH_IPV4_OFFSET 20   /* a RoCEv2 IPv4 header sits in the last 20 bytes of the 40 */
#define NEXT_HDR_UDP 17	     /* RoCEv2 over IPv6 */
#define NEXT_HDR_IB_BTH 0x1b /* RoCEv1 / IB */

struct ipv4_hdr {
	uint8_t version_ihl;
	uint8_t tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off;
	uint8_t ttl;
	uint8_t protocol;
	uint16_t check; /* one's complement sum: byte order does not matter to verify it */
	__be32 saddr;
	__be32 daddr;
};
_Static_assert(sizeof(struct ipv4_hdr) == 20, "IPv4 header without options");

static const struct ipv4_hdr *grh_ipv4(const struct ibv_grh *grh)
{
	return (const struct ipv4_hdr *)((const uint8_t *)grh + GRH_IPV4_OFFSET);
}

static int ipv4_checksum_ok(const struct ipv4_hdr *h)
{
	uint16_t words[sizeof(*h) / 2];
	uint32_t sum = 0;

	memcpy(words, h, sizeof(words));
	for (size_t i = 0; i < sizeof(words) / 2; i++)
		sum += words[i];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

/* The GRH buffer of a RoCEv2 IPv4 packet leaves its first 20 bytes undefined: they may even read
 * as IPv6, so a well-formed IPv4 header at offset 20 is what tells the two apart.  Returns 4, 6,
 * or -1 with errno set. */
static int grh_ip_version(const struct ibv_grh *grh)
{
	const struct ipv4_hdr *ip4 = grh_ipv4(grh);

	if (be32toh(grh->version_tclass_flow) >> 28 != 6) {
		if (ip4->version_ihl >> 4 == 4)
			return 4;
		errno = EPROTONOSUPPORT;
		return -1;
	}
	return (ip4->version_ihl & 0xf) == 5 && ipv4_checksum_ok(ip4) ? 4 : 6;
}

/* The index of the port's GID equal to gid, or -1 with errno set.  Every urnic GID is RoCEv2
 * (see ibv_query_gid_type), so the type needs no comparing. */
static int find_gid_index(struct ibv_context *context, uint8_t port_num, const union ibv_gid *gid)
{
	for (int i = 0;; i++) {
		union ibv_gid g;

		if (ibv_query_gid(context, port_num, i, &g))
			return -1;
		if (!memcmp(&g, gid, sizeof(g)))
			return i;
	}
}

/* A reply goes back to the sender from the GID the message was sent to. */
static int route_from_ipv4(struct ibv_context *context, uint8_t port_num,
			   const struct ipv4_hdr *ip4, struct ibv_ah_attr *ah_attr)
{
	union ibv_gid local;
	int index;

	if ((be32toh(ip4->daddr) >> 28) == 0xe) { /* multicast is never in the GID table */
		errno = EINVAL;
		return -1;
	}
	urnic_gid_from_ipv4(ip4->daddr, &local);
	index = find_gid_index(context, port_num, &local);
	if (index < 0)
		return -1;
	urnic_gid_from_ipv4(ip4->saddr, &ah_attr->grh.dgid);
	ah_attr->grh.sgid_index = (uint8_t)index;
	ah_attr->grh.hop_limit = ip4->ttl;
	ah_attr->grh.traffic_class = ip4->tos;
	return 0;
}

static int route_from_ipv6(struct ibv_context *context, uint8_t port_num, const struct ibv_grh *grh,
			   struct ibv_ah_attr *ah_attr)
{
	int index;

	if (grh->dgid.raw[0] == 0xff) {
		errno = EINVAL;
		return -1;
	}
	if (grh->next_hdr == NEXT_HDR_IB_BTH) { /* RoCEv1: no urnic GID has that type */
		errno = EINVAL;
		return -1;
	}
	if (grh->next_hdr != NEXT_HDR_UDP) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	index = find_gid_index(context, port_num, &grh->dgid);
	if (index < 0)
		return -1;
	ah_attr->grh.dgid = grh->sgid;
	ah_attr->grh.sgid_index = (uint8_t)index;
	ah_attr->grh.hop_limit = grh->hop_limit;
	ah_attr->grh.traffic_class = (be32toh(grh->version_tclass_flow) >> 20) & 0xff;
	return 0;
}

URNIC_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
				     struct ibv_wc *wc, struct ibv_grh *grh,
				     struct ibv_ah_attr *ah_attr)
{
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;

	ah_attr->is_global = 1;
	ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
	switch (grh_ip_version(grh)) {
	case 4:
		return route_from_ipv4(context, port_num, grh_ipv4(grh), ah_attr);
	case 6:
		return route_from_ipv6(context, port_num, grh, ah_attr);
	default:
		return -1;
	}
}

URNIC_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						  struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

/* urnic is not an Ethernet device: there is no neighbour to resolve a MAC from. */
URNIC_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					     uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	errno = EOPNOTSUPP;
	return -EOPNOTSUPP;
}

/* ---- enhanced connection establishment: no vendor options to offer or accept ---- */

URNIC_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}

URNIC_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	errno = EOPNOTSUPP;
	return EOPNOTSUPP;
}
