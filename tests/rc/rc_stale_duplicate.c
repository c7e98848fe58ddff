/* rc_stale_duplicate: a READ request or an atomic that arrives late, older than every responder
 * resource, is dropped and counted (drop_stale_read_atomic) and leaves the resources as they
 * were: the retry of an atomic still among them gets its first answer again, and no atomic
 * executes twice.
 *
 * The responder keeps the answers to its last max_dest_rd_atomic READs and atomics: enough for
 * any retry a requester can make, since it has at most that many unanswered. A copy older than
 * all of them is one the network held back. Answering it (as a new READ, before) took a resource
 * and recycled the oldest record; when the answer to that atomic had been lost, its retries
 * went unanswered for good and the requester went back over it until its retry count ran out
 * (rc_ordering under URNIC_FAULT reorder=0.3,depth=64,dup=0.05: 2 runs in 62); and new requests
 * arriving with it could find every resource owing its first answer, which the responder takes
 * for more than max_dest_rd_atomic outstanding: an invalid-request NAK.
 *
 * One process: the requester is scripted on a plain UDP socket (script_peer.c) against
 * rc->qp[0]'s responder, whose max_dest_rd_atomic is 2. */
#include <string.h>

#include "script_peer.h"

#include "common/stats.h"

#define RD_ATOMIC 2
#define SQ_PSN 3000u /* rc->qp[0]'s own requester: unused here */
#define ROFF 0	     /* what the READ reads */
#define RLEN 64u
#define AOFF 4096 /* the counter the FETCH_ADDs add to */
#define INITIAL 1000u
#define SEED 73
#define QUIET_MS 100 /* no answer this long: none is coming */

static uint64_t memory(struct rc *rc)
{
	uint64_t v;

	memcpy(&v, rc->buf + AOFF, sizeof(v));
	return v;
}

/* The next answer, an ACK-type response with opcode at psn. */
static void expect_answer(struct rc *rc, struct script_peer *p, uint8_t opcode, uint32_t psn,
			  struct script_response *r)
{
	RC_CHECK(rc, script_peer_recv_response(rc, p, 2000, r), "no answer in 2 s");
	RC_CHECK(rc, r->opcode == opcode && r->psn == psn && r->aeth == URNIC_AETH_ACK,
		 "answer: opcode %#x PSN %u AETH type %d value %u, expected opcode %#x PSN %u ACK",
		 r->opcode, r->psn, r->aeth, r->aeth_value, opcode, psn);
}

static void fetch_add(struct rc *rc, struct script_peer *p, uint32_t psn, uint64_t add,
		      uint64_t orig)
{
	struct script_response r;

	rc_step(rc, "FETCH_ADD %llu at PSN %u returns %llu", (unsigned long long)add, psn,
		(unsigned long long)orig);
	script_peer_send_fetch_add(rc, p, psn, AOFF, add);
	expect_answer(rc, p, URNIC_OP_ATOMIC_ACK, psn, &r);
	RC_CHECK(rc, r.orig == orig, "original value %llu", (unsigned long long)r.orig);
}

/* Nothing answers the packet just sent, and the stale-copy counter moves by one. */
static void dropped_as_stale(struct rc *rc, struct script_peer *p, uint64_t before)
{
	struct script_response r;
	double end = rc_now_ms() + 2000;

	RC_CHECK(rc, !script_peer_recv_response(rc, p, QUIET_MS, &r),
		 "answered with opcode %#x at PSN %u", r.opcode, r.psn);
	while (rc_counter(rc, URNIC_C_drop_stale_rd_atomic) == before && rc_now_ms() < end)
		rc_sleep_ms(1);
	RC_CHECK(rc, rc_counter(rc, URNIC_C_drop_stale_rd_atomic) == before + 1,
		 "drop_stale_read_atomic moved by %llu, expected 1",
		 (unsigned long long)(rc_counter(rc, URNIC_C_drop_stale_rd_atomic) - before));
}

static int test(struct rc *rc)
{
	struct script_peer p = {0};
	struct script_response r;
	const uint32_t psn = SCRIPT_PEER_PSN;
	uint64_t v = INITIAL, nak_inv = rc_counter(rc, URNIC_C_nak_inv_sent);

	script_peer_open(rc, &p, SQ_PSN);
	rc_fill(rc->buf + ROFF, RLEN, SEED);
	memcpy(rc->buf + AOFF, &v, sizeof(v));

	rc_step(rc, "a READ of %u bytes at PSN %u", RLEN, psn);
	script_peer_send_read_request(rc, &p, psn, ROFF, RLEN);
	expect_answer(rc, &p, URNIC_OP_READ_RESP_ONLY, psn, &r);
	RC_CHECK(rc, r.len == RLEN, "READ response of %u bytes", r.len);
	rc_check_from(rc, r.payload, RLEN, SEED, 0, "READ response");
	fetch_add(rc, &p, psn + 1, 5, INITIAL);
	fetch_add(rc, &p, psn + 2, 7, INITIAL + 5); /* the READ's resource is recycled */

	rc_step(rc, "the READ at PSN %u again, late: older than both resources", psn);
	uint64_t stale = rc_counter(rc, URNIC_C_drop_stale_rd_atomic);

	script_peer_send_read_request(rc, &p, psn, ROFF, RLEN);
	dropped_as_stale(rc, &p, stale);

	rc_step(rc, "the FETCH_ADD at PSN %u again (its answer lost): answered from its record",
		psn + 1);
	fetch_add(rc, &p, psn + 1, 5, INITIAL);
	RC_CHECK(rc, memory(rc) == INITIAL + 12, "counter %llu after the retry, expected %u",
		 (unsigned long long)memory(rc), INITIAL + 12);

	fetch_add(rc, &p, psn + 3, 11, INITIAL + 12); /* recycles PSN psn + 1's record */
	rc_step(rc, "the FETCH_ADD at PSN %u again, late: older than both resources", psn + 1);
	stale = rc_counter(rc, URNIC_C_drop_stale_rd_atomic);
	script_peer_send_fetch_add(rc, &p, psn + 1, AOFF, 5);
	dropped_as_stale(rc, &p, stale);
	RC_CHECK(rc, memory(rc) == INITIAL + 23, "counter %llu, expected %u: an atomic ran twice",
		 (unsigned long long)memory(rc), INITIAL + 23);

	/* A stale copy that took a resource, then two new requests in the same receive batch:
	 * the second found every resource owing its first answer, and drew an invalid-request
	 * NAK (4 runs in 5 before; the timing decides whether the three share a batch). */
	rc_step(rc, "the READ at PSN %u late again, and new FETCH_ADDs at PSN %u and %u at once", psn,
		psn + 4, psn + 5);
	script_peer_send_read_request(rc, &p, psn, ROFF, RLEN);
	script_peer_send_fetch_add(rc, &p, psn + 4, AOFF, 13);
	script_peer_send_fetch_add(rc, &p, psn + 5, AOFF, 17);
	expect_answer(rc, &p, URNIC_OP_ATOMIC_ACK, psn + 4, &r);
	RC_CHECK(rc, r.orig == INITIAL + 23, "original value %llu", (unsigned long long)r.orig);
	expect_answer(rc, &p, URNIC_OP_ATOMIC_ACK, psn + 5, &r);
	RC_CHECK(rc, r.orig == INITIAL + 36, "original value %llu", (unsigned long long)r.orig);
	RC_CHECK(rc, !script_peer_recv_response(rc, &p, QUIET_MS, &r),
		 "answered with opcode %#x at PSN %u", r.opcode, r.psn);
	RC_CHECK(rc, rc_counter(rc, URNIC_C_nak_inv_sent) == nak_inv, "an invalid-request NAK");
	script_peer_close(&p);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = script_peer_defaults("rc_stale_duplicate");

	o.max_rd_atomic = RD_ATOMIC;
	return rc_run_local(&o, test);
}
