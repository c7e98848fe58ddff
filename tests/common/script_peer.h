/* script_peer.h - a scripted RC peer for one-process tests: a plain UDP socket at another
 * loopback address. As a responder it reads the requester's WRITE packets (payload checked byte
 * for byte) and READ requests, and answers with forged, ICRC-sealed ACKs, NAKs and READ
 * responses, when and as the test says. As a requester it sends READ and FETCH_ADD requests to
 * rc->qp[0]'s responder and reads what it answers.
 * It lets a test stage what a real peer does only by chance: a lost retransmission, a NAK that
 * crosses a go-back, a request the network delivered late. */
#ifndef URNIC_TEST_SCRIPT_PEER_H
#define URNIC_TEST_SCRIPT_PEER_H

#include <stdint.h>

#include "net/net.h"
#include "rc_harness.h"
#include "wire/wire.h"

#define SCRIPT_PEER_QPN 0x00beefu /* the scripted peer's QPN */
#define SCRIPT_PEER_PSN 1000u	  /* the PSN rc->qp[0]'s responder expects first */

struct script_peer {
	int fd;
	uint32_t addr, requester_addr; /* network order */
	uint32_t requester_qpn;
	/* the IPv4 ID the next packet's ICRC is sealed for: 0 always, as a urnic peer sends, or
	 * counting up from where a test sets it, as rxe's do (up to 65535, then 0 for good) */
	uint16_t ip_id;
	uint32_t received; /* request packets read */
	bool ackreq;	   /* the last one read asked for an ACK */
	/* what the WRITE being read carries: PSN first_psn + i holds the bytes at offset
	 * buf_off + i * mtu of rc_fill(seed) */
	uint32_t first_psn, npkts, seed;
	size_t buf_off;
};

/* rc_defaults for a test against the scripted responder: the wire path (URNIC_SHM=0: the
 * responder is a plain socket), 1 MiB, path MTU 1024, IB timeout 20 (4.3 s: the fast
 * retransmission timer alone acts within a test, and the warm-ups' 120 ms timer is not capped
 * by it). */
struct rc_opts script_peer_defaults(const char *name);

/* Binds UDP 4791 on a loopback address next to rc's that no other process holds, and connects
 * rc->qp[0] to it with sq_psn as the requester's first PSN. Needs URNIC_SHM=0 and one QP. */
void script_peer_open(struct rc *rc, struct script_peer *p, uint32_t sq_psn);
void script_peer_close(struct script_peer *p);

/* Binds p->fd to UDP 4791 at the first loopback address next to rc's that nothing holds (another
 * peer's, for one that is not rc->qp[0]'s). */
void script_peer_bind_near(struct rc *rc, struct script_peer *p);

/* The next WRITE packet within ms, its payload checked against p's WRITE: its PSN, or -1 when
 * none came. */
int64_t script_peer_recv(struct rc *rc, struct script_peer *p, unsigned ms);

/* Reads and discards packets until none comes for ms; returns how many. */
unsigned script_peer_drain(struct rc *rc, struct script_peer *p, unsigned ms);

/* Teaches the requester a round trip of about 8 ms and a silence of 60 ms, so that its
 * retransmission timer (at least twice the longest silence) stands at about 120 ms, well after
 * what a round trip decides (a held NAK after about 12 ms, a tail loss probe after 16): a
 * one-packet WRITE each, PSN first_psn + k from rc->buf + k * mtu to the same offset, ACKed after
 * a delay. Fills rc->buf for all of p's npkts packets first; fails if the timer expired. The
 * test's own WRITEs follow from PSN first_psn + SCRIPT_PEER_WARMUPS. */
#define SCRIPT_PEER_WARMUPS 21
void script_peer_warm_up(struct rc *rc, struct script_peer *p);

/* Posts an npkts-packet WRITE from PSN first (rc->buf at (first - first_psn) * mtu, to the same
 * offset) and reads its first sending, every packet in order. */
void script_peer_write(struct rc *rc, struct script_peer *p, uint64_t wr_id, uint32_t first,
		       uint32_t npkts);

/* Sends an ACK, or a PSN-sequence NAK, naming psn. */
void script_peer_send_aeth(struct rc *rc, struct script_peer *p, enum urnic_aeth_type type,
			   uint32_t psn);

/* The next READ request within ms (checked: for our QPN, with the rkey rc->peer names): its PSN,
 * with the address and length its RETH asks for, or -1 when none came. */
int64_t script_peer_recv_read(struct rc *rc, struct script_peer *p, unsigned ms, uint64_t *va,
			      uint32_t *len);

/* Sends one READ response packet (opcode READ_RESP_FIRST, _MIDDLE, _LAST or _ONLY) at psn with
 * len bytes of payload, and an ACK's AETH where the opcode has one. */
void script_peer_send_read_response(struct rc *rc, struct script_peer *p, uint8_t opcode,
				    uint32_t psn, const void *payload, uint32_t len);

/* The responses to a READ of npkts packets from PSN psn, mtu bytes each from data on: FIRST,
 * MIDDLE..., LAST, or ONLY. */
void script_peer_send_read_responses(struct rc *rc, struct script_peer *p, uint32_t psn,
				     uint32_t npkts, const uint8_t *data);

/* ---- the scripted peer as a requester ---- */

/* Sends a READ request at psn for len bytes of rc->buf from offset off, with rc's rkey. */
void script_peer_send_read_request(struct rc *rc, struct script_peer *p, uint32_t psn, size_t off,
				   uint32_t len);

/* Sends a FETCH_ADD at psn of add to the 8 bytes at offset off of rc->buf, with rc's rkey. */
void script_peer_send_fetch_add(struct rc *rc, struct script_peer *p, uint32_t psn, size_t off,
				uint64_t add);

/* A packet rc->qp[0]'s responder sent: its opcode and PSN, its AETH's type and value (an ACK
 * for a READ RESPONSE MIDDLE, which has none), the original value of an ATOMIC ACKNOWLEDGE, the
 * payload of a READ response. */
struct script_response {
	uint8_t opcode;
	uint32_t psn;
	enum urnic_aeth_type aeth;
	unsigned aeth_value;
	uint64_t orig;
	uint32_t len;
	uint8_t payload[URNIC_RX_BUF_LEN];
};

/* The next packet from rc->qp[0]'s responder within ms (checked: an ICRC-sealed response for
 * our QPN): true, with *r filled in, or false when none came. */
bool script_peer_recv_response(struct rc *rc, struct script_peer *p, unsigned ms,
			       struct script_response *r);

#endif
