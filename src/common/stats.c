/* stats.c - which shard of the devices' stats files a thread counts in (common/stats.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "common/stats.h"

_Thread_local int urnic_stats_shard_idx __attribute__((tls_model("initial-exec")));

#define ALL_SHARDS ((uint32_t)((1ull << URNIC_STATS_SHARDS) - 1))

static _Atomic uint32_t shards_taken; /* bit k: shard k + 1 belongs to a live thread */
static pthread_key_t shard_key;
static pthread_once_t shard_key_once = PTHREAD_ONCE_INIT;
static int shard_key_err;

/* At a thread's exit: its shard goes to the next thread (its counts stay in it). What the thread
 * counts after this, in another library's destructor, goes to the shared counters. */
static void shard_release(void *v)
{
	int k = (int)(intptr_t)v;

	urnic_stats_shard_idx = -1;
	atomic_fetch_and(&shards_taken, ~(1u << (k - 1)));
}

static void shard_key_create(void)
{
	shard_key_err = pthread_key_create(&shard_key, shard_release);
}

static int shard_take(void)
{
	uint32_t cur = atomic_load(&shards_taken);

	pthread_once(&shard_key_once, shard_key_create);
	if (shard_key_err)
		return -1;
	while (cur != ALL_SHARDS) {
		int k = __builtin_ctz(~cur);

		if (atomic_compare_exchange_weak(&shards_taken, &cur, cur | 1u << k)) {
			if (pthread_setspecific(shard_key, (void *)(intptr_t)(k + 1)) == 0)
				return k + 1;
			atomic_fetch_and(&shards_taken, ~(1u << k));
			return -1;
		}
	}
	return -1; /* more threads count than there are shards */
}

int urnic_stats_shard_claim(void)
{
	if (urnic_stats_shard_idx == 0)
		urnic_stats_shard_idx = shard_take();
	return urnic_stats_shard_idx;
}

void urnic_stats_add_shared(struct urnic_stats_file *s, enum urnic_counter c, uint64_t n)
{
	if (urnic_stats_shard_idx == 0 && urnic_stats_shard_claim() > 0) {
		urnic_stats_add(s, c, n);
		return;
	}
	atomic_fetch_add_explicit((_Atomic uint64_t *)&s->c[c], n, memory_order_relaxed);
}

static _Thread_local pid_t thread_id;

static void thread_id_forget(void)
{
	thread_id = 0; /* the fork's child: its one thread has an id of its own */
}

__attribute__((constructor)) static void thread_id_at_fork(void)
{
	pthread_atfork(NULL, NULL, thread_id_forget);
}

pid_t urnic_thread_id(void)
{
	if (!thread_id)
		thread_id = gettid();
	return thread_id;
}
