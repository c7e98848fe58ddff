/* icrc.c - the RoCEv2 invariant CRC: computing it for sent packets and checking received ones. */

/*
 * The ICRC is the Ethernet CRC-32 (reflected, polynomial 0x04C11DB7, initial value 0xffffffff,
 * final complement) over:
 *   8 bytes of 0xff                    the masked LRH that RoCEv2 does not have
 *   the IPv4 header                    TOS, TTL and header checksum set to all ones
 *   the UDP header                     checksum set to all ones
 *   the BTH                            byte 4 (FECN, BECN, resv6) set to all ones
 *   everything after it, up to the ICRC
 * and is appended least significant byte first. The capture from Linux rxe in
 * tests/data/rxe-rc-pingpong.pcap fixes these conventions; test_icrc_rxe_pcap checks them.
 *
 * Why the check has to guess the IPv4 identification: the ICRC covers the IP ID, but a UDP socket
 * never sees it. urnic sends with ID 0 and DF (what Linux gives an unconnected UDP socket with
 * IP_PMTUDISC_DO), so a urnic packet is checked with ID 0 at the full strength of the CRC. Linux
 * rxe instead stamps each packet with a per-destination counter. For a fixed length the CRC is
 * affine over GF(2): crc(M ^ D) = crc(M) ^ crc0(D), crc0 having zero initial value and no final
 * xor. So residual = crc(packet with ID 0) ^ received ICRC equals crc0(delta of the ID and flags
 * fields), that is delta(x) * x^(8n + 32) mod P with n the bytes after the ID field. Multiplying by
 * x^-(8n) mod P (x is invertible because P has a constant term) leaves crc0 of the two ID bytes,
 * an injective map from 16 bits to 32; a left inverse recovers the only ID that can match and
 * mapping it forward again confirms that the residual lies in the map's image. Clearing DF adds
 * a known constant. Each (ID, DF) pair therefore gives a distinct ICRC, and at most one matches.
 *
 * What integrity remains: an ID-0 packet keeps all 32 bits. Otherwise a corrupted packet passes
 * when its residual happens to equal one of the accepted (ID, DF) deltas. The receive path
 * (urnic_icrc_check_track) accepts, for a peer that stamps ID 0 (urnic: its GSO segments are
 * numbered below 64), at most 127 IDs with DF: about 25 bits against random corruption; for a
 * peer whose IDs count up (rxe), 2 * 1089 IDs in the window around its hint: about 21 bits; and
 * for the first packet of a peer not yet known, any ID: about 15 bits, for that packet. Before
 * peers were told apart, a urnic peer's hint stayed 0 ("unknown") for good, and every packet
 * from it was checked at 15 bits: a 1-bit flip in the payload of a 4 KiB READ response, made by
 * the fault injector, passed at 2 of its 32,928 bit positions.
 * A single flipped bit is still always caught when DF is set: the nearest bit that ID recovery
 * could take for an ID change lies 26 KiB past the ID field, beyond any RoCE packet. Guessing DF
 * clear (rxe and urnic always set it) has such bits from about 195 bytes past the ID field on;
 * those are caught only with the window's odds. A NULL id_hint accepts ID 0 alone.
 */

#include <pthread.h>
#include <string.h>

#include "wire/wire.h"

#define GF2_X_INV 0xdb710641u  /* x^-1 mod P, reflected: (P - 1) / x */

#define IP_DF 0x4000
#define IP_HDR_LEN 20
#define UDP_HDR_LEN 8
#define PSEUDO_LEN (8 + IP_HDR_LEN + UDP_HDR_LEN)
#define PREFIX_PKT_MAX 28 /* packet bytes hashed with the pseudo-headers: a BTH and a RETH */
#define IP_ID_OFFSET (8 + 4) /* of the IP ID in the CRC's input */
#define IP_MAX_LEN 65535

/* The window of IDs accepted around the last one seen from a peer (rxe counts up by one). */
#define ID_BEHIND_MAX 64u
#define ID_AHEAD_MAX 1024u

/* x^-(8 * i) and x^-(8 * 256 * i) mod P: together they un-shift a residual by up to 65535 bytes;
 * shift_lo and shift_hi are their inverses, x^(8 * i) and x^(8 * 256 * i). */
static uint32_t unshift_lo[256], unshift_hi[256];
static uint32_t shift_lo[256], shift_hi[256];
/* Left inverse of the map ID -> crc0(ID bytes), one table per byte of the 32-bit residual. */
static uint16_t id_of_residual[4][256];
/* What clearing DF adds to an un-shifted residual. */
static uint32_t df_clear_delta;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* crc0 of the two ID bytes as they stand in the IPv4 header (big-endian). */
static uint32_t crc0_id(uint16_t id)
{
	uint8_t b[2] = {(uint8_t)(id >> 8), (uint8_t)id};

	return urnic_crc32_update(0, b, sizeof(b));
}

/* table[i] = step^i for i < 256, and *next = step^256 */
static void build_powers(uint32_t *table, uint32_t step, uint32_t *next)
{
	table[0] = URNIC_GF2_ONE;
	for (int i = 1; i < 256; i++)
		table[i] = urnic_gf2_mul(table[i - 1], step);
	*next = urnic_gf2_mul(table[255], step);
}

/* Tables of x^(8 * i) and x^(2048 * i) for x (shift) or x^-1 (unshift). */
static void build_byte_shifts(uint32_t x, uint32_t *lo, uint32_t *hi)
{
	uint32_t x8 = URNIC_GF2_ONE, x2048, unused;

	for (int i = 0; i < 8; i++)
		x8 = urnic_gf2_mul(x8, x);
	build_powers(lo, x8, &x2048);
	build_powers(hi, x2048, &unused);
}

/*
 * Gaussian elimination on the 16 images crc0_id(1 << i): each reduced vector gets a pivot bit no
 * other has, so for a residual in the image the pivot bits spell out its coordinates.
 */
static void build_id_inverse(void)
{
	uint32_t vec[16];
	uint16_t ids[16];
	uint32_t pivot[16];

	for (int i = 0; i < 16; i++) {
		vec[i] = crc0_id((uint16_t)(1u << i));
		ids[i] = (uint16_t)(1u << i);
	}
	for (int i = 0; i < 16; i++) {
		pivot[i] = vec[i] & -vec[i]; /* nonzero: crc0_id is injective */
		for (int j = 0; j < 16; j++)
			if (j != i && (vec[j] & pivot[i])) {
				vec[j] ^= vec[i];
				ids[j] ^= ids[i];
			}
	}
	for (int byte = 0; byte < 4; byte++)
		for (unsigned v = 0; v < 256; v++) {
			uint32_t r = (uint32_t)v << (8 * byte);
			uint16_t id = 0;

			for (int i = 0; i < 16; i++)
				if (r & pivot[i])
					id ^= ids[i];
			id_of_residual[byte][v] = id;
		}
}

static void build_tables(void)
{
	build_byte_shifts(GF2_X_INV, unshift_lo, unshift_hi);
	build_byte_shifts(URNIC_GF2_ONE >> 1 /* the polynomial x */, shift_lo, shift_hi);
	build_id_inverse();
	/* the flags field follows the ID: its crc0 is crc0_id's, un-shifted by those 2 bytes */
	df_clear_delta = urnic_gf2_mul(crc0_id(IP_DF), unshift_lo[2]);
}

/* The masked LRH, IPv4 and UDP headers for a packet whose BTH-to-ICRC part is ib_len bytes. */
static void build_pseudo_headers(uint8_t *h, const struct urnic_ip4_flow *flow, uint16_t ip_id,
				 uint16_t ip_frag, size_t ib_len)
{
	uint8_t *ip = h + 8, *udp = ip + IP_HDR_LEN;

	for (int i = 0; i < 8; i++)
		h[i] = 0xff;
	ip[0] = 0x45;
	ip[1] = 0xff; /* TOS */
	urnic_put16(ip + 2, (uint16_t)(IP_HDR_LEN + UDP_HDR_LEN + ib_len));
	urnic_put16(ip + 4, ip_id);
	urnic_put16(ip + 6, ip_frag);
	ip[8] = 0xff;		/* TTL */
	ip[9] = 17;		/* UDP */
	ip[10] = ip[11] = 0xff; /* header checksum */
	for (int i = 0; i < 4; i++) {
		ip[12 + i] = ((const uint8_t *)&flow->saddr)[i];
		ip[16 + i] = ((const uint8_t *)&flow->daddr)[i];
	}
	urnic_put16(udp, flow->sport);
	urnic_put16(udp + 2, flow->dport);
	urnic_put16(udp + 4, (uint16_t)(UDP_HDR_LEN + ib_len));
	udp[6] = udp[7] = 0xff; /* checksum */
}

/* The ICRC value (final xor applied) over len bytes of iov, with the BTH's byte 4 masked.
 * The packet's first bytes (BTH and RETH, when the first iovec holds them) join the
 * pseudo-headers in one buffer: one CRC call over 48-64 bytes instead of five short ones, most of
 * them a byte at a time (a quarter of the sender's ICRC time at 4 KiB packets). */
static uint32_t icrc_value(const struct urnic_ip4_flow *flow, uint16_t ip_id, uint16_t ip_frag,
			   const struct iovec *iov, int iovcnt, size_t len)
{
	uint8_t pre[PSEUDO_LEN + PREFIX_PKT_MAX];
	size_t joined = iovcnt > 0 ? iov[0].iov_len : 0;
	size_t off = 0; /* bytes of the packet consumed so far */
	uint32_t crc;

	pthread_once(&tables_once, build_tables);
	build_pseudo_headers(pre, flow, ip_id, ip_frag, len + URNIC_ICRC_LEN);
	if (joined > len)
		joined = len;
	if (joined > PREFIX_PKT_MAX)
		joined = PREFIX_PKT_MAX;
	if (joined <= 4)
		joined = 0; /* BTH byte 4 is not in it: the loop below masks it */
	if (joined) {
		memcpy(pre + PSEUDO_LEN, iov[0].iov_base, joined);
		pre[PSEUDO_LEN + 4] = 0xff;
	}
	crc = urnic_crc32_update(0xffffffffu, pre, PSEUDO_LEN + joined);
	off = joined;
	for (int i = 0; i < iovcnt && off < len; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t skip = i == 0 ? joined : 0;
		size_t n = iov[i].iov_len - skip < len - off ? iov[i].iov_len - skip : len - off;

		p += skip;
		if (off <= 4 && off + n > 4) { /* this segment holds BTH byte 4 */
			static const uint8_t masked = 0xff;
			size_t before = 4 - off;

			crc = urnic_crc32_update(crc, p, before);
			crc = urnic_crc32_update(crc, &masked, 1);
			crc = urnic_crc32_update(crc, p + before + 1, n - before - 1);
		} else {
			crc = urnic_crc32_update(crc, p, n);
		}
		off += n;
	}
	return ~crc;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void urnic_icrc_compute_ipid(const struct urnic_ip4_flow *flow, uint16_t ip_id, uint16_t ip_frag,
			     const struct iovec *iov, int iovcnt, size_t len, uint8_t icrc[4])
{
	put_le32(icrc, icrc_value(flow, ip_id, ip_frag, iov, iovcnt, len));
}

void urnic_icrc_compute(const struct urnic_ip4_flow *flow, const struct iovec *iov, int iovcnt,
			size_t len, uint8_t icrc[4])
{
	urnic_icrc_compute_ipid(flow, 0, IP_DF, iov, iovcnt, len, icrc);
}

/* Bytes of the CRC's input after the IP ID field, for a packet of len bytes BTH through ICRC. */
static size_t bytes_after_id(size_t len)
{
	return PSEUDO_LEN - IP_ID_OFFSET - 2 + (len - URNIC_ICRC_LEN);
}

/* What changing the ID by the bits of delta does to the ICRC: crc0 of the ID bytes, shifted. */
static uint32_t id_residual(uint16_t delta, size_t after_id)
{
	pthread_once(&tables_once, build_tables);
	return urnic_gf2_mul(urnic_gf2_mul(crc0_id(delta), shift_lo[after_id & 0xff]), shift_hi[after_id >> 8]);
}

void urnic_icrc_move_ip_id(uint8_t icrc[4], size_t len, uint16_t from, uint16_t to)
{
	if (from == to || len < URNIC_BTH_LEN + URNIC_ICRC_LEN)
		return;
	put_le32(icrc, urnic_get_le32(icrc) ^ id_residual(from ^ to, bytes_after_id(len)));
}

static bool id_near(uint16_t id, uint16_t hint)
{
	return (uint16_t)(id - hint) <= ID_AHEAD_MAX || (uint16_t)(hint - id) <= ID_BEHIND_MAX;
}

/* hint 0: nothing predicted yet */
static bool id_in_window(uint16_t id, uint16_t hint)
{
	return hint == 0 || id_near(id, hint);
}

/* The ID whose crc0 is the un-shifted residual r, or -1 if r is no ID's. */
static int id_of(uint32_t r)
{
	uint16_t id = id_of_residual[0][r & 0xff] ^ id_of_residual[1][(r >> 8) & 0xff] ^
		      id_of_residual[2][(r >> 16) & 0xff] ^ id_of_residual[3][r >> 24];

	return crc0_id(id) == r ? id : -1;
}

/* The ID (DF set, or clear: *df false) a residual is the ICRC difference of, or -1. residual:
 * received ICRC xor the one computed with ID 0 and DF; after_id: bytes past the ID. */
static int id_of_any(uint32_t residual, size_t after_id, bool *df)
{
	uint32_t r =
	    urnic_gf2_mul(urnic_gf2_mul(residual, unshift_lo[after_id & 0xff]), unshift_hi[after_id >> 8]);
	int id = id_of(r);

	*df = id >= 0;
	return id >= 0 ? id : id_of(r ^ df_clear_delta);
}

static bool recover_ip_id(uint32_t residual, size_t after_id, uint16_t *id_hint)
{
	bool df;
	int id = id_of_any(residual, after_id, &df);

	if (id < 0 || !id_in_window((uint16_t)id, *id_hint))
		return false;
	/* move the prediction forward only: a late packet must not drag the window back */
	if (id && (*id_hint == 0 || (uint16_t)(id - *id_hint) <= ID_AHEAD_MAX))
		*id_hint = (uint16_t)id;
	return true;
}

bool urnic_icrc_check(const struct urnic_ip4_flow *flow, const uint8_t *pkt, size_t len,
		      uint16_t *id_hint)
{
	return urnic_icrc_check_seg(flow, pkt, len, 0, id_hint);
}

/* A received packet's residual (its ICRC xor the one computed for ID 0 and DF), or false if its
 * length is no packet's. */
static bool residual_of(const struct urnic_ip4_flow *flow, const uint8_t *pkt, size_t len,
			uint32_t *residual)
{
	if (len < URNIC_BTH_LEN + URNIC_ICRC_LEN || len > IP_MAX_LEN - IP_HDR_LEN - UDP_HDR_LEN)
		return false;
	size_t body = len - URNIC_ICRC_LEN;
	struct iovec iov = {.iov_base = (void *)pkt, .iov_len = body};

	*residual = icrc_value(flow, 0, IP_DF, &iov, 1, body) ^ urnic_get_le32(pkt + body);
	return true;
}

/* Whether a residual is ID 0's, segment seg's, or (with id_hint) an ID's in the window. */
static bool residual_ok(uint32_t residual, size_t len, uint16_t seg, uint16_t *id_hint)
{
	if (residual == 0)
		return true;
	if (seg && residual == id_residual(seg, bytes_after_id(len)))
		return true;
	return id_hint && recover_ip_id(residual, bytes_after_id(len), id_hint);
}

bool urnic_icrc_check_seg(const struct urnic_ip4_flow *flow, const uint8_t *pkt, size_t len,
			  uint16_t seg, uint16_t *id_hint)
{
	uint32_t residual;

	return residual_of(flow, pkt, len, &residual) && residual_ok(residual, len, seg, id_hint);
}

/* A FIXED peer's recovered ID: one of the fixed ones (the highest seen is the hint), or one
 * just past the hint, from a counter that started among them and now counts on past them. */
static bool fixed_id_fits(struct urnic_ip_id_track *t, uint16_t id, bool df)
{
	if (!df)
		return false;
	if (id < URNIC_IP_ID_FIXED_MAX) {
		if (id > t->hint)
			t->hint = id;
		return true;
	}
	if ((uint16_t)(id - t->hint) > URNIC_IP_ID_RESYNC)
		return false;
	t->kind = URNIC_IP_IDS_COUNTING;
	t->hint = id;
	return true;
}

/* Whether a tracked peer's recovered ID is one its kind may stamp. An unknown peer's first
 * packet, when not ID 0, makes it COUNTING, even at a low ID: rxe's counter once started at 30,
 * went on to 39, then jumped to 111, 224 and 436 in four sendings of one packet (an interop run),
 * which a FIXED peer's small steps would have dropped. */
static bool id_fits(struct urnic_ip_id_track *t, uint16_t id, bool df)
{
	switch (t->kind) {
	case URNIC_IP_IDS_UNKNOWN:
		t->kind = URNIC_IP_IDS_COUNTING;
		t->hint = id;
		return true;
	case URNIC_IP_IDS_FIXED:
		return fixed_id_fits(t, id, df);
	default:
		if (!id_near(id, t->hint))
			return false;
		/* forward only: a late packet must not drag the window back */
		if ((uint16_t)(id - t->hint) <= ID_AHEAD_MAX)
			t->hint = id;
		return true;
	}
}

/* An intact packet's ID outside what the peer's kind accepts: taken, and the peer COUNTING
 * there, when the last such packet's ID was at most URNIC_IP_ID_RESYNC before it; for a FIXED
 * peer, at most ID_AHEAD_MAX. A counter that started at 0 steps further than 64 when it jumps:
 * rxe sent one packet four times as IDs 111, 224, 436 and 700 (an interop run). */
static bool id_resync(struct urnic_ip_id_track *t, uint16_t id)
{
	uint16_t reach = t->kind == URNIC_IP_IDS_FIXED ? ID_AHEAD_MAX : URNIC_IP_ID_RESYNC;

	if (t->jumped && (uint16_t)(id - t->jump - 1) < reach) {
		t->kind = URNIC_IP_IDS_COUNTING;
		t->hint = id;
		t->jumped = false;
		return true;
	}
	t->jump = id;
	t->jumped = true;
	return false;
}

bool urnic_icrc_check_track(const struct urnic_ip4_flow *flow, const uint8_t *pkt, size_t len,
			    uint16_t seg, struct urnic_ip_id_track *t)
{
	uint32_t residual;

	if (!residual_of(flow, pkt, len, &residual))
		return false;
	size_t after = bytes_after_id(len);

	if (residual == 0 || (seg && residual == id_residual(seg, after))) {
		if (t->kind == URNIC_IP_IDS_UNKNOWN)
			t->kind = URNIC_IP_IDS_FIXED;
		t->jumped = false; /* a jump stands when the next packet confirms it */
		return true;
	}
	bool df;
	int id = id_of_any(residual, after, &df);

	if (id < 0)
		return false; /* corrupted for every ID */
	if (id_fits(t, (uint16_t)id, df)) {
		t->jumped = false;
		return true;
	}
	return id_resync(t, (uint16_t)id);
}
