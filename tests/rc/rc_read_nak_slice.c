/* rc_read_nak_slice: a PSN-sequence NAK that names a later slice of a READ, while none of the
 * first slice's responses has come, sends the requester back to the READ's first response with
 * the READ's own first PSN: every request after it asks, at each PSN, for the bytes that PSN
 * stands for. It did not: the requester went back to the first response (nothing received) but
 * left its send cursor at the NAK's PSN, and the READ took that PSN as its first again. Its
 * next request asked for the first slice's bytes at the second slice's PSNs; a responder still
 * answering the second slice's original request then had its responses taken for the first
 * slice's, and a slice's bytes landed a slice early (CI's rc_read_lossy: a 64 MiB READ's first
 * byte was the one 32 packets on; seed 188 did it to a 1 MiB READ three runs in four).
 *
 * One process: the responder is scripted on a plain UDP socket (script_peer.c). After warm-ups,
 * a READ of two slices (two requests before any answer); the responder answers neither and NAKs
 * with the second slice's PSN, as one that took the first request and lost the second would.
 * Every request from then on must read at the address its PSN stands for; each is answered as
 * asked, and the READ completes with the responder's bytes, byte for byte.
 *
 * With --gap, a READ response gap follows that go-back: the second response of the first slice
 * comes, not the first. The requester went back to that first response, so the gap is one its
 * go-back may still answer, and is held a round trip (read_response_gaps_held), as after a
 * go-back to the gap's own PSN. It was taken as a new loss instead and asked again at once,
 * spending one of retry_cnt's tries (as gaps did until 5bc42e4): the go-back was remembered by
 * the NAK's PSN alone.
 *
 * With --stale, the other order: the gap first (asked again at once, from the first response),
 * then, within the round trip, the NAK naming the second slice. That NAK would send the
 * requester back to where it has just gone: it is stale (stale_naks), held, not acted on.
 *
 * With --held, the go-back's first request is answered in full, the second is lost again, and
 * the NAK comes again within the round trip: stale, held, and a round trip later judged by its
 * own PSN, still unacknowledged: the requester goes back at once (nak_psn_seq_err_held). It was
 * judged by where the go-back had started, the first slice, acknowledged by then: the second
 * waited for the retransmission timer.
 *
 * With --spurious, a READ of four slices, none answered until the retransmission timer sends
 * the requester back to the first (its window cut); then a NAK naming the third slice. The
 * NAK acknowledges requests the timer's go-back has not sent again, but the READ still lacks
 * every response: the go-back was no mistake. It was counted as one (spurious_gobacks), and
 * the window's cut undone. */
#include <stdlib.h>
#include <string.h>

#include "script_peer.h"

#include "common/param.h"
#include "common/stats.h"

#define SQ_PSN 12000u	 /* the requester's first PSN */
#define SEED 83		 /* the warm-ups' bytes */
#define RESP_SEED 89	 /* the responder's memory */
#define LOFF (64u << 10) /* where the READ lands in rc->buf, past the warm-ups */
#define MAX_REQUESTS 64	 /* requests answered before the READ must be */

static const char *mode = ""; /* --gap, --stale, --held, --spurious */

struct reader {
	struct script_peer p;
	uint8_t *mem; /* the responder's memory: npkts packets */
	uint32_t first_psn, npkts;
};

/* The next READ request within ms, checked to read at the address its PSN stands for and to
 * stay within the READ: its PSN, and its length in packets in *n. */
static uint32_t read_request(struct rc *rc, struct reader *r, unsigned ms, uint32_t *n)
{
	uint64_t va;
	uint32_t len;
	int64_t psn = script_peer_recv_read(rc, &r->p, ms, &va, &len);

	RC_CHECK(rc, psn >= 0, "no READ request within %u ms", ms);
	uint32_t i = (uint32_t)psn - r->first_psn;

	RC_CHECK(rc, i < r->npkts, "READ request at PSN %lld, outside the READ's %u..%u",
		 (long long)psn, r->first_psn, r->first_psn + r->npkts - 1);
	RC_CHECK(rc, va == rc->peer.addr + (uint64_t)i * rc->mtu,
		 "the request at PSN %u (packet %u of the READ) reads at offset %lld, the bytes of "
		 "packet %lld", (uint32_t)psn, i, (long long)(va - rc->peer.addr),
		 (long long)(va - rc->peer.addr) / rc->mtu);
	*n = (len + rc->mtu - 1) / rc->mtu;
	RC_CHECK(rc, len % rc->mtu == 0 && i + *n <= r->npkts,
		 "the request at PSN %u asks for %u bytes, past the READ", (uint32_t)psn, len);
	return (uint32_t)psn;
}

/* After the NAK and the gap right behind it (counters in before, taken before the NAK), and
 * the go-back's first request read: the second slice's request again, then the gap held until
 * its round trip is over. Returns the next request. */
static uint32_t held_gap(struct rc *rc, struct reader *r, uint32_t slice, uint32_t *n,
			 const uint64_t *before)
{
	uint64_t after[URNIC_C_COUNT];

	RC_CHECK(rc, read_request(rc, r, 1000, n) == r->first_psn + slice,
		 "after the NAK: the second slice's request again");
	uint32_t psn = read_request(rc, r, 1000, n);

	rc_read_counters(rc, after);
	uint64_t held = after[URNIC_C_held_read_gaps] - before[URNIC_C_held_read_gaps];
	uint64_t expiries = after[URNIC_C_rto_expiries] - before[URNIC_C_rto_expiries];

	rc_step(rc, "asked again from PSN %u; %llu held gaps, %llu timer expiries", psn,
		(unsigned long long)held, (unsigned long long)expiries);
	RC_CHECK(rc, psn == r->first_psn, "after the gap: a request at PSN %u", psn);
	RC_CHECK(rc, held == 1 && expiries == 0,
		 "read_response_gaps_held moved by %llu, expected 1: the gap was not held as one "
		 "the go-back may answer", (unsigned long long)held);
	return psn;
}

/* After the NAK's go-back (its first request read, counters in before from before the NAK):
 * the second request again, left unanswered; the first answered; the NAK again. Returns the
 * next request, which must come a round trip later, not after the timer. */
static uint32_t held_nak(struct rc *rc, struct reader *r, uint32_t slice, uint32_t *n,
			 const uint64_t *before)
{
	uint64_t after[URNIC_C_COUNT];

	RC_CHECK(rc, read_request(rc, r, 1000, n) == r->first_psn + slice,
		 "after the NAK: the second slice's request again");
	rc_step(rc, "the first slice answered, the second not; the NAK again");
	script_peer_send_read_responses(rc, &r->p, r->first_psn, slice, r->mem);
	script_peer_send_aeth(rc, &r->p, URNIC_AETH_NAK, r->first_psn + slice);
	uint32_t psn = read_request(rc, r, 1000, n);

	rc_read_counters(rc, after);
	uint64_t held = after[URNIC_C_held_naks] - before[URNIC_C_held_naks];
	uint64_t expiries = after[URNIC_C_rto_expiries] - before[URNIC_C_rto_expiries];

	rc_step(rc, "asked again from PSN %u; %llu held NAKs gone back for, %llu timer expiries",
		psn, (unsigned long long)held, (unsigned long long)expiries);
	RC_CHECK(rc, psn == r->first_psn + slice, "a request at PSN %u", psn);
	RC_CHECK(rc, held == 1 && expiries == 0,
		 "nak_psn_seq_err_held moved by %llu, timer expiries by %llu: the held NAK was not "
		 "judged by its own PSN", (unsigned long long)held, (unsigned long long)expiries);
	return psn;
}

/* The response at PSN first + 1, not first: a gap. */
static void send_gap(struct rc *rc, struct reader *r)
{
	rc_step(rc, "a gap: the response at PSN %u, not %u", r->first_psn + 1, r->first_psn);
	script_peer_send_read_response(rc, &r->p, URNIC_OP_READ_RESP_MIDDLE, r->first_psn + 1,
				       r->mem + rc->mtu, rc->mtu);
}

/* Reads the counters into after until the requester has taken a NAK since before (1 s). */
static void await_nak_taken(struct rc *rc, const uint64_t *before, uint64_t *after)
{
	for (int ms = 0; ms < 1000; ms++) {
		rc_read_counters(rc, after);
		if (after[URNIC_C_nak_seq_rcvd] != before[URNIC_C_nak_seq_rcvd])
			return;
		rc_sleep_ms(1);
	}
	rc_fail(rc, "the NAK not taken within 1 s");
}

/* Before the main NAK: a gap at the first response, asked again at once (both requests
 * again), and right behind it the same NAK, within the round trip: stale. */
static void gap_then_stale_nak(struct rc *rc, struct reader *r, uint32_t slice, uint32_t *n)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];

	rc_read_counters(rc, before);
	send_gap(rc, r);
	rc_step(rc, "a NAK names PSN %u right behind it", r->first_psn + slice);
	script_peer_send_aeth(rc, &r->p, URNIC_AETH_NAK, r->first_psn + slice);
	RC_CHECK(rc, read_request(rc, r, 1000, n) == r->first_psn &&
			     read_request(rc, r, 1000, n) == r->first_psn + slice,
		 "after the gap: both requests again");
	await_nak_taken(rc, before, after);
	uint64_t stale = after[URNIC_C_stale_naks] - before[URNIC_C_stale_naks];

	RC_CHECK(rc, stale == 1,
		 "stale_naks moved by %llu, expected 1: the NAK sent the requester back again to "
		 "where the gap had just sent it", (unsigned long long)stale);
}

/* Before the main NAK (all four requests read): the timer's go-back, then a NAK for the third
 * slice, which must not count the go-back as spurious. */
static void timer_then_nak(struct rc *rc, struct reader *r, uint32_t slice, uint32_t *n)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];

	RC_CHECK(rc, read_request(rc, r, 1000, n) == r->first_psn + 2 * slice &&
			     read_request(rc, r, 1000, n) == r->first_psn + 3 * slice,
		 "the third and fourth requests");
	rc_read_counters(rc, before);
	rc_step(rc, "none answered: the timer's go-back");
	RC_CHECK(rc, read_request(rc, r, 2000, n) == r->first_psn, "the timer's go-back");
	rc_read_counters(rc, after);
	RC_CHECK(rc, after[URNIC_C_rto_expiries] != before[URNIC_C_rto_expiries],
		 "a request came again, but no timer expired");
	rc_step(rc, "a NAK names PSN %u, the third slice's", r->first_psn + 2 * slice);
	script_peer_send_aeth(rc, &r->p, URNIC_AETH_NAK, r->first_psn + 2 * slice);
	await_nak_taken(rc, before, after);
	uint64_t spurious = after[URNIC_C_spurious_gobacks] - before[URNIC_C_spurious_gobacks];

	RC_CHECK(rc, spurious == 0, "spurious_gobacks moved by %llu: the NAK taken for proof that "
		 "the READ's go-back was a mistake", (unsigned long long)spurious);
}

static int test(struct rc *rc)
{
	static struct reader r;
	const uint32_t slice = URNIC_TX_WINDOW / URNIC_READ_SLICES;
	struct ibv_wc wc;
	struct rc_wr w;
	uint32_t n;

	r.p = (struct script_peer){.first_psn = SQ_PSN, .npkts = SCRIPT_PEER_WARMUPS, .seed = SEED};
	r.first_psn = SQ_PSN + SCRIPT_PEER_WARMUPS;
	r.npkts = (strcmp(mode, "--spurious") == 0 ? 4 : 2) * slice;
	r.mem = malloc((size_t)r.npkts * rc->mtu);
	RC_CHECK(rc, r.mem, "out of memory");
	rc_fill(r.mem, (size_t)r.npkts * rc->mtu, RESP_SEED);
	script_peer_open(rc, &r.p, SQ_PSN);
	script_peer_warm_up(rc, &r.p);

	rc_step(rc, "a READ of %u packets: two requests of %u", r.npkts, slice);
	rc_wr(rc, &w, IBV_WR_RDMA_READ, 11, LOFF, (size_t)r.npkts * rc->mtu, 0);
	rc_post_send(rc, 0, &w.wr);
	RC_CHECK(rc, read_request(rc, &r, 1000, &n) == r.first_psn && n == slice,
		 "the first request");
	RC_CHECK(rc, read_request(rc, &r, 1000, &n) == r.first_psn + slice && n == slice,
		 "the second request");

	if (strcmp(mode, "--stale") == 0)
		gap_then_stale_nak(rc, &r, slice, &n);
	if (strcmp(mode, "--spurious") == 0)
		timer_then_nak(rc, &r, slice, &n);
	uint64_t before[URNIC_C_COUNT];

	rc_read_counters(rc, before);
	rc_step(rc, "neither answered; a NAK names PSN %u, the second slice's", r.first_psn + slice);
	script_peer_send_aeth(rc, &r.p, URNIC_AETH_NAK, r.first_psn + slice);
	if (strcmp(mode, "--gap") == 0)
		send_gap(rc, &r);
	uint32_t psn = read_request(rc, &r, 1000, &n);

	RC_CHECK(rc, psn == r.first_psn, "after the NAK: a request at PSN %u, not the first (%u)",
		 psn, r.first_psn);
	if (strcmp(mode, "--gap") == 0)
		psn = held_gap(rc, &r, slice, &n, before);
	if (strcmp(mode, "--held") == 0)
		psn = held_nak(rc, &r, slice, &n, before);

	rc_step(rc, "each request answered as asked, until every packet of the READ is");
	/* answered in order up to here (--held: the first slice already) */
	uint32_t next = r.first_psn + (strcmp(mode, "--held") == 0 ? slice : 0);

	for (int k = 0;; k++) {
		script_peer_send_read_responses(rc, &r.p, psn, n,
						r.mem + (size_t)(psn - r.first_psn) * rc->mtu);
		if (psn <= next && psn + n > next) /* (no PSN wraps here) */
			next = psn + n;
		if (next == r.first_psn + r.npkts)
			break;
		RC_CHECK(rc, k < MAX_REQUESTS, "%d requests, and the READ not answered in full", k);
		psn = read_request(rc, &r, 1000, &n);
	}
	rc_poll(rc, rc->scq, &wc, 1, 5000);
	rc_expect(rc, &wc, 11, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	rc_check(rc, rc->buf + LOFF, (size_t)r.npkts * rc->mtu, RESP_SEED, "READ data");
	script_peer_close(&r.p);
	free(r.mem);
	return RC_PASS;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *arg, *name;
	} modes[] = {
	    {"--gap", "rc_read_nak_gap"},
	    {"--stale", "rc_read_nak_stale"},
	    {"--held", "rc_read_nak_held"},
	    {"--spurious", "rc_read_nak_spurious"},
	};
	const char *name = "rc_read_nak_slice";

	mode = argc > 1 ? argv[1] : "";
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(mode, modes[i].arg) == 0)
			name = modes[i].name;
	struct rc_opts o = script_peer_defaults(name);

	o.max_rd_atomic = 16;
	return rc_run_local(&o, test);
}
