/* rc_ack_with_request: an application that keeps polling leaves the ACKs its polls owe to its
 * next turn, and a request it posts on the QP meanwhile takes the QP's ACK along. In a SEND
 * ping-pong the answers carry the ACKs of the messages they answer (acks_with_requests counts
 * them on the answering side) and every message and answer lands byte for byte. A process that
 * exits right after it received a SEND, without destroying anything, still acknowledges it:
 * the sender's SEND completes successfully, not in IBV_WC_RETRY_EXC_ERR. */
#include "rc_harness.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/stats.h"

#define ROUNDS 200
#define MSG 64
#define ANSWERS ((size_t)(ROUNDS + 1) * MSG) /* offset of the answers: messages come first */

static int server(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct ibv_wc wc[ROUNDS];
	struct rc_wr w;

	rc_step(rc, "answer %d SENDs of %d bytes on the same QP", ROUNDS, MSG);
	for (int i = 0; i <= ROUNDS; i++)
		rc_post_recv(rc, 0, 0x100 + (uint64_t)i, (size_t)i * MSG, MSG);
	rc_fill(rc->buf + ANSWERS, (size_t)ROUNDS * MSG, 77);
	rc_read_counters(rc, before);
	rc_sync(rc);
	for (int i = 0; i < ROUNDS; i++) {
		rc_wait(rc, rc->rcq, 0x100 + (uint64_t)i, IBV_WC_RECV, NULL);
		rc_wr(rc, &w, IBV_WR_SEND, 0x300 + (uint64_t)i, ANSWERS + (size_t)i * MSG, MSG, 0);
		rc_post_send(rc, 0, &w.wr);
	}
	rc_poll(rc, rc->scq, wc, ROUNDS, RC_WAIT_MS);
	for (int i = 0; i < ROUNDS; i++)
		rc_expect(rc, &wc[i], 0x300 + (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_SEND);
	rc_read_counters(rc, after);
	rc_check(rc, rc->buf, (size_t)ROUNDS * MSG, 55, "received messages");
	uint64_t carried = after[URNIC_C_acks_with_requests] - before[URNIC_C_acks_with_requests];

	/* at most one each; a turn of a poll that was not back at once sends its ACKs at once */
	RC_CHECK(rc, carried >= 1 && carried <= ROUNDS,
		 "%llu ACKs went with the %d answers (expected 1 to %d)",
		 (unsigned long long)carried, ROUNDS, ROUNDS);

	rc_step(rc, "receive one more SEND, then exit at once");
	rc_sync(rc);
	rc_wait(rc, rc->rcq, 0x100 + ROUNDS, IBV_WC_RECV, NULL);
	rc_check(rc, rc->buf + (size_t)ROUNDS * MSG, MSG, 56, "last message");
	rc_put(rc, 1);
	exit(RC_PASS); /* no destroy, no close: only the exit handler can send the ACK now */
}

static int client(struct rc *rc)
{
	struct ibv_wc wc[ROUNDS];
	struct rc_wr w;

	rc_fill(rc->buf, (size_t)(ROUNDS + 1) * MSG, 55);
	for (int i = 0; i < ROUNDS; i++)
		rc_post_recv(rc, 0, 0x400 + (uint64_t)i, ANSWERS + (size_t)i * MSG, MSG);
	rc_sync(rc);
	rc_step(rc, "send %d SENDs, each after the answer to the one before", ROUNDS);
	for (int i = 0; i < ROUNDS; i++) {
		rc_wr(rc, &w, IBV_WR_SEND, 0x200 + (uint64_t)i, (size_t)i * MSG, MSG, 0);
		rc_post_send(rc, 0, &w.wr);
		rc_wait(rc, rc->rcq, 0x400 + (uint64_t)i, IBV_WC_RECV, NULL);
	}
	rc_check(rc, rc->buf + ANSWERS, (size_t)ROUNDS * MSG, 77, "received answers");
	rc_poll(rc, rc->scq, wc, ROUNDS, RC_WAIT_MS);
	for (int i = 0; i < ROUNDS; i++)
		rc_expect(rc, &wc[i], 0x200 + (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_SEND);

	rc_step(rc, "send one more, which the server receives before it exits");
	rc_fill(rc->buf + (size_t)ROUNDS * MSG, MSG, 56);
	rc_sync(rc);
	rc_wr(rc, &w, IBV_WR_SEND, 0x200 + ROUNDS, (size_t)ROUNDS * MSG, MSG, 0);
	rc_post_send(rc, 0, &w.wr);
	RC_CHECK(rc, rc_get(rc) == 1, "the server did not report its receive");
	int status = rc_reap_peer(rc);

	RC_CHECK(rc, WIFEXITED(status) && WEXITSTATUS(status) == RC_PASS,
		 "the server did not exit cleanly (status %#x)", status);
	rc_wait(rc, rc->scq, 0x200 + ROUNDS, IBV_WC_SEND, NULL);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_ack_with_request");

	o.sq_depth = ROUNDS + 8;
	o.rq_depth = ROUNDS + 8;
	o.buf_size = ANSWERS + (size_t)ROUNDS * MSG + RC_GUARD;
	return rc_run(&o, server, client);
}
