/* rc_atomic_cas: COMPARE_AND_SWAP always returns the original 64-bit value; it stores the swap
 * value only when all 64 bits match the compare value. */
#include "rc_harness.h"

#include <string.h>

#define AOFF 64
#define LOFF 128

static const struct {
	uint64_t initial, compare, swap;
	bool match;
} cases[] = {
	{0, 0, 0x1111111111111111ull, true},
	{0x0123456789abcdefull, 0x0123456789abcdefull, 0xfedcba9876543210ull, true},
	{0x0123456789abcdefull, 0x0123456789abcdeeull, 0xdeadbeefdeadbeefull, false}, /* low bit */
	{0x0123456789abcdefull, 0x8123456789abcdefull, 0xdeadbeefdeadbeefull, false}, /* high bit */
	{0xffffffff00000000ull, 0x00000000ffffffffull, 1, false},
	{0xffffffffffffffffull, 0xffffffffffffffffull, 0, true},
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

static uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static int server(struct rc *rc)
{
	for (int i = 0; i < NCASES; i++) {
		rc_step(rc, "case %d (%s)", i, cases[i].match ? "matching" : "not matching");
		memset(rc->buf, RC_CANARY, 256);
		memcpy(rc->buf + AOFF, &cases[i].initial, 8);
		rc_sync(rc);
		rc_sync(rc);
		uint64_t got = load64(rc->buf + AOFF);
		uint64_t want = cases[i].match ? cases[i].swap : cases[i].initial;
		RC_CHECK(rc, got == want, "remote value %#llx, expected %#llx", (unsigned long long)got,
			 (unsigned long long)want);
		rc_check_const(rc, rc->buf + AOFF + 8, 8, RC_CANARY, "bytes after the word");
	}
	return RC_PASS;
}

static int client(struct rc *rc)
{
	for (int i = 0; i < NCASES; i++) {
		struct rc_wr w;

		rc_step(rc, "case %d (%s)", i, cases[i].match ? "matching" : "not matching");
		memset(rc->buf, RC_CANARY, LOFF + 16);
		rc_wr(rc, &w, IBV_WR_ATOMIC_CMP_AND_SWP, 0x100 + i, LOFF, 8, AOFF);
		w.wr.wr.atomic.compare_add = cases[i].compare;
		w.wr.wr.atomic.swap = cases[i].swap;
		rc_sync(rc);
		rc_post_send(rc, 0, &w.wr);
		rc_wait(rc, rc->scq, 0x100 + i, IBV_WC_COMP_SWAP, NULL);
		uint64_t orig = load64(rc->buf + LOFF);
		RC_CHECK(rc, orig == cases[i].initial, "returned %#llx, expected the original %#llx",
			 (unsigned long long)orig, (unsigned long long)cases[i].initial);
		rc_check_const(rc, rc->buf + LOFF + 8, 8, RC_CANARY, "bytes after the result");
		rc_sync(rc);
	}
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = rc_defaults("rc_atomic_cas");

	o.buf_size = RC_MIB;
	return rc_run(&o, server, client);
}
