/* rq.h - receive queues: a QP's own, or a shared receive queue (SRQ) several QPs draw from. */
#ifndef URNIC_RQ_H
#define URNIC_RQ_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct urnic_rwqe {
	uint64_t wr_id;
	int num_sge;
	struct ibv_sge *sge;
};

struct urnic_rq {
	pthread_mutex_t lock; /* posters against the engine; a QP's own RQ also has the QP lock */
	struct urnic_rwqe *ring;
	uint32_t size; /* power of two */
	uint32_t prod, cons;
	uint32_t max_wr, max_sge;
	uint32_t limit; /* SRQ: IBV_EVENT_SRQ_LIMIT_REACHED when fewer WQEs remain; 0 = off */
};

int urnic_rq_init(struct urnic_rq *rq, uint32_t max_wr, uint32_t max_sge);
void urnic_rq_destroy(struct urnic_rq *rq);
/* Posts a list of receive WRs; returns 0 or an errno with *bad set. */
int urnic_rq_post(struct urnic_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
/* Moves the oldest WQE into out (its SGEs copied to sge). Returns false if the queue is empty.
 * *limit_hit is set when an armed limit was crossed (the caller raises the event). */
bool urnic_rq_pop(struct urnic_rq *rq, uint64_t *wr_id, int *num_sge, struct ibv_sge *sge,
		  bool *limit_hit);
uint32_t urnic_rq_count(struct urnic_rq *rq);

#endif
