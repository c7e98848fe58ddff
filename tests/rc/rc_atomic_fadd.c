/* rc_atomic_fadd: FETCH_AND_ADD returns the original 64-bit value into the local buffer and
 * leaves original + add (mod 2^64) at the remote address, carries and wrap included. */
#include "rc_harness.h"

#include <string.h>

#define AOFF 64 /* remote counter: 8-byte aligned */
#define LOFF 128 /* local result */

static const struct {
	uint64_t initial, add;
} cases[] = {
	{0, 1},
	{41, 0},
	{0x00000000ffffffffull, 1},          /* carry into the high word */
	{0xffffffffffffffffull, 2},          /* wraps to 1 */
	{0x8000000000000000ull, 0x8000000000000000ull},
	{0x0123456789abcdefull, 0xfedcba9876543210ull},
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

/* Atomics act on 64-bit words in the responder's native byte order (as rxe does). */
static uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static int server(struct rc *rc)
{
	for (int i = 0; i < NCASES; i++) {
		rc_step(rc, "case %d: counter %#llx", i, (unsigned long long)cases[i].initial);
		memset(rc->buf, RC_CANARY, 256);
		memcpy(rc->buf + AOFF, &cases[i].initial, 8);
		rc_sync(rc);
		rc_sync(rc);
		uint64_t got = load64(rc->buf + AOFF), want = cases[i].initial + cases[i].add;
		RC_CHECK(rc, got == want, "remote value %#llx, expected %#llx", (unsigned long long)got,
			 (unsigned long long)want);
		rc_check_const(rc, rc->buf, AOFF, RC_CANARY, "bytes before the counter");
		rc_check_const(rc, rc->buf + AOFF + 8, 256 - AOFF - 8, RC_CANARY,
			       "bytes after the counter");
	}
	return RC_PASS;
}

static int client(struct rc *rc)
{
	for (int i = 0; i < NCASES; i++) {
		struct rc_wr w;

		rc_step(rc, "case %d: fetch-and-add %#llx", i, (unsigned long long)cases[i].add);
		memset(rc->buf, RC_CANARY, LOFF + 16);
		rc_wr(rc, &w, IBV_WR_ATOMIC_FETCH_AND_ADD, 0x100 + i, LOFF, 8, AOFF);
		w.wr.wr.atomic.compare_add = cases[i].add;
		rc_sync(rc);
		rc_post_send(rc, 0, &w.wr);
		rc_wait(rc, rc->scq, 0x100 + i, IBV_WC_FETCH_ADD, NULL);
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
	struct rc_opts o = rc_defaults("rc_atomic_fadd");

	o.buf_size = RC_MIB;
	return rc_run(&o, server, client);
}
