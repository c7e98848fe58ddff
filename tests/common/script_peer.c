/* script_peer.c - a scripted RC responder on a plain UDP socket (script_peer.h). */
#include "script_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net/net.h"
#include "urnic.h"

#define PEER_PSN 1000u /* the PSN the responder expects first (unchecked: it only reads) */

static void bind_near(struct rc *rc, struct script_peer *p)
{
	RC_CHECK(rc, urnic_gid_to_ipv4(&rc->me.gid, &p->requester_addr), "GID 0 is not IPv4");
	p->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	RC_CHECK(rc, p->fd >= 0, "socket: %s", strerror(errno));
	for (uint32_t x = 1; x < 64; x++) {
		struct sockaddr_in sin = {.sin_family = AF_INET,
					  .sin_port = htons(URNIC_ROCEV2_PORT),
					  .sin_addr.s_addr = htonl(ntohl(p->requester_addr) ^ x)};

		if (bind(p->fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
			p->addr = sin.sin_addr.s_addr;
			return;
		}
		RC_CHECK(rc, errno == EADDRINUSE, "bind: %s", strerror(errno));
	}
	rc_fail(rc, "no free loopback address near ours for the responder");
}

void script_peer_open(struct rc *rc, struct script_peer *p, uint32_t sq_psn)
{
	struct rc_peer peer = {.qpn = {SCRIPT_PEER_QPN},
			       .psn = {PEER_PSN},
			       .addr = 0x10000,
			       .rkey = 0x77};

	bind_near(rc, p);
	urnic_gid_from_ipv4(p->addr, &peer.gid);
	rc->peer = peer;
	rc_qp_init(rc, rc->qp[0]);
	rc_qp_rtr(rc, rc->qp[0], &peer, 0);
	rc_qp_rts(rc, rc->qp[0], sq_psn);
	p->requester_qpn = rc->qp[0]->qp_num;
}

void script_peer_close(struct script_peer *p)
{
	close(p->fd);
}

int64_t script_peer_recv(struct rc *rc, struct script_peer *p, unsigned ms)
{
	uint8_t pkt[URNIC_RX_BUF_LEN];
	struct pollfd pfd = {.fd = p->fd, .events = POLLIN};

	if (poll(&pfd, 1, (int)ms) <= 0)
		return -1;
	ssize_t n = recv(p->fd, pkt, sizeof(pkt), 0);

	RC_CHECK(rc, n >= URNIC_BTH_LEN + URNIC_ICRC_LEN, "recv: %zd (%s)", n, strerror(errno));
	p->received++;
	uint8_t opcode = bth_opcode(pkt);
	const struct urnic_opcode_info *op = urnic_op(opcode);
	uint32_t psn = bth_psn(pkt), i = (uint32_t)psn_diff(psn, p->first_psn);

	RC_CHECK(rc, op && (op->mask & URNIC_M_WRITE), "opcode %#x is no WRITE", opcode);
	RC_CHECK(rc, bth_dqpn(pkt) == SCRIPT_PEER_QPN, "packet for QPN %#x", bth_dqpn(pkt));
	RC_CHECK(rc, i < p->npkts, "PSN %u outside the WRITE (%u..%u)", psn, p->first_psn,
		 p->first_psn + p->npkts - 1);
	size_t len = (size_t)n - op->hdr_len - URNIC_ICRC_LEN;

	RC_CHECK(rc, len == rc->mtu, "PSN %u carries %zu bytes, not %u", psn, len, rc->mtu);
	rc_check_from(rc, pkt + op->hdr_len, len, p->seed, p->buf_off + (size_t)i * rc->mtu,
		      "payload");
	return psn;
}

unsigned script_peer_drain(struct rc *rc, struct script_peer *p, unsigned ms)
{
	unsigned n = 0;

	while (script_peer_recv(rc, p, ms) >= 0)
		n++;
	return n;
}

void script_peer_send_aeth(struct rc *rc, struct script_peer *p, enum urnic_aeth_type type,
			   uint32_t psn)
{
	uint8_t pkt[URNIC_BTH_LEN + URNIC_AETH_LEN + URNIC_ICRC_LEN];
	const struct urnic_bth_fields f = {.opcode = URNIC_OP_RC | URNIC_OP_ACK,
					   .pkey = URNIC_DEFAULT_PKEY,
					   .dqpn = p->requester_qpn,
					   .psn = psn};
	const struct urnic_ip4_flow flow = {.saddr = p->addr,
					    .daddr = p->requester_addr,
					    .sport = URNIC_ROCEV2_PORT,
					    .dport = URNIC_ROCEV2_PORT};
	const struct iovec iov = {.iov_base = pkt, .iov_len = sizeof(pkt) - URNIC_ICRC_LEN};
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(URNIC_ROCEV2_PORT),
				 .sin_addr.s_addr = p->requester_addr};

	urnic_bth_build(pkt, &f);
	aeth_build(pkt + URNIC_BTH_LEN, type,
		   type == URNIC_AETH_NAK ? URNIC_NAK_PSN_SEQ_ERR : URNIC_AETH_CREDITS_INVALID, 0);
	urnic_icrc_compute(&flow, &iov, 1, iov.iov_len, pkt + iov.iov_len);
	RC_CHECK(rc, sendto(p->fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&to, sizeof(to)) ==
			     (ssize_t)sizeof(pkt),
		 "sendto: %s", strerror(errno));
}
