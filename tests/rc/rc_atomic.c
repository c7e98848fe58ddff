/* rc_atomic: FETCH_AND_ADD (--fadd) and COMPARE_AND_SWAP (--cas) on a remote 64-bit word
 * return its original value into the local buffer and leave the right value behind: the sum
 * mod 2^64 (carries and wrap included); the swap value only when all 64 bits match. */
#include "rc_harness.h"

#include <string.h>

#define AOFF 64	 /* remote word: 8-byte aligned */
#define LOFF 128 /* local result */

struct acase {
	uint64_t initial, operand, swap, after;
};

static const struct acase fadd[] = {
    {0, 1, 0, 1},
    {41, 0, 0, 41},
    {0x00000000ffffffffull, 1, 0, 0x0000000100000000ull}, /* carry into the high word */
    {0xffffffffffffffffull, 2, 0, 1},			  /* wraps */
    {0x8000000000000000ull, 0x8000000000000000ull, 0, 0},
    {0x0123456789abcdefull, 0xfedcba9876543210ull, 0, 0xffffffffffffffffull},
};

static const struct acase cas[] = {
    {0, 0, 0x1111111111111111ull, 0x1111111111111111ull},
    {0x0123456789abcdefull, 0x0123456789abcdefull, 0xfedcba9876543210ull, 0xfedcba9876543210ull},
    {0x0123456789abcdefull, 0x0123456789abcdeeull, 7, 0x0123456789abcdefull}, /* low bit */
    {0x0123456789abcdefull, 0x8123456789abcdefull, 7, 0x0123456789abcdefull}, /* high bit */
    {0xffffffff00000000ull, 0x00000000ffffffffull, 1, 0xffffffff00000000ull},
    {0xffffffffffffffffull, 0xffffffffffffffffull, 0, 0},
};

static bool is_cas;
static const struct acase *cases;
static int ncases;

/* Atomics act on 64-bit words in the responder's native byte order, as rxe does. */
static uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static int server(struct rc *rc)
{
	for (int i = 0; i < ncases; i++) {
		rc_step(rc, "case %d: word %#llx", i, (unsigned long long)cases[i].initial);
		memset(rc->buf, RC_CANARY, 256);
		memcpy(rc->buf + AOFF, &cases[i].initial, 8);
		rc_sync(rc);
		rc_sync(rc);
		uint64_t got = load64(rc->buf + AOFF);
		RC_CHECK(rc, got == cases[i].after, "remote value %#llx, expected %#llx",
			 (unsigned long long)got, (unsigned long long)cases[i].after);
		rc_check_const(rc, rc->buf, AOFF, RC_CANARY, "bytes before the word");
		rc_check_const(rc, rc->buf + AOFF + 8, 256 - AOFF - 8, RC_CANARY,
			       "bytes after the word");
	}
	return RC_PASS;
}

static int client(struct rc *rc)
{
	for (int i = 0; i < ncases; i++) {
		struct rc_wr w;

		rc_step(rc, "case %d: %s %#llx", i, is_cas ? "compare" : "add",
			(unsigned long long)cases[i].operand);
		memset(rc->buf, RC_CANARY, LOFF + 16);
		rc_wr(rc, &w, is_cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD,
		      0x100 + i, LOFF, 8, AOFF);
		w.wr.wr.atomic.compare_add = cases[i].operand;
		w.wr.wr.atomic.swap = cases[i].swap;
		rc_sync(rc);
		rc_post_send(rc, 0, &w.wr);
		rc_wait(rc, rc->scq, 0x100 + i, is_cas ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD, NULL);
		uint64_t orig = load64(rc->buf + LOFF);
		RC_CHECK(rc, orig == cases[i].initial,
			 "returned %#llx, expected the original %#llx", (unsigned long long)orig,
			 (unsigned long long)cases[i].initial);
		rc_check_const(rc, rc->buf + LOFF + 8, 8, RC_CANARY, "bytes after the result");
		rc_sync(rc);
	}
	return RC_PASS;
}

int main(int argc, char **argv)
{
	is_cas = argc > 1 && strcmp(argv[1], "--cas") == 0;
	cases = is_cas ? cas : fadd;
	ncases =
	    is_cas ? (int)(sizeof(cas) / sizeof(cas[0])) : (int)(sizeof(fadd) / sizeof(fadd[0]));
	struct rc_opts o = rc_defaults(is_cas ? "rc_atomic_cas" : "rc_atomic_fadd");

	o.buf_size = RC_MIB;
	return rc_run(&o, server, client);
}
