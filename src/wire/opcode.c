/* opcode.c - the BTH opcode table (what each opcode is and carries) and the BTH builder. */
#include "wire/wire.h"

/*
 * Header layouts. Each names the extension headers that follow the BTH, in the order IBTA vol. 1
 * puts them (DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH), with their offsets from the
 * start of the BTH; L_x_MASK is the matching set of URNIC_M_* header bits.
 */
#define L_BTH .hdr_len = URNIC_BTH_LEN
#define L_BTH_MASK 0u

#define L_IMM .immdt = URNIC_BTH_LEN, .hdr_len = URNIC_BTH_LEN + URNIC_IMMDT_LEN
#define L_IMM_MASK URNIC_M_IMMDT

#define L_IETH .ieth = URNIC_BTH_LEN, .hdr_len = URNIC_BTH_LEN + URNIC_IETH_LEN
#define L_IETH_MASK URNIC_M_IETH

#define L_RETH .reth = URNIC_BTH_LEN, .hdr_len = URNIC_BTH_LEN + URNIC_RETH_LEN
#define L_RETH_MASK URNIC_M_RETH

#define L_RETH_IMM                                                                                 \
	.reth = URNIC_BTH_LEN, .immdt = URNIC_BTH_LEN + URNIC_RETH_LEN,                            \
	.hdr_len = URNIC_BTH_LEN + URNIC_RETH_LEN + URNIC_IMMDT_LEN
#define L_RETH_IMM_MASK (URNIC_M_RETH | URNIC_M_IMMDT)

#define L_AETH .aeth = URNIC_BTH_LEN, .hdr_len = URNIC_BTH_LEN + URNIC_AETH_LEN
#define L_AETH_MASK URNIC_M_AETH

#define L_ATOMIC .atomiceth = URNIC_BTH_LEN, .hdr_len = URNIC_BTH_LEN + URNIC_ATOMICETH_LEN
#define L_ATOMIC_MASK URNIC_M_ATOMICETH

#define L_ATOMIC_ACK                                                                               \
	.aeth = URNIC_BTH_LEN, .atomicacketh = URNIC_BTH_LEN + URNIC_AETH_LEN,                     \
	.hdr_len = URNIC_BTH_LEN + URNIC_AETH_LEN + URNIC_ATOMICACKETH_LEN
#define L_ATOMIC_ACK_MASK (URNIC_M_AETH | URNIC_M_ATOMICACKETH)

#define L_DETH .deth = URNIC_BTH_LEN, .hdr_len = URNIC_BTH_LEN + URNIC_DETH_LEN
#define L_DETH_MASK URNIC_M_DETH

#define L_DETH_IMM                                                                                 \
	.deth = URNIC_BTH_LEN, .immdt = URNIC_BTH_LEN + URNIC_DETH_LEN,                            \
	.hdr_len = URNIC_BTH_LEN + URNIC_DETH_LEN + URNIC_IMMDT_LEN
#define L_DETH_IMM_MASK (URNIC_M_DETH | URNIC_M_IMMDT)

/* One row per opcode reads best as a table. */
/* clang-format off */

/* One row: T is the transport (RC, UC, UD), OP the opcode's low five bits without URNIC_OP_. */
#define ROW(T, OP, what, layout)                                                                   \
	[URNIC_OP_##T | URNIC_OP_##OP] = {                                                         \
		.name = #T "_" #OP,                                                                \
		.mask = URNIC_M_##T | (what) | layout##_MASK,                                      \
		layout,                                                                            \
	}

#define SEND (URNIC_M_REQ | URNIC_M_SEND | URNIC_M_PAYLOAD)
#define WRITE (URNIC_M_REQ | URNIC_M_WRITE | URNIC_M_PAYLOAD)
#define READ_RESP (URNIC_M_RESP | URNIC_M_READ | URNIC_M_PAYLOAD)

/* SEND and RDMA WRITE exist alike on RC and UC: UC's opcode is RC's with bit 5 set. */
#define SEND_WRITE_ROWS(T)                                                                         \
	ROW(T, SEND_FIRST, SEND | URNIC_M_FIRST, L_BTH),                                           \
	ROW(T, SEND_MIDDLE, SEND | URNIC_M_MIDDLE, L_BTH),                                         \
	ROW(T, SEND_LAST, SEND | URNIC_M_LAST, L_BTH),                                             \
	ROW(T, SEND_LAST_IMM, SEND | URNIC_M_LAST, L_IMM),                                         \
	ROW(T, SEND_ONLY, SEND | URNIC_M_ONLY, L_BTH),                                             \
	ROW(T, SEND_ONLY_IMM, SEND | URNIC_M_ONLY, L_IMM),                                         \
	ROW(T, WRITE_FIRST, WRITE | URNIC_M_FIRST, L_RETH),                                        \
	ROW(T, WRITE_MIDDLE, WRITE | URNIC_M_MIDDLE, L_BTH),                                       \
	ROW(T, WRITE_LAST, WRITE | URNIC_M_LAST, L_BTH),                                           \
	ROW(T, WRITE_LAST_IMM, WRITE | URNIC_M_LAST, L_IMM),                                       \
	ROW(T, WRITE_ONLY, WRITE | URNIC_M_ONLY, L_RETH),                                          \
	ROW(T, WRITE_ONLY_IMM, WRITE | URNIC_M_ONLY, L_RETH_IMM)

/*
 * Single-packet operations (read request, ACK, atomics) are marked ONLY: each both starts and ends
 * what it belongs to. Opcodes not listed stay all zero: mask 0 means "unknown, drop".
 */
const struct urnic_opcode_info urnic_opcodes[256] = {
	SEND_WRITE_ROWS(RC),
	ROW(RC, READ_REQUEST, URNIC_M_REQ | URNIC_M_READ | URNIC_M_ONLY, L_RETH),
	ROW(RC, READ_RESP_FIRST, READ_RESP | URNIC_M_FIRST, L_AETH),
	ROW(RC, READ_RESP_MIDDLE, READ_RESP | URNIC_M_MIDDLE, L_BTH),
	ROW(RC, READ_RESP_LAST, READ_RESP | URNIC_M_LAST, L_AETH),
	ROW(RC, READ_RESP_ONLY, READ_RESP | URNIC_M_ONLY, L_AETH),
	ROW(RC, ACK, URNIC_M_RESP | URNIC_M_ONLY, L_AETH),
	ROW(RC, ATOMIC_ACK, URNIC_M_RESP | URNIC_M_ATOMIC | URNIC_M_ONLY, L_ATOMIC_ACK),
	ROW(RC, CMP_SWAP, URNIC_M_REQ | URNIC_M_ATOMIC | URNIC_M_ONLY, L_ATOMIC),
	ROW(RC, FETCH_ADD, URNIC_M_REQ | URNIC_M_ATOMIC | URNIC_M_ONLY, L_ATOMIC),
	ROW(RC, SEND_LAST_INV, SEND | URNIC_M_LAST, L_IETH),
	ROW(RC, SEND_ONLY_INV, SEND | URNIC_M_ONLY, L_IETH),

	SEND_WRITE_ROWS(UC),

	ROW(UD, SEND_ONLY, SEND | URNIC_M_ONLY, L_DETH),
	ROW(UD, SEND_ONLY_IMM, SEND | URNIC_M_ONLY, L_DETH_IMM),
};
/* clang-format on */

void urnic_bth_build(uint8_t *bth, const struct urnic_bth_fields *f)
{
	bth[0] = f->opcode;
	/* SE, M = 0 (no migration), PadCnt, TVer = 0 */
	bth[1] = (uint8_t)((f->se ? 0x80 : 0) | (f->padcnt & 3) << 4);
	urnic_put16(bth + 2, f->pkey);
	bth[4] = 0; /* FECN, BECN, resv6 */
	urnic_put24(bth + 5, f->dqpn & URNIC_QPN_MASK);
	bth[8] = f->ackreq ? 0x80 : 0; /* AckReq, resv7 */
	urnic_put24(bth + 9, f->psn & URNIC_PSN_MASK);
}
