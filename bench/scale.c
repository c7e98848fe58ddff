/* scale: many connected RC QPs between two processes. For one QP count it measures how fast the
 * QPs are brought to RTS, what each costs in resident memory, the aggregate RDMA WRITE bandwidth
 * with every QP busy, and the 8-byte WRITE round trip (post to completion) over them all.
 *
 *   scale [--qps N] [--size BYTES] [--depth D] [--seconds S] [--samples K]
 *         (defaults 16 QPs, 64 KiB, 2 WRITEs in flight per QP, 3 s, 20000 samples)
 *
 * Phases, each between barriers of both processes:
 *   setup:   each side creates N QPs on one CQ, takes them to INIT, swaps QPNs and PSNs with the
 *            other, then RTR and RTS; timed from the first ibv_create_qp to the barrier after
 *            the last RTS of both sides.
 *   memory:  VmRSS of both processes before the QPs exist and after the traffic, per QP.
 *   bw:      every QP keeps D WRITEs of BYTES in flight into its own region of the server for S
 *            seconds; payload bytes completed / time of the last completion.
 *   latency: one 8-byte signaled WRITE at a time, QP after QP round robin, post to completion
 *            (the WRITE and its ACK: a full round trip), at most K samples or S seconds.
 * Then the server checks that every region holds its QP's pattern, byte for byte.
 *
 * Prints the figures and one line "scale<TAB>..." for scripts (fields named by the
 * "scale-fields" line above it). Not a test: it asserts no timing, only data and statuses. */
#include "common/stats.h"
#include "rc_harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_QPS 4096
#define LAT_BYTES 8
#define POLL_BATCH 64

static struct {
	int nqp;
	size_t size;
	unsigned depth;
	double seconds;
	int samples;
} cfg = {16, 64 * 1024, 2, 3.0, 20000};

struct scale {
	struct ibv_cq *cq;
	struct ibv_qp *qp[MAX_QPS];
	struct rc_peer to; /* the peer's MR and GID; qpn[0]/psn[0] rewritten per QP for RTR */
	uint32_t peer_qpn[MAX_QPS], peer_psn[MAX_QPS], my_psn[MAX_QPS];
};

static struct scale S;

static uint32_t seed_of(int q)
{
	return 7000u + (uint32_t)q;
}

static size_t region(int q)
{
	return (size_t)q * cfg.size;
}

/* ---- setup ---- */

static void create_qps(struct rc *rc)
{
	int cqe = cfg.nqp * (int)cfg.depth + 16;

	S.cq = ibv_create_cq(rc->ctx, cqe, NULL, NULL, 0);
	RC_CHECK(rc, S.cq, "ibv_create_cq(%d): %s", cqe, strerror(errno));
	for (int q = 0; q < cfg.nqp; q++) {
		struct ibv_qp_init_attr a = {
		    .send_cq = S.cq,
		    .recv_cq = S.cq,
		    .cap = {.max_send_wr = cfg.depth,
			    .max_recv_wr = 1,
			    .max_send_sge = 1,
			    .max_recv_sge = 1},
		    .qp_type = IBV_QPT_RC,
		};

		S.qp[q] = ibv_create_qp(rc->pd, &a);
		RC_CHECK(rc, S.qp[q], "ibv_create_qp #%d: %s", q, strerror(errno));
		S.my_psn[q] = (uint32_t)(q * 0x1001 + (rc->client ? 0x500 : 0)) & 0xffffffu;
		rc_qp_init(rc, S.qp[q]);
	}
}

static void send_qpns(struct rc *rc)
{
	for (int q = 0; q < cfg.nqp; q++)
		rc_put(rc, (uint64_t)S.qp[q]->qp_num << 32 | S.my_psn[q]);
}

static void recv_qpns(struct rc *rc)
{
	for (int q = 0; q < cfg.nqp; q++) {
		uint64_t v = rc_get(rc);

		S.peer_qpn[q] = (uint32_t)(v >> 32);
		S.peer_psn[q] = (uint32_t)v;
	}
}

/* The server sends first and the client reads first: a socketpair holds only a few hundred
 * 8-byte messages, so both sending at once would block both. */
static void swap_qpns(struct rc *rc)
{
	if (rc->client) {
		recv_qpns(rc);
		send_qpns(rc);
	} else {
		send_qpns(rc);
		recv_qpns(rc);
	}
}

static void connect_qps(struct rc *rc)
{
	S.to = rc->peer;
	for (int q = 0; q < cfg.nqp; q++) {
		S.to.qpn[0] = S.peer_qpn[q];
		S.to.psn[0] = S.peer_psn[q];
		rc_qp_rtr(rc, S.qp[q], &S.to, 0);
		rc_qp_rts(rc, S.qp[q], S.my_psn[q]);
	}
}

static void setup(struct rc *rc)
{
	rc_step(rc, "bring %d QPs to RTS", cfg.nqp);
	create_qps(rc);
	swap_qpns(rc);
	connect_qps(rc);
	rc_sync(rc);
}

static void teardown(struct rc *rc)
{
	int r;

	rc_step(rc, "destroy %d QPs", cfg.nqp);
	for (int q = 0; q < cfg.nqp; q++)
		if ((r = ibv_destroy_qp(S.qp[q])))
			rc_fail(rc, "ibv_destroy_qp #%d: %s", q, strerror(r));
	if ((r = ibv_destroy_cq(S.cq)))
		rc_fail(rc, "ibv_destroy_cq: %s", strerror(r));
}

/* ---- traffic (client) ---- */

static void post_write(struct rc *rc, int q, size_t len)
{
	struct rc_wr w;
	struct ibv_send_wr *bad;

	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, (uint64_t)q, region(q), len, region(q));
	int r = ibv_post_send(S.qp[q], &w.wr, &bad);

	RC_CHECK(rc, r == 0, "ibv_post_send on QP #%d: %s", q, strerror(r));
}

/* Up to POLL_BATCH completions within 60 s, each checked; returns how many. */
static int poll_some(struct rc *rc, struct ibv_wc *wc)
{
	double deadline = rc_now_ms() + 60000.0;
	int n;

	while ((n = ibv_poll_cq(S.cq, POLL_BATCH, wc)) == 0)
		RC_CHECK(rc, rc_now_ms() < deadline, "no completion for 60 s");
	RC_CHECK(rc, n > 0, "ibv_poll_cq: %d", n);
	for (int i = 0; i < n; i++)
		RC_CHECK(rc, wc[i].status == IBV_WC_SUCCESS, "QP #%d: %s", (int)wc[i].wr_id,
			 ibv_wc_status_str(wc[i].status));
	return n;
}

struct bw {
	double gbps, mpps;
	uint64_t retransmits, rto_expiries, held;
};

static struct bw bandwidth(struct rc *rc)
{
	uint64_t c0[URNIC_C_COUNT], c1[URNIC_C_COUNT];
	struct ibv_wc wc[POLL_BATCH];
	uint64_t done = 0, inflight = 0;

	rc_step(rc, "bandwidth: %u x %zu B in flight on each of %d QPs", cfg.depth, cfg.size,
		cfg.nqp);
	rc_read_counters(rc, c0);
	double t0 = rc_now_ms(), stop = t0 + cfg.seconds * 1e3;

	for (unsigned d = 0; d < cfg.depth; d++)
		for (int q = 0; q < cfg.nqp; q++, inflight++)
			post_write(rc, q, cfg.size);
	while (inflight) {
		int n = poll_some(rc, wc);
		bool more = rc_now_ms() < stop;

		done += (uint64_t)n;
		inflight -= (uint64_t)n;
		for (int i = 0; more && i < n; i++, inflight++)
			post_write(rc, (int)wc[i].wr_id, cfg.size);
	}
	double s = (rc_now_ms() - t0) / 1e3;

	rc_read_counters(rc, c1);
	return (struct bw){
	    .gbps = (double)done * (double)cfg.size / s / 1e9,
	    .mpps = (double)done / s / 1e6,
	    .retransmits = c1[URNIC_C_retransmits] - c0[URNIC_C_retransmits],
	    .rto_expiries = c1[URNIC_C_rto_expiries] - c0[URNIC_C_rto_expiries],
	    .held = c1[URNIC_C_tx_held] - c0[URNIC_C_tx_held],
	};
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct lat {
	double p50, p99, max;
	int n;
};

/* Writes the first LAT_BYTES of each QP's pattern onto themselves: the final check holds. */
static struct lat latency(struct rc *rc)
{
	double *us = calloc((size_t)cfg.samples, sizeof(*us));
	struct ibv_wc wc[POLL_BATCH];
	struct lat l = {0};

	RC_CHECK(rc, us, "out of memory");
	rc_step(rc, "latency: %d B WRITE round trips over %d QPs", LAT_BYTES, cfg.nqp);
	double stop = rc_now_ms() + cfg.seconds * 1e3;

	for (; l.n < cfg.samples && rc_now_ms() < stop; l.n++) {
		int q = l.n % cfg.nqp;
		double t = rc_now_ms();

		post_write(rc, q, LAT_BYTES);
		RC_CHECK(rc, poll_some(rc, wc) == 1 && (int)wc[0].wr_id == q,
			 "one completion, of QP #%d, expected", q);
		us[l.n] = (rc_now_ms() - t) * 1e3;
	}
	qsort(us, (size_t)l.n, sizeof(*us), cmp_double);
	l.p50 = us[l.n / 2];
	l.p99 = us[(size_t)l.n * 99 / 100];
	l.max = us[l.n - 1];
	free(us);
	return l;
}

/* ---- the two sides ---- */

static int server(struct rc *rc)
{
	memset(rc->buf, 0, rc->o.buf_size); /* every page resident before the first RSS sample */
	rc_sync(rc);			    /* the client samples RSS */
	rc_sync(rc);
	setup(rc);
	rc_sync(rc); /* bandwidth and latency */
	rc_step(rc, "check %d regions", cfg.nqp);
	for (int q = 0; q < cfg.nqp; q++)
		rc_check(rc, rc->buf + region(q), cfg.size, seed_of(q), "a QP's region");
	rc_sync(rc); /* checked; the client samples RSS */
	rc_sync(rc);
	teardown(rc);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	for (int q = 0; q < cfg.nqp; q++)
		rc_fill(rc->buf + region(q), cfg.size, seed_of(q));
	rc_sync(rc);
	long rss0_c = rc_rss_kib(getpid()), rss0_s = rc_rss_kib(rc->child);

	rc_sync(rc);
	double t0 = rc_now_ms();

	setup(rc);
	double setup_s = (rc_now_ms() - t0) / 1e3;
	struct bw bw = bandwidth(rc);
	struct lat lat = latency(rc);

	rc_sync(rc);
	rc_sync(rc); /* the server checked every region */
	long rss1_c = rc_rss_kib(getpid()), rss1_s = rc_rss_kib(rc->child);

	rc_sync(rc);
	teardown(rc);

	double kib_c = (double)(rss1_c - rss0_c) / cfg.nqp;
	double kib_s = (double)(rss1_s - rss0_s) / cfg.nqp;

	printf("%d QPs: setup %.3f s (%.0f QPs/s to RTS, each side); RSS per QP: client %.1f KiB, "
	       "server %.1f KiB\n",
	       cfg.nqp, setup_s, cfg.nqp / setup_s, kib_c, kib_s);
	printf("  WRITE %zu B x %u in flight per QP: %.3f GB/s, %.4f Mpps (%" PRIu64
	       " retransmitted packets, %" PRIu64 " timer expiries, %" PRIu64 " held back)\n",
	       cfg.size, cfg.depth, bw.gbps, bw.mpps, bw.retransmits, bw.rto_expiries, bw.held);
	printf("  %d B WRITE round trip, %d samples: p50 %.2f us, p99 %.2f us, max %.1f us\n",
	       LAT_BYTES, lat.n, lat.p50, lat.p99, lat.max);
	printf("scale-fields\tqps\tsize\tdepth\tsetup_s\tqps_per_s\trss_kib_per_qp_client\t"
	       "rss_kib_per_qp_server\tbw_gbps\tmpps\tretransmits\trto_expiries\tlat_p50_us\t"
	       "lat_p99_us\tlat_samples\theld_back\n");
	printf("scale\t%d\t%zu\t%u\t%.4f\t%.1f\t%.2f\t%.2f\t%.4f\t%.4f\t%" PRIu64 "\t%" PRIu64
	       "\t%.2f\t%.2f\t%d\t%" PRIu64 "\n",
	       cfg.nqp, cfg.size, cfg.depth, setup_s, cfg.nqp / setup_s, kib_c, kib_s, bw.gbps,
	       bw.mpps, bw.retransmits, bw.rto_expiries, lat.p50, lat.p99, lat.n, bw.held);
	return RC_PASS;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: scale [--qps 1..%d] [--size BYTES] [--depth D] [--seconds S] "
		"[--samples K]\n",
		MAX_QPS);
	exit(2);
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];

		if (strcmp(k, "--qps") == 0)
			cfg.nqp = atoi(v);
		else if (strcmp(k, "--size") == 0)
			cfg.size = strtoull(v, NULL, 0);
		else if (strcmp(k, "--depth") == 0)
			cfg.depth = (unsigned)atoi(v);
		else if (strcmp(k, "--seconds") == 0)
			cfg.seconds = atof(v);
		else if (strcmp(k, "--samples") == 0)
			cfg.samples = atoi(v);
		else
			usage();
	}
	if (argc % 2 == 0 || cfg.nqp < 1 || cfg.nqp > MAX_QPS || cfg.size < LAT_BYTES ||
	    cfg.size > (64u << 20) || cfg.depth < 1 || cfg.depth > 64 || cfg.seconds <= 0 ||
	    cfg.samples < 1)
		usage();
	struct rc_opts o = rc_defaults("scale");

	o.alarm_s = 300 + (unsigned)(4 * cfg.seconds);
	o.buf_size = (size_t)cfg.nqp * cfg.size;
	return rc_run(&o, server, client);
}
