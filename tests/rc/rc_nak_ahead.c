/* rc_nak_ahead: a PSN-sequence NAK that names a PSN ahead of the requester's send cursor, but
 * not beyond anything it ever sent, is a NAK of the first sending and is acted on.
 *
 * After a timer expiry the requester goes back to its oldest unacknowledged PSN and, with its
 * window cut, sends only the first packets again. A NAK from the responder that was on its way
 * then names a PSN past them: the responder holds everything before it. Seen with rdma_rxe under
 * 2% loss (ib_write_bw, urnic the client), such a NAK was dropped as out of the window and the
 * requester sent again what the responder already had. It must instead skip ahead (a spurious
 * go-back), take the NAK as the acknowledgement of everything before its PSN, and go back to
 * that PSN; a NAK beyond the highest PSN ever sent stays a drop.
 *
 * One process: the responder is scripted on a plain UDP socket at another loopback address,
 * which reads the requester's packets, checks their payload byte for byte, and answers with
 * forged NAKs and ACKs. */
#include "rc_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/stats.h"
#include "net/net.h"
#include "urnic.h"
#include "wire/wire.h"

#define NPKTS 8		   /* packets of the WRITE */
#define NAK_AT 5	   /* the responder holds packets 0..NAK_AT-1 of the first sending */
#define PEER_QPN 0x00beefu /* the scripted responder's QPN */
#define PEER_PSN 1000u	   /* the PSN it expects first (unchecked: it only reads) */
#define SQ_PSN 5000u	   /* the requester's first PSN */
#define SEED 41

struct responder {
	int fd;
	uint32_t addr, requester_addr; /* network order */
	uint32_t requester_qpn;
	uint32_t received; /* request packets read */
};

/* Binds UDP 4791 on a loopback address next to ours that no other process holds. */
static void responder_open(struct rc *rc, struct responder *r)
{
	RC_CHECK(rc, urnic_gid_to_ipv4(&rc->me.gid, &r->requester_addr), "GID 0 is not IPv4");
	r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	RC_CHECK(rc, r->fd >= 0, "socket: %s", strerror(errno));
	for (uint32_t x = 1; x < 64; x++) {
		struct sockaddr_in sin = {.sin_family = AF_INET,
					  .sin_port = htons(URNIC_ROCEV2_PORT),
					  .sin_addr.s_addr = htonl(ntohl(r->requester_addr) ^ x)};

		if (bind(r->fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
			r->addr = sin.sin_addr.s_addr;
			return;
		}
		RC_CHECK(rc, errno == EADDRINUSE, "bind: %s", strerror(errno));
	}
	rc_fail(rc, "no free loopback address near ours for the responder");
}

/* The next request packet within ms: its PSN, with its payload checked against the WRITE's;
 * -1 when none came. */
static int64_t recv_request(struct rc *rc, struct responder *r, unsigned ms)
{
	uint8_t pkt[URNIC_RX_BUF_LEN];
	struct pollfd pfd = {.fd = r->fd, .events = POLLIN};

	if (poll(&pfd, 1, (int)ms) <= 0)
		return -1;
	ssize_t n = recv(r->fd, pkt, sizeof(pkt), 0);

	RC_CHECK(rc, n >= URNIC_BTH_LEN + URNIC_ICRC_LEN, "recv: %zd (%s)", n, strerror(errno));
	r->received++;
	uint8_t opcode = bth_opcode(pkt);
	const struct urnic_opcode_info *op = urnic_op(opcode);
	uint32_t psn = bth_psn(pkt), i = (uint32_t)psn_diff(psn, SQ_PSN);

	RC_CHECK(rc, op && (op->mask & URNIC_M_WRITE), "opcode %#x is no WRITE", opcode);
	RC_CHECK(rc, bth_dqpn(pkt) == PEER_QPN, "packet for QPN %#x", bth_dqpn(pkt));
	RC_CHECK(rc, i < NPKTS, "PSN %u outside the WRITE (%u..%u)", psn, SQ_PSN,
		 SQ_PSN + NPKTS - 1);
	size_t len = (size_t)n - op->hdr_len - URNIC_ICRC_LEN;

	RC_CHECK(rc, len == rc->mtu, "PSN %u carries %zu bytes, not %u", psn, len, rc->mtu);
	rc_check_from(rc, pkt + op->hdr_len, len, SEED, (size_t)i * rc->mtu, "payload");
	return psn;
}

/* An ACK, or a NAK of the given syndrome type, naming psn, sealed with a valid ICRC. */
static void send_aeth(struct rc *rc, struct responder *r, enum urnic_aeth_type type, uint32_t psn)
{
	uint8_t pkt[URNIC_BTH_LEN + URNIC_AETH_LEN + URNIC_ICRC_LEN];
	const struct urnic_bth_fields f = {.opcode = URNIC_OP_RC | URNIC_OP_ACK,
					   .pkey = URNIC_DEFAULT_PKEY,
					   .dqpn = r->requester_qpn,
					   .psn = psn};
	const struct urnic_ip4_flow flow = {.saddr = r->addr,
					    .daddr = r->requester_addr,
					    .sport = URNIC_ROCEV2_PORT,
					    .dport = URNIC_ROCEV2_PORT};
	const struct iovec iov = {.iov_base = pkt, .iov_len = sizeof(pkt) - URNIC_ICRC_LEN};
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(URNIC_ROCEV2_PORT),
				 .sin_addr.s_addr = r->requester_addr};

	urnic_bth_build(pkt, &f);
	aeth_build(pkt + URNIC_BTH_LEN, type,
		   type == URNIC_AETH_NAK ? URNIC_NAK_PSN_SEQ_ERR : URNIC_AETH_CREDITS_INVALID, 0);
	urnic_icrc_compute(&flow, &iov, 1, iov.iov_len, pkt + iov.iov_len);
	RC_CHECK(rc, sendto(r->fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&to, sizeof(to)) ==
			     (ssize_t)sizeof(pkt),
		 "sendto: %s", strerror(errno));
}

static void connect_to_responder(struct rc *rc, struct responder *r)
{
	struct rc_peer peer = {.qpn = {PEER_QPN}, .psn = {PEER_PSN}, .addr = 0x10000, .rkey = 0x77};

	urnic_gid_from_ipv4(r->addr, &peer.gid);
	rc->peer = peer;
	rc_qp_init(rc, rc->qp[0]);
	rc_qp_rtr(rc, rc->qp[0], &peer, 0);
	rc_qp_rts(rc, rc->qp[0], SQ_PSN);
	r->requester_qpn = rc->qp[0]->qp_num;
}

/* Reads the first sending, then waits for the timer's go-back to resend PSN SQ_PSN; returns the
 * highest PSN seen again in the next 20 ms (the cut window allows only the first few). */
static uint32_t first_sending_and_goback(struct rc *rc, struct responder *r)
{
	rc_step(rc, "the first sending: %d packets, unanswered", NPKTS);
	for (uint32_t i = 0; i < NPKTS; i++) {
		int64_t psn = recv_request(rc, r, 2000);

		RC_CHECK(rc, psn == SQ_PSN + i, "packet %u of the first sending: PSN %lld", i,
			 (long long)psn);
	}
	rc_step(rc, "the timer goes back to PSN %u", SQ_PSN);
	int64_t psn = recv_request(rc, r, 2000);

	RC_CHECK(rc, psn == SQ_PSN, "first packet after the first sending: PSN %lld",
		 (long long)psn);
	uint32_t highest = SQ_PSN;

	while ((psn = recv_request(rc, r, 20)) >= 0)
		if (psn_diff((uint32_t)psn, highest) > 0)
			highest = (uint32_t)psn;
	RC_CHECK(rc, psn_diff(SQ_PSN + NAK_AT, highest) > 0,
		 "the go-back sent PSN %u again within 20 ms: the window was not cut, this test "
		 "needs the cursor behind PSN %u",
		 highest, SQ_PSN + NAK_AT);
	return highest;
}

static int test(struct rc *rc)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct responder r = {0};
	struct rc_wr w;
	struct ibv_wc wc;

	responder_open(rc, &r);
	connect_to_responder(rc, &r);
	rc_fill(rc->buf, NPKTS * rc->mtu, SEED);
	rc_read_counters(rc, before);
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, 7, 0, NPKTS * rc->mtu, 0);
	rc_post_send(rc, 0, &w.wr);
	uint32_t highest = first_sending_and_goback(rc, &r);

	rc_step(rc, "a NAK beyond anything sent (PSN %u) is dropped", SQ_PSN + NPKTS + 1);
	send_aeth(rc, &r, URNIC_AETH_NAK, SQ_PSN + NPKTS + 1);
	rc_step(rc, "a NAK of the first sending for PSN %u, ahead of the cursor (%u resent)",
		SQ_PSN + NAK_AT, highest);
	send_aeth(rc, &r, URNIC_AETH_NAK, SQ_PSN + NAK_AT);
	for (int64_t psn;;) {
		psn = recv_request(rc, &r, 1000);
		RC_CHECK(rc, psn >= 0, "no packet within 1 s of the NAK: PSN %u never sent again",
			 SQ_PSN + NAK_AT);
		if (psn == SQ_PSN + NAK_AT)
			break;
		/* a timer's resend may have left before the NAK was read; nothing the responder
		 * already holds past it may go again */
		RC_CHECK(rc, psn_diff((uint32_t)psn, highest) <= 0,
			 "PSN %lld sent again: the responder holds everything before PSN %u",
			 (long long)psn, SQ_PSN + NAK_AT);
	}
	rc_step(rc, "ACK the whole WRITE");
	send_aeth(rc, &r, URNIC_AETH_ACK, SQ_PSN + NPKTS - 1);
	rc_poll(rc, rc->scq, &wc, 1, 5000);
	rc_expect(rc, &wc, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);

	while (recv_request(rc, &r, 20) >= 0) /* a timer's resend still on its way */
		;
	rc_read_counters(rc, after);
	uint64_t dropped = after[URNIC_C_drop_psn] - before[URNIC_C_drop_psn];
	uint64_t spurious = after[URNIC_C_spurious_gobacks] - before[URNIC_C_spurious_gobacks];
	uint64_t resent = after[URNIC_C_retransmits] - before[URNIC_C_retransmits];

	rc_step(rc, "counters: %llu dropped for their PSN, %llu spurious go-backs, %llu packets "
		    "counted as resent, %u seen again",
		(unsigned long long)dropped, (unsigned long long)spurious,
		(unsigned long long)resent, r.received - NPKTS);
	RC_CHECK(rc, resent == r.received - NPKTS,
		 "retransmitted_packets moved by %llu; the responder read %u packets again",
		 (unsigned long long)resent, r.received - NPKTS);
	RC_CHECK(rc, dropped == 1,
		 "drop_psn_out_of_window moved by %llu, expected 1 (the NAK beyond anything sent)",
		 (unsigned long long)dropped);
	RC_CHECK(rc, spurious >= 1, "the NAK ahead of the cursor proved no go-back spurious");
	close(r.fd);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_nak_ahead");

	setenv("URNIC_SHM", "0", 1); /* the responder is a plain socket */
	o.buf_size = RC_MIB;
	o.path_mtu = IBV_MTU_1024;
	return rc_run_local(&o, test);
}
