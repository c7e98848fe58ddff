/* rc_tail_probe: when the last packet of a WRITE is lost and the requester has nothing more to
 * send, two round trips without progress send that packet again, asking for an ACK (a tail loss
 * probe), long before the retransmission timer would go back.
 *
 * A lost last packet leaves the responder nothing to NAK: before the probe, only the timer told
 * (at least 2 ms, and twice the longest recent silence: 5 to 11 ms in bench/loss.sh's runs).
 *
 * One process: the responder is scripted on a plain UDP socket (script_peer.c). Warm-ups teach
 * the requester a round trip of about 8 ms and a timer of about 120 ms. Then an 8-packet WRITE:
 * the responder ACKs all but its last packet and waits. The last packet must come again, asking
 * for an ACK, by a probe and not by a timer expiry; ACKed, the WRITE completes. */
#include "script_peer.h"


#include "common/stats.h"

#define SQ_PSN 9000u /* the requester's first PSN */
#define SEED 47
#define NPKTS 8 /* packets of the WRITE */

static int test(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	const uint32_t first = SQ_PSN + SCRIPT_PEER_WARMUPS, last = first + NPKTS - 1;
	struct script_peer p = {
		.first_psn = SQ_PSN, .npkts = SCRIPT_PEER_WARMUPS + NPKTS, .seed = SEED};
	struct ibv_wc wc;

	script_peer_open(rc, &p, SQ_PSN);
	script_peer_warm_up(rc, &p);
	rc_read_counters(rc, before);
	script_peer_write(rc, &p, 99, first, NPKTS);
	rc_step(rc, "ACK PSN %u: the last one, %u, is lost", last - 1, last);
	script_peer_send_aeth(rc, &p, URNIC_AETH_ACK, last - 1);
	double ack_ms = rc_now_ms();
	int64_t psn = script_peer_recv(rc, &p, 1000);

	RC_CHECK(rc, psn == last, "after the ACK: PSN %lld, not the lost %u", (long long)psn, last);
	RC_CHECK(rc, p.ackreq, "the probe (PSN %u) does not ask for an ACK", last);
	rc_step(rc, "PSN %u again %.1f ms after the ACK; ACK it", last, rc_now_ms() - ack_ms);
	script_peer_send_aeth(rc, &p, URNIC_AETH_ACK, last);
	rc_poll(rc, rc->scq, &wc, 1, 5000);
	rc_expect(rc, &wc, 99, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	RC_CHECK(rc, script_peer_drain(rc, &p, 50) == 0, "a packet after the WRITE completed");
	rc_read_counters(rc, after);
	uint64_t probes = after[URNIC_C_tail_probes] - before[URNIC_C_tail_probes];
	uint64_t expiries = after[URNIC_C_rto_expiries] - before[URNIC_C_rto_expiries];
	uint64_t resent = after[URNIC_C_retransmits] - before[URNIC_C_retransmits];

	rc_step(rc, "counters: %llu probes, %llu timer expiries, %llu packets counted as resent",
		(unsigned long long)probes, (unsigned long long)expiries,
		(unsigned long long)resent);
	RC_CHECK(rc, expiries == 0, "the retransmission timer expired: no probe came first");
	RC_CHECK(rc, probes == 1, "tail_loss_probes moved by %llu, expected 1",
		 (unsigned long long)probes);
	RC_CHECK(rc, resent == 1, "retransmitted_packets moved by %llu, expected 1",
		 (unsigned long long)resent);
	script_peer_close(&p);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = script_peer_defaults("rc_tail_probe");

	return rc_run_local(&o, test);
}
