/* cma_bw.c - what one cross-memory-attach copy (process_vm_readv) moves per second between two
 * processes of this machine, in calls of 16 KiB to 1 MiB, against memcpy in the same run: the
 * measurement behind the intra-host path's choice of rings (docs/PERFORMANCE.md).
 * Build and run: gcc -O2 -o /tmp/cma_bw bench/cma_bw.c && taskset -c 1 /tmp/cma_bw */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define BYTES ((size_t)1 << 20)
#define ITERS 4000

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
	char *src = mmap(NULL, BYTES, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	char *dst = malloc(BYTES);

	if (src == MAP_FAILED || !dst)
		return 1;
	memset(src, 1, BYTES);
	memset(dst, 0, BYTES);
	pid_t pid = fork(); /* the peer: its copy of src is what we read */

	if (pid == 0) {
		pause();
		return 0;
	}
	for (size_t chunk = 16384; chunk <= BYTES; chunk *= 4) {
		double t0 = now_s();

		for (int i = 0; i < ITERS; i++)
			for (size_t off = 0; off < BYTES; off += chunk) {
				struct iovec l = {dst + off, chunk}, r = {src + off, chunk};

				if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)chunk) {
					perror("process_vm_readv");
					kill(pid, SIGKILL);
					return 1;
				}
			}
		printf("process_vm_readv %7zu B calls: %5.1f GB/s\n", chunk,
		       (double)ITERS * BYTES / (now_s() - t0) / 1e9);
	}
	double t0 = now_s();

	for (int i = 0; i < ITERS; i++) {
		memcpy(dst, src, BYTES);
		__asm__ volatile("" : : "r"(dst) : "memory");
	}
	printf("memcpy 1 MiB: %5.1f GB/s\n", (double)ITERS * BYTES / (now_s() - t0) / 1e9);
	kill(pid, SIGKILL);
	return 0;
}
