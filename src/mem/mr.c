/* mr.c - MR key table, protection checks, and copies between packets and registered memory. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "mem/mr.h"

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

int urnic_mr_register(struct urnic_dev *dev, struct urnic_mr *mr)
{
	pthread_rwlock_wrlock(&dev->mr_lock);
	if (dev->nmr >= URNIC_MAX_MR) {
		pthread_rwlock_unlock(&dev->mr_lock);
		return -ENOMEM;
	}
	do
		mr->key = random_key();
	while (lookup(dev, mr->key));
	unsigned b = bucket_of(mr->key);

	mr->next = dev->mr_buckets[b];
	dev->mr_buckets[b] = mr;
	dev->nmr++;
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

int urnic_sge_to_iov(struct urnic_dev *dev, struct urnic_pd *pd, const struct ibv_sge *sge,
		     int nsge, uint64_t off, uint32_t len, struct iovec *iov, int max_iov)
{
	int n = 0;

	for (int i = sge_seek(sge, nsge, &off); len > 0; i++, off = 0) {
		if (i >= nsge || n >= max_iov)
			return -EACCES;
		uint32_t chunk = sge[i].length - (uint32_t)off;

		if (chunk > len)
			chunk = len;
		if (chunk == 0)
			continue;
		struct urnic_mr *mr = urnic_mr_find(dev, pd, sge[i].lkey, sge[i].addr + off, chunk, 0);

		if (!mr)
			return -EACCES;
		iov[n].iov_base = urnic_mr_ptr(mr, sge[i].addr + off);
		iov[n].iov_len = chunk;
		n++;
		len -= chunk;
	}
	return n;
}

int urnic_sge_scatter(struct urnic_dev *dev, struct urnic_pd *pd, const struct ibv_sge *sge,
		      int nsge, uint64_t off, const uint8_t *data, uint32_t len)
{
	for (int i = sge_seek(sge, nsge, &off); len > 0; i++, off = 0) {
		if (i >= nsge)
			return -EMSGSIZE;
		uint32_t chunk = sge[i].length - (uint32_t)off;

		if (chunk > len)
			chunk = len;
		if (chunk == 0)
			continue;
		struct urnic_mr *mr = urnic_mr_find(dev, pd, sge[i].lkey, sge[i].addr + off, chunk,
						    IBV_ACCESS_LOCAL_WRITE);

		if (!mr)
			return -EACCES;
		memcpy(urnic_mr_ptr(mr, sge[i].addr + off), data, chunk);
		data += chunk;
		len -= chunk;
	}
	return 0;
}
