/* ring_copy.c - the ceiling of a two-copy ring between two CPUs: what urnic's shared-memory rings
 * do with a 1 MiB message, without urnic. A producer thread (CPU 1) copies 64 KiB blocks from a
 * 1 MiB source into a 4 MiB ring with streamed stores, as net/shm.c does for large packets; a
 * consumer (CPU 0) copies each block out into a 1 MiB destination with memcpy, as the responder
 * does into an MR, and hands the space back every 4 blocks (urnic's 256 KiB receive batch).
 *
 *   ring_copy [TRIALS] [OFFSET] [plain]   prints GB/s (1e9 bytes through the ring per second),
 *                                         one line per trial of 8 GiB
 * OFFSET puts each block that many bytes past a line in the ring (44: a packet's payload behind
 * urnic's 16-byte record header and a 28-byte BTH+RETH, as before SHM_VERSION 4); "plain" copies
 * into the ring with memcpy instead of streamed stores. */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING (4u << 20)
#define BLOCK (64u << 10)
#define BUF (1u << 20)
#define BATCH 4
#define TOTAL (8ull << 30)

struct ring_copy {
	uint8_t *ring, *src, *dst;
	size_t offset;
	int plain;
	_Alignas(64) _Atomic uint64_t head; /* bytes produced */
	_Alignas(64) _Atomic uint64_t tail; /* bytes consumed */
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* n bytes from src to dst with streamed stores (dst made 16-byte aligned first), then a fence. */
static void stream_copy(uint8_t *dst, const uint8_t *src, size_t n)
{
	size_t k = (16 - ((uintptr_t)dst & 15)) & 15;

	memcpy(dst, src, k);
	for (; k + 64 <= n; k += 64)
		for (int i = 0; i < 64; i += 16)
			_mm_stream_si128((__m128i *)(dst + k + i),
					 _mm_loadu_si128((const __m128i *)(src + k + i)));
	memcpy(dst + k, src + k, n - k);
	_mm_sfence();
}

static void *produce(void *arg)
{
	struct ring_copy *rc = arg;

	pin(1);
	for (uint64_t h = 0; h < TOTAL; h += BLOCK) {
		while (h + BLOCK - atomic_load_explicit(&rc->tail, memory_order_acquire) > RING)
			_mm_pause();
		uint8_t *d = rc->ring + h % RING + rc->offset;
		const uint8_t *s = rc->src + h % BUF;

		if (rc->plain)
			memcpy(d, s, BLOCK);
		else
			stream_copy(d, s, BLOCK);
		atomic_store_explicit(&rc->head, h + BLOCK, memory_order_release);
	}
	return NULL;
}

static double trial(struct ring_copy *rc)
{
	pthread_t t;
	double t0 = now();

	atomic_store(&rc->head, 0);
	atomic_store(&rc->tail, 0);
	if (pthread_create(&t, NULL, produce, rc))
		return 0;
	for (uint64_t tail = 0; tail < TOTAL;) {
		uint64_t head;

		while ((head = atomic_load_explicit(&rc->head, memory_order_acquire)) == tail)
			_mm_pause();
		if (head > tail + BATCH * BLOCK)
			head = tail + BATCH * BLOCK;
		for (; tail < head; tail += BLOCK)
			memcpy(rc->dst + tail % BUF, rc->ring + tail % RING + rc->offset, BLOCK);
		atomic_store_explicit(&rc->tail, tail, memory_order_release);
	}
	pthread_join(t, NULL);
	return (double)TOTAL / (now() - t0) / 1e9;
}

int main(int argc, char **argv)
{
	static struct ring_copy rc;
	int trials = argc > 1 ? atoi(argv[1]) : 3;

	rc.offset = argc > 2 ? strtoul(argv[2], NULL, 0) % 4096 : 0;
	rc.plain = argc > 3 && strcmp(argv[3], "plain") == 0;
	if (posix_memalign((void **)&rc.ring, 4096, RING + 4096) ||
	    posix_memalign((void **)&rc.src, 4096, BUF) ||
	    posix_memalign((void **)&rc.dst, 4096, BUF))
		return 1;
	memset(rc.ring, 1, RING + 4096);
	memset(rc.src, 2, BUF);
	memset(rc.dst, 3, BUF);
	pin(0);
	for (int i = 0; i < trials; i++)
		printf("%.3f\n", trial(&rc));
	return 0;
}
