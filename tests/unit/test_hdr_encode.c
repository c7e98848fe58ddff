/* test_hdr_encode - BTH, RETH, AETH, AtomicETH and friends against byte vectors of the IBTA layout.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wire/wire.h"

static int failures;

#define EXPECT(cond, what)                                                                         \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, what);                      \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static bool same(const uint8_t *a, const uint8_t *b, size_t n, const char *what)
{
	if (!memcmp(a, b, n))
		return true;
	printf("FAIL %s:\n  got ", what);
	for (size_t i = 0; i < n; i++)
		printf("%02x ", a[i]);
	printf("\n  exp ");
	for (size_t i = 0; i < n; i++)
		printf("%02x ", b[i]);
	printf("\n");
	failures++;
	return false;
}

static void check_bth(void)
{
	/* RC_WRITE_ONLY, SE, PadCnt 2, P_Key 0xffff, DestQP 0x123456, AckReq, PSN 0xabcdef */
	static const uint8_t write_only[12] = {0x0a, 0xa0, 0xff, 0xff, 0x00, 0x12,
					       0x34, 0x56, 0x80, 0xab, 0xcd, 0xef};
	/* frame 1 of tests/data/rxe-rc-pingpong.pcap: RC_SEND_ONLY to QP 0x15, PSN 12361952 */
	static const uint8_t rxe_send[12] = {0x04, 0x00, 0xff, 0xff, 0x00, 0x00,
					     0x00, 0x15, 0x80, 0xbc, 0xa0, 0xe0};
	/* ACK with M set, TVer 15, FECN/BECN set, DestQP all ones, PSN 1: every accessor's mask */
	static const uint8_t odd[12] = {0x11, 0x4f, 0x80, 0x00, 0xc0, 0xff,
					0xff, 0xff, 0x7f, 0x00, 0x00, 0x01};
	uint8_t b[12];

	memset(b, 0x5a, sizeof(b));
	urnic_bth_build(b, &(struct urnic_bth_fields){.opcode = 0x0a,
						      .se = true,
						      .ackreq = true,
						      .padcnt = 2,
						      .pkey = 0xffff,
						      .dqpn = 0x123456,
						      .psn = 0xabcdef});
	same(b, write_only, 12, "BTH build, RC_WRITE_ONLY");
	EXPECT(bth_opcode(b) == 0x0a && bth_se(b) && !bth_mig(b) && bth_padcnt(b) == 2 &&
		   bth_tver(b) == 0 && bth_pkey(b) == 0xffff && bth_dqpn(b) == 0x123456 &&
		   bth_ackreq(b) && bth_psn(b) == 0xabcdef,
	       "BTH accessors read back what was built");

	/* bits above 24 in the QPN and PSN are not the BTH's */
	urnic_bth_build(b, &(struct urnic_bth_fields){.opcode = 0x04,
						      .ackreq = true,
						      .pkey = 0xffff,
						      .dqpn = 0xff000015,
						      .psn = 0x01bca0e0});
	same(b, rxe_send, 12, "BTH build, rxe's RC_SEND_ONLY, QPN/PSN masked to 24 bits");

	EXPECT(bth_opcode(odd) == 0x11 && !bth_se(odd) && bth_mig(odd) && bth_padcnt(odd) == 0 &&
		   bth_tver(odd) == 0xf && bth_pkey(odd) == 0x8000 && bth_dqpn(odd) == 0xffffff &&
		   !bth_ackreq(odd) && bth_psn(odd) == 1,
	       "BTH accessors mask their fields");
}

static void check_reth(void)
{
	static const uint8_t v[16] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
				      0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x10, 0x00};
	uint8_t h[16];

	reth_build(h, 0x0102030405060708ull, 0x11223344, 0x1000);
	same(h, v, 16, "RETH build");
	EXPECT(reth_va(v) == 0x0102030405060708ull && reth_rkey(v) == 0x11223344 &&
		   reth_len(v) == 0x1000,
	       "RETH accessors");
}

static void check_aeth(void)
{
	static const uint8_t ack[4] = {0x1f, 0x00, 0x01, 0x02}; /* ACK, no credits, MSN 258 */
	static const uint8_t rnr[4] = {0x2e, 0x00, 0x00, 0x07}; /* RNR NAK, timer 14 */
	static const uint8_t nak[4] = {0x62, 0xff, 0xff, 0xff}; /* NAK remote access error */
	uint8_t h[4];

	aeth_build(h, URNIC_AETH_ACK, URNIC_AETH_CREDITS_INVALID, 0x000102);
	same(h, ack, 4, "AETH build, ACK");
	aeth_build(h, URNIC_AETH_RNR_NAK, 14, 7);
	same(h, rnr, 4, "AETH build, RNR NAK");
	aeth_build(h, URNIC_AETH_NAK, URNIC_NAK_REM_ACCESS_ERR, 0xffffff);
	same(h, nak, 4, "AETH build, NAK");
	EXPECT(aeth_type(ack) == URNIC_AETH_ACK && aeth_value(ack) == 0x1f &&
		   aeth_msn(ack) == 0x102 && aeth_syndrome(ack) == 0x1f,
	       "AETH accessors, ACK");
	EXPECT(aeth_type(rnr) == URNIC_AETH_RNR_NAK && aeth_value(rnr) == 14 && aeth_msn(rnr) == 7,
	       "AETH accessors, RNR NAK");
	EXPECT(aeth_type(nak) == URNIC_AETH_NAK && aeth_value(nak) == URNIC_NAK_REM_ACCESS_ERR &&
		   aeth_msn(nak) == 0xffffff,
	       "AETH accessors, NAK");
}

static void check_atomic(void)
{
	static const uint8_t v[28] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  /* VA */
				      0xde, 0xad, 0xbe, 0xef,			       /* R_Key */
				      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  /* swap */
				      0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8}; /* compare */
	static const uint8_t ack[8] = {0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10};
	static const uint8_t deth[8] = {0x80, 0x01, 0x02, 0x03, 0xee, 0x00, 0x0a, 0xbc};
	uint8_t h[28];

	atomiceth_build(h, 0x1122334455667788ull, 0xdeadbeef, 0x0102030405060708ull,
			0xa1a2a3a4a5a6a7a8ull);
	same(h, v, 28, "AtomicETH build");
	EXPECT(atomiceth_va(v) == 0x1122334455667788ull && atomiceth_rkey(v) == 0xdeadbeef &&
		   atomiceth_swap_add(v) == 0x0102030405060708ull &&
		   atomiceth_compare(v) == 0xa1a2a3a4a5a6a7a8ull,
	       "AtomicETH accessors");
	EXPECT(atomicacketh_orig(ack) == 0xfedcba9876543210ull, "AtomicAckETH accessor");
	EXPECT(deth_qkey(deth) == 0x80010203 && deth_srcqp(deth) == 0x000abc,
	       "DETH accessors skip the reserved byte");
}

static void check_psn(void)
{
	EXPECT(psn_add(0xfffffe, 1) == 0xffffff, "psn_add below the wrap");
	EXPECT(psn_add(0xffffff, 1) == 0, "psn_add wraps at 2^24");
	EXPECT(psn_add(0xfffffe, 3) == 1, "psn_add past the wrap");
	EXPECT(psn_add(5, URNIC_PSN_MASK) == 4, "psn_add of 2^24 - 1 steps back by one");
	EXPECT(psn_diff(0, 0xffffff) == 1, "psn_diff across the wrap, ahead");
	EXPECT(psn_diff(0xffffff, 0) == -1, "psn_diff across the wrap, behind");
	EXPECT(psn_diff(3, 0xfffffe) == 5, "psn_diff across the wrap, 5 ahead");
	EXPECT(psn_diff(0x123456, 0x123456) == 0, "psn_diff of equal PSNs");
	EXPECT(psn_diff(0x7fffff, 0) == 0x7fffff, "psn_diff largest ahead");
	EXPECT(psn_diff(0, 0x7fffff) == -0x7fffff, "psn_diff largest behind");
	/* exactly half the space: either sign is a valid answer; magnitude must be 2^23 */
	EXPECT(psn_diff(0x800000, 0) == 0x800000 || psn_diff(0x800000, 0) == -0x800000,
	       "psn_diff at half the space");
}

int main(void)
{
	alarm(10);
	check_bth();
	check_reth();
	check_aeth();
	check_atomic();
	check_psn();
	printf("checked BTH, RETH, AETH, AtomicETH, AtomicAckETH and DETH against IBTA byte "
	       "vectors, and psn_add/psn_diff at the 2^24 wrap\n");
	printf("%s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}
