/* test_stats_shards: a device's counters lose no count when many threads count at once. Each
 * thread adds to its own shard of the stats file with a plain load and store; threads past the
 * shards share one set of words with locked adds; a thread's shard goes to the next thread when
 * it exits. Twice as many threads as shards count at once, in two rounds (the second round takes
 * the shards the first one left), and the folded totals must be exact. Two threads given one
 * shard would lose counts here. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/stats.h"
#include "check.h"

#define THREADS (2 * URNIC_STATS_SHARDS)
#define ADDS 200000

static struct urnic_stats_file stats;
static pthread_barrier_t start, claimed;

struct counter_thread {
	pthread_t t;
	int shard; /* the shard it counted in, -1 for the shared words */
};

static void *count(void *arg)
{
	struct counter_thread *me = arg;

	pthread_barrier_wait(&start);
	urnic_stats_add(&stats, URNIC_C_rx_packets, 1); /* takes a shard, if one is free */
	urnic_stats_add(&stats, URNIC_C_rx_bytes, 3);
	pthread_barrier_wait(&claimed); /* no thread exits, and frees its shard, before all took */
	for (int i = 1; i < ADDS; i++) {
		urnic_stats_add(&stats, URNIC_C_rx_packets, 1);
		urnic_stats_add(&stats, URNIC_C_rx_bytes, 3);
	}
	me->shard = urnic_stats_shard_idx;
	return NULL;
}

static void round_of(int n, int *in_shards)
{
	struct counter_thread th[THREADS];

	pthread_barrier_init(&start, NULL, (unsigned)n);
	pthread_barrier_init(&claimed, NULL, (unsigned)n);
	for (int i = 0; i < n; i++)
		CHECK(pthread_create(&th[i].t, NULL, count, &th[i]) == 0, "pthread_create");
	*in_shards = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i].t, NULL);
		*in_shards += th[i].shard > 0;
		for (int j = 0; j < i; j++)
			CHECK(th[i].shard <= 0 || th[i].shard != th[j].shard,
			      "threads %d and %d counted in one shard (%d)", j, i, th[i].shard);
	}
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&claimed);
}

int main(void)
{
	uint64_t c[URNIC_C_COUNT];
	int first, second;

	round_of(THREADS, &first);
	round_of(THREADS, &second);
	urnic_stats_fold(&stats, c);
	CHECK(first == URNIC_STATS_SHARDS && second == URNIC_STATS_SHARDS,
	      "%d and %d threads had shards of their own, want %d in each round", first, second,
	      URNIC_STATS_SHARDS);
	CHECK(c[URNIC_C_rx_packets] == 2ull * THREADS * ADDS, "rx_packets %llu, want %llu",
	      (unsigned long long)c[URNIC_C_rx_packets], 2ull * THREADS * ADDS);
	CHECK(c[URNIC_C_rx_bytes] == 6ull * THREADS * ADDS, "rx_bytes %llu, want %llu",
	      (unsigned long long)c[URNIC_C_rx_bytes], 6ull * THREADS * ADDS);
	CHECK(stats.c[URNIC_C_rx_packets] == 2ull * (THREADS - URNIC_STATS_SHARDS) * ADDS,
	      "the shared words hold %llu, want the shardless threads' %llu",
	      (unsigned long long)stats.c[URNIC_C_rx_packets],
	      2ull * (THREADS - URNIC_STATS_SHARDS) * ADDS);
	printf("test_stats_shards: %d threads x 2 rounds, %d in shards each, totals exact\n", THREADS,
	       URNIC_STATS_SHARDS);
	return 0;
}
