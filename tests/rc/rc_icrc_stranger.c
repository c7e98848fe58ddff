/* rc_icrc_stranger: a packet from an address not the RC QP's peer teaches its ICRC check nothing
 * about the peer's IPv4 IDs.
 *
 * The ICRC covers the sender's IPv4 ID, which a UDP socket never sees; a QP learns from its
 * peer's first packet how that peer stamps them (0, a urnic peer; a counter, rxe). A stranger's
 * packet is dropped (drop_peer), but only after the ICRC check, which took the stranger's ID 0
 * for the peer's: the rxe peer's first requests then failed the check as corrupt, and the first
 * was lost to its retransmission timer.
 *
 * One process: rc->qp[0]'s responder against requesters scripted on plain UDP sockets
 * (script_peer.c): the stranger's READ request, sealed for ID 0, then the peer's, sealed for IDs
 * counting from 30000, each to be answered at once with the bytes asked for. */
#include <string.h>

#include "script_peer.h"

#include "common/stats.h"

#define SQ_PSN 3000u /* rc->qp[0]'s own requester: unused here */
#define RLEN 256u
#define SEED 29
#define PEER_IP_ID 30000u
#define READS 3
#define QUIET_MS 100 /* no answer this long: none is coming */

static void stranger_dropped(struct rc *rc, struct script_peer *p, struct script_peer *stranger)
{
	uint64_t before = rc_counter(rc, URNIC_C_drop_peer);
	struct script_response r;
	double end = rc_now_ms() + 2000;

	rc_step(rc, "a READ request from a stranger, sealed for IPv4 ID 0: dropped, unanswered");
	script_peer_send_read_request(rc, stranger, SCRIPT_PEER_PSN, 0, RLEN);
	while (rc_counter(rc, URNIC_C_drop_peer) == before && rc_now_ms() < end)
		rc_sleep_ms(1);
	RC_CHECK(rc, rc_counter(rc, URNIC_C_drop_peer) == before + 1, "drop_peer moved by %llu",
		 (unsigned long long)(rc_counter(rc, URNIC_C_drop_peer) - before));
	RC_CHECK(rc, !script_peer_recv_response(rc, p, QUIET_MS, &r),
		 "answered with opcode %#x at PSN %u", r.opcode, r.psn);
}

static int test(struct rc *rc)
{
	struct script_peer p = {0}, stranger;
	struct script_response r;

	script_peer_open(rc, &p, SQ_PSN);
	stranger = p;
	script_peer_bind_near(rc, &stranger);
	rc_fill(rc->buf, RLEN * READS, SEED);
	uint64_t icrc = rc_counter(rc, URNIC_C_drop_icrc);

	stranger_dropped(rc, &p, &stranger);
	p.ip_id = PEER_IP_ID;
	for (uint32_t i = 0; i < READS; i++) {
		uint32_t psn = SCRIPT_PEER_PSN + i;

		rc_step(rc, "the peer's READ at PSN %u, sealed for IPv4 ID %u: answered", psn,
			PEER_IP_ID + i);
		script_peer_send_read_request(rc, &p, psn, i * RLEN, RLEN);
		RC_CHECK(rc, script_peer_recv_response(rc, &p, 2000, &r),
			 "no answer in 2 s (drop_icrc moved by %llu)",
			 (unsigned long long)(rc_counter(rc, URNIC_C_drop_icrc) - icrc));
		RC_CHECK(rc, r.opcode == URNIC_OP_READ_RESP_ONLY && r.psn == psn && r.len == RLEN,
			 "answer: opcode %#x PSN %u, %u bytes", r.opcode, r.psn, r.len);
		rc_check_from(rc, r.payload, RLEN, SEED, i * RLEN, "READ response");
	}
	RC_CHECK(rc, rc_counter(rc, URNIC_C_drop_icrc) == icrc, "drop_icrc moved by %llu",
		 (unsigned long long)(rc_counter(rc, URNIC_C_drop_icrc) - icrc));
	script_peer_close(&stranger);
	script_peer_close(&p);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = script_peer_defaults("rc_icrc_stranger");

	return rc_run_local(&o, test);
}
