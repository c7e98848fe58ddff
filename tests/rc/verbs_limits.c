/* verbs_limits: a device holds exactly the PDs, CQs, MRs, AHs, SRQs and QPs ibv_query_device
 * advertises; the next create fails with ENOMEM (siw and mlx5; rxe's pools say EINVAL), one
 * destroy makes room for one more, and destroying them all gives every slot back. Single
 * process; the harness's own PD, CQs, MR and QP count towards the limits. */
#include "rc_harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one kind of object needs: make one (NULL with errno on failure), destroy one. */
struct kind {
	const char *name;
	int max;      /* from ibv_query_device */
	int held;     /* created by the harness before the test body */
	void *(*make)(struct rc *rc);
	int (*destroy)(void *obj);
};

static void *make_pd(struct rc *rc)
{
	return ibv_alloc_pd(rc->ctx);
}
static int destroy_pd(void *o)
{
	return ibv_dealloc_pd(o);
}

static void *make_cq(struct rc *rc)
{
	return ibv_create_cq(rc->ctx, 1, NULL, NULL, 0);
}
static int destroy_cq(void *o)
{
	return ibv_destroy_cq(o);
}

static void *make_mr(struct rc *rc)
{
	return ibv_reg_mr(rc->pd, rc->buf, 64, IBV_ACCESS_LOCAL_WRITE);
}
static int destroy_mr(void *o)
{
	return ibv_dereg_mr(o);
}

static void *make_ah(struct rc *rc)
{
	struct ibv_ah_attr a;

	rc_fill_ah(rc, &a, &rc->me);
	return ibv_create_ah(rc->pd, &a);
}
static int destroy_ah(void *o)
{
	return ibv_destroy_ah(o);
}

static void *make_srq(struct rc *rc)
{
	struct ibv_srq_init_attr a = {.attr = {.max_wr = 1, .max_sge = 1}};

	return ibv_create_srq(rc->pd, &a);
}
static int destroy_srq(void *o)
{
	return ibv_destroy_srq(o);
}

/* The smallest QP there is: one WQE each way, one SGE, no inline. */
static void *make_qp(struct rc *rc)
{
	struct ibv_qp_init_attr a = {
	    .send_cq = rc->scq,
	    .recv_cq = rc->rcq,
	    .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC};

	return ibv_create_qp(rc->pd, &a);
}
static int destroy_qp(void *o)
{
	return ibv_destroy_qp(o);
}

/* Fills the device to k->max, checks the refusal, the slot a destroy frees, and the release. */
static void fill_to_limit(struct rc *rc, const struct kind *k)
{
	int n = k->max - k->held;
	void **objs = calloc((size_t)n, sizeof(*objs));
	double t0 = rc_now_ms();

	RC_CHECK(rc, n > 0 && objs, "%s: max %d, %d held by the harness", k->name, k->max, k->held);
	for (int i = 0; i < n; i++) {
		rc_step(rc, "%s %d of max %d", k->name, k->held + i + 1, k->max);
		objs[i] = k->make(rc);
		RC_CHECK(rc, objs[i], "%s %d of %d: %s", k->name, k->held + i + 1, k->max,
			 strerror(errno));
	}
	rc_step(rc, "%s %d: one past max", k->name, k->max + 1);
	errno = 0;
	void *over = k->make(rc);
	int e = over ? 0 : errno;
	if (over)
		k->destroy(over);
	rc_expect_errno(rc, e, ENOMEM, "create past the advertised maximum");

	rc_step(rc, "%s: destroy one at the limit, create one", k->name);
	rc_expect_errno(rc, k->destroy(objs[n / 2]), 0, "destroy at the limit");
	objs[n / 2] = k->make(rc);
	RC_CHECK(rc, objs[n / 2], "create after a destroy at the limit: %s", strerror(errno));
	errno = 0;
	over = k->make(rc);
	e = over ? 0 : errno;
	if (over)
		k->destroy(over);
	rc_expect_errno(rc, e, ENOMEM, "create past the maximum again");

	rc_step(rc, "%s: destroy all %d", k->name, n);
	for (int i = 0; i < n; i++)
		rc_expect_errno(rc, k->destroy(objs[i]), 0, "destroy");
	free(objs);

	rc_step(rc, "%s: the count went back: all %d fit again", k->name, n);
	objs = calloc((size_t)n, sizeof(*objs));
	RC_CHECK(rc, objs, "calloc");
	for (int i = 0; i < n; i++) {
		objs[i] = k->make(rc);
		RC_CHECK(rc, objs[i], "%s %d of %d after release: %s", k->name, k->held + i + 1,
			 k->max, strerror(errno));
	}
	for (int i = 0; i < n; i++)
		rc_expect_errno(rc, k->destroy(objs[i]), 0, "destroy");
	free(objs);
	printf("verbs_limits: %-4s max %6d: %6d created, next ENOMEM, %.0f ms\n", k->name, k->max,
	       n, rc_now_ms() - t0);
}

static int test(struct rc *rc)
{
	const struct ibv_device_attr *d = &rc->dev;
	const struct kind kinds[] = {
	    {"PD", d->max_pd, 1, make_pd, destroy_pd},
	    {"CQ", d->max_cq, 2, make_cq, destroy_cq},
	    {"MR", d->max_mr, 1, make_mr, destroy_mr},
	    {"AH", d->max_ah, 0, make_ah, destroy_ah},
	    {"SRQ", d->max_srq, 0, make_srq, destroy_srq},
	    {"QP", d->max_qp, rc->o.nqp, make_qp, destroy_qp},
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		fill_to_limit(rc, &kinds[i]);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("verbs_limits");

	o.nqp = 1;
	o.buf_size = 4096;
	o.sq_depth = o.rq_depth = 1;
	o.alarm_s = 60;
	return rc_run_local(&o, test);
}
