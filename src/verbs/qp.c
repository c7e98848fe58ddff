/* qp.c - QP create, modify (the IBTA state machine and its attribute rules), query, destroy. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine/direct.h"
#include "engine/engine.h"
#include "net/shm.h"
#include "verbs/verbs_ops.h"

/* ---------------- the state machine, as data (IBTA vol. 1, table 91 / rdma-core) ----------- */

struct qp_transition {
	unsigned required;
	unsigned optional;
};

/* [cur][next] for RC; only transitions with a row here are legal. */
static const struct qp_transition rc_transitions[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] =
		{
			[IBV_QPS_INIT] = {.required = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						      IBV_QP_ACCESS_FLAGS},
		},
	[IBV_QPS_INIT] =
		{
			[IBV_QPS_INIT] = {.optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						      IBV_QP_ACCESS_FLAGS},
			[IBV_QPS_RTR] = {.required = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
						     IBV_QP_MIN_RNR_TIMER,
					 .optional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
						     IBV_QP_PKEY_INDEX},
		},
	[IBV_QPS_RTR] =
		{
			[IBV_QPS_RTS] = {.required = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
						     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						     IBV_QP_MAX_QP_RD_ATOMIC,
					 .optional = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH |
						     IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
						     IBV_QP_PATH_MIG_STATE},
		},
	[IBV_QPS_RTS] =
		{
			[IBV_QPS_RTS] = {.optional = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
						     IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
						     IBV_QP_MIN_RNR_TIMER},
		},
};

/* UC: no READ/atomic resources, no ACK timer, no RNR. */
static const struct qp_transition uc_transitions[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] =
		{
			[IBV_QPS_INIT] = {.required = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						      IBV_QP_ACCESS_FLAGS},
		},
	[IBV_QPS_INIT] =
		{
			[IBV_QPS_INIT] = {.optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						      IBV_QP_ACCESS_FLAGS},
			[IBV_QPS_RTR] = {.required = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						     IBV_QP_RQ_PSN,
					 .optional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
						     IBV_QP_PKEY_INDEX},
		},
	[IBV_QPS_RTR] =
		{
			[IBV_QPS_RTS] = {.required = IBV_QP_SQ_PSN,
					 .optional = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH |
						     IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE},
		},
	[IBV_QPS_RTS] =
		{
			[IBV_QPS_RTS] = {.optional = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |
						     IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE},
		},
};

/* UD: a Q_Key instead of a connection. */
static const struct qp_transition ud_transitions[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] =
		{
			[IBV_QPS_INIT] = {.required = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY},
		},
	[IBV_QPS_INIT] =
		{
			[IBV_QPS_INIT] = {.optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY},
			[IBV_QPS_RTR] = {.optional = IBV_QP_PKEY_INDEX | IBV_QP_QKEY},
		},
	[IBV_QPS_RTR] =
		{
			[IBV_QPS_RTS] = {.required = IBV_QP_SQ_PSN,
					 .optional = IBV_QP_CUR_STATE | IBV_QP_QKEY},
		},
	[IBV_QPS_RTS] =
		{
			[IBV_QPS_RTS] = {.optional = IBV_QP_CUR_STATE | IBV_QP_QKEY},
		},
};

static bool transition_legal(enum ibv_qp_type type, enum ibv_qp_state cur,
			     enum ibv_qp_state next, unsigned mask)
{
	/* any state may go to RESET or ERR, with no other attribute */
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return (mask & ~(unsigned)(IBV_QP_STATE | IBV_QP_CUR_STATE)) == 0;
	if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR)
		return false;
	const struct qp_transition *t = type == IBV_QPT_UC   ? &uc_transitions[cur][next]
					: type == IBV_QPT_UD ? &ud_transitions[cur][next]
							     : &rc_transitions[cur][next];

	/* a row with nothing required or optional is illegal, except UD's INIT to RTR */
	if (!t->required && !t->optional)
		return false;
	unsigned attrs = mask & ~(unsigned)IBV_QP_STATE;

	return (attrs & t->required) == t->required &&
	       (attrs & ~(t->required | t->optional)) == 0;
}

/* ---------------- attribute values ---------------- */

static int check_values(struct urnic_qp *qp, const struct ibv_qp_attr *a, unsigned mask)
{
	struct urnic_dev *dev = qp->dev;
	uint32_t addr;

	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags & ~(unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) &&
	    (a->path_mtu < IBV_MTU_256 || (int)a->path_mtu > dev->active_mtu))
		return EINVAL;
	if ((mask & IBV_QP_AV) &&
	    (!a->ah_attr.is_global || a->ah_attr.grh.sgid_index != 0 ||
	     a->ah_attr.port_num > 1 || !urnic_gid_to_ipv4(&a->ah_attr.grh.dgid, &addr) || addr == 0))
		return EINVAL; /* RoCE needs a GRH, and urnic speaks IPv4 */
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > URNIC_QPN_MASK)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > URNIC_MAX_QP_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > URNIC_MAX_QP_RD_ATOM)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_ALT_PATH) || (mask & IBV_QP_PATH_MIG_STATE))
		return EINVAL; /* no alternate path: one port, one address */
	return 0;
}

static void save_attrs(struct urnic_qp *qp, const struct ibv_qp_attr *a, unsigned mask)
{
	struct ibv_qp_attr *s = &qp->attr;

#define COPY(flag, field)                                                                          \
	if (mask & (flag))                                                                         \
	s->field = a->field
	COPY(IBV_QP_PKEY_INDEX, pkey_index);
	COPY(IBV_QP_PORT, port_num);
	COPY(IBV_QP_ACCESS_FLAGS, qp_access_flags);
	COPY(IBV_QP_AV, ah_attr);
	COPY(IBV_QP_PATH_MTU, path_mtu);
	COPY(IBV_QP_DEST_QPN, dest_qp_num);
	COPY(IBV_QP_RQ_PSN, rq_psn);
	COPY(IBV_QP_SQ_PSN, sq_psn);
	COPY(IBV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
	COPY(IBV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic);
	COPY(IBV_QP_MIN_RNR_TIMER, min_rnr_timer);
	COPY(IBV_QP_TIMEOUT, timeout);
	COPY(IBV_QP_RETRY_CNT, retry_cnt);
	COPY(IBV_QP_RNR_RETRY, rnr_retry);
	COPY(IBV_QP_QKEY, qkey);
#undef COPY
	s->rq_psn &= URNIC_PSN_MASK;
	s->sq_psn &= URNIC_PSN_MASK;
	qp->attr_mask_set |= mask;
}

/* ---------------- entering each state ---------------- */

static void enter_reset(struct urnic_qp *qp)
{
	qp->sq_prod = qp->sq_next = qp->sq_cons = 0;
	if (!qp->srq) { /* RESET empties the QP's own receive queue */
		qp->own_rq.prod = qp->own_rq.cons = 0;
	}
	qp->cur_recv.taken = false;
	qp->ack_deadline = qp->rnr_deadline = qp->held_until = 0;
	urnic_rtx_reset(qp);
	qp->in_send = qp->in_write = qp->nak_sent = false;
	qp->ack_pending = qp->nak_pending = false;
	qp->rd_count = qp->rd_head = 0;
	qp->rd_outstanding = 0;
	qp->attr_mask_set = 0;
	memset(&qp->attr, 0, sizeof(qp->attr));
}

static int enter_rtr(struct urnic_qp *qp)
{
	int n = qp->attr.max_dest_rd_atomic ? qp->attr.max_dest_rd_atomic : 1;
	struct urnic_rd_res *rd = calloc((size_t)n, sizeof(*rd));

	if (!rd)
		return ENOMEM;
	free(qp->rd);
	qp->rd = rd;
	qp->rd_size = n;
	qp->rd_head = qp->rd_count = 0;
	urnic_gid_to_ipv4(&qp->attr.ah_attr.grh.dgid, &qp->peer_addr);
	qp->peer_ip_id = (struct urnic_ip_id_track){0};
	memset(qp->ud_ip_ids, 0, sizeof(qp->ud_ip_ids));
	qp->ud_ip_ids_next = 0;
	/* a UD message is one packet of up to the port's MTU */
	qp->mtu = urnic_mtu_bytes(qp->ibv.qp_type == IBV_QPT_UD ? qp->dev->active_mtu
								: (int)qp->attr.path_mtu);
	qp->window = URNIC_TX_WINDOW;
	if (qp->ibv.qp_type != IBV_QPT_UD && urnic_shm_reaches(&qp->dev->net, qp->peer_addr)) {
		qp->mtu = URNIC_SHM_MTU;
		qp->window = URNIC_SHM_WINDOW;
	}
	qp->epsn = qp->attr.rq_psn;
	qp->msn = 0;
	if (qp->stats) {
		qp->stats->dest_qpn = qp->attr.dest_qp_num;
		qp->stats->peer_addr = qp->peer_addr;
	}
	return 0;
}

static void enter_rts(struct urnic_qp *qp)
{
	qp->snd_nxt = qp->snd_una = qp->snd_max = qp->attr.sq_psn;
	qp->last_ackreq = qp->attr.sq_psn;
	qp->retry_left = qp->attr.retry_cnt;
	qp->rnr_left = qp->attr.rnr_retry;
	urnic_rtx_reset(qp);
}

static int apply(struct urnic_qp *qp, enum ibv_qp_state cur, enum ibv_qp_state next)
{
	int err = 0;

	if (next == IBV_QPS_RESET)
		enter_reset(qp);
	else if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR)
		urnic_qp_error(qp);
	else if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT)
		err = enter_rtr(qp);
	else if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR)
		enter_rts(qp);
	if (err)
		return err;
	qp->ibv.state = next;
	if (qp->stats)
		qp->stats->state = next;
	return 0;
}

URNIC_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct urnic_qp *qp = to_uqp(ibqp);
	unsigned mask = (unsigned)attr_mask;
	int err;

	pthread_mutex_lock(&qp->lock);
	urnic_resp_ack_now(qp); /* a request the application has seen complete is acknowledged */
	enum ibv_qp_state cur = ibqp->state;
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;

	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		err = EINVAL;
	else if (!transition_legal(ibqp->qp_type, cur, next, mask))
		err = EINVAL;
	else
		err = check_values(qp, attr, mask);
	if (!err && next != IBV_QPS_RESET) {
		save_attrs(qp, attr, mask);
		err = apply(qp, cur, next);
	} else if (!err) {
		err = apply(qp, cur, next);
	}
	if (!err)
		urnic_direct_publish_qp(qp, false);
	pthread_mutex_unlock(&qp->lock);
	return err;
}

URNIC_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask,
			      struct ibv_qp_init_attr *init_attr)
{
	struct urnic_qp *qp = to_uqp(ibqp);

	pthread_mutex_lock(&qp->lock);
	*attr = qp->attr;
	attr->qp_state = ibqp->state;
	attr->cur_qp_state = ibqp->state;
	attr->cap = qp->cap;
	attr->port_num = attr->port_num ? attr->port_num : 1;
	attr->sq_draining = 0;
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->srq = ibqp->srq;
	init_attr->cap = qp->cap;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->sq_sig_all = qp->sq_sig_all;
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

/* ---------------- create / destroy ---------------- */

static int check_caps(const struct ibv_qp_init_attr *a)
{
	const struct ibv_qp_cap *c = &a->cap;

	if (!a->send_cq || !a->recv_cq)
		return EINVAL;
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD)
		return EOPNOTSUPP;
	if (c->max_send_wr > URNIC_MAX_QP_WR || c->max_recv_wr > URNIC_MAX_QP_WR ||
	    c->max_send_sge > URNIC_MAX_SGE || c->max_recv_sge > URNIC_MAX_SGE ||
	    c->max_inline_data > URNIC_MAX_INLINE)
		return EINVAL;
	return 0;
}

static void *wqe_array(uint32_t n, size_t wqe_size, size_t extra)
{
	return calloc(n, wqe_size + extra);
}

static int alloc_queues(struct urnic_qp *qp)
{
	uint32_t sq = 1;
	size_t sge_sz = sizeof(struct ibv_sge);

	while (sq < qp->cap.max_send_wr)
		sq <<= 1;
	qp->sq_size = sq;
	qp->sq = calloc(sq, sizeof(*qp->sq));
	/* SGE lists and inline buffers, one slice per WQE */
	uint8_t *sq_mem = wqe_array(sq, sge_sz * (qp->cap.max_send_sge + 1), qp->cap.max_inline_data);

	if (!qp->sq || !sq_mem) {
		free(sq_mem);
		return ENOMEM;
	}
	if (!qp->srq) {
		if (urnic_rq_init(&qp->own_rq, qp->cap.max_recv_wr, qp->cap.max_recv_sge)) {
			free(sq_mem);
			return ENOMEM;
		}
		qp->rq = &qp->own_rq;
	} else {
		qp->rq = &qp->srq->rq;
	}
	size_t stride = sge_sz * (qp->cap.max_send_sge + 1) + qp->cap.max_inline_data;

	for (uint32_t i = 0; i < sq; i++) {
		qp->sq[i].sge = (struct ibv_sge *)(void *)(sq_mem + i * stride);
		qp->sq[i].inline_buf = sq_mem + i * stride + sge_sz * (qp->cap.max_send_sge + 1);
	}
	return 0;
}

static void free_queues(struct urnic_qp *qp)
{
	if (qp->sq)
		free(qp->sq[0].sge);
	free(qp->sq);
	urnic_rq_destroy(&qp->own_rq);
	free(qp->rd);
}

static struct urnic_stats_qp *stats_slot(struct urnic_dev *dev, uint32_t qpn,
					 enum ibv_qp_type type)
{
	for (int i = 0; i < URNIC_STATS_QP_SLOTS; i++) {
		struct urnic_stats_qp *s = &dev->stats->qp[i];

		if (s->qpn == 0) {
			memset(s, 0, sizeof(*s));
			s->qpn = qpn;
			s->type = type;
			return s;
		}
	}
	return NULL; /* more QPs than slots: device counters still count */
}

static uint32_t qpn_of(const struct urnic_dev *dev, uint32_t slot)
{
	return ((uint32_t)dev->qp_gen[slot] * URNIC_MAX_QP + slot) & URNIC_QPN_MASK;
}

/* QPN: table slot in the low bits, a generation above, so a stale packet for a destroyed QP
 * does not reach its successor. QPNs 0 and 1 are reserved by IB. */
static int add_qp(struct urnic_dev *dev, struct urnic_qp *qp)
{
	uint32_t start;

	if (getrandom(&start, sizeof(start), 0) != sizeof(start))
		start = (uint32_t)urnic_now_ns();
	pthread_mutex_lock(&dev->qp_lock);
	for (uint32_t i = 0; i < URNIC_MAX_QP; i++) {
		uint32_t slot = (start + i) % URNIC_MAX_QP;
		uint32_t qpn;

		if (dev->qp_table[slot])
			continue;
		/* QPNs 0 and 1 are reserved: their slot moves to the next generation, so that all
		 * URNIC_MAX_QP slots (the advertised max_qp) can hold a QP */
		while ((qpn = qpn_of(dev, slot)) < 2)
			dev->qp_gen[slot]++;
		qp->ibv.qp_num = qpn;
		qp->live_idx = dev->nqp;
		dev->qps[dev->nqp++] = qp;
		qp->stats = stats_slot(dev, qpn, qp->ibv.qp_type);
		dev->qp_table[slot] = qp;
		pthread_mutex_unlock(&dev->qp_lock);
		return 0;
	}
	pthread_mutex_unlock(&dev->qp_lock);
	return ENOMEM;
}

static void remove_qp(struct urnic_dev *dev, struct urnic_qp *qp)
{
	uint32_t slot = qp->ibv.qp_num % URNIC_MAX_QP;

	pthread_mutex_lock(&dev->qp_lock);
	dev->qp_table[slot] = NULL;
	dev->qp_gen[slot]++;
	dev->qps[qp->live_idx] = dev->qps[--dev->nqp];
	dev->qps[qp->live_idx]->live_idx = qp->live_idx;
	if (qp->stats)
		qp->stats->qpn = 0;
	for (struct urnic_qp **p = &dev->ack_list; *p; p = &(*p)->ack_next)
		if (*p == qp) {
			*p = qp->ack_next;
			break;
		}
	pthread_mutex_unlock(&dev->qp_lock);
}

URNIC_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	struct urnic_dev *dev = ctx_dev(pd->context);
	struct urnic_qp *qp;
	int err = check_caps(init);

	if (err) {
		errno = err;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->dev = dev;
	qp->cap = init->cap;
	qp->cap.max_send_wr = qp->cap.max_send_wr ? qp->cap.max_send_wr : 1;
	qp->cap.max_recv_wr = qp->cap.max_recv_wr ? qp->cap.max_recv_wr : 1;
	qp->sq_sig_all = init->sq_sig_all;
	qp->srq = init->srq ? container_of(init->srq, struct urnic_srq, ibv) : NULL;
	pthread_mutex_init(&qp->lock, NULL);
	qp->ibv.context = pd->context;
	qp->ibv.qp_context = init->qp_context;
	qp->ibv.pd = pd;
	qp->ibv.send_cq = init->send_cq;
	qp->ibv.recv_cq = init->recv_cq;
	qp->ibv.qp_type = init->qp_type;
	qp->ibv.state = IBV_QPS_RESET;
	pthread_mutex_init(&qp->ibv.mutex, NULL);
	pthread_cond_init(&qp->ibv.cond, NULL);
	err = alloc_queues(qp);
	if (!err)
		err = add_qp(dev, qp);
	if (err) {
		free_queues(qp);
		pthread_mutex_destroy(&qp->lock);
		free(qp);
		errno = err;
		return NULL;
	}
	qp->sport_idx = (uint16_t)(qp->ibv.qp_num % URNIC_TX_SOCKETS);
	qp->ibv.handle = qp->ibv.qp_num;
	atomic_fetch_add(&to_upd(pd)->users, 1);
	atomic_fetch_add(&to_ucq(init->send_cq)->users, 1);
	atomic_fetch_add(&to_ucq(init->recv_cq)->users, 1);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->users, 1);
	qp->ibv.srq = init->srq;
	init->cap = qp->cap;
	return &qp->ibv;
}

URNIC_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct urnic_qp *qp = to_uqp(ibqp);

	pthread_mutex_lock(&qp->lock);
	urnic_resp_ack_now(qp);
	urnic_direct_publish_qp(qp, true);
	pthread_mutex_unlock(&qp->lock);
	/* once out of the table the engine cannot reach it: it looks QPs up under qp_lock */
	remove_qp(qp->dev, qp);
	pthread_mutex_lock(&qp->lock);
	pthread_mutex_unlock(&qp->lock);
	atomic_fetch_sub(&to_upd(ibqp->pd)->users, 1);
	atomic_fetch_sub(&to_ucq(ibqp->send_cq)->users, 1);
	atomic_fetch_sub(&to_ucq(ibqp->recv_cq)->users, 1);
	if (qp->srq)
		atomic_fetch_sub(&qp->srq->users, 1);
	pthread_mutex_destroy(&qp->lock);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	free_queues(qp);
	free(qp);
	return 0;
}
