/* memcpy_bw.c - single-thread memcpy bandwidth, the ceiling for any copy-based transport. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Prints GB/s (1e9 bytes copied per second), one line per trial. */
int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 1 << 20;
	int trials = argc > 2 ? atoi(argv[2]) : 3;
	char *src, *dst;
	long reps = (1L << 30) / (long)size;

	if (size == 0 || posix_memalign((void **)&src, 4096, size) || posix_memalign((void **)&dst, 4096, size))
		return 1;
	if (reps < 4)
		reps = 4;
	memset(src, 1, size);
	memset(dst, 2, size);
	for (long i = 0; i < reps / 8 + 1; i++)
		memcpy(dst, src, size);
	for (int t = 0; t < trials; t++) {
		double t0 = now();

		for (long i = 0; i < reps; i++) {
			memcpy(dst, src, size);
			__asm__ __volatile__("" : : "r"(dst) : "memory");
		}
		printf("%.3f\n", (double)size * reps / (now() - t0) / 1e9);
	}
	return 0;
}
