/* test_icrc_id0 - urnic's own packets (IP ID 0) verify; a nonzero ID verifies only near the hint;
 * a GSO segment's ICRC moved to its ID is the one computed for that ID, and verifies exactly. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wire/wire.h"
#include "expect.h"

#define MAX_PKT 4096
#define IP_DF 0x4000


static uint64_t rng_state = 0x9e3779b97f4a7c15ull; /* fixed seed: the test is deterministic */

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static void init_flow(struct urnic_ip4_flow *f)
{
	*f = (struct urnic_ip4_flow){.saddr = htonl(0x0a000001),
				     .daddr = htonl(0x0a000002),
				     .sport = 49152,
				     .dport = URNIC_ROCEV2_PORT};
}

/* A random nonzero ID none of whose test hints in check_window is 0 ("unknown peer"). */
static uint16_t random_id(void)
{
	static const uint16_t offsets[] = {1,	 (uint16_t)-10, 1024,
					   1025, (uint16_t)-64, (uint16_t)-65};

	for (;;) {
		uint16_t id = (uint16_t)rnd();
		bool ok = id != 0 && id != 0x8000;

		for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++)
			ok = ok && (uint16_t)(id - offsets[i]) != 0;
		if (ok)
			return id;
	}
}

/* A packet of len bytes before the ICRC: a BTH, then random bytes. */
static void fill_packet(uint8_t *pkt, size_t len)
{
	urnic_bth_build(pkt, &(struct urnic_bth_fields){.opcode = URNIC_OP_SEND_ONLY,
							.ackreq = true,
							.pkey = 0xffff,
							.dqpn = rnd() & 0xffffff,
							.psn = rnd() & 0xffffff});
	for (size_t i = URNIC_BTH_LEN; i < len; i++)
		pkt[i] = (uint8_t)rnd();
}

/* The ICRC must not depend on how the packet is cut into iovecs (BTH byte 4 included). */
static void check_iov_splits(const struct urnic_ip4_flow *f)
{
	static uint8_t pkt[MAX_PKT];
	uint8_t whole[4], split[4];

	for (int round = 0; round < 200; round++) {
		size_t len = URNIC_BTH_LEN + rnd() % (MAX_PKT - URNIC_BTH_LEN + 1);
		struct iovec one = {pkt, len}, iov[8];
		size_t off = 0;
		int n = 0;

		fill_packet(pkt, len);
		urnic_icrc_compute(f, &one, 1, len, whole);
		while (n < 7 && off < len) {
			size_t cut =
			    rnd() % (round < 20 ? 6 : 64); /* early rounds cut inside the BTH */

			iov[n++] = (struct iovec){pkt + off, cut < len - off ? cut : len - off};
			off += iov[n - 1].iov_len;
		}
		iov[n++] = (struct iovec){pkt + off, len - off};
		urnic_icrc_compute(f, iov, n, len, split);
		EXPECT(!memcmp(whole, split, 4), "len %zu: ICRC differs when split in %d", len, n);
	}
}

/* ID 0 with DF is urnic's own: accepted whatever the hint, which stays untouched. */
static void check_id0(const struct urnic_ip4_flow *f, uint8_t *pkt, size_t len)
{
	struct iovec iov = {pkt, len};
	uint8_t other[4];
	uint16_t hints[] = {0, 1, 0x1234, 0xffff};

	urnic_icrc_compute(f, &iov, 1, len, pkt + len);
	urnic_icrc_compute_ipid(f, 0, IP_DF, &iov, 1, len, other);
	EXPECT(!memcmp(pkt + len, other, 4), "compute is compute_ipid with ID 0 and DF");
	for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
		uint16_t h = hints[i];

		EXPECT(urnic_icrc_check(f, pkt, len + 4, &h) && h == hints[i],
		       "ID 0, len %zu: rejected or hint moved (hint %#x -> %#x)", len, hints[i], h);
	}
	EXPECT(urnic_icrc_check(f, pkt, len + 4, NULL), "ID 0 rejected with no hint");
	pkt[len / 2] ^= 0x10;
	EXPECT(!urnic_icrc_check(f, pkt, len + 4, NULL), "ID 0: corrupted packet accepted");
	pkt[len / 2] ^= 0x10;
}

/* GSO: moving an ID-0 ICRC to ID k gives what computing with ID k gives; segment k of a GRO
 * receive verifies with no hint, segment k + 1 does not, and a flipped bit is still caught. */
static void check_gso_segment(const struct urnic_ip4_flow *f, uint8_t *pkt, size_t len)
{
	struct iovec iov = {pkt, len};
	uint8_t direct[4];

	for (uint16_t k = 1; k <= 64; k++) {
		urnic_icrc_compute(f, &iov, 1, len, pkt + len);
		urnic_icrc_move_ip_id(pkt + len, len + 4, 0, k);
		urnic_icrc_compute_ipid(f, k, IP_DF, &iov, 1, len, direct);
		EXPECT(!memcmp(pkt + len, direct, 4), "len %zu: ICRC moved to ID %u differs", len, k);
		EXPECT(urnic_icrc_check_seg(f, pkt, len + 4, k, NULL), "len %zu: segment %u rejected",
		       len, k);
		EXPECT(!urnic_icrc_check_seg(f, pkt, len + 4, (uint16_t)(k + 1), NULL),
		       "len %zu: ID %u accepted as segment %u", len, k, k + 1);
		EXPECT(!urnic_icrc_check(f, pkt, len + 4, NULL), "len %zu: ID %u taken for ID 0", len,
		       k);
		pkt[URNIC_BTH_LEN + (len - URNIC_BTH_LEN) / 2] ^= 0x01;
		EXPECT(!urnic_icrc_check_seg(f, pkt, len + 4, k, NULL),
		       "len %zu: corrupted segment %u accepted", len, k);
		pkt[URNIC_BTH_LEN + (len - URNIC_BTH_LEN) / 2] ^= 0x01;
		urnic_icrc_move_ip_id(pkt + len, len + 4, k, 0);
		EXPECT(urnic_icrc_check(f, pkt, len + 4, NULL), "len %zu: moving back from %u", len, k);
	}
}

static bool check_with_hint(const struct urnic_ip4_flow *f, const uint8_t *pkt, size_t len,
			    uint16_t hint)
{
	return urnic_icrc_check(f, pkt, len, &hint);
}

/* An ID other than 0 is recovered, and accepted only from hint - 64 to hint + 1024. */
static void check_window(const struct urnic_ip4_flow *f, uint8_t *pkt, size_t len, uint16_t id,
			 uint16_t frag)
{
	struct iovec iov = {pkt, len};
	uint16_t h;

	urnic_icrc_compute_ipid(f, id, frag, &iov, 1, len, pkt + len);
	len += 4;
	h = 0;
	EXPECT(urnic_icrc_check(f, pkt, len, &h) && h == id,
	       "ID %#x frag %#x: unknown peer should learn it (hint now %#x)", id, frag, h);
	h = (uint16_t)(id - 1);
	EXPECT(urnic_icrc_check(f, pkt, len, &h) && h == id, "ID %#x: next in sequence", id);
	h = (uint16_t)(id + 10);
	EXPECT(urnic_icrc_check(f, pkt, len, &h) && h == (uint16_t)(id + 10),
	       "ID %#x: late packet accepted without moving the hint back (hint %#x)", id, h);
	EXPECT(check_with_hint(f, pkt, len, (uint16_t)(id - 1024)), "ID %#x: hint + 1024", id);
	EXPECT(!check_with_hint(f, pkt, len, (uint16_t)(id - 1025)), "ID %#x: hint + 1025", id);
	EXPECT(check_with_hint(f, pkt, len, (uint16_t)(id + 64)), "ID %#x: hint - 64", id);
	EXPECT(!check_with_hint(f, pkt, len, (uint16_t)(id + 65)), "ID %#x: hint - 65", id);
	EXPECT(!check_with_hint(f, pkt, len, (uint16_t)(id ^ 0x8000)), "ID %#x: far hint", id);
	EXPECT(!urnic_icrc_check(f, pkt, len, NULL), "ID %#x: accepted with no hint", id);
	pkt[len - 5] ^= 0x01;
	EXPECT(!check_with_hint(f, pkt, len, (uint16_t)(id - 1)), "ID %#x: corruption accepted",
	       id);
	pkt[len - 5] ^= 0x01;
}

/* Writes pkt's ICRC (len bytes before it) for IPv4 ID id with DF; returns the packet's length. */
static size_t with_id(const struct urnic_ip4_flow *f, uint8_t *pkt, size_t len, uint16_t id)
{
	struct iovec iov = {pkt, len};

	urnic_icrc_compute_ipid(f, id, IP_DF, &iov, 1, len, pkt + len);
	return len + 4;
}

/* A peer's IDs that jump out of the window: the first packet there is dropped, the next one (up
 * to URNIC_IP_ID_RESYNC IDs on) is taken and moves the window; two jumps that disagree, and a
 * corrupted packet, move nothing. */
static void check_resync(const struct urnic_ip4_flow *f, uint8_t *pkt, size_t len)
{
	struct urnic_ip_id_track t = {.hint = 1000, .kind = URNIC_IP_IDS_COUNTING};
	uint16_t far = 1000 + 6469;

	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 1001), 0, &t) && t.hint == 1001,
	       "in the window: taken (hint %u)", t.hint);
	EXPECT(!urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, far), 0, &t) && t.hint == 1001,
	       "first packet past a jump of 6469: dropped, hint kept (hint %u)", t.hint);
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, (uint16_t)(far + 3)), 0, &t) &&
		       t.hint == (uint16_t)(far + 3),
	       "second packet past the jump: taken, window moved (hint %u)", t.hint);
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, (uint16_t)(far + 4)), 0, &t),
	       "the next in sequence after the move");
	EXPECT(!urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 30000), 0, &t) &&
		       !urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 30000 + 65), 0, &t) &&
		       !urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 30000 + 65), 0, &t),
	       "jumps more than %u apart, or the same ID again, moved the window", URNIC_IP_ID_RESYNC);
	EXPECT(t.hint == (uint16_t)(far + 4), "hint %u after disagreeing jumps", t.hint);
	size_t n = with_id(f, pkt, len, 50000);

	pkt[n - 5] ^= 0x01;
	EXPECT(!urnic_icrc_check_track(f, pkt, n, 0, &t), "a corrupted packet taken");
	pkt[n - 5] ^= 0x01;
}

/* How many single-bit flips of the packet (len bytes with its ICRC for ID id, DF) pass a check
 * from state t; BTH byte 4 (masked out of the ICRC) is skipped. */
static unsigned flips_passing(const struct urnic_ip4_flow *f, uint8_t *pkt, size_t len,
			      const struct urnic_ip_id_track *t)
{
	unsigned passed = 0;

	for (size_t bit = 0; bit < len * 8; bit++) {
		struct urnic_ip_id_track s = *t;

		if (bit / 8 == 4)
			continue;
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		passed += urnic_icrc_check_track(f, pkt, len, 0, &s);
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	return passed;
}

/* A peer is known by its first packet: ID 0 makes it FIXED, whose packets are then checked at
 * nearly the CRC's strength (no single flipped bit passes); any other ID makes it COUNTING. A
 * FIXED peer's hint never moved, and once every packet from it was checked as from an unknown
 * peer: a 4 KiB packet had single flipped bits that passed. */
static void check_kinds(const struct urnic_ip4_flow *f, uint8_t *pkt)
{
	const size_t len = MAX_PKT; /* a READ response FIRST with 4080 bytes of payload */
	struct urnic_ip_id_track t = {0};
	uint16_t unknown = 0;
	size_t n = with_id(f, pkt, len, 0);

	EXPECT(urnic_icrc_check_track(f, pkt, n, 0, &t) && t.kind == URNIC_IP_IDS_FIXED,
	       "ID 0 first: kind %u, not FIXED", t.kind);
	EXPECT(flips_passing(f, pkt, n, &t) == 0, "FIXED peer: %u single flips of %zu bits passed",
	       flips_passing(f, pkt, n, &t), n * 8);
	unsigned weak = 0;

	for (size_t bit = 0; bit < n * 8; bit++) {
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		unknown = 0;
		weak += bit / 8 != 4 && urnic_icrc_check(f, pkt, n, &unknown);
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	printf("%zu-byte packet: %u single flips pass as from an unknown peer, none from a FIXED "
	       "one\n", n, weak);
	EXPECT(!urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 65), 0, &t) &&
		       t.kind == URNIC_IP_IDS_FIXED,
	       "FIXED, no ID above 0 yet: ID 65 taken, or the kind changed on one packet");
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 63), 0, &t),
	       "FIXED: a GSO segment's ID 63 (no GRO) dropped");
	EXPECT(!urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 200), 0, &t) &&
		       t.kind == URNIC_IP_IDS_FIXED,
	       "FIXED: ID 200 taken, or the kind changed on one packet");
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 202), 0, &t) &&
		       t.kind == URNIC_IP_IDS_COUNTING && t.hint == 202,
	       "FIXED: a second ID just past the first outside it: not COUNTING there (kind %u, "
	       "hint %u)", t.kind, t.hint);
	/* rxe's counter may start among the fixed IDs: it counts on past them without a drop */
	t = (struct urnic_ip_id_track){0};
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 0), 0, &t) &&
		       urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 10), 0, &t) &&
		       urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 74), 0, &t) &&
		       t.kind == URNIC_IP_IDS_COUNTING && t.hint == 74,
	       "IDs 0, 10, 74: not all taken, or not COUNTING at 74 (kind %u, hint %u)", t.kind,
	       t.hint);
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 900), 0, &t),
	       "COUNTING from a low start: ID 900 dropped");
	/* a counter that started at 0 and jumps: one packet dropped, then COUNTING */
	t = (struct urnic_ip_id_track){0};
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 0), 0, &t) &&
		       urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 39), 0, &t) &&
		       !urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 111), 0, &t),
	       "IDs 0, 39, 111: 111 should be the one dropped");
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 224), 0, &t) &&
		       t.kind == URNIC_IP_IDS_COUNTING &&
		       urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 436), 0, &t) &&
		       urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 700), 0, &t),
	       "IDs 224, 436, 700 after a dropped 111: not all taken (kind %u)", t.kind);
	/* a jump stands only if the very next packet confirms it */
	t = (struct urnic_ip_id_track){.hint = 1000, .kind = URNIC_IP_IDS_COUNTING};
	EXPECT(!urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 9000), 0, &t) &&
		       urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 0), 0, &t) &&
		       !urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 9001), 0, &t),
	       "COUNTING: a jump confirmed across an ID-0 packet");

	struct iovec iov = {pkt, len};

	t = (struct urnic_ip_id_track){0};
	urnic_icrc_compute_ipid(f, 5, 0, &iov, 1, len, pkt + len);
	EXPECT(urnic_icrc_check_track(f, pkt, n, 0, &t) && t.kind == URNIC_IP_IDS_COUNTING &&
		       t.hint == 5,
	       "first packet, ID 5 with DF clear: kind %u hint %u, not COUNTING at 5", t.kind,
	       t.hint);
	/* rxe's counter may start low and jump: a first ID of 30 is a counter's */
	t = (struct urnic_ip_id_track){0};
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 30), 0, &t) &&
		       t.kind == URNIC_IP_IDS_COUNTING &&
		       urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 111), 0, &t) &&
		       urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 436), 0, &t),
	       "first packet, ID 30, then 111 and 436: not all taken (kind %u)", t.kind);
	t = (struct urnic_ip_id_track){0};
	urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 0), 0, &t);
	urnic_icrc_compute_ipid(f, 6, 0, &iov, 1, len, pkt + len);
	EXPECT(!urnic_icrc_check_track(f, pkt, n, 0, &t), "FIXED: ID 6 with DF clear taken");
	t = (struct urnic_ip_id_track){0};
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 40000), 0, &t) &&
		       t.kind == URNIC_IP_IDS_COUNTING && t.hint == 40000,
	       "first packet, ID 40000: kind %u hint %u, not COUNTING at 40000", t.kind, t.hint);
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 40001), 0, &t) &&
		       !urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 20000), 0, &t),
	       "COUNTING: the next ID dropped, or a far one taken");
	EXPECT(urnic_icrc_check_track(f, pkt, with_id(f, pkt, len, 0), 0, &t) &&
		       t.kind == URNIC_IP_IDS_COUNTING,
	       "COUNTING: ID 0 dropped or the kind changed");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Throughput is printed, never asserted: it depends on the machine. */
static void measure(const struct urnic_ip4_flow *f)
{
	static uint8_t pkt[MAX_PKT + 4];
	struct iovec iov = {pkt, MAX_PKT};
	unsigned rounds = 0;
	double t0 = now(), t;
	uint16_t h;

	fill_packet(pkt, MAX_PKT);
	do {
		for (int i = 0; i < 1000; i++)
			urnic_icrc_compute(f, &iov, 1, MAX_PKT, pkt + MAX_PKT);
		rounds += 1000;
		t = now() - t0;
	} while (t < 0.2);
	printf("compute: %.0f MB/s (4096-byte packets)\n", rounds * (double)MAX_PKT / t / 1e6);

	urnic_icrc_compute_ipid(f, 0x2000, IP_DF, &iov, 1, MAX_PKT, pkt + MAX_PKT);
	rounds = 0;
	t0 = now();
	do {
		for (int i = 0; i < 1000; i++) {
			h = 0x1fff;
			if (!urnic_icrc_check(f, pkt, MAX_PKT + 4, &h))
				test_failures++;
		}
		rounds += 1000;
		t = now() - t0;
	} while (t < 0.2);
	printf("check with ID recovery: %.0f MB/s, %.0f ns per 4096-byte packet\n",
	       rounds * (double)MAX_PKT / t / 1e6, t / rounds * 1e9);
}

int main(void)
{
	static uint8_t pkt[MAX_PKT + 4];
	static const size_t lens[] = {URNIC_BTH_LEN, 16, 28, 60, 1036, MAX_PKT};
	struct urnic_ip4_flow f, other;
	unsigned ids = 0;

	alarm(20);
	init_flow(&f);
	check_iov_splits(&f);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		fill_packet(pkt, lens[i]);
		check_id0(&f, pkt, lens[i]);
		check_gso_segment(&f, pkt, lens[i]);
		for (int k = 0; k < 50; k++, ids++) {
			check_window(&f, pkt, lens[i], random_id(), k & 1 ? IP_DF : 0);
		}
	}
	fill_packet(pkt, 1036);
	check_resync(&f, pkt, 1036);
	fill_packet(pkt, MAX_PKT);
	check_kinds(&f, pkt);
	/* the flow is covered: another source address does not verify */
	other = f;
	other.saddr ^= htonl(1);
	fill_packet(pkt, 100);
	urnic_icrc_compute(&f, &(struct iovec){pkt, 100}, 1, 100, pkt + 100);
	EXPECT(!check_with_hint(&other, pkt, 104, 0x100), "wrong source address accepted");

	printf("checked ID-0 packets of %zu lengths against any hint, %u random IDs (DF set and "
	       "clear) inside and just outside the window hint-64..hint+1024, iovec splits, GSO segment IDs 1-64\n",
	       sizeof(lens) / sizeof(lens[0]), ids);
	measure(&f);
	printf("%s\n", test_failures ? "FAIL" : "PASS");
	return test_failures ? 1 : 0;
}
