/* rc_comp_channel: the completion channel fd becomes readable after an armed completion, under
 * poll() and epoll; ibv_get_cq_event names the CQ and its context; arming is one-shot until
 * ibv_req_notify_cq re-arms; a non-blocking fd gives EAGAIN when no event is pending; events
 * acknowledged in one batch let ibv_destroy_cq return (ibv_get_cq_event(3)). */
#include "rc_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define NMSG 4

static int poll_fd(struct rc *rc, int ms)
{
	struct pollfd p = {.fd = rc->channel->fd, .events = POLLIN};
	int r;

	while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	RC_CHECK(rc, r >= 0, "poll: %s", strerror(errno));
	RC_CHECK(rc, r == 0 || (p.revents & POLLIN), "poll revents %#x", p.revents);
	return r;
}

static int epoll_fd(struct rc *rc, int ms)
{
	struct epoll_event ev = {.events = EPOLLIN}, out;
	int ep = epoll_create1(0), r;

	RC_CHECK(rc, ep >= 0, "epoll_create1: %s", strerror(errno));
	RC_CHECK(rc, epoll_ctl(ep, EPOLL_CTL_ADD, rc->channel->fd, &ev) == 0, "epoll_ctl: %s",
		 strerror(errno));
	while ((r = epoll_wait(ep, &out, 1, ms)) < 0 && errno == EINTR)
		;
	RC_CHECK(rc, r >= 0, "epoll_wait: %s", strerror(errno));
	close(ep);
	return r;
}

static void get_event(struct rc *rc)
{
	struct ibv_cq *cq;
	void *ctx;

	RC_CHECK(rc, ibv_get_cq_event(rc->channel, &cq, &ctx) == 0, "ibv_get_cq_event: %s",
		 strerror(errno));
	RC_CHECK(rc, cq == rc->rcq, "event for CQ %p, expected the recv CQ %p", (void *)cq,
		 (void *)rc->rcq);
	RC_CHECK(rc, ctx == rc, "event context %p, expected %p", ctx, (void *)rc);
}

static void arm(struct rc *rc)
{
	int r = ibv_req_notify_cq(rc->rcq, 0);

	RC_CHECK(rc, r == 0, "ibv_req_notify_cq: %s", strerror(r));
}

static void receive(struct rc *rc, int i)
{
	rc_wait(rc, rc->rcq, (uint64_t)i, IBV_WC_RECV, NULL);
	rc_check(rc, rc->buf + 64 * i, 64, (uint32_t)i, "message");
}

static int server(struct rc *rc)
{
	struct ibv_cq *cq;
	void *ctx;
	int events = 0;

	for (int i = 0; i < NMSG; i++)
		rc_post_recv(rc, 0, (uint64_t)i, 64 * (size_t)i, 64);

	rc_step(rc, "armed, wait with poll()");
	arm(rc);
	rc_sync(rc);
	RC_CHECK(rc, poll_fd(rc, 5000) == 1, "no event within 5 s");
	get_event(rc);
	events++;
	receive(rc, 0);

	rc_step(rc, "re-armed, wait with epoll");
	arm(rc);
	rc_sync(rc);
	RC_CHECK(rc, epoll_fd(rc, 5000) == 1, "no event within 5 s");
	get_event(rc);
	events++;
	receive(rc, 1);

	rc_step(rc, "not re-armed: a completion, no event");
	rc_sync(rc);
	receive(rc, 2);
	RC_CHECK(rc, poll_fd(rc, 300) == 0, "event without arming (the arm is one-shot)");
	int fl = fcntl(rc->channel->fd, F_GETFL);
	RC_CHECK(rc, fl >= 0 && fcntl(rc->channel->fd, F_SETFL, fl | O_NONBLOCK) == 0,
		 "fcntl O_NONBLOCK: %s", strerror(errno));
	errno = 0;
	RC_CHECK(rc, ibv_get_cq_event(rc->channel, &cq, &ctx) == -1 && errno == EAGAIN,
		 "non-blocking ibv_get_cq_event with nothing pending: errno %d, expected EAGAIN",
		 errno);

	rc_step(rc, "re-armed, non-blocking fd");
	arm(rc);
	rc_sync(rc);
	RC_CHECK(rc, poll_fd(rc, 5000) == 1, "no event within 5 s");
	get_event(rc);
	events++;
	receive(rc, 3);

	/* One batched ack for all of them; teardown's ibv_destroy_cq would hang on a missing one.
	 */
	ibv_ack_cq_events(rc->rcq, (unsigned)events);
	return RC_PASS;
}

static int client(struct rc *rc)
{
	for (int i = 0; i < NMSG; i++) {
		struct rc_wr w;

		rc_step(rc, "send message %d", i);
		rc_fill(rc->buf, 64, (uint32_t)i);
		rc_wr(rc, &w, IBV_WR_SEND, (uint64_t)i, 0, 64, 0);
		rc_sync(rc);
		rc_post_send(rc, 0, &w.wr);
		rc_wait(rc, rc->scq, (uint64_t)i, IBV_WC_SEND, NULL);
	}
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_comp_channel");

	o.channel = true;
	o.buf_size = RC_MIB;
	return rc_run(&o, server, client);
}
