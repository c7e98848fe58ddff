/* rc_err_access: a remote MR registered without the needed right rejects the request with
 * IBV_WC_REM_ACCESS_ERR and is left untouched: WRITE without REMOTE_WRITE, READ without
 * REMOTE_READ, FETCH_ADD and CMP_SWAP without REMOTE_ATOMIC. One fresh connection per case. */
#include "rc_harness.h"

#include <string.h>

#define AREA 4096
#define ALL_REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static const struct {
	const char *name;
	enum ibv_wr_opcode op;
	int missing;
} cases[] = {
    {"WRITE to an MR without REMOTE_WRITE", IBV_WR_RDMA_WRITE, IBV_ACCESS_REMOTE_WRITE},
    {"READ from an MR without REMOTE_READ", IBV_WR_RDMA_READ, IBV_ACCESS_REMOTE_READ},
    {"FETCH_ADD on an MR without REMOTE_ATOMIC", IBV_WR_ATOMIC_FETCH_AND_ADD,
     IBV_ACCESS_REMOTE_ATOMIC},
    {"CMP_SWAP on an MR without REMOTE_ATOMIC", IBV_WR_ATOMIC_CMP_AND_SWP,
     IBV_ACCESS_REMOTE_ATOMIC},
};
static int c;

static int server(struct rc *rc)
{
	rc_step(rc, "%s", cases[c].name);
	memset(rc->buf, RC_CANARY, AREA);
	rc_sync(rc);
	rc_sync(rc);
	rc_check_const(rc, rc->buf, AREA, RC_CANARY, "responder memory");
	return RC_PASS;
}

static int client(struct rc *rc)
{
	bool atomic =
	    cases[c].op == IBV_WR_ATOMIC_FETCH_AND_ADD || cases[c].op == IBV_WR_ATOMIC_CMP_AND_SWP;
	size_t len = atomic ? 8 : rc->mtu + 1;
	struct rc_wr w;
	struct ibv_wc wc;

	rc_step(rc, "%s", cases[c].name);
	memset(rc->buf, RC_CANARY, AREA);
	rc_wr(rc, &w, cases[c].op, 1, 0, len, 0);
	rc_sync(rc);
	rc_post_send(rc, 0, &w.wr);
	rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
	/* IBTA C9: R_Key access-right violation -> NAK Remote Access Error. */
	rc_expect(rc, &wc, 1, IBV_WC_REM_ACCESS_ERR, -1);
	rc_check_const(rc, rc->buf, AREA, RC_CANARY, "local buffer (no response data)");
	rc_sync(rc);
	return RC_PASS;
}

static void adjust(struct rc_opts *o, int i)
{
	o->mr_access = IBV_ACCESS_LOCAL_WRITE | (ALL_REMOTE & ~cases[i].missing);
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_err_access");

	o.buf_size = RC_MIB;
	o.alarm_s = 30;
	return rc_run_cases(&o, (int)(sizeof(cases) / sizeof(cases[0])), &c, adjust, server,
			    client);
}
