/* rc_solicited: a CQ armed with ibv_req_notify_cq(cq, 1) raises no event for an unsolicited
 * SEND (its completion is still queued) and one event for a SEND posted with
 * IBV_SEND_SOLICITED (ibv_req_notify_cq(3)). */
#include "rc_harness.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

static int fd_ready(struct rc *rc, int ms)
{
	struct pollfd p = {.fd = rc->channel->fd, .events = POLLIN};
	int r;

	while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	RC_CHECK(rc, r >= 0, "poll: %s", strerror(errno));
	return r;
}

static int server(struct rc *rc)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	rc_post_recv(rc, 0, 1, 0, 64);
	rc_post_recv(rc, 0, 2, 64, 64);
	RC_CHECK(rc, ibv_req_notify_cq(rc->rcq, 1) == 0, "ibv_req_notify_cq(solicited only)");
	rc_step(rc, "unsolicited SEND: completion, no event");
	rc_sync(rc);
	rc_wait(rc, rc->rcq, 1, IBV_WC_RECV, NULL);
	rc_check(rc, rc->buf, 64, 1, "first message");
	RC_CHECK(rc, fd_ready(rc, 300) == 0, "event raised for an unsolicited completion");

	rc_step(rc, "solicited SEND: one event");
	rc_sync(rc);
	RC_CHECK(rc, fd_ready(rc, 5000) == 1, "no event within 5 s for a solicited completion");
	RC_CHECK(rc, ibv_get_cq_event(rc->channel, &ev_cq, &ev_ctx) == 0, "ibv_get_cq_event: %s",
		 strerror(errno));
	RC_CHECK(rc, ev_cq == rc->rcq && ev_ctx == rc, "event names another CQ or context");
	ibv_ack_cq_events(ev_cq, 1);
	rc_wait(rc, rc->rcq, 2, IBV_WC_RECV, NULL);
	rc_check(rc, rc->buf + 64, 64, 2, "second message");
	RC_CHECK(rc, fd_ready(rc, 100) == 0, "a second event for one arm");
	return RC_PASS;
}

static int client(struct rc *rc)
{
	for (int i = 1; i <= 2; i++) {
		struct rc_wr w;

		rc_step(rc, "%s SEND", i == 1 ? "unsolicited" : "solicited");
		rc_fill(rc->buf, 64, (uint32_t)i);
		rc_wr(rc, &w, IBV_WR_SEND, (uint64_t)i, 0, 64, 0);
		if (i == 2)
			w.wr.send_flags |= IBV_SEND_SOLICITED;
		rc_sync(rc);
		rc_post_send(rc, 0, &w.wr);
		rc_wait(rc, rc->scq, (uint64_t)i, IBV_WC_SEND, NULL);
	}
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_solicited");

	o.channel = true;
	o.buf_size = RC_MIB;
	return rc_run(&o, server, client);
}
