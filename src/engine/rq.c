/* rq.c - receive queues, private or shared: posting, and taking WQEs for arriving messages. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/rq.h"

int urnic_rq_init(struct urnic_rq *rq, uint32_t max_wr, uint32_t max_sge)
{
	uint32_t size = 1;

	while (size < max_wr)
		size <<= 1;
	memset(rq, 0, sizeof(*rq));
	rq->ring = calloc(size, sizeof(*rq->ring));
	struct ibv_sge *sge = calloc((size_t)size * (max_sge + 1), sizeof(*sge));

	if (!rq->ring || !sge) {
		free(rq->ring);
		free(sge);
		rq->ring = NULL;
		return ENOMEM;
	}
	for (uint32_t i = 0; i < size; i++)
		rq->ring[i].sge = sge + (size_t)i * (max_sge + 1);
	rq->size = size;
	rq->max_wr = max_wr;
	rq->max_sge = max_sge;
	pthread_mutex_init(&rq->lock, NULL);
	return 0;
}

void urnic_rq_destroy(struct urnic_rq *rq)
{
	if (!rq->ring)
		return;
	free(rq->ring[0].sge);
	free(rq->ring);
	rq->ring = NULL;
	pthread_mutex_destroy(&rq->lock);
}

int urnic_rq_post(struct urnic_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int err = 0;

	pthread_mutex_lock(&rq->lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge)
			err = EINVAL;
		else if (rq->prod - rq->cons >= rq->max_wr)
			err = ENOMEM;
		if (err)
			break;
		struct urnic_rwqe *r = &rq->ring[rq->prod & (rq->size - 1)];

		r->wr_id = wr->wr_id;
		r->num_sge = wr->num_sge;
		if (wr->num_sge > 0)
			memcpy(r->sge, wr->sg_list, sizeof(*r->sge) * (size_t)wr->num_sge);
		rq->prod++;
	}
	pthread_mutex_unlock(&rq->lock);
	if (err)
		*bad = wr;
	return err;
}

bool urnic_rq_pop(struct urnic_rq *rq, uint64_t *wr_id, int *num_sge, struct ibv_sge *sge,
		  bool *limit_hit)
{
	pthread_mutex_lock(&rq->lock);
	if (rq->cons == rq->prod) {
		pthread_mutex_unlock(&rq->lock);
		return false;
	}
	struct urnic_rwqe *r = &rq->ring[rq->cons & (rq->size - 1)];

	*wr_id = r->wr_id;
	*num_sge = r->num_sge;
	if (r->num_sge > 0)
		memcpy(sge, r->sge, sizeof(*sge) * (size_t)r->num_sge);
	rq->cons++;
	/* the limit is one-shot: ibv_modify_srq re-arms it */
	*limit_hit = rq->limit && rq->prod - rq->cons < rq->limit;
	if (*limit_hit)
		rq->limit = 0;
	pthread_mutex_unlock(&rq->lock);
	return true;
}

uint32_t urnic_rq_count(struct urnic_rq *rq)
{
	pthread_mutex_lock(&rq->lock);
	uint32_t n = rq->prod - rq->cons;

	pthread_mutex_unlock(&rq->lock);
	return n;
}
