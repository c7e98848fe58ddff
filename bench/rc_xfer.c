/* rc_xfer: RDMA WRITE and READ throughput of large messages between two processes, every byte
 * checked. Run it with URNIC_FAULT set (bench/loss.sh does) to see what recovery from loss costs.
 *
 *   rc_xfer [--op write|read] [--size BYTES] [--iters N]
 * prints one line per operation: "write 67108864 B x 3: median 812.3 MB/s (min .., max ..)".
 * Not a test: it asserts no timing, only the data. */
#include "rc_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITERS 32

static struct {
	enum ibv_wr_opcode op;
	size_t size;
	int iters;
} cfg = {IBV_WR_RDMA_WRITE, 64 * RC_MIB, 3};

static uint32_t seed_of(int iter)
{
	return 1000u + (uint32_t)iter;
}

/* The side whose memory the operation targets: fills it for READs, checks it after WRITEs. */
static int server(struct rc *rc)
{
	for (int i = 0; i < cfg.iters; i++) {
		rc_step(rc, "iteration %d", i);
		if (cfg.op == IBV_WR_RDMA_READ)
			rc_fill(rc->buf, cfg.size, seed_of(i));
		else
			memset(rc->buf, 0, cfg.size);
		rc_sync(rc); /* ready */
		rc_sync(rc); /* the client's operation completed */
		if (cfg.op == IBV_WR_RDMA_WRITE)
			rc_check(rc, rc->buf, cfg.size, seed_of(i), "written data");
		rc_sync(rc); /* checked */
	}
	return RC_PASS;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int client(struct rc *rc)
{
	double mbps[MAX_ITERS];

	for (int i = 0; i < cfg.iters; i++) {
		struct rc_wr w;
		struct ibv_wc wc;

		rc_step(rc, "iteration %d", i);
		if (cfg.op == IBV_WR_RDMA_WRITE)
			rc_fill(rc->buf, cfg.size, seed_of(i));
		else
			memset(rc->buf, 0, cfg.size);
		rc_wr(rc, &w, cfg.op, (uint64_t)i, 0, cfg.size, 0);
		rc_sync(rc);
		double t0 = rc_now_ms();

		rc_post_send(rc, 0, &w.wr);
		rc_poll(rc, rc->scq, &wc, 1, 280000);
		double ms = rc_now_ms() - t0;

		rc_expect(rc, &wc, (uint64_t)i, IBV_WC_SUCCESS, -1);
		rc_sync(rc);
		if (cfg.op == IBV_WR_RDMA_READ)
			rc_check(rc, rc->buf, cfg.size, seed_of(i), "read data");
		rc_sync(rc);
		mbps[i] = (double)cfg.size / (ms * 1e3);
	}
	qsort(mbps, (size_t)cfg.iters, sizeof(mbps[0]), cmp_double);
	printf("%s %zu B x %d: median %.1f MB/s (min %.1f, max %.1f)\n",
	       cfg.op == IBV_WR_RDMA_WRITE ? "write" : "read", cfg.size, cfg.iters,
	       mbps[cfg.iters / 2], mbps[0], mbps[cfg.iters - 1]);
	return RC_PASS;
}

static void usage(void)
{
	fprintf(stderr, "usage: rc_xfer [--op write|read] [--size BYTES] [--iters 1..%d]\n",
		MAX_ITERS);
	exit(2);
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--op") == 0 && strcmp(argv[i + 1], "write") == 0)
			cfg.op = IBV_WR_RDMA_WRITE;
		else if (strcmp(argv[i], "--op") == 0 && strcmp(argv[i + 1], "read") == 0)
			cfg.op = IBV_WR_RDMA_READ;
		else if (strcmp(argv[i], "--size") == 0)
			cfg.size = strtoull(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--iters") == 0)
			cfg.iters = atoi(argv[i + 1]);
		else
			usage();
	}
	if (argc % 2 == 0 || cfg.size == 0 || cfg.size > (1u << 30) || cfg.iters < 1 ||
	    cfg.iters > MAX_ITERS)
		usage();
	struct rc_opts o = rc_defaults("rc_xfer");

	o.alarm_s = 600;
	o.buf_size = cfg.size;
	return rc_run(&o, server, client);
}
