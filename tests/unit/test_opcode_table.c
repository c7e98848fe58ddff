/* test_opcode_table - every known opcode's headers add up, in spec order; unknown opcodes are 0. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wire/wire.h"
#include "expect.h"


/* The opcodes urnic implements: RC 0x00-0x14, 0x16, 0x17; UC 0x20-0x2b; UD 0x64, 0x65. */
static bool expected_known(unsigned op)
{
	return op <= 0x14 || op == 0x16 || op == 0x17 || (op >= 0x20 && op <= 0x2b) || op == 0x64 ||
	       op == 0x65;
}

struct ext {
	uint32_t bit;
	unsigned len;
	const char *name;
};

/* Extension headers in the order IBTA vol. 1 places them after the BTH. */
static const struct ext order[] = {
    {URNIC_M_DETH, URNIC_DETH_LEN, "DETH"},
    {URNIC_M_RETH, URNIC_RETH_LEN, "RETH"},
    {URNIC_M_ATOMICETH, URNIC_ATOMICETH_LEN, "AtomicETH"},
    {URNIC_M_AETH, URNIC_AETH_LEN, "AETH"},
    {URNIC_M_ATOMICACKETH, URNIC_ATOMICACKETH_LEN, "AtomicAckETH"},
    {URNIC_M_IMMDT, URNIC_IMMDT_LEN, "ImmDt"},
    {URNIC_M_IETH, URNIC_IETH_LEN, "IETH"},
};

static unsigned offset_of(const struct urnic_opcode_info *o, uint32_t bit)
{
	switch (bit) {
	case URNIC_M_DETH:
		return o->deth;
	case URNIC_M_RETH:
		return o->reth;
	case URNIC_M_ATOMICETH:
		return o->atomiceth;
	case URNIC_M_AETH:
		return o->aeth;
	case URNIC_M_ATOMICACKETH:
		return o->atomicacketh;
	case URNIC_M_IMMDT:
		return o->immdt;
	default:
		return o->ieth;
	}
}

static int popcount(uint32_t v)
{
	return __builtin_popcount(v);
}

static void check_known(unsigned op, const struct urnic_opcode_info *o)
{
	static const char *const prefix[8] = {"RC_", "UC_", NULL, "UD_"};
	static const uint32_t transport[8] = {URNIC_M_RC, URNIC_M_UC, 0, URNIC_M_UD};
	uint32_t m = o->mask;
	unsigned sum = URNIC_BTH_LEN;

	EXPECT(o->name && prefix[op >> 5] && !strncmp(o->name, prefix[op >> 5], 3),
	       "0x%02x: name %s", op, o->name ? o->name : "(null)");
	EXPECT((m & (URNIC_M_RC | URNIC_M_UC | URNIC_M_UD)) == transport[op >> 5],
	       "0x%02x: transport bits %#x", op, m);
	EXPECT(popcount(m & (URNIC_M_REQ | URNIC_M_RESP)) == 1, "0x%02x: not one of REQ/RESP", op);
	EXPECT(popcount(m & (URNIC_M_SEND | URNIC_M_WRITE | URNIC_M_READ | URNIC_M_ATOMIC)) <= 1,
	       "0x%02x: more than one operation", op);
	EXPECT((m & URNIC_M_MIDDLE) ? !(m & URNIC_M_ONLY) : (m & (URNIC_M_FIRST | URNIC_M_LAST)),
	       "0x%02x: FIRST/MIDDLE/LAST %#x", op, m);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		unsigned off = offset_of(o, order[i].bit);

		if (m & order[i].bit) {
			EXPECT(off == sum, "0x%02x %s: %s at %u, expected %u", op, o->name,
			       order[i].name, off, sum);
			sum += order[i].len;
		} else {
			EXPECT(off == 0, "0x%02x %s: %s absent but offset %u", op, o->name,
			       order[i].name, off);
		}
	}
	EXPECT(o->hdr_len == sum, "0x%02x %s: hdr_len %u, headers add up to %u", op, o->name,
	       o->hdr_len, sum);
	EXPECT(o->hdr_len <= URNIC_MAX_HDR_LEN, "0x%02x: hdr_len %u over max", op, o->hdr_len);
}

/* A few rows spelled out, as the brief and the spec's table 38 list them. */
static void check_samples(void)
{
	const struct urnic_opcode_info *o;

	o = urnic_op(URNIC_OP_RC | URNIC_OP_WRITE_ONLY_IMM);
	EXPECT(o->reth == 12 && o->immdt == 28 && o->hdr_len == 32, "RC_WRITE_ONLY_IMM layout");
	o = urnic_op(URNIC_OP_RC | URNIC_OP_READ_RESP_MIDDLE);
	EXPECT(!(o->mask & URNIC_M_AETH) && o->hdr_len == 12, "READ_RESP_MIDDLE has no AETH");
	o = urnic_op(URNIC_OP_RC | URNIC_OP_ATOMIC_ACK);
	EXPECT(o->aeth == 12 && o->atomicacketh == 16 && o->hdr_len == 24, "ATOMIC_ACK layout");
	o = urnic_op(URNIC_OP_UD | URNIC_OP_SEND_ONLY_IMM);
	EXPECT(o->deth == 12 && o->immdt == 20 && o->hdr_len == 24, "UD_SEND_ONLY_IMM layout");
	o = urnic_op(URNIC_OP_RC | URNIC_OP_SEND_ONLY_INV);
	EXPECT(o->ieth == 12 && o->hdr_len == 16, "SEND_ONLY_INV layout");
	o = urnic_op(URNIC_OP_RC | URNIC_OP_FETCH_ADD);
	EXPECT(o->atomiceth == 12 && o->hdr_len == 40 && !(o->mask & URNIC_M_PAYLOAD),
	       "FETCH_ADD layout");
	o = urnic_op(URNIC_OP_RC | URNIC_OP_READ_REQUEST);
	EXPECT(o->reth == 12 && !(o->mask & URNIC_M_PAYLOAD) && (o->mask & URNIC_M_REQ),
	       "READ_REQUEST layout");
	o = urnic_op(URNIC_OP_UC | URNIC_OP_SEND_MIDDLE);
	EXPECT(!strcmp(o->name, "UC_SEND_MIDDLE") && (o->mask & URNIC_M_PAYLOAD), "UC_SEND_MIDDLE");
}

int main(void)
{
	unsigned known = 0;

	alarm(10);
	for (unsigned op = 0; op < 256; op++) {
		const struct urnic_opcode_info *o = urnic_op((uint8_t)op);

		if (expected_known(op)) {
			EXPECT(o->mask != 0, "0x%02x should be known", op);
			if (o->mask)
				check_known(op, o);
			known++;
		} else {
			EXPECT(o->mask == 0 && o->hdr_len == 0 && !o->name,
			       "0x%02x should be unknown (mask %#x)", op, o->mask);
		}
	}
	check_samples();
	printf(
	    "checked %u known opcodes (headers add up in spec order, transport matches bits 7:5) "
	    "and %u unknown ones (all zero)\n",
	    known, 256 - known);
	printf("%s\n", test_failures ? "FAIL" : "PASS");
	return test_failures ? 1 : 0;
}
