/* mr.h - memory regions: keys, protection checks, and data movement between packets and MRs.
 * Every function that touches MR memory must run with dev->mr_lock held for reading. */
#ifndef URNIC_MR_H
#define URNIC_MR_H

#include "urnic.h"

/* Gives mr a key, and moves its pages onto a memfd where they qualify (mem/share.h); unregister
 * moves them back once no packet can reach it. */
int urnic_mr_register(struct urnic_dev *dev, struct urnic_mr *mr);
void urnic_mr_unregister(struct urnic_dev *dev, struct urnic_mr *mr);

/* The MR that grants access to [va, va+len) of pd under key, or NULL. */
struct urnic_mr *urnic_mr_find(struct urnic_dev *dev, struct urnic_pd *pd, uint32_t key,
			       uint64_t va, uint64_t len, unsigned access);

static inline uint8_t *urnic_mr_ptr(const struct urnic_mr *mr, uint64_t va)
{
	return mr->addr + (va - mr->iova);
}

/* Appends iovecs for bytes [off, off+len) of an SGE list; checks every lkey (LOCAL access
 * only: reading needs no flag). Returns iovecs added or -EACCES. */
int urnic_sge_to_iov(struct urnic_dev *dev, struct urnic_pd *pd, const struct ibv_sge *sge,
		     int nsge, uint64_t off, uint32_t len, struct iovec *iov, int max_iov);

/* The same for the first len bytes of a list that will be written (IBV_ACCESS_LOCAL_WRITE):
 * iovecs added, -EACCES or -EMSGSIZE (the list is too short). */
int urnic_sge_writable_iov(struct urnic_dev *dev, struct urnic_pd *pd, const struct ibv_sge *sge,
			   int nsge, uint32_t len, struct iovec *iov, int max_iov);

/* Copies len bytes into [off, off+len) of an SGE list, which needs IBV_ACCESS_LOCAL_WRITE.
 * Returns 0, -EACCES (key/bounds/flags) or -EMSGSIZE (the list is too short). */
int urnic_sge_scatter(struct urnic_dev *dev, struct urnic_pd *pd, const struct ibv_sge *sge,
		      int nsge, uint64_t off, const uint8_t *data, uint32_t len);

uint64_t urnic_sge_total(const struct ibv_sge *sge, int nsge);

#endif
