/* objects.c - protection domains, memory regions, completion channels and CQs. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "mem/mr.h"
#include "verbs/verbs_ops.h"

/* ---------------- PD ---------------- */

static atomic_uint pd_ids;

URNIC_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct urnic_dev *dev = ctx_dev(context);
	struct urnic_pd *pd;

	if (!urnic_take(&dev->npd, URNIC_MAX_PD))
		return NULL;
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		urnic_give(&dev->npd);
		errno = ENOMEM;
		return NULL;
	}
	pd->ibv.context = context;
	pd->ibv.handle = (uint32_t)atomic_load(&dev->npd);
	pd->id = atomic_fetch_add(&pd_ids, 1) + 1;
	return &pd->ibv;
}

URNIC_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct urnic_pd *pd = to_upd(ibpd);

	if (atomic_load(&pd->users) > 0)
		return EBUSY;
	urnic_give(&ctx_dev(ibpd->context)->npd);
	free(pd);
	return 0;
}

/* ---------------- MR ---------------- */

#define URNIC_MR_ACCESS                                                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_OPTIONAL_RANGE)

static int check_access(unsigned access)
{
	if (access & ~(unsigned)URNIC_MR_ACCESS)
		return EINVAL;
	/* IBTA: remote write or atomic access requires local write */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	return 0;
}

URNIC_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr, size_t length,
					     uint64_t iova, unsigned int access)
{
	struct urnic_dev *dev = ctx_dev(ibpd->context);
	struct urnic_mr *mr;
	int err = check_access(access);

	if (!err && (length > URNIC_MAX_MR_SIZE || (!addr && length) ||
		     iova + length < iova || (uintptr_t)addr + length < (uintptr_t)addr))
		err = EINVAL;
	if (err) {
		errno = err;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	*mr = (struct urnic_mr){.pd = to_upd(ibpd),
				.addr = addr,
				.iova = iova,
				.length = length,
				.access = access};
	err = urnic_mr_register(dev, mr); /* its pages may move (mem/share.h) */
	if (err) {
		free(mr);
		errno = -err;
		return NULL;
	}
	atomic_fetch_add(&mr->pd->users, 1);
	mr->ibv = (struct ibv_mr){.context = ibpd->context,
				  .pd = ibpd,
				  .addr = addr,
				  .length = length,
				  .handle = mr->key,
				  .lkey = mr->key,
				  .rkey = mr->key};
	return &mr->ibv;
}

/* the header makes these two macros that pick ibv_reg_mr_iova2 when access is not constant */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
URNIC_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

URNIC_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					    uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

URNIC_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct urnic_mr *mr = to_umr(ibmr);

	urnic_mr_unregister(ctx_dev(ibmr->context), mr);
	atomic_fetch_sub(&mr->pd->users, 1);
	free(mr);
	return 0;
}

/* ---------------- completion channel ---------------- */

URNIC_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct urnic_channel *ch = calloc(1, sizeof(*ch));
	int fds[2];

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(fds, O_CLOEXEC) != 0) {
		free(ch);
		return NULL;
	}
	ch->ibv.context = context;
	ch->ibv.fd = fds[0];
	ch->wfd = fds[1];
	/* a writer must never block the engine: an event lost to a full pipe is counted */
	fcntl(ch->wfd, F_SETFL, O_NONBLOCK);
	return &ch->ibv;
}

URNIC_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct urnic_channel *ch = container_of(channel, struct urnic_channel, ibv);

	if (channel->refcnt)
		return EBUSY;
	close(channel->fd);
	close(ch->wfd);
	free(ch);
	return 0;
}

URNIC_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
				  void **cq_context)
{
	struct ibv_cq *ev;
	ssize_t r;

	urnic_progress_idle(ctx_dev(channel->context));
	r = read(channel->fd, &ev, sizeof(ev));

	if (r != sizeof(ev))
		return -1;
	*cq = ev;
	*cq_context = ev->cq_context;
	return 0;
}

URNIC_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* ---------------- CQ ---------------- */

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

URNIC_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
					  struct ibv_comp_channel *channel, int comp_vector)
{
	struct urnic_dev *dev = ctx_dev(context);
	struct urnic_cq *cq;

	if (cqe < 1 || cqe > URNIC_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= URNIC_NUM_COMP_VECTORS) {
		errno = EINVAL;
		return NULL;
	}
	if (!urnic_take(&dev->ncq, URNIC_MAX_CQ))
		return NULL;
	cq = calloc(1, sizeof(*cq));
	if (cq) {
		cq->size = pow2_at_least((uint32_t)cqe);
		cq->ring = calloc(cq->size, sizeof(*cq->ring));
	}
	if (!cq || !cq->ring) {
		if (cq)
			free(cq);
		urnic_give(&dev->ncq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&cq->lock, NULL);
	cq->ibv.context = context;
	cq->ibv.channel = channel;
	cq->ibv.cq_context = cq_context;
	cq->ibv.cqe = (int)cq->size;
	pthread_mutex_init(&cq->ibv.mutex, NULL);
	pthread_cond_init(&cq->ibv.cond, NULL);
	if (channel)
		__atomic_fetch_add(&channel->refcnt, 1, __ATOMIC_SEQ_CST);
	return &cq->ibv;
}

URNIC_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct urnic_cq *cq = to_ucq(ibcq);

	if (atomic_load(&cq->users) > 0)
		return EBUSY;
	if (ibcq->channel)
		__atomic_fetch_sub(&ibcq->channel->refcnt, 1, __ATOMIC_SEQ_CST);
	urnic_give(&ctx_dev(ibcq->context)->ncq);
	pthread_mutex_destroy(&cq->lock);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_cond_destroy(&ibcq->cond);
	free(cq->ring);
	free(cq);
	return 0;
}

URNIC_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct urnic_cq *cq = to_ucq(ibcq);
	uint32_t size;
	struct ibv_wc *ring;

	if (cqe < 1 || cqe > URNIC_MAX_CQE)
		return EINVAL;
	size = pow2_at_least((uint32_t)cqe);
	ring = calloc(size, sizeof(*ring));
	if (!ring)
		return ENOMEM;
	pthread_mutex_lock(&cq->lock);
	if (cq->tail - cq->head > size) {
		pthread_mutex_unlock(&cq->lock);
		free(ring);
		return EINVAL; /* would lose completions */
	}
	for (uint32_t i = 0; cq->head + i != cq->tail; i++)
		ring[i] = cq->ring[(cq->head + i) & (cq->size - 1)];
	cq->tail -= cq->head;
	cq->head = 0;
	atomic_store_explicit(&cq->ready, cq->tail, memory_order_relaxed);
	free(cq->ring);
	cq->ring = ring;
	cq->size = size;
	ibcq->cqe = (int)size;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

int urnic_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct urnic_cq *cq = to_ucq(ibcq);
	bool drained = false;
	uint64_t polled = 0; /* the clock of the engine turn this poll ran, if it ran one */
	int n = 0;

	if (num_entries < 0)
		return -EINVAL;
	for (int pass = 0; pass < 2 && n == 0; pass++) {
		if (pass == 1)
			polled = urnic_progress(ctx_dev(ibcq->context));
		if (!atomic_load_explicit(&cq->ready, memory_order_relaxed))
			continue; /* a completion written meanwhile is the next poll's */
		pthread_mutex_lock(&cq->lock);
		while (n < num_entries && cq->head != cq->tail) {
			wc[n++] = cq->ring[cq->head & (cq->size - 1)];
			cq->head++;
		}
		atomic_store_explicit(&cq->ready, cq->tail - cq->head, memory_order_relaxed);
		drained = n > 0 && cq->head == cq->tail;
		pthread_mutex_unlock(&cq->lock);
	}
	if (drained)
		urnic_progress_leave(ctx_dev(ibcq->context), polled);
	return n;
}

int urnic_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct urnic_cq *cq = to_ucq(ibcq);

	pthread_mutex_lock(&cq->lock);
	cq->armed = solicited_only ? 2 : 1;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}
