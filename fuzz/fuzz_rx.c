/* fuzz_rx - libFuzzer target for the packet receive path: whatever arrives on UDP 4791 goes
 * through urnic_engine_inject() (the checks of recv.c, then the responder or completer) against
 * live RC, UC and UD QPs and one MR fenced by canary bytes. A crash, a sanitizer report, a hang
 * or a changed canary byte is a finding.
 *
 * Input: one global byte, then up to MAX_RECORDS records of
 *   ctl (1 byte) | len (2 bytes, big-endian) | len bytes: a packet from its BTH to its ICRC
 * global bit 0: first post requester work on the RC QP (SEND, WRITE, READ, CMP_SWAP, FETCH_ADD
 *               at PSNs 0..), so ACKs and responses have something to match
 * ctl bit 0:    recompute the ICRC over the (mutated) packet, so mutations get past it
 * ctl bits 1-2: 0 keep the destination QPN; 1, 2, 3 patch in the RC, UC, UD QP's number
 * ctl bit 3:    patch the RETH/AtomicETH rkey with the MR's, and make its VA the MR's base plus
 *               the low 16 bits of the VA field (so the memory checks see real memory)
 * ctl bit 4:    send it from a stranger's address instead of the connected peer's
 * ctl bit 5:    deliver it as segment i (its record number) of a GRO receive, its ICRC (if bit
 *               0 recomputes it) for IP ID i, as a urnic GSO sender stamps it
 * Every input starts from the same state: each QP reset and reconnected, the MR zeroed.
 *
 * URNIC_FUZZ_SEEDS=DIR fuzz_rx writes the seed corpus (a packet of every known opcode, and some
 * multi-packet messages) to DIR and exits. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/engine.h"

#define MAX_RECORDS 64
#define MR_LEN (64 * 1024u)
#define GUARD 4096u
#define CANARY 0xa5
#define PEER_ADDR 0x0900007fu	  /* 127.0.0.9, network order: the connected peer */
#define STRANGER_ADDR 0x0a00007fu /* 127.0.0.10 */
#define PEER_QPN 0x000123u
#define PEER_SPORT 49152
#define QKEY 0x11111111u
#define NRECV 4

enum { Q_RC, Q_UC, Q_UD, NQ };

static struct {
	struct ibv_context *ctx;
	struct urnic_dev *dev;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_ah *ah;
	struct ibv_qp *qp[NQ];
	uint8_t *area; /* GUARD | MR_LEN | GUARD */
	struct ibv_mr *mr;
	uint8_t *local; /* requester work's local buffer (inside the MR's second half) */
} F;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_rx: %s\n", what);
	abort();
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *what)
{
	if (ibv_modify_qp(qp, a, mask))
		die(what);
}

static void peer_ah(struct ibv_ah_attr *ah)
{
	*ah = (struct ibv_ah_attr){.is_global = 1, .port_num = 1, .grh = {.hop_limit = 64}};
	urnic_gid_from_ipv4(PEER_ADDR, &ah->grh.dgid);
}

/* RESET -> INIT -> RTR -> RTS, connected to the fake peer at PSN 0 both ways. */
static void connect_qp(int q)
{
	struct ibv_qp *qp = F.qp[q];
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
	int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

	modify(qp, &a, IBV_QP_STATE, "to RESET");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_INIT, .port_num = 1};
	if (q == Q_UD) {
		a.qkey = QKEY;
		modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, "UD INIT");
		a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
		modify(qp, &a, IBV_QP_STATE, "UD RTR");
		a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS};
		modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN, "UD RTS");
		return;
	}
	a.qp_access_flags = q == Q_RC ? access : IBV_ACCESS_REMOTE_WRITE;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_256,
				 .dest_qp_num = PEER_QPN + (uint32_t)q, .rq_psn = 0,
				 .max_dest_rd_atomic = 4, .min_rnr_timer = 1};
	peer_ah(&a.ah_attr);
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

	if (q == Q_RC)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	modify(qp, &a, mask, "RTR");
	/* timeout 0: no ACK timer, so nothing retransmits between two inputs */
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 0, .timeout = 0,
				 .retry_cnt = 1, .rnr_retry = 1, .max_rd_atomic = 4};
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (q == Q_RC)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	modify(qp, &a, mask, "RTS");
}

static void post_recvs(int q)
{
	for (int i = 0; i < NRECV; i++) {
		struct ibv_sge sge = {.addr = (uintptr_t)(F.mr->addr) + (uint64_t)i * 1024,
				      .length = 1024, .lkey = F.mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;

		if (ibv_post_recv(F.qp[q], &wr, &bad))
			die("ibv_post_recv");
	}
}

static void setup(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	if (!list || !list[0] || !(F.ctx = ibv_open_device(list[0])))
		die("no urnic device");
	ibv_free_device_list(list);
	F.dev = ctx_dev(F.ctx);
	F.pd = ibv_alloc_pd(F.ctx);
	F.cq = ibv_create_cq(F.ctx, 1024, NULL, NULL, 0);
	F.area = mmap(NULL, MR_LEN + 2 * GUARD, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!F.pd || !F.cq || F.area == MAP_FAILED)
		die("PD, CQ or memory");
	memset(F.area, CANARY, MR_LEN + 2 * GUARD);
	F.mr = ibv_reg_mr(F.pd, F.area + GUARD, MR_LEN,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_ATOMIC);
	F.local = F.area + GUARD + MR_LEN / 2;
	for (int q = 0; q < NQ; q++) {
		struct ibv_qp_init_attr a = {
			.send_cq = F.cq, .recv_cq = F.cq,
			.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				.max_recv_sge = 1},
			.qp_type = q == Q_RC ? IBV_QPT_RC : q == Q_UC ? IBV_QPT_UC : IBV_QPT_UD};

		if (!(F.qp[q] = ibv_create_qp(F.pd, &a)))
			die("ibv_create_qp");
	}
	if (!F.mr)
		die("ibv_reg_mr");
}

static void drain(void)
{
	struct ibv_wc wc[32];

	while (ibv_poll_cq(F.cq, 32, wc) > 0)
		;
}

/* The same starting state for every input. */
static void reset_state(void)
{
	drain();
	for (int q = 0; q < NQ; q++)
		connect_qp(q);
	drain();
	memset(F.area + GUARD, 0, MR_LEN);
	for (int q = 0; q < NQ; q++)
		post_recvs(q);
}

static void check_guards(void)
{
	for (uint32_t i = 0; i < GUARD; i++)
		if (F.area[i] != CANARY || F.area[GUARD + MR_LEN + i] != CANARY)
			die("a byte outside the MR changed");
}

/* SEND, WRITE, READ, CMP_SWAP, FETCH_ADD at the fake peer: PSNs 0 to 5 (the READ takes two). */
static void post_requester_work(void)
{
	static const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
						 IBV_WR_ATOMIC_CMP_AND_SWP,
						 IBV_WR_ATOMIC_FETCH_AND_ADD};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		bool atomic = ops[i] >= IBV_WR_ATOMIC_CMP_AND_SWP;
		struct ibv_sge sge = {.addr = (uintptr_t)F.local + i * 1024,
				      .length = atomic ? 8 : ops[i] == IBV_WR_RDMA_READ ? 512 : 64,
				      .lkey = F.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = ops[i],
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		if (atomic) {
			wr.wr.atomic.remote_addr = 0x1000;
			wr.wr.atomic.rkey = 0x1234;
		} else {
			wr.wr.rdma.remote_addr = 0x1000;
			wr.wr.rdma.rkey = 0x1234;
		}
		if (ibv_post_send(F.qp[Q_RC], &wr, &bad))
			die("ibv_post_send");
	}
}

static void patch(uint8_t *p, uint32_t len, uint8_t ctl)
{
	const struct urnic_opcode_info *op = urnic_op(bth_opcode(p));
	unsigned q = (ctl >> 1) & 3;

	if (q)
		urnic_put24(p + 5, F.qp[q - 1]->qp_num);
	if (!(ctl & 8))
		return;
	uint8_t eth = op->reth ? op->reth : op->atomiceth;

	if (eth && len >= eth + 12u) {
		uint64_t va = (uintptr_t)F.mr->addr + (urnic_get64(p + eth) & 0xffff);

		urnic_put64(p + eth, va);
		urnic_put32(p + eth + 8, F.mr->rkey);
	}
}

static void seal(uint8_t *p, uint32_t len, uint32_t saddr)
{
	const struct urnic_ip4_flow flow = {
		.saddr = saddr, .daddr = F.dev->addr, .sport = PEER_SPORT, .dport = URNIC_ROCEV2_PORT};
	const struct iovec iov = {.iov_base = p, .iov_len = len - URNIC_ICRC_LEN};

	urnic_icrc_compute(&flow, &iov, 1, len - URNIC_ICRC_LEN, p + len - URNIC_ICRC_LEN);
}

static int write_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("URNIC_FUZZ_SEEDS");

	if (seeds && *seeds)
		exit(write_seeds(seeds));
	setup();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct urnic_rxpkt pkts[MAX_RECORDS];
	int n = 0;

	if (size < 1)
		return 0;
	reset_state();
	if (data[0] & 1)
		post_requester_work();
	for (size_t at = 1; n < MAX_RECORDS && at + 3 <= size;) {
		uint8_t ctl = data[at];
		uint32_t len = urnic_get16(data + at + 1);

		at += 3;
		if (len > size - at)
			len = (uint32_t)(size - at);
		if (len > URNIC_RX_BUF_LEN)
			len = URNIC_RX_BUF_LEN; /* what a receive buffer holds */
		/* an exact-size copy, so ASan sees any read past the packet */
		uint8_t *p = malloc(len ? len : 1);

		memcpy(p, data + at, len);
		at += len;
		if (len >= URNIC_BTH_LEN)
			patch(p, len, ctl);
		uint32_t saddr = (ctl & 16) ? STRANGER_ADDR : PEER_ADDR;

		uint16_t seg = (ctl & 32) ? (uint16_t)n : 0;

		if ((ctl & 1) && len >= URNIC_BTH_LEN + URNIC_ICRC_LEN) {
			seal(p, len, saddr);
			urnic_icrc_move_ip_id(p + len - URNIC_ICRC_LEN, len, 0, seg);
		}
		pkts[n++] = (struct urnic_rxpkt){.saddr = saddr,
						 .daddr = F.dev->addr,
						 .sport = PEER_SPORT,
						 .seg = seg,
						 .len = len,
						 .data = p};
	}
	if (n)
		urnic_engine_inject(F.dev, pkts, n);
	drain();
	check_guards();
	for (int i = 0; i < n; i++)
		free(pkts[i].data);
	return 0;
}

/* ---- the seed corpus ---- */

struct seed {
	uint8_t buf[8192];
	size_t len;
};

/* A valid packet of opcode at psn, with every header the table names and a payload that fits a
 * 256-byte path MTU. */
static void seed_packet(struct seed *s, uint8_t opcode, uint32_t psn, uint32_t payload)
{
	const struct urnic_opcode_info *op = urnic_op(opcode);
	unsigned transport = opcode >> 5; /* 0 RC, 1 UC, 3 UD */
	uint8_t ctl = 1 | 8 | (uint8_t)((transport == 0 ? 1 : transport == 1 ? 2 : 3) << 1);
	uint8_t *p = s->buf + s->len + 3;
	const struct urnic_bth_fields f = {
		.opcode = opcode, .ackreq = true, .pkey = URNIC_DEFAULT_PKEY, .psn = psn};

	if (!(op->mask & URNIC_M_PAYLOAD))
		payload = 0;
	memset(p, 0, op->hdr_len);
	urnic_bth_build(p, &f);
	if (op->reth)
		reth_build(p + op->reth, 0x100, 0, (op->mask & URNIC_M_ONLY) == URNIC_M_ONLY ||
							   (op->mask & URNIC_M_READ)
						       ? payload ? payload : 64
						       : 3 * 256);
	if (op->atomiceth)
		atomiceth_build(p + op->atomiceth, 0x200, 0, 5, 0);
	if (op->aeth)
		aeth_build(p + op->aeth, URNIC_AETH_ACK, 31, 1);
	if (op->immdt)
		urnic_put32(p + op->immdt, 0xabcdef01u);
	if (op->ieth)
		urnic_put32(p + op->ieth, 0);
	if (op->deth) {
		urnic_put32(p + op->deth, QKEY);
		urnic_put32(p + op->deth + 4, 0x42);
	}
	for (uint32_t i = 0; i < payload; i++)
		p[op->hdr_len + i] = (uint8_t)(i * 7 + 1);
	uint32_t len = op->hdr_len + payload + URNIC_ICRC_LEN;

	s->buf[s->len] = ctl;
	urnic_put16(s->buf + s->len + 1, (uint16_t)len);
	s->len += 3 + len;
}

static int save(const char *dir, const char *name, const struct seed *s)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(s->buf, 1, s->len, f) != s->len || fclose(f) != 0) {
		perror(path);
		return 1;
	}
	return 0;
}

static int write_seeds(const char *dir)
{
	int err = 0, count = 0;
	char name[96];

	for (int opcode = 0; opcode < 256; opcode++) {
		const struct urnic_opcode_info *op = urnic_op((uint8_t)opcode);

		if (!op->mask)
			continue;
		struct seed s = {.buf = {(op->mask & URNIC_M_RESP) ? 1 : 0}, .len = 1};
		bool whole = (op->mask & URNIC_M_ONLY) == URNIC_M_ONLY;

		/* a PSN the QP expects: responses answer the requester work at PSN 2 (the READ) or
		 * 0; requests start at 0 */
		uint32_t psn = (op->mask & URNIC_M_READ) && (op->mask & URNIC_M_RESP) ? 2 : 0;

		seed_packet(&s, (uint8_t)opcode, psn, whole || (op->mask & URNIC_M_LAST) ? 64 : 256);
		snprintf(name, sizeof(name), "op-%02x", opcode);
		err |= save(dir, name, &s);
		count++;
	}
	/* whole multi-packet messages: FIRST, MIDDLE, LAST */
	static const struct {
		const char *name;
		uint8_t first, middle, last;
	} msgs[] = {
		{"rc-send-3", URNIC_OP_RC | URNIC_OP_SEND_FIRST, URNIC_OP_RC | URNIC_OP_SEND_MIDDLE,
		 URNIC_OP_RC | URNIC_OP_SEND_LAST},
		{"rc-write-3", URNIC_OP_RC | URNIC_OP_WRITE_FIRST, URNIC_OP_RC | URNIC_OP_WRITE_MIDDLE,
		 URNIC_OP_RC | URNIC_OP_WRITE_LAST},
		{"uc-write-3", URNIC_OP_UC | URNIC_OP_WRITE_FIRST, URNIC_OP_UC | URNIC_OP_WRITE_MIDDLE,
		 URNIC_OP_UC | URNIC_OP_WRITE_LAST},
	};
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
		struct seed s = {.len = 1};

		seed_packet(&s, msgs[i].first, 0, 256);
		seed_packet(&s, msgs[i].middle, 1, 256);
		seed_packet(&s, msgs[i].last, 2, 256);
		err |= save(dir, msgs[i].name, &s);
		count++;
	}
	fprintf(stderr, "fuzz_rx: %d seeds in %s\n", count, dir);
	return err;
}
