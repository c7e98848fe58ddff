/* test_crc32 - both carry-less-multiplication CRC-32s (128-bit and 512-bit registers) equal the
 * table one and a bit-at-a-time reference, at every length 0..1100 and every starting offset
 * 0..15, and at lengths around 4 KiB and 9 KiB, from random registers; the check value of
 * "123456789" is the standard 0xcbf43926; urnic_gf2_mul agrees with the definition on 20000
 * products. Prints the three speeds at 4 KiB. An implementation
 * this CPU lacks gives the best one below it, so the comparison stays meaningful anywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/wire.h"

#define MAX_LEN 1100
#define SPEED_LEN 4096
#define LONG_LEN (9000 + 16) /* a jumbo frame's payload, at each offset */
#define SPEED_ROUNDS 20000

static int failures;

static uint64_t rng_state = 0x2545f4914f6cdd1dull; /* fixed seed: the test is deterministic */

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

/* The definition: one bit at a time, reflected polynomial 0xedb88320. */
static uint32_t crc_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int i = 0; i < 8; i++)
			crc = (crc >> 1) ^ (crc & 1 ? 0xedb88320u : 0);
	}
	return crc;
}

static const char *const impl_names[] = {"table", "clmul", "vpclmul"};

static void check_one(const uint8_t *buf, size_t off, size_t len)
{
	uint32_t init = rnd();
	uint32_t ref = crc_bitwise(init, buf + off, len);

	for (enum urnic_crc32_impl i = URNIC_CRC32_TABLE; i <= URNIC_CRC32_VPCLMUL; i++) {
		uint32_t got = urnic_crc32_update_with(i, init, buf + off, len);

		if (got != ref && failures++ < 10)
			printf("FAIL %s offset %zu length %zu: bitwise %08x got %08x\n",
			       impl_names[i], off, len, ref, got);
	}
}

static void check_lengths(const uint8_t *buf)
{
	for (size_t off = 0; off < 16; off++) {
		for (size_t len = 0; len <= MAX_LEN; len++)
			check_one(buf, off, len);
		for (size_t len = 4096 - 300; len <= 4096 + 300; len += 13)
			check_one(buf, off, len);
		for (size_t len = LONG_LEN - 16 - 280; len <= LONG_LEN - 16; len += 11)
			check_one(buf, off, len);
	}
}

/* a * b mod P by the definition, both reflected */
static uint32_t mul_bitwise(uint32_t a, uint32_t b)
{
	uint32_t r = 0;

	for (int i = 31; i >= 0; i--) { /* bit i of a is the coefficient of x^(31 - i) */
		uint32_t t = b;

		for (int k = 0; k < 31 - i; k++) /* t = b x^(31 - i) */
			t = (t >> 1) ^ (t & 1 ? 0xedb88320u : 0);
		if (a >> i & 1)
			r ^= t;
	}
	return r;
}

static void check_mul(void)
{
	for (int i = 0; i < 20000; i++) {
		uint32_t a = i < 32 ? 1u << i : rnd(), b = rnd();
		uint32_t ref = mul_bitwise(a, b), got = urnic_gf2_mul(a, b);

		if (got != ref && failures++ < 10)
			printf("FAIL gf2_mul %08x * %08x: bitwise %08x got %08x\n", a, b, ref, got);
	}
}

static double gbps(enum urnic_crc32_impl impl, const uint8_t *buf)
{
	struct timespec a, b;
	uint32_t sink = 0;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < SPEED_ROUNDS; i++)
		sink ^= urnic_crc32_update_with(impl, sink, buf, SPEED_LEN);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (sink == 0x12345678u)
		printf("(unlikely register)\n");
	return (double)SPEED_LEN * SPEED_ROUNDS /
	       ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec));
}

int main(void)
{
	static uint8_t buf[LONG_LEN];
	const char *check = "123456789";

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rnd();
	if (~urnic_crc32_update(0xffffffffu, check, 9) != 0xcbf43926u) {
		printf("FAIL check value of \"123456789\"\n");
		failures++;
	}
	check_lengths(buf);
	check_mul();
	printf("crc32: in use %s; 4 KiB: table %.1f GB/s, clmul %.1f GB/s, vpclmul %.1f GB/s "
	       "(one this CPU lacks runs the best below it)\n",
	       impl_names[urnic_crc32_impl()], gbps(URNIC_CRC32_TABLE, buf),
	       gbps(URNIC_CRC32_CLMUL, buf), gbps(URNIC_CRC32_VPCLMUL, buf));
	if (failures) {
		printf("test_crc32: %d failures\n", failures);
		return 1;
	}
	printf("test_crc32: lengths 0..%d, around 4 KiB and up to %d, at 16 offsets, and the "
	       "products agree with the bitwise definition\n",
	       MAX_LEN, LONG_LEN - 16);
	return 0;
}
