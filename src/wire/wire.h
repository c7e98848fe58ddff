/* wire.h - InfiniBand transport headers as RoCEv2 carries them: layout, opcode table, ICRC. */
#ifndef URNIC_WIRE_H
#define URNIC_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define URNIC_ROCEV2_PORT 4791
#define URNIC_BTH_LEN 12
#define URNIC_RETH_LEN 16
#define URNIC_AETH_LEN 4
#define URNIC_ATOMICETH_LEN 28
#define URNIC_ATOMICACKETH_LEN 8
#define URNIC_IMMDT_LEN 4
#define URNIC_DETH_LEN 8
#define URNIC_IETH_LEN 4
#define URNIC_ICRC_LEN 4
#define URNIC_MAX_HDR_LEN (URNIC_BTH_LEN + URNIC_ATOMICETH_LEN + URNIC_IMMDT_LEN + URNIC_DETH_LEN)
#define URNIC_DEFAULT_PKEY 0xffff
#define URNIC_PSN_MASK 0xffffffu
#define URNIC_QPN_MASK 0xffffffu

/* BTH opcodes (IBTA vol. 1, table 38). Bits 7:5 name the transport. */
enum urnic_opcode {
	URNIC_OP_RC = 0x00,
	URNIC_OP_UC = 0x20,
	URNIC_OP_UD = 0x60,

	URNIC_OP_SEND_FIRST = 0x00,
	URNIC_OP_SEND_MIDDLE = 0x01,
	URNIC_OP_SEND_LAST = 0x02,
	URNIC_OP_SEND_LAST_IMM = 0x03,
	URNIC_OP_SEND_ONLY = 0x04,
	URNIC_OP_SEND_ONLY_IMM = 0x05,
	URNIC_OP_WRITE_FIRST = 0x06,
	URNIC_OP_WRITE_MIDDLE = 0x07,
	URNIC_OP_WRITE_LAST = 0x08,
	URNIC_OP_WRITE_LAST_IMM = 0x09,
	URNIC_OP_WRITE_ONLY = 0x0a,
	URNIC_OP_WRITE_ONLY_IMM = 0x0b,
	URNIC_OP_READ_REQUEST = 0x0c,
	URNIC_OP_READ_RESP_FIRST = 0x0d,
	URNIC_OP_READ_RESP_MIDDLE = 0x0e,
	URNIC_OP_READ_RESP_LAST = 0x0f,
	URNIC_OP_READ_RESP_ONLY = 0x10,
	URNIC_OP_ACK = 0x11,
	URNIC_OP_ATOMIC_ACK = 0x12,
	URNIC_OP_CMP_SWAP = 0x13,
	URNIC_OP_FETCH_ADD = 0x14,
	URNIC_OP_SEND_LAST_INV = 0x16,
	URNIC_OP_SEND_ONLY_INV = 0x17,
};

/* What an opcode is and carries; the table in opcode.c is the only place that knows. */
enum urnic_op_mask {
	URNIC_M_RETH = 1u << 0,
	URNIC_M_AETH = 1u << 1,
	URNIC_M_ATOMICETH = 1u << 2,
	URNIC_M_ATOMICACKETH = 1u << 3,
	URNIC_M_IMMDT = 1u << 4,
	URNIC_M_DETH = 1u << 5,
	URNIC_M_IETH = 1u << 6,
	URNIC_M_PAYLOAD = 1u << 7,
	URNIC_M_REQ = 1u << 8,   /* requester to responder */
	URNIC_M_RESP = 1u << 9,  /* responder to requester */
	URNIC_M_SEND = 1u << 10,
	URNIC_M_WRITE = 1u << 11,
	URNIC_M_READ = 1u << 12, /* read request or read response */
	URNIC_M_ATOMIC = 1u << 13,
	URNIC_M_FIRST = 1u << 14, /* starts a message */
	URNIC_M_MIDDLE = 1u << 15,
	URNIC_M_LAST = 1u << 16,  /* ends a message */
	URNIC_M_ONLY = URNIC_M_FIRST | URNIC_M_LAST,
	URNIC_M_RC = 1u << 17,
	URNIC_M_UC = 1u << 18,
	URNIC_M_UD = 1u << 19,
};

struct urnic_opcode_info {
	const char *name;
	uint32_t mask;  /* enum urnic_op_mask; 0 for an opcode urnic does not know */
	uint8_t hdr_len; /* BTH and every extension header, in bytes */
	/* offset of each extension header from the start of the BTH, 0 if absent */
	uint8_t reth, aeth, atomiceth, atomicacketh, immdt, deth, ieth;
};

extern const struct urnic_opcode_info urnic_opcodes[256];

static inline const struct urnic_opcode_info *urnic_op(uint8_t opcode)
{
	return &urnic_opcodes[opcode];
}

/* ---- big-endian field access ---- */
static inline uint16_t urnic_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t urnic_get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}
static inline uint32_t urnic_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t urnic_get64(const uint8_t *p)
{
	return (uint64_t)urnic_get32(p) << 32 | urnic_get32(p + 4);
}
/* Little-endian: the ICRC goes on the wire least significant byte first. */
static inline uint32_t urnic_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void urnic_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void urnic_put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}
static inline void urnic_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static inline void urnic_put64(uint8_t *p, uint64_t v)
{
	urnic_put32(p, (uint32_t)(v >> 32));
	urnic_put32(p + 4, (uint32_t)v);
}

/* ---- BTH (12 bytes): opcode | SE M PadCnt(2) TVer(4) | P_Key | FECN BECN resv6 | DestQP |
 *      AckReq resv7 | PSN ---- */
static inline uint8_t bth_opcode(const uint8_t *bth)
{
	return bth[0];
}
static inline bool bth_se(const uint8_t *bth)
{
	return bth[1] & 0x80;
}
static inline bool bth_mig(const uint8_t *bth)
{
	return bth[1] & 0x40;
}
static inline unsigned bth_padcnt(const uint8_t *bth)
{
	return (bth[1] >> 4) & 3;
}
static inline unsigned bth_tver(const uint8_t *bth)
{
	return bth[1] & 0xf;
}
static inline uint16_t bth_pkey(const uint8_t *bth)
{
	return urnic_get16(bth + 2);
}
static inline uint32_t bth_dqpn(const uint8_t *bth)
{
	return urnic_get24(bth + 5);
}
static inline bool bth_ackreq(const uint8_t *bth)
{
	return bth[8] & 0x80;
}
static inline uint32_t bth_psn(const uint8_t *bth)
{
	return urnic_get24(bth + 9);
}

struct urnic_bth_fields {
	uint8_t opcode;
	bool se, ackreq;
	unsigned padcnt;
	uint16_t pkey;
	uint32_t dqpn, psn;
};
void urnic_bth_build(uint8_t *bth, const struct urnic_bth_fields *f);

/* ---- RETH: VA(8) R_Key(4) DMA length(4) ---- */
static inline uint64_t reth_va(const uint8_t *h)
{
	return urnic_get64(h);
}
static inline uint32_t reth_rkey(const uint8_t *h)
{
	return urnic_get32(h + 8);
}
static inline uint32_t reth_len(const uint8_t *h)
{
	return urnic_get32(h + 12);
}
static inline void reth_build(uint8_t *h, uint64_t va, uint32_t rkey, uint32_t len)
{
	urnic_put64(h, va);
	urnic_put32(h + 8, rkey);
	urnic_put32(h + 12, len);
}

/* ---- AETH: Syndrome(1) MSN(3) ---- */
enum urnic_aeth_type {
	URNIC_AETH_ACK = 0,
	URNIC_AETH_RNR_NAK = 1,
	URNIC_AETH_RESERVED = 2,
	URNIC_AETH_NAK = 3,
};
enum urnic_nak_code {
	URNIC_NAK_PSN_SEQ_ERR = 0,
	URNIC_NAK_INVALID_REQ = 1,
	URNIC_NAK_REM_ACCESS_ERR = 2,
	URNIC_NAK_REM_OP_ERR = 3,
	URNIC_NAK_INVALID_RD_REQ = 4,
};
#define URNIC_AETH_CREDITS_INVALID 0x1f /* "no flow control credits", as rxe sends */

static inline uint8_t aeth_syndrome(const uint8_t *h)
{
	return h[0];
}
static inline enum urnic_aeth_type aeth_type(const uint8_t *h)
{
	return (enum urnic_aeth_type)((h[0] >> 5) & 3);
}
static inline unsigned aeth_value(const uint8_t *h) /* credits, RNR timer or NAK code */
{
	return h[0] & 0x1f;
}
static inline uint32_t aeth_msn(const uint8_t *h)
{
	return urnic_get24(h + 1);
}
static inline void aeth_build(uint8_t *h, enum urnic_aeth_type type, unsigned value, uint32_t msn)
{
	h[0] = (uint8_t)((type & 3) << 5 | (value & 0x1f));
	urnic_put24(h + 1, msn);
}

/* ---- AtomicETH: VA(8) R_Key(4) Swap/Add(8) Compare(8) ---- */
static inline uint64_t atomiceth_va(const uint8_t *h)
{
	return urnic_get64(h);
}
static inline uint32_t atomiceth_rkey(const uint8_t *h)
{
	return urnic_get32(h + 8);
}
static inline uint64_t atomiceth_swap_add(const uint8_t *h)
{
	return urnic_get64(h + 12);
}
static inline uint64_t atomiceth_compare(const uint8_t *h)
{
	return urnic_get64(h + 20);
}
static inline void atomiceth_build(uint8_t *h, uint64_t va, uint32_t rkey, uint64_t swap_add,
				   uint64_t compare)
{
	urnic_put64(h, va);
	urnic_put32(h + 8, rkey);
	urnic_put64(h + 12, swap_add);
	urnic_put64(h + 20, compare);
}

/* ---- AtomicAckETH: original remote data (8) ---- */
static inline uint64_t atomicacketh_orig(const uint8_t *h)
{
	return urnic_get64(h);
}

/* ---- ImmDt: carried as the sender wrote it, in network order ---- */

/* ---- DETH: Q_Key(4) resv(1) SrcQP(3) ---- */
static inline uint32_t deth_qkey(const uint8_t *h)
{
	return urnic_get32(h);
}
static inline uint32_t deth_srcqp(const uint8_t *h)
{
	return urnic_get24(h + 5);
}

/* ---- PSN arithmetic, modulo 2^24 ---- */
static inline uint32_t psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & URNIC_PSN_MASK;
}
/* a - b as a signed distance in (-2^23, 2^23] */
static inline int32_t psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

/* Path MTU in bytes for an IB MTU enum value (1 = 256 ... 5 = 4096); 0 if invalid. */
static inline uint32_t urnic_mtu_bytes(int ib_mtu)
{
	return (ib_mtu >= 1 && ib_mtu <= 5) ? 128u << ib_mtu : 0;
}

/* ---- ICRC (RoCEv2 annex A17.4): CRC-32 over a masked copy of the IPv4 and UDP headers, the BTH
 *      with its reserved byte masked, and everything after it up to the ICRC ---- */

/* The CRC-32 register (reflected 0x04C11DB7, no initial value or final xor applied) advanced over
 * n bytes: carry-less multiplication where the CPU has VPCLMULQDQ with AVX-512 or PCLMULQDQ,
 * tables otherwise; URNIC_ICRC=table or =clmul caps the choice (crc32.c). _with asks for one
 * implementation, for tests and benchmarks, and gets the best below it that the CPU has. */
#define URNIC_CRC32_POLY 0xedb88320u /* 0x04C11DB7, bit-reflected */
#define URNIC_GF2_ONE 0x80000000u    /* the polynomial 1 in the reflected representation */
enum urnic_crc32_impl { URNIC_CRC32_TABLE, URNIC_CRC32_CLMUL, URNIC_CRC32_VPCLMUL };
enum urnic_crc32_impl urnic_crc32_impl(void);
uint32_t urnic_crc32_update(uint32_t crc, const void *data, size_t n);
uint32_t urnic_crc32_update_with(enum urnic_crc32_impl impl, uint32_t crc, const void *data,
				 size_t n);
/* a * b mod P, both in the register's reflected representation (URNIC_GF2_ONE is 1): one
 * carry-less multiplication where the CPU has PCLMULQDQ, a bit loop otherwise. */
uint32_t urnic_gf2_mul(uint32_t a, uint32_t b);

/* What the receiver can know of the IP and UDP headers around a packet. Addresses in network
 * order; ports in host order. The IP ID is not visible to a UDP socket (see icrc.c). */
struct urnic_ip4_flow {
	uint32_t saddr, daddr;
	uint16_t sport, dport;
};

/* ICRC of a packet sent by urnic: IPv4 ID 0 and DF, as Linux gives unconnected UDP sockets with
 * IP_PMTUDISC_DO. iov covers the packet from the BTH up to the ICRC (len bytes in all). The
 * result is the 4 bytes to append, in wire order. */
void urnic_icrc_compute(const struct urnic_ip4_flow *flow, const struct iovec *iov, int iovcnt,
			size_t len, uint8_t icrc[4]);

/* The same with an explicit IPv4 identification and flags/fragment field (host order). */
void urnic_icrc_compute_ipid(const struct urnic_ip4_flow *flow, uint16_t ip_id, uint16_t ip_frag,
			     const struct iovec *iov, int iovcnt, size_t len, uint8_t icrc[4]);

/* Checks a received packet (pkt: BTH up to and including the 4-byte ICRC, len bytes in all).
 * Because a UDP socket cannot see the sender's IPv4 ID, the check accepts an ID of 0 (urnic,
 * DF senders), then IDs near *id_hint (per-peer prediction, updated on success: Linux rxe counts
 * up per destination). Returns true if the ICRC matches for one of them. */
bool urnic_icrc_check(const struct urnic_ip4_flow *flow, const uint8_t *pkt, size_t len,
		      uint16_t *id_hint);

/* UDP GSO: the kernel cuts one send into segments whose IPv4 IDs count up from the first's (0 for
 * urnic), so segment k must carry the ICRC for ID k. Rewrites icrc (in wire order, of a packet of
 * len bytes from the BTH through the ICRC) from ID `from` to ID `to` without touching the payload:
 * the ICRC is affine in the ID bits (see icrc.c). */
void urnic_icrc_move_ip_id(uint8_t icrc[4], size_t len, uint16_t from, uint16_t to);

/* urnic_icrc_check for segment seg of a UDP GRO receive: first the ID seg exactly (what a urnic
 * GSO sender stamped, checked at the CRC's full strength), then as urnic_icrc_check. */
bool urnic_icrc_check_seg(const struct urnic_ip4_flow *flow, const uint8_t *pkt, size_t len,
			  uint16_t seg, uint16_t *id_hint);

/* How a peer stamps its IPv4 IDs, learned from its first packet. Zero (unknown) until then. */
enum urnic_ip_id_kind {
	URNIC_IP_IDS_UNKNOWN,
	URNIC_IP_IDS_FIXED,    /* ID 0 with DF, or a GSO segment's number: urnic (unconnected) */
	URNIC_IP_IDS_COUNTING, /* a counter per destination: Linux rxe */
};

/* A peer's IPv4 IDs as a receiver follows them: their kind, the window's hint (COUNTING), and an
 * intact packet's ID seen outside what the kind accepts (jumped). */
struct urnic_ip_id_track {
	uint16_t hint;
	uint16_t jump;
	bool jumped;
	uint8_t kind; /* enum urnic_ip_id_kind */
};

/* The IDs a FIXED peer may stamp: 0, and segment numbers of a GSO send (URNIC_GSO_MAX_SEGS at
 * most), which reach a receiver one by one where nothing coalesces them again (a veth). */
#define URNIC_IP_ID_FIXED_MAX 64u

/* urnic_icrc_check_seg with the peer's IDs tracked (t zeroed for a new peer). ID 0, or a GRO
 * segment's own number, is checked at the CRC's full strength and marks an unknown peer FIXED.
 * Otherwise the ID is recovered, and accepted:
 *   - from an unknown peer: any ID, once: the peer is COUNTING from there;
 *   - from a FIXED peer: IDs below URNIC_IP_ID_FIXED_MAX with DF, or at most
 *     URNIC_IP_ID_RESYNC past the highest of those seen, which makes it COUNTING (a counter
 *     that started low): 2^-25 of random corruption passes;
 *   - from a COUNTING peer: the window around the hint (2^-21).
 * A packet whose ICRC is right for an ID outside that is dropped and its ID kept; the next
 * packet, if it is such a packet at most URNIC_IP_ID_RESYNC IDs after it (1024 for a FIXED
 * peer), is taken and makes the peer COUNTING there.
 * One ID jump of rxe's (6469 IDs in 6 ms, in an interop run under 2% loss) had made every later
 * packet fail the window. Two packets that pass the CRC for IDs that close stand for a
 * corruption by chance about once in 2^41 pairs. */
#define URNIC_IP_ID_RESYNC 64u
bool urnic_icrc_check_track(const struct urnic_ip4_flow *flow, const uint8_t *pkt, size_t len,
			    uint16_t seg, struct urnic_ip_id_track *t);

#endif
