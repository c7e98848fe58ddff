/* script_peer.c - a scripted RC responder on a plain UDP socket (script_peer.h). */
#include "script_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/ip.h> /* IP_DF */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/stats.h"
#include "net/net.h"
#include "urnic.h"

void script_peer_bind_near(struct rc *rc, struct script_peer *p)
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

struct rc_opts script_peer_defaults(const char *name)
{
	struct rc_opts o = rc_defaults(name);

	setenv("URNIC_SHM", "0", 1);
	o.buf_size = RC_MIB;
	o.path_mtu = IBV_MTU_1024;
	o.timeout = 20; /* 4.3 s: the IB timer stays out of the way of the fast one */
	return o;
}

void script_peer_open(struct rc *rc, struct script_peer *p, uint32_t sq_psn)
{
	struct rc_peer peer = {.qpn = {SCRIPT_PEER_QPN},
			       .psn = {SCRIPT_PEER_PSN},
			       .addr = 0x10000,
			       .rkey = 0x77};

	script_peer_bind_near(rc, p);
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

/* Reads the next datagram within ms into pkt, its length into *n and its sender into *from
 * (when not NULL): false when none came. */
static bool recv_within(struct script_peer *p, unsigned ms, uint8_t pkt[URNIC_RX_BUF_LEN],
			ssize_t *n, struct sockaddr_in *from)
{
	struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
	socklen_t fromlen = sizeof(*from);

	if (poll(&pfd, 1, (int)ms) <= 0)
		return false;
	*n = recvfrom(p->fd, pkt, URNIC_RX_BUF_LEN, 0, (struct sockaddr *)from,
		      from ? &fromlen : NULL);
	return true;
}

int64_t script_peer_recv(struct rc *rc, struct script_peer *p, unsigned ms)
{
	uint8_t pkt[URNIC_RX_BUF_LEN];
	ssize_t n;

	if (!recv_within(p, ms, pkt, &n, NULL))
		return -1;

	RC_CHECK(rc, n >= URNIC_BTH_LEN + URNIC_ICRC_LEN, "recv: %zd (%s)", n, strerror(errno));
	p->received++;
	p->ackreq = bth_ackreq(pkt);
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

void script_peer_write(struct rc *rc, struct script_peer *p, uint64_t wr_id, uint32_t first,
		       uint32_t npkts)
{
	size_t off = (size_t)psn_diff(first, p->first_psn) * rc->mtu;
	struct rc_wr w;

	rc_step(rc, "the first sending of an %u-packet WRITE (PSN %u..%u)", npkts, first,
		first + npkts - 1);
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, wr_id, off, (size_t)npkts * rc->mtu, off);
	rc_post_send(rc, 0, &w.wr);
	for (uint32_t i = 0; i < npkts; i++) {
		int64_t psn = script_peer_recv(rc, p, 2000);

		RC_CHECK(rc, psn == first + i, "packet %u of the WRITE: PSN %lld", i,
			 (long long)psn);
	}
}

unsigned script_peer_drain(struct rc *rc, struct script_peer *p, unsigned ms)
{
	unsigned n = 0;

	while (script_peer_recv(rc, p, ms) >= 0)
		n++;
	return n;
}

/* Seals a packet (BTH onwards, with room for the ICRC at its end) and sends it to the
 * requester. */
static void send_sealed(struct rc *rc, struct script_peer *p, uint8_t *pkt, size_t len)
{
	const struct urnic_ip4_flow flow = {.saddr = p->addr,
					    .daddr = p->requester_addr,
					    .sport = URNIC_ROCEV2_PORT,
					    .dport = URNIC_ROCEV2_PORT};
	const struct iovec iov = {.iov_base = pkt, .iov_len = len - URNIC_ICRC_LEN};
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(URNIC_ROCEV2_PORT),
				 .sin_addr.s_addr = p->requester_addr};

	urnic_icrc_compute_ipid(&flow, p->ip_id, IP_DF, &iov, 1, iov.iov_len,
				pkt + iov.iov_len);
	if (p->ip_id)
		p->ip_id++;
	RC_CHECK(rc, sendto(p->fd, pkt, len, 0, (struct sockaddr *)&to, sizeof(to)) ==
			     (ssize_t)len,
		 "sendto: %s", strerror(errno));
}

static void build_bth(const struct script_peer *p, uint8_t *pkt, uint8_t opcode, uint32_t psn,
		      unsigned pad)
{
	const struct urnic_bth_fields f = {.opcode = opcode,
					   .padcnt = pad,
					   .pkey = URNIC_DEFAULT_PKEY,
					   .dqpn = p->requester_qpn,
					   .psn = psn};

	urnic_bth_build(pkt, &f);
}

void script_peer_send_aeth(struct rc *rc, struct script_peer *p, enum urnic_aeth_type type,
			   uint32_t psn)
{
	uint8_t pkt[URNIC_BTH_LEN + URNIC_AETH_LEN + URNIC_ICRC_LEN];

	build_bth(p, pkt, URNIC_OP_RC | URNIC_OP_ACK, psn, 0);
	aeth_build(pkt + URNIC_BTH_LEN, type,
		   type == URNIC_AETH_NAK ? URNIC_NAK_PSN_SEQ_ERR : URNIC_AETH_CREDITS_INVALID, 0);
	send_sealed(rc, p, pkt, sizeof(pkt));
}

int64_t script_peer_recv_read(struct rc *rc, struct script_peer *p, unsigned ms, uint64_t *va,
			      uint32_t *len)
{
	uint8_t pkt[URNIC_RX_BUF_LEN];
	const struct urnic_opcode_info *op = urnic_op(URNIC_OP_READ_REQUEST);
	ssize_t n;

	if (!recv_within(p, ms, pkt, &n, NULL))
		return -1;

	RC_CHECK(rc, n == op->hdr_len + URNIC_ICRC_LEN, "recv: %zd (%s)", n, strerror(errno));
	RC_CHECK(rc, bth_opcode(pkt) == URNIC_OP_READ_REQUEST, "opcode %#x is no READ request",
		 bth_opcode(pkt));
	RC_CHECK(rc, bth_dqpn(pkt) == SCRIPT_PEER_QPN, "packet for QPN %#x", bth_dqpn(pkt));
	RC_CHECK(rc, reth_rkey(pkt + op->reth) == rc->peer.rkey, "READ request with rkey %#x",
		 reth_rkey(pkt + op->reth));
	p->received++;
	*va = reth_va(pkt + op->reth);
	*len = reth_len(pkt + op->reth);
	return bth_psn(pkt);
}

void script_peer_send_read_response(struct rc *rc, struct script_peer *p, uint8_t opcode,
				    uint32_t psn, const void *payload, uint32_t len)
{
	const struct urnic_opcode_info *op = urnic_op(opcode);
	uint8_t pkt[URNIC_RX_BUF_LEN];
	uint32_t pad = (4 - len % 4) % 4;
	size_t n = op->hdr_len + len + pad + URNIC_ICRC_LEN;

	RC_CHECK(rc, (op->mask & (URNIC_M_READ | URNIC_M_RESP)) == (URNIC_M_READ | URNIC_M_RESP) &&
			 n <= sizeof(pkt),
		 "no READ response of %u bytes with opcode %#x", len, opcode);
	build_bth(p, pkt, opcode, psn, pad);
	if (op->aeth)
		aeth_build(pkt + op->aeth, URNIC_AETH_ACK, URNIC_AETH_CREDITS_INVALID, 0);
	memcpy(pkt + op->hdr_len, payload, len);
	memset(pkt + op->hdr_len + len, 0, pad);
	send_sealed(rc, p, pkt, n);
}

/* ACK delays of the warm-ups, in ms: each shorter than the timer the ones before it left (10 ms
 * at first, then at least twice the longest silence), so none is gone back for (a tail loss
 * probe, 2 srtt, may send one again: a duplicate, and no round-trip sample); the rising ones
 * leave the 60 ms silence, the rest bring the round trip to about 8 ms. */
static const unsigned warmup_ms[] = {5, 12, 20, 35, 60, 8, 8, 8, 8, 8, 8, 8,
				     8, 8, 8, 8, 8, 8, 8, 8, 8};
_Static_assert(sizeof(warmup_ms) / sizeof(warmup_ms[0]) == SCRIPT_PEER_WARMUPS,
	       "one delay per warm-up");

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

void script_peer_warm_up(struct rc *rc, struct script_peer *p)
{
	uint64_t before[URNIC_C_COUNT], after[URNIC_C_COUNT];
	struct rc_wr w;
	struct ibv_wc wc;

	rc_fill(rc->buf, (size_t)p->npkts * rc->mtu, p->seed);
	rc_read_counters(rc, before);
	rc_step(rc, "%d one-packet WRITEs, ACKed after 5 to 60 ms, then 8 ms", SCRIPT_PEER_WARMUPS);
	for (uint32_t k = 0; k < SCRIPT_PEER_WARMUPS; k++) {
		rc_wr(rc, &w, IBV_WR_RDMA_WRITE, k, (size_t)k * rc->mtu, rc->mtu,
		      (size_t)k * rc->mtu);
		rc_post_send(rc, 0, &w.wr);
		int64_t psn = script_peer_recv(rc, p, 2000);

		RC_CHECK(rc, psn == p->first_psn + k, "warm-up %u: PSN %lld", k, (long long)psn);
		sleep_ms(warmup_ms[k]);
		script_peer_send_aeth(rc, p, URNIC_AETH_ACK, (uint32_t)psn);
		rc_poll(rc, rc->scq, &wc, 1, 5000);
		rc_expect(rc, &wc, k, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		while ((psn = script_peer_recv(rc, p, 0)) >= 0) /* a probe: the same packet */
			RC_CHECK(rc, psn == p->first_psn + k, "warm-up %u: PSN %lld after it", k,
				 (long long)psn);
	}
	rc_read_counters(rc, after);
	RC_CHECK(rc, after[URNIC_C_rto_expiries] == before[URNIC_C_rto_expiries],
		 "a warm-up's ACK delay outlasted the timer");
}

void script_peer_send_read_responses(struct rc *rc, struct script_peer *p, uint32_t psn,
				     uint32_t npkts, const uint8_t *data)
{
	for (uint32_t k = 0; k < npkts; k++) {
		uint8_t opcode = npkts == 1   ? URNIC_OP_READ_RESP_ONLY
				 : k == 0     ? URNIC_OP_READ_RESP_FIRST
				 : k + 1 < npkts ? URNIC_OP_READ_RESP_MIDDLE
						 : URNIC_OP_READ_RESP_LAST;

		script_peer_send_read_response(rc, p, opcode, psn + k, data + (size_t)k * rc->mtu,
					       rc->mtu);
	}
}

/* ---- the scripted peer as a requester ---- */

void script_peer_send_read_request(struct rc *rc, struct script_peer *p, uint32_t psn, size_t off,
				   uint32_t len)
{
	const struct urnic_opcode_info *op = urnic_op(URNIC_OP_READ_REQUEST);
	uint8_t pkt[URNIC_MAX_HDR_LEN + URNIC_ICRC_LEN];

	build_bth(p, pkt, URNIC_OP_READ_REQUEST, psn, 0);
	reth_build(pkt + op->reth, (uint64_t)(uintptr_t)(rc->buf + off), rc->mr->rkey, len);
	send_sealed(rc, p, pkt, op->hdr_len + URNIC_ICRC_LEN);
}

void script_peer_send_fetch_add(struct rc *rc, struct script_peer *p, uint32_t psn, size_t off,
				uint64_t add)
{
	const struct urnic_opcode_info *op = urnic_op(URNIC_OP_FETCH_ADD);
	uint8_t pkt[URNIC_MAX_HDR_LEN + URNIC_ICRC_LEN];

	build_bth(p, pkt, URNIC_OP_FETCH_ADD, psn, 0);
	atomiceth_build(pkt + op->atomiceth, (uint64_t)(uintptr_t)(rc->buf + off), rc->mr->rkey,
			add, 0);
	send_sealed(rc, p, pkt, op->hdr_len + URNIC_ICRC_LEN);
}

bool script_peer_recv_response(struct rc *rc, struct script_peer *p, unsigned ms,
			       struct script_response *r)
{
	uint8_t pkt[URNIC_RX_BUF_LEN];
	struct sockaddr_in from;
	uint16_t id_hint = 0;
	ssize_t n;

	if (!recv_within(p, ms, pkt, &n, &from))
		return false;

	RC_CHECK(rc, n >= URNIC_BTH_LEN + URNIC_ICRC_LEN, "recv: %zd (%s)", n, strerror(errno));
	const struct urnic_opcode_info *op = urnic_op(bth_opcode(pkt));
	const struct urnic_ip4_flow flow = {.saddr = from.sin_addr.s_addr,
					    .daddr = p->addr,
					    .sport = ntohs(from.sin_port),
					    .dport = URNIC_ROCEV2_PORT};

	RC_CHECK(rc, op && (op->mask & URNIC_M_RESP), "opcode %#x is no response", bth_opcode(pkt));
	RC_CHECK(rc, bth_dqpn(pkt) == SCRIPT_PEER_QPN, "packet for QPN %#x", bth_dqpn(pkt));
	RC_CHECK(rc, (size_t)n >= op->hdr_len + bth_padcnt(pkt) + URNIC_ICRC_LEN,
		 "%zd bytes: shorter than its headers", n);
	RC_CHECK(rc, urnic_icrc_check(&flow, pkt, (size_t)n, &id_hint), "ICRC wrong");
	*r = (struct script_response){
		.opcode = bth_opcode(pkt),
		.psn = bth_psn(pkt),
		.aeth = op->aeth ? aeth_type(pkt + op->aeth) : URNIC_AETH_ACK,
		.aeth_value = op->aeth ? aeth_value(pkt + op->aeth) : 0,
		.len = (uint32_t)((size_t)n - op->hdr_len - bth_padcnt(pkt) - URNIC_ICRC_LEN)};
	if (op->atomicacketh)
		r->orig = atomicacketh_orig(pkt + op->atomicacketh);
	memcpy(r->payload, pkt + op->hdr_len, r->len);
	return true;
}
