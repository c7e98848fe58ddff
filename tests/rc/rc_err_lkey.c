/* rc_err_lkey: a WR whose local SGE the MR does not cover completes with
 * IBV_WC_LOC_PROT_ERR at the requester: a wrong lkey on SEND, WRITE and READ (the READ's
 * destination), and a right lkey with the SGE running 8 bytes past the MR. */
#include "rc_harness.h"

static const struct {
	const char *name;
	enum ibv_wr_opcode op;
	bool past_end;
} cases[] = {
    {"SEND with a wrong lkey", IBV_WR_SEND, false},
    {"WRITE with a wrong lkey", IBV_WR_RDMA_WRITE, false},
    {"READ into a wrong lkey", IBV_WR_RDMA_READ, false},
    {"SEND with an SGE 8 bytes past the MR", IBV_WR_SEND, true},
};
static int c;

static int server(struct rc *rc)
{
	rc_step(rc, "%s", cases[c].name);
	rc_post_recv(rc, 0, 0x10, 0, 4096);
	rc_sync(rc);
	rc_sync(rc);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	struct rc_wr w;
	struct ibv_wc wc;

	rc_step(rc, "%s", cases[c].name);
	if (cases[c].past_end) {
		rc_wr(rc, &w, cases[c].op, 0x20, rc->o.buf_size - 8, 16, 0);
	} else {
		rc_wr(rc, &w, cases[c].op, 0x20, 0, 64, 0);
		w.sge.lkey = rc->mr->lkey ^ 0x5a; /* one MR in the PD: any other key is bad */
	}
	rc_sync(rc);
	rc_post_send(rc, 0, &w.wr);
	rc_poll(rc, rc->scq, &wc, 1, RC_WAIT_MS);
	/* IBTA 11.6.2 Local Protection Error: the local data segment is not covered by a valid
	 * L_Key with the needed access. */
	rc_expect(rc, &wc, 0x20, IBV_WC_LOC_PROT_ERR, -1);
	rc_sync(rc);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_err_lkey");

	o.buf_size = RC_MIB;
	o.alarm_s = 30;
	return rc_run_cases(&o, (int)(sizeof(cases) / sizeof(cases[0])), &c, NULL, server, client);
}
