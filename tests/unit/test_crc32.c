/* test_crc32 - the carry-less-multiplication CRC-32 equals the table one and a bit-at-a-time
 * reference, at every length 0..1100 and every starting offset 0..15, from random registers;
 * the check value of "123456789" is the standard 0xcbf43926. Prints both speeds at 4 KiB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/wire.h"

#define MAX_LEN 1100
#define SPEED_LEN 4096
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

static void check_lengths(const uint8_t *buf)
{
	for (size_t off = 0; off < 16; off++)
		for (size_t len = 0; len <= MAX_LEN; len++) {
			uint32_t init = rnd();
			uint32_t ref = crc_bitwise(init, buf + off, len);
			uint32_t tab = urnic_crc32_update_with(URNIC_CRC32_TABLE, init, buf + off, len);
			uint32_t clm = urnic_crc32_update_with(URNIC_CRC32_CLMUL, init, buf + off, len);

			if (tab != ref || clm != ref) {
				printf("FAIL offset %zu length %zu: bitwise %08x table %08x clmul %08x\n",
				       off, len, ref, tab, clm);
				if (++failures > 10)
					return;
			}
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
	static uint8_t buf[SPEED_LEN + 16];
	const char *check = "123456789";

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rnd();
	if (~urnic_crc32_update(0xffffffffu, check, 9) != 0xcbf43926u) {
		printf("FAIL check value of \"123456789\"\n");
		failures++;
	}
	check_lengths(buf);
	printf("crc32: in use %s; 4 KiB: table %.1f GB/s, clmul %.1f GB/s%s\n",
	       urnic_crc32_impl() == URNIC_CRC32_CLMUL ? "clmul" : "table",
	       gbps(URNIC_CRC32_TABLE, buf), gbps(URNIC_CRC32_CLMUL, buf),
	       urnic_crc32_impl() == URNIC_CRC32_CLMUL ? "" : " (tables forced or no PCLMULQDQ)");
	if (failures) {
		printf("test_crc32: %d failures\n", failures);
		return 1;
	}
	printf("test_crc32: lengths 0..%d at 16 offsets agree with the bitwise definition\n",
	       MAX_LEN);
	return 0;
}
