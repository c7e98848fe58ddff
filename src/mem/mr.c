/* mr.c - MR key table, protection checks, and copies between packets and registered memory. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "common/dma.h"
#include "engine/direct.h"
#include "mem/mr.h"
#include "mem/share.h"

#define MR_BUCKETS 4096

static unsigned bucket_of(uint32_t key)
{
	return (key ^ (key >> 12) ^ (key >> 24)) & (MR_BUCKETS - 1);
}

static struct urnic_mr *lookup(struct urnic_dev *dev, uint32_t key)
{
	for (struct urnic_mr *mr = dev->mr_buckets[bucket_of(key)]; mr; mr = mr->next)
		if (mr->key == key)
			return mr;
	return NULL;
}

/* Keys are 32 random bits, so a remote peer cannot guess its way into memory. */
static uint32_t random_key(void)
{
	uint32_t key = 0;

	while (key == 0 || key == UINT32_MAX)
		if (getrandom(&key, sizeof(key), 0) != sizeof(key))
			key = (uint32_t)urnic_now_ns() * 2654435761u;
	return key;
}

/* The MR's pages move onto a memfd (mem/share.h) with mr_lock held for writing: while they are
 * copied, a peer's WRITE into another MR of this device over the same pages would land in the
 * old pages, and be lost. */
int urnic_mr_register(struct urnic_dev *dev, struct urnic_mr *mr)
{
	pthread_rwlock_wrlock(&dev->mr_lock);
	if (dev->nmr >= URNIC_MAX_MR) {
		pthread_rwlock_unlock(&dev->mr_lock);
		return -ENOMEM;
	}
	/* a small MR is worth sharing only for a peer's one-sided operations (engine/direct.c):
	 * the 256 regions and their fds stay for the ones they serve */
	mr->share = urnic_share_get(mr->addr, mr->length,
				    mr->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						  IBV_ACCESS_REMOTE_ATOMIC));
	do
		mr->key = random_key();
	while (lookup(dev, mr->key));
	unsigned b = bucket_of(mr->key);

	mr->next = dev->mr_buckets[b];
	dev->mr_buckets[b] = mr;
	dev->nmr++;
	urnic_direct_publish_mr(dev, mr);
	pthread_rwlock_unlock(&dev->mr_lock);
	return 0;
}

/* Once this returns, no packet can reach the MR: every access holds mr_lock for reading. */
void urnic_mr_unregister(struct urnic_dev *dev, struct urnic_mr *mr)
{
	pthread_rwlock_wrlock(&dev->mr_lock);
	for (struct urnic_mr **p = &dev->mr_buckets[bucket_of(mr->key)]; *p; p = &(*p)->next) {
		if (*p == mr) {
			*p = mr->next;
			dev->nmr--;
			break;
		}
	}
	urnic_direct_withdraw_mr(dev, mr); /* and no peer's one-sided operation */
	urnic_share_put(mr->share); /* no packet can reach it now; its pages move back */
	mr->share = 0;
	pthread_rwlock_unlock(&dev->mr_lock);
}

struct urnic_mr *urnic_mr_find(struct urnic_dev *dev, struct urnic_pd *pd, uint32_t key,
			       uint64_t va, uint64_t len, unsigned access)
{
	struct urnic_mr *mr = lookup(dev, key);

	if (!mr || mr->pd != pd || (mr->access & access) != access)
		return NULL;
	if (va < mr->iova || len > mr->length || va - mr->iova > mr->length - len)
		return NULL;
	return mr;
}

uint64_t urnic_sge_total(const struct ibv_sge *sge, int nsge)
{
	uint64_t total = 0;

	for (int i = 0; i < nsge; i++)
		total += sge[i].length;
	return total;
}

/* Finds the SGE holding byte off; returns its index and the offset inside it. */
static int sge_seek(const struct ibv_sge *sge, int nsge, uint64_t *off)
{
	int i = 0;

	while (i < nsge && *off >= sge[i].length) {
		*off -= sge[i].length;
		i++;
	}
	return i;
}

/* Visits bytes [off, off+len) of an SGE list one registered piece at a time, each checked for
 * key, PD, bounds and access. A list that ends early yields short_err. */
typedef int (*sge_visit)(uint8_t *p, uint32_t len, void *arg);

static int sge_walk(struct urnic_dev *dev, struct urnic_pd *pd, const struct ibv_sge *sge,
		    int nsge, uint64_t off, uint32_t len, unsigned access, int short_err,
		    sge_visit visit, void *arg)
{
	for (int i = sge_seek(sge, nsge, &off); len > 0; i++, off = 0) {
		if (i >= nsge)
			return short_err;
		uint32_t chunk = sge[i].length - (uint32_t)off;

		if (chunk > len)
			chunk = len;
		if (chunk == 0)
			continue;
		struct urnic_mr *mr =
			urnic_mr_find(dev, pd, sge[i].lkey, sge[i].addr + off, chunk, access);
		int err = mr ? visit(urnic_mr_ptr(mr, sge[i].addr + off), chunk, arg) : -EACCES;

		if (err)
			return err;
		len -= chunk;
	}
	return 0;
}

struct iov_out {
	struct iovec *iov;
	int n, max;
};

static int add_iov(uint8_t *p, uint32_t len, void *arg)
{
	struct iov_out *o = arg;

	if (o->n == o->max)
		return -EACCES; /* more pieces than a packet can carry */
	o->iov[o->n++] = (struct iovec){.iov_base = p, .iov_len = len};
	return 0;
}

int urnic_sge_to_iov(struct urnic_dev *dev, struct urnic_pd *pd, const struct ibv_sge *sge,
		     int nsge, uint64_t off, uint32_t len, struct iovec *iov, int max_iov)
{
	struct iov_out o = {.iov = iov, .max = max_iov};
	int err = sge_walk(dev, pd, sge, nsge, off, len, 0, -EACCES, add_iov, &o);

	return err ? err : o.n;
}

int urnic_sge_writable_iov(struct urnic_dev *dev, struct urnic_pd *pd, const struct ibv_sge *sge,
			   int nsge, uint32_t len, struct iovec *iov, int max_iov)
{
	struct iov_out o = {.iov = iov, .max = max_iov};
	int err = sge_walk(dev, pd, sge, nsge, 0, len, IBV_ACCESS_LOCAL_WRITE, -EMSGSIZE, add_iov,
			   &o);

	return err ? err : o.n;
}

static int copy_in(uint8_t *p, uint32_t len, void *arg)
{
	const uint8_t **data = arg;

	URNIC_DMA_BEGIN();
	memcpy(p, *data, len);
	URNIC_DMA_END();
	*data += len;
	return 0;
}

int urnic_sge_scatter(struct urnic_dev *dev, struct urnic_pd *pd, const struct ibv_sge *sge,
		      int nsge, uint64_t off, const uint8_t *data, uint32_t len)
{
	return sge_walk(dev, pd, sge, nsge, off, len, IBV_ACCESS_LOCAL_WRITE, -EMSGSIZE, copy_in,
			&data);
}
