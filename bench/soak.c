/* soak: 64 RC QPs of mixed traffic between two processes for a while, every byte and every
 * completion checked, with both processes' memory sampled: it must stay flat.
 *
 *   soak [--seconds N] [--qps N]      (defaults 600 s, 64 QPs; CI runs --seconds 30)
 *
 * Each round posts, on every QP: an RDMA WRITE of a fresh pattern (1 B to 256 KiB) into the QP's
 * region of the server, a READ of it back, a FETCH_AND_ADD on the QP's counter, and a
 * SEND_WITH_IMM (up to 64 KiB) that the server checks and answers with a new receive. The client
 * checks what came back (READ data, the counter's old value) and every status. It prints a line
 * every 2 s and a summary; it fails on any error, or if either process's RSS grows by more than
 * max(8 MiB, 10%) between the 10% mark of the run and its end (the first 10% is warm-up: CQs,
 * socket buffers and allocator arenas reach their working size). */
#include "rc_harness.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NQP_MAX RC_MAX_QP
#define REGION (256 * 1024u) /* per QP: the WRITE/READ target on the server */
#define SLOT (64 * 1024u)    /* per QP: the server's receive slot */
#define RECV_OFF ((size_t)NQP_MAX * REGION)
#define COUNTER_OFF (RECV_OFF + (size_t)NQP_MAX * SLOT)
#define FETCH_OFF (2 * (size_t)NQP_MAX * REGION) /* client: where each QP's fetched value lands */
#define BUF_SIZE (FETCH_OFF + 4096) /* client: a source and a sink per QP, then the fetches */
#define STOP_IMM 0xffffffffu
#define WR_PER_QP 4
#define SAMPLE_MS 2000.0

static struct {
	unsigned seconds;
	int nqp;
} cfg = {600, NQP_MAX};

enum { K_WRITE, K_READ, K_FADD, K_SEND };

static void post_recv_slot(struct rc *rc, int q)
{
	rc_post_recv(rc, q, (uint64_t)q, RECV_OFF + (size_t)q * SLOT, SLOT);
}

static int qp_index(struct rc *rc, uint32_t qpn)
{
	for (int q = 0; q < cfg.nqp; q++)
		if (rc->qp[q]->qp_num == qpn)
			return q;
	rc_fail(rc, "a completion for QP %#x, which is not ours", qpn);
}

static int server(struct rc *rc)
{
	struct ibv_wc wc;
	uint64_t sends = 0;

	memset(rc->buf, 0, rc->o.buf_size); /* every page touched now: RSS then shows the library */
	for (int q = 0; q < cfg.nqp; q++)
		post_recv_slot(rc, q);
	rc_sync(rc);
	rc_step(rc, "check SENDs until the client stops");
	for (;;) {
		int n = ibv_poll_cq(rc->rcq, 1, &wc);

		RC_CHECK(rc, n >= 0, "ibv_poll_cq: %d", n);
		if (n == 0)
			continue; /* bounded by the harness's alarm */
		RC_CHECK(rc, wc.status == IBV_WC_SUCCESS, "RECV: %s", ibv_wc_status_str(wc.status));
		RC_CHECK(rc, wc.wc_flags & IBV_WC_WITH_IMM, "a SEND without immediate data");
		uint32_t seed = ntohl(wc.imm_data);

		if (seed == STOP_IMM)
			break;
		int q = qp_index(rc, wc.qp_num);

		rc_check(rc, rc->buf + RECV_OFF + (size_t)q * SLOT, wc.byte_len, seed, "SEND payload");
		post_recv_slot(rc, q);
		sends++;
	}
	rc_put(rc, sends);
	rc_sync(rc);
	return RC_PASS;
}

struct qp_round {
	uint32_t seed, len, slen;
	uint64_t adds; /* fetch-and-adds done on this QP's counter */
	uint64_t fetched;
};

static uint32_t pick_len(uint32_t *s)
{
	uint32_t r = rc_rand(s);

	switch (r % 4) {
	case 0:
		return 1 + rc_rand(s) % 64;
	case 1:
		return 1 + rc_rand(s) % 4096;
	default:
		return 1 + rc_rand(s) % REGION;
	}
}

static void post_round(struct rc *rc, int q, struct qp_round *r)
{
	uint8_t *src = rc->buf + (size_t)q * 2 * REGION;
	size_t src_off = (size_t)q * 2 * REGION, dst_off = src_off + REGION;
	struct rc_wr w[WR_PER_QP];

	rc_fill(src, r->len, r->seed);
	memset(rc->buf + dst_off, 0, r->len);
	rc_wr(rc, &w[K_WRITE], IBV_WR_RDMA_WRITE, (uint64_t)q << 8 | K_WRITE, src_off, r->len,
	      (size_t)q * REGION);
	rc_wr(rc, &w[K_READ], IBV_WR_RDMA_READ, (uint64_t)q << 8 | K_READ, dst_off, r->len,
	      (size_t)q * REGION);
	rc_wr(rc, &w[K_FADD], IBV_WR_ATOMIC_FETCH_AND_ADD, (uint64_t)q << 8 | K_FADD,
	      FETCH_OFF + (size_t)q * 8, 8, COUNTER_OFF + (size_t)q * 8);
	w[K_FADD].wr.wr.atomic.compare_add = (uint64_t)q + 1;
	rc_wr(rc, &w[K_SEND], IBV_WR_SEND_WITH_IMM, (uint64_t)q << 8 | K_SEND, src_off, r->slen, 0);
	w[K_SEND].wr.imm_data = htonl(r->seed);
	for (int k = 0; k < WR_PER_QP - 1; k++)
		w[k].wr.next = &w[k + 1].wr;
	rc_post_send(rc, q, &w[0].wr);
}

static void check_round(struct rc *rc, int q, struct qp_round *r)
{
	const uint8_t *dst = rc->buf + (size_t)q * 2 * REGION + REGION;
	uint64_t got;

	rc_check(rc, dst, r->len, r->seed, "READ back what was written");
	memcpy(&got, rc->buf + FETCH_OFF + (size_t)q * 8, 8);
	RC_CHECK(rc, got == r->adds * ((uint64_t)q + 1), "QP %d counter %#llx, expected %#llx", q,
		 (unsigned long long)got, (unsigned long long)(r->adds * ((uint64_t)q + 1)));
	r->adds++;
}

struct rss_track {
	long at_mark[2], last[2], peak[2];
	bool marked;
};

static void sample(struct rc *rc, struct rss_track *t, double elapsed_s, uint64_t ops,
		   double mb)
{
	long now[2] = {rc_rss_kib(getpid()), rc_rss_kib(rc->child)};

	for (int i = 0; i < 2; i++) {
		t->last[i] = now[i];
		if (now[i] > t->peak[i])
			t->peak[i] = now[i];
	}
	if (!t->marked && elapsed_s >= cfg.seconds * 0.1) {
		t->marked = true;
		memcpy(t->at_mark, now, sizeof(now));
	}
	printf("soak: t=%6.1f s ops=%10llu moved=%9.1f MB rss client=%ld KiB server=%ld KiB\n",
	       elapsed_s, (unsigned long long)ops, mb, now[0], now[1]);
	fflush(stdout);
}

static bool grew(const struct rss_track *t, int i)
{
	long bound = t->at_mark[i] / 10 > 8192 ? t->at_mark[i] / 10 : 8192;

	return t->last[i] - t->at_mark[i] > bound;
}

static int client(struct rc *rc)
{
	static struct qp_round r[NQP_MAX];
	struct ibv_wc wc[WR_PER_QP * NQP_MAX];
	struct rss_track t = {0};
	uint32_t s = 12345;
	uint64_t ops = 0, bytes = 0, rounds = 0;
	double start, next_sample;

	memset(rc->buf, 0, rc->o.buf_size); /* every page touched now: RSS then shows the library */
	rc_sync(rc);
	start = next_sample = rc_now_ms();
	rc_step(rc, "mixed traffic on %d QPs for %u s", cfg.nqp, cfg.seconds);
	while (rc_now_ms() - start < cfg.seconds * 1000.0) {
		for (int q = 0; q < cfg.nqp; q++) {
			r[q].seed = (uint32_t)(rounds * NQP_MAX + (uint64_t)q) & 0x7fffffffu;
			r[q].len = pick_len(&s);
			r[q].slen = r[q].len < SLOT ? r[q].len : SLOT;
			post_round(rc, q, &r[q]);
		}
		int n = WR_PER_QP * cfg.nqp;

		rc_poll(rc, rc->scq, wc, n, RC_WAIT_MS);
		for (int i = 0; i < n; i++)
			RC_CHECK(rc, wc[i].status == IBV_WC_SUCCESS, "QP %d WR kind %d: %s",
				 (int)(wc[i].wr_id >> 8), (int)(wc[i].wr_id & 0xff),
				 ibv_wc_status_str(wc[i].status));
		for (int q = 0; q < cfg.nqp; q++) {
			check_round(rc, q, &r[q]);
			bytes += 2ull * r[q].len + r[q].slen + 8;
		}
		ops += (uint64_t)n;
		rounds++;
		double now = rc_now_ms();

		if (now >= next_sample) {
			sample(rc, &t, (now - start) / 1000.0, ops, (double)bytes / 1e6);
			next_sample = now + SAMPLE_MS;
		}
	}
	double secs = (rc_now_ms() - start) / 1000.0;

	sample(rc, &t, secs, ops, (double)bytes / 1e6);
	rc_step(rc, "stop the server");
	struct rc_wr stop;

	rc_wr(rc, &stop, IBV_WR_SEND_WITH_IMM, 1u << 30, 0, 0, 0);
	stop.wr.imm_data = htonl(STOP_IMM);
	rc_post_send(rc, 0, &stop.wr);
	rc_wait(rc, rc->scq, 1u << 30, IBV_WC_SEND, NULL);
	uint64_t sends = rc_get(rc);

	RC_CHECK(rc, sends == rounds * (uint64_t)cfg.nqp, "server checked %llu SENDs of %llu",
		 (unsigned long long)sends, (unsigned long long)(rounds * (uint64_t)cfg.nqp));
	printf("soak: %d QPs, %.0f s: %llu ops (%.0f/s), %.1f MB moved (%.1f MB/s), 0 errors\n",
	       cfg.nqp, secs, (unsigned long long)ops, ops / secs, bytes / 1e6, bytes / 1e6 / secs);
	for (int i = 0; i < 2; i++)
		printf("soak: %s RSS %ld KiB at the 10%% mark, %ld KiB at the end (peak %ld)\n",
		       i ? "server" : "client", t.at_mark[i], t.last[i], t.peak[i]);
	rc_sync(rc);
	for (int i = 0; i < 2; i++)
		RC_CHECK(rc, !grew(&t, i), "%s RSS grew from %ld to %ld KiB",
			 i ? "server" : "client", t.at_mark[i], t.last[i]);
	return RC_PASS;
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--seconds") == 0)
			cfg.seconds = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--qps") == 0)
			cfg.nqp = atoi(argv[i + 1]);
	}
	if (cfg.seconds < 1 || cfg.nqp < 1 || cfg.nqp > NQP_MAX) {
		fprintf(stderr, "usage: soak [--seconds N] [--qps 1..%d]\n", NQP_MAX);
		return 2;
	}
	struct rc_opts o = rc_defaults("soak");

	o.nqp = cfg.nqp;
	o.buf_size = BUF_SIZE;
	o.sq_depth = 16;
	o.rq_depth = 4;
	o.alarm_s = cfg.seconds + 120;
	return rc_run(&o, server, client);
}
