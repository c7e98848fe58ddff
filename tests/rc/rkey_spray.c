/* rkey_spray: thousands of RDMA WRITEs with random rkeys, addresses and lengths change no byte
 * outside the memory the server granted, and every granted byte ends as the legal WRITEs left it.
 *
 * The server lays out pages with an unregistered canary page between every two regions:
 *   A  REMOTE_WRITE MR in the QP's PD  (the only legal target)
 *   B  REMOTE_READ-only MR in the same PD
 *   D  an MR deregistered before the spray (unreachable once ibv_dereg_mr returned)
 *   P  a REMOTE_WRITE MR in another PD
 * The QPs are UC, whose responder drops an R_Key violation silently (IBTA vol. 1 9.7.5.1.7
 * UC: no NAK, the QP stays up), so one connection takes the whole spray. Both sides derive the
 * same WRITEs from one seed: the server replays the legal ones on a shadow copy of A and compares. */
#include "rc_harness.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define REGION (64 * 1024u)
#define PAGE 4096u
#define NREGIONS 4
#define ROUNDS 8
#define PER_ROUND 250
#define MAX_LEN (3 * 4096u) /* several packets at any MTU */
#define SEED 0x5eed1234u

enum { R_A, R_B, R_D, R_P };

/* What the client knows of the server's memory. */
struct layout {
	uint64_t base;		   /* first canary page */
	uint64_t addr[NREGIONS];   /* region starts */
	uint32_t rkey[NREGIONS];
	uint32_t harness_rkey;	   /* the harness's own MR: never aimed at */
};

struct spray_wr {
	uint64_t va;
	uint32_t rkey, len;
};

/* A target the spray aims at: mostly near the regions, since far-off addresses are easy. */
static uint64_t pick_va(const struct layout *l, uint32_t *s)
{
	uint64_t span = NREGIONS * (REGION + PAGE) + PAGE;
	uint32_t r = rc_rand(s);

	switch (r % 6) {
	case 0: /* anywhere in the layout, canary pages included */
		return l->base + rc_rand(s) % span;
	case 1: /* straddling a region's start */
		return l->addr[rc_rand(s) % NREGIONS] - 1 - rc_rand(s) % 64;
	case 2: /* straddling a region's end */
		return l->addr[rc_rand(s) % NREGIONS] + REGION - rc_rand(s) % 64;
	case 3: /* a random 64-bit address */
		return ((uint64_t)rc_rand(s) << 32) | rc_rand(s);
	case 4: /* inside A, where most of the legal WRITEs come from */
		return l->addr[R_A] + rc_rand(s) % REGION;
	default: /* inside any region */
		return l->addr[rc_rand(s) % NREGIONS] + rc_rand(s) % REGION;
	}
}

static uint32_t pick_rkey(const struct layout *l, uint32_t *s)
{
	uint32_t r = rc_rand(s) % 8, k;

	if (r < 4)
		return l->rkey[R_A];
	if (r < 7)
		return l->rkey[1 + r - 4]; /* B, D, P */
	do
		k = rc_rand(s);
	while (k == l->harness_rkey);
	return k;
}

static struct spray_wr pick(const struct layout *l, uint32_t *s)
{
	struct spray_wr w = {.rkey = pick_rkey(l, s), .va = pick_va(l, s)};

	w.len = rc_rand(s) % 16 == 0 ? 0 : 1 + rc_rand(s) % MAX_LEN;
	return w;
}

/* The only WRITE the server may execute: A's rkey, wholly inside A. */
static bool legal(const struct layout *l, const struct spray_wr *w)
{
	return w->len && w->rkey == l->rkey[R_A] && w->va >= l->addr[R_A] &&
	       w->va - l->addr[R_A] <= REGION - w->len;
}

static void send_layout(struct rc *rc, const struct layout *l)
{
	rc_put(rc, l->base);
	for (int i = 0; i < NREGIONS; i++) {
		rc_put(rc, l->addr[i]);
		rc_put(rc, l->rkey[i]);
	}
	rc_put(rc, l->harness_rkey);
}

static void get_layout(struct rc *rc, struct layout *l)
{
	l->base = rc_get(rc);
	for (int i = 0; i < NREGIONS; i++) {
		l->addr[i] = rc_get(rc);
		l->rkey[i] = (uint32_t)rc_get(rc);
	}
	l->harness_rkey = (uint32_t)rc_get(rc);
}

static int server(struct rc *rc)
{
	size_t total = NREGIONS * (REGION + PAGE) + PAGE;
	uint8_t *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *shadow = malloc(REGION);
	struct ibv_pd *other_pd = ibv_alloc_pd(rc->ctx);
	struct ibv_mr *mr[NREGIONS];
	static const int access[NREGIONS] = {
		[R_A] = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		[R_B] = IBV_ACCESS_REMOTE_READ,
		[R_D] = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		[R_P] = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};
	struct layout l = {.base = (uintptr_t)mem, .harness_rkey = rc->mr->rkey};

	RC_CHECK(rc, mem != MAP_FAILED && shadow && other_pd, "allocate the layout");
	memset(mem, RC_CANARY, total);
	memset(shadow, RC_CANARY, REGION);
	rc_step(rc, "register A, B, D, P");
	for (int i = 0; i < NREGIONS; i++) {
		uint8_t *p = mem + PAGE + (size_t)i * (REGION + PAGE);

		mr[i] = ibv_reg_mr(i == R_P ? other_pd : rc->pd, p, REGION, access[i]);
		RC_CHECK(rc, mr[i], "ibv_reg_mr region %d", i);
		l.addr[i] = (uintptr_t)p;
		l.rkey[i] = mr[i]->rkey;
	}
	RC_CHECK(rc, ibv_dereg_mr(mr[R_D]) == 0, "ibv_dereg_mr D");
	mr[R_D] = NULL;
	send_layout(rc, &l);

	uint32_t s = SEED;
	uint64_t nlegal = 0;

	for (int round = 0; round < ROUNDS; round++) {
		rc_step(rc, "round %d: wait for the client's marker SEND", round);
		rc_post_recv(rc, 0, (uint64_t)round, 0, 8);
		rc_sync(rc);
		rc_wait(rc, rc->rcq, (uint64_t)round, IBV_WC_RECV, NULL);
		for (int i = 0; i < PER_ROUND; i++) {
			struct spray_wr w = pick(&l, &s);

			if (legal(&l, &w)) {
				rc_fill(shadow + (w.va - l.addr[R_A]), w.len,
					(uint32_t)(round * PER_ROUND + i));
				nlegal++;
			}
		}
	}
	rc_step(rc, "A is what the %llu legal WRITEs left", (unsigned long long)nlegal);
	RC_CHECK(rc, nlegal > 100, "only %llu legal WRITEs: the spray aims badly",
		 (unsigned long long)nlegal);
	RC_CHECK(rc, memcmp(mem + PAGE, shadow, REGION) == 0, "region A differs from its shadow");
	rc_step(rc, "every byte outside A unchanged");
	rc_check_const(rc, mem, PAGE, RC_CANARY, "canary page before A");
	rc_check_const(rc, mem + PAGE + REGION, total - PAGE - REGION, RC_CANARY,
		       "B, D, P and the canary pages between");
	rc_sync(rc);
	for (int i = 0; i < NREGIONS; i++)
		if (mr[i])
			ibv_dereg_mr(mr[i]);
	ibv_dealloc_pd(other_pd);
	munmap(mem, total);
	free(shadow);
	return RC_PASS;
}

static void reap(struct rc *rc, struct ibv_wc *wc, int n)
{
	rc_poll(rc, rc->scq, wc, n, RC_WAIT_MS);
	for (int k = 0; k < n; k++)
		RC_CHECK(rc, wc[k].status == IBV_WC_SUCCESS, "WRITE %llu: %s (UC reports no remote error)",
			 (unsigned long long)wc[k].wr_id, ibv_wc_status_str(wc[k].status));
}

static int client(struct rc *rc)
{
	struct layout l;
	uint32_t s = SEED;
	struct ibv_wc wc[16];

	get_layout(rc, &l);
	for (int round = 0; round < ROUNDS; round++) {
		rc_step(rc, "round %d: %d WRITEs", round, PER_ROUND);
		for (int i = 0; i < PER_ROUND; i++) {
			struct spray_wr w = pick(&l, &s);
			size_t off = (size_t)i * MAX_LEN;
			struct rc_wr wr;

			rc_fill(rc->buf + off, w.len, (uint32_t)(round * PER_ROUND + i));
			rc_wr(rc, &wr, IBV_WR_RDMA_WRITE, (uint64_t)i, off, w.len, 0);
			wr.wr.wr.rdma.remote_addr = w.va;
			wr.wr.wr.rdma.rkey = w.rkey;
			rc_post_send(rc, 0, &wr.wr);
			if (i % 16 == 15 || i == PER_ROUND - 1) /* UC completes on send: keep the SQ short */
				reap(rc, wc, i % 16 + 1);
		}
		/* behind every WRITE of the round on the server's socket: once the server has it,
		 * it has judged them all */
		rc_sync(rc);
		struct rc_wr marker;

		rc_wr(rc, &marker, IBV_WR_SEND, 1000, 0, 8, 0);
		rc_post_send(rc, 0, &marker.wr);
		rc_wait(rc, rc->scq, 1000, IBV_WC_SEND, NULL);
	}
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rkey_spray");

	o.uc = true;
	o.buf_size = PER_ROUND * MAX_LEN;
	o.sq_depth = 64;
	return rc_run(&o, server, client);
}
