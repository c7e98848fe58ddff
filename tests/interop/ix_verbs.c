/* ix_verbs.c - checks RC data byte for byte between two verbs stacks (urnic and kernel rdma_rxe).
 *
 * Plain verbs against the system's <infiniband/verbs.h> and libibverbs.so.1, so the same binary
 * runs over urnic on the host (under `urnic exec`) and over rdma-core and rxe in the interop guest.
 *
 *   ix_verbs [-d DEV] [-g GID_INDEX] [-m MTU] [-p PORT] [-u TIMEOUT]        server: one client
 *   ix_verbs [-d DEV] [-g GID_INDEX] [-m MTU] [-p PORT] [-u TIMEOUT] HOST   client: the checks
 * TIMEOUT is the QP's ACK timeout exponent (4.096 us * 2^TIMEOUT), 18 (1 s) unless given.
 *
 * Both sides register the same layout (LAYOUT below). The client drives; after each operation it
 * tells the server on the TCP connection what it did, and the server checks its own memory and
 * completions and answers "ok" or what differed:
 *   WRITE of sizes 1 B .. 1 MiB (the bytes after the message must stay untouched), WRITE with
 *   immediate, READ of the same sizes (checked by the client, with the same guard), SEND and SEND
 *   with immediate (byte_len, opcode, immediate, data), FETCH_ADD and CMP_SWAP (each original
 *   value, a failing compare that changes nothing, the final value read back and in server memory).
 * Exit 0 when every check passed on both sides, 1 otherwise, with the first difference printed. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* LAYOUT: the WRITE target, the READ source, the SEND buffer, the atomic word. */
#define MIB (1u << 20)
#define OFF_WRITE 0u
#define OFF_READ (2 * MIB)
#define OFF_SEND (4 * MIB)
#define OFF_ATOMIC (6 * MIB)
#define REGION_LEN (6 * MIB + 4096)
#define GUARD 64 /* bytes after each message that must keep the background */
#define BG_SERVER 0xee
#define BG_CLIENT 0x55
#define ATOMIC_INIT 0x0102030405060708ull
#define SWAP_VALUE 0xdeadbeefcafef00dull
#define IMM_VALUE 0x1234abcdu
#define READ_SEED 7u

static const uint32_t sizes[] = {1, 63, 4095, 4096, 4097, 65537, MIB};
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))

struct opts {
	const char *dev, *host;
	int gid_index, port, timeout;
	enum ibv_mtu mtu;
};

struct conn_info {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

struct ctx {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct conn_info me, peer;
	FILE *ctl_in, *ctl_out; /* the TCP control connection */
	const char *role;
};

static int fail(const struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ix_verbs %s: FAIL: ", c->role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

/* The byte a pattern holds at position i: differs by seed and position, never constant. */
static uint8_t pattern_byte(uint32_t seed, uint32_t i)
{
	uint32_t x = (i + 1) * 2654435761u ^ seed * 40503u;

	return (uint8_t)(x >> 13 ^ x);
}

static void fill_pattern(uint8_t *p, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

/* 0, or -1 after printing the first byte that differs from pattern then background. */
static int check_bytes(const struct ctx *c, const char *what, const uint8_t *p, uint32_t len,
		       uint32_t seed, uint8_t background)
{
	for (uint32_t i = 0; i < len + GUARD; i++) {
		uint8_t want = i < len ? pattern_byte(seed, i) : background;

		if (p[i] != want)
			return fail(c, "%s of %u bytes: byte %u is 0x%02x, want 0x%02x%s", what,
				    len, i, p[i], want, i < len ? "" : " (past the end)");
	}
	return 0;
}

/* ---------------- set-up ---------------- */

static int open_device(struct ctx *c, const char *name)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list || n == 0)
		return fail(c, "no RDMA device");
	for (int i = 0; i < n && !c->verbs; i++)
		if (!name || strcmp(ibv_get_device_name(list[i]), name) == 0)
			c->verbs = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return c->verbs ? 0 : fail(c, "cannot open device %s", name ? name : "(first)");
}

static int create_resources(struct ctx *c, const struct opts *o)
{
	if (open_device(c, o->dev))
		return -1;
	c->pd = ibv_alloc_pd(c->verbs);
	c->cq = c->pd ? ibv_create_cq(c->verbs, 64, NULL, NULL, 0) : NULL;
	c->buf = aligned_alloc(4096, REGION_LEN);
	if (!c->cq || !c->buf)
		return fail(c, "cannot create a PD, a CQ or the buffer");
	c->mr = ibv_reg_mr(c->pd, c->buf, REGION_LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	struct ibv_qp_init_attr qia = {
	    .send_cq = c->cq,
	    .recv_cq = c->cq,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	    .sq_sig_all = 1,
	};
	c->qp = c->mr ? ibv_create_qp(c->pd, &qia) : NULL;
	if (!c->qp)
		return fail(c, "cannot register the buffer or create the QP: %s", strerror(errno));
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT,
	    .port_num = 1,
	    .qp_access_flags =
		IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};
	if (ibv_modify_qp(c->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return fail(c, "INIT: %s", strerror(errno));
	if (ibv_query_gid(c->verbs, 1, o->gid_index, &c->me.gid))
		return fail(c, "no GID at index %d", o->gid_index);
	c->me.qpn = c->qp->qp_num;
	c->me.psn = (uint32_t)getpid() & 0xffffff;
	c->me.rkey = c->mr->rkey;
	c->me.addr = (uintptr_t)c->buf;
	return 0;
}

static int connect_qp(struct ctx *c, const struct opts *o)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = o->mtu,
	    .dest_qp_num = c->peer.qpn,
	    .rq_psn = c->peer.psn,
	    .max_dest_rd_atomic = 1,
	    .min_rnr_timer = 12,
	    .ah_attr = {.is_global = 1,
			.port_num = 1,
			.grh = {.dgid = c->peer.gid, .sgid_index = o->gid_index, .hop_limit = 64}},
	};
	if (ibv_modify_qp(c->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return fail(c, "RTR: %s", strerror(errno));
	/* timeout 18 (1 s) by default: a TCG guest stalls for hundreds of milliseconds */
	a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS,
				 .timeout = (uint8_t)o->timeout,
				 .retry_cnt = 7,
				 .rnr_retry = 7,
				 .sq_psn = c->me.psn,
				 .max_rd_atomic = 1};
	if (ibv_modify_qp(c->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return fail(c, "RTS: %s", strerror(errno));
	return 0;
}

/* ---------------- the control connection ---------------- */

static int tcp_connect(const struct opts *o)
{
	struct addrinfo *ai, hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
	char port[16];
	int fd = -1;

	snprintf(port, sizeof(port), "%d", o->port);
	if (getaddrinfo(o->host, port, &hints, &ai))
		return -1;
	for (int tries = 0; tries < 50 && fd < 0; tries++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			close(fd);
			fd = -1;
			usleep(100000);
		}
	}
	freeaddrinfo(ai);
	return fd;
}

static int tcp_accept(const struct opts *o)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd;

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1)) {
		close(lfd);
		return -1;
	}
	fd = accept(lfd, NULL, NULL);
	close(lfd);
	return fd;
}

static void vsend_line(struct ctx *c, const char *fmt, va_list ap)
{
	vfprintf(c->ctl_out, fmt, ap);
	fputc('\n', c->ctl_out);
	fflush(c->ctl_out);
}

static void send_line(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsend_line(c, fmt, ap);
	va_end(ap);
}

static int read_line(struct ctx *c, char *line, size_t len)
{
	if (!fgets(line, (int)len, c->ctl_in))
		return fail(c, "the peer closed the control connection");
	line[strcspn(line, "\n")] = 0;
	return 0;
}

static int exchange_info(struct ctx *c)
{
	char line[256], gid[33];
	const uint8_t *g = c->me.gid.raw;
	unsigned long long addr;

	for (int i = 0; i < 16; i++)
		snprintf(gid + 2 * i, 3, "%02x", g[i]);
	send_line(c, "%06x %06x %08x %016llx %s", c->me.qpn, c->me.psn, c->me.rkey,
		  (unsigned long long)c->me.addr, gid);
	if (read_line(c, line, sizeof(line)) ||
	    sscanf(line, "%x %x %x %llx %32s", &c->peer.qpn, &c->peer.psn, &c->peer.rkey, &addr,
		   gid) != 5)
		return fail(c, "bad connection info from the peer");
	c->peer.addr = addr;
	for (int i = 0; i < 16; i++)
		sscanf(gid + 2 * i, "%2hhx", &c->peer.gid.raw[i]);
	return 0;
}

/* ---------------- work requests ---------------- */

static uint64_t now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec;
}

/* The next completion, within 60 s: a TCG guest moves 1-10 MB/s, and the largest message is 1 MiB.
 */
static int wait_wc(struct ctx *c, struct ibv_wc *wc)
{
	uint64_t deadline = now_s() + 60;

	for (long spins = 0; now_s() < deadline; spins++) {
		int n = ibv_poll_cq(c->cq, 1, wc);

		if (n < 0)
			return fail(c, "ibv_poll_cq: %d", n);
		if (n == 1 && wc->status != IBV_WC_SUCCESS)
			return fail(c, "completion wr_id %llu: %s", (unsigned long long)wc->wr_id,
				    ibv_wc_status_str(wc->status));
		if (n == 1)
			return 0;
		if (spins > 1000)
			usleep(50);
	}
	return fail(c, "no completion");
}

static int post_recv(struct ctx *c, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)c->buf + off, .length = len, .lkey = c->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(c->qp, &wr, &bad) ? fail(c, "ibv_post_recv: %s", strerror(errno)) : 0;
}

/* Posts one send-queue WR from local offset off and waits for its completion. */
static int run_wr(struct ctx *c, struct ibv_send_wr *wr, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)c->buf + off, .length = len, .lkey = c->mr->lkey};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	wr->wr_id = 1;
	wr->sg_list = &sge;
	wr->num_sge = 1;
	if (ibv_post_send(c->qp, wr, &bad))
		return fail(c, "ibv_post_send: %s", strerror(errno));
	if (wait_wc(c, &wc))
		return -1;
	return wc.wr_id == 1 ? 0
			     : fail(c, "completion for wr_id %llu", (unsigned long long)wc.wr_id);
}

static struct ibv_send_wr rdma_wr(struct ctx *c, enum ibv_wr_opcode op, uint32_t remote_off)
{
	return (struct ibv_send_wr){
	    .opcode = op,
	    .wr = {.rdma = {.remote_addr = c->peer.addr + remote_off, .rkey = c->peer.rkey}}};
}

static int atomic_op(struct ctx *c, enum ibv_wr_opcode op, uint64_t compare_add, uint64_t swap,
		     uint64_t *orig)
{
	struct ibv_send_wr wr = {
	    .opcode = op,
	    .wr = {.atomic = {.remote_addr = c->peer.addr + OFF_ATOMIC,
			      .rkey = c->peer.rkey,
			      .compare_add = compare_add,
			      .swap = swap}},
	};
	if (run_wr(c, &wr, OFF_ATOMIC + 64, 8))
		return -1;
	memcpy(orig, c->buf + OFF_ATOMIC + 64, 8);
	return 0;
}

/* ---------------- the client's checks ---------------- */

/* Tells the server what happened and waits for its verdict. */
static int ask(struct ctx *c, const char *what, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsend_line(c, fmt, ap);
	va_end(ap);
	if (read_line(c, line, sizeof(line)))
		return -1;
	return strcmp(line, "ok") == 0 ? 0 : fail(c, "%s: the server says: %s", what, line);
}

static int client_writes(struct ctx *c)
{
	for (unsigned i = 0; i < N_SIZES; i++) {
		struct ibv_send_wr wr = rdma_wr(c, IBV_WR_RDMA_WRITE, OFF_WRITE);

		fill_pattern(c->buf + OFF_WRITE, sizes[i], 100 + i);
		if (run_wr(c, &wr, OFF_WRITE, sizes[i]) ||
		    ask(c, "WRITE", "write %u %u", sizes[i], 100 + i))
			return -1;
	}
	/* with immediate: the server has a RECV posted for it */
	struct ibv_send_wr wr = rdma_wr(c, IBV_WR_RDMA_WRITE_WITH_IMM, OFF_WRITE);

	wr.imm_data = htonl(IMM_VALUE);
	fill_pattern(c->buf + OFF_WRITE, 4097, 200);
	if (ask(c, "WRITE_WITH_IMM", "post-recv") || run_wr(c, &wr, OFF_WRITE, 4097) ||
	    ask(c, "WRITE_WITH_IMM", "write-imm %u %u", 4097, 200))
		return -1;
	printf("ix_verbs client: WRITE of %zu sizes and WRITE_WITH_IMM checked\n", N_SIZES);
	return 0;
}

static int client_reads(struct ctx *c)
{
	for (unsigned i = 0; i < N_SIZES; i++) {
		struct ibv_send_wr wr = rdma_wr(c, IBV_WR_RDMA_READ, OFF_READ);

		memset(c->buf + OFF_READ, BG_CLIENT, sizes[i] + GUARD);
		if (run_wr(c, &wr, OFF_READ, sizes[i]) ||
		    check_bytes(c, "READ", c->buf + OFF_READ, sizes[i], READ_SEED, BG_CLIENT))
			return -1;
	}
	printf("ix_verbs client: READ of %zu sizes checked\n", N_SIZES);
	return 0;
}

static int client_sends(struct ctx *c)
{
	for (unsigned i = 0; i < 2 * N_SIZES; i++) {
		uint32_t len = sizes[i % N_SIZES], seed = 300 + i;
		bool imm = i >= N_SIZES;
		struct ibv_send_wr wr = {.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
					 .imm_data = htonl(IMM_VALUE + i)};

		fill_pattern(c->buf + OFF_SEND, len, seed);
		if (ask(c, "SEND", "post-recv") || run_wr(c, &wr, OFF_SEND, len) ||
		    ask(c, "SEND", "send %u %u %d %u", len, seed, imm, IMM_VALUE + i))
			return -1;
	}
	printf("ix_verbs client: SEND and SEND_WITH_IMM of %zu sizes checked\n", N_SIZES);
	return 0;
}

static int client_atomics(struct ctx *c)
{
	uint64_t orig, want = ATOMIC_INIT;

	for (int i = 0; i < 3; i++, want += 5) {
		if (atomic_op(c, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 0, &orig))
			return -1;
		if (orig != want)
			return fail(c, "FETCH_ADD %d returned 0x%016llx, want 0x%016llx", i,
				    (unsigned long long)orig, (unsigned long long)want);
	}
	if (atomic_op(c, IBV_WR_ATOMIC_CMP_AND_SWP, want, SWAP_VALUE, &orig) || orig != want)
		return fail(c, "CMP_SWAP (equal) returned 0x%016llx, want 0x%016llx",
			    (unsigned long long)orig, (unsigned long long)want);
	if (atomic_op(c, IBV_WR_ATOMIC_CMP_AND_SWP, 1, 2, &orig) || orig != SWAP_VALUE)
		return fail(c, "CMP_SWAP (unequal) returned 0x%016llx, want 0x%016llx",
			    (unsigned long long)orig, (unsigned long long)SWAP_VALUE);
	struct ibv_send_wr wr = rdma_wr(c, IBV_WR_RDMA_READ, OFF_ATOMIC);

	if (run_wr(c, &wr, OFF_ATOMIC, 8))
		return -1;
	memcpy(&orig, c->buf + OFF_ATOMIC, 8);
	if (orig != SWAP_VALUE)
		return fail(c, "the atomic word reads 0x%016llx after the swaps",
			    (unsigned long long)orig);
	if (ask(c, "atomics", "atomic %llx", (unsigned long long)SWAP_VALUE))
		return -1;
	printf("ix_verbs client: FETCH_ADD x3 and CMP_SWAP (equal, unequal) checked\n");
	return 0;
}

static int run_client(struct ctx *c)
{
	if (client_writes(c) || client_reads(c) || client_sends(c) || client_atomics(c))
		return -1;
	return ask(c, "done", "done");
}

/* ---------------- the server's checks ---------------- */

static int server_check_recv(struct ctx *c, uint32_t len, uint32_t seed, bool write_imm, int imm,
			     uint32_t imm_value)
{
	struct ibv_wc wc;
	const uint8_t *data = c->buf + (write_imm ? OFF_WRITE : OFF_SEND);
	enum ibv_wc_opcode want_op = write_imm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;

	if (wait_wc(c, &wc))
		return -1;
	if (wc.opcode != want_op)
		return fail(c, "receive completion opcode %d, want %d", wc.opcode, want_op);
	if (!write_imm && wc.byte_len != len)
		return fail(c, "receive byte_len %u, want %u", wc.byte_len, len);
	if (!!(wc.wc_flags & IBV_WC_WITH_IMM) != !!imm || (imm && ntohl(wc.imm_data) != imm_value))
		return fail(c, "immediate: flags 0x%x value 0x%x, want %s 0x%x", wc.wc_flags,
			    ntohl(wc.imm_data), imm ? "one" : "none", imm_value);
	return check_bytes(c, write_imm ? "WRITE_WITH_IMM" : "SEND", data, len, seed, BG_SERVER);
}

/* One request from the client: 0 checked (answer sent), 1 done, -1 a check failed. */
static int server_step(struct ctx *c, const char *line)
{
	unsigned len, seed, imm_value;
	int imm, rc = 0;
	unsigned long long word;

	if (strcmp(line, "done") == 0) {
		send_line(c, "ok");
		return 1;
	}
	if (strcmp(line, "post-recv") == 0) {
		rc = post_recv(c, OFF_SEND, REGION_LEN - OFF_SEND);
	} else if (sscanf(line, "write %u %u", &len, &seed) == 2) {
		rc = check_bytes(c, "WRITE", c->buf + OFF_WRITE, len, seed, BG_SERVER);
	} else if (sscanf(line, "write-imm %u %u", &len, &seed) == 2) {
		rc = server_check_recv(c, len, seed, true, 1, IMM_VALUE);
	} else if (sscanf(line, "send %u %u %d %u", &len, &seed, &imm, &imm_value) == 4) {
		rc = server_check_recv(c, len, seed, false, imm, imm_value);
	} else if (sscanf(line, "atomic %llx", &word) == 1) {
		uint64_t v;

		memcpy(&v, c->buf + OFF_ATOMIC, 8);
		if (v != word)
			rc = fail(c, "the atomic word is 0x%016llx, want 0x%016llx",
				  (unsigned long long)v, word);
	} else {
		rc = fail(c, "unknown request '%s'", line);
	}
	/* the background again, for the next message */
	memset(c->buf + OFF_WRITE, BG_SERVER, OFF_READ - OFF_WRITE);
	memset(c->buf + OFF_SEND, BG_SERVER, OFF_ATOMIC - OFF_SEND);
	send_line(c, rc ? "the check failed (see the server's log)" : "ok");
	return rc;
}

static int run_server(struct ctx *c)
{
	char line[512];

	for (;;) {
		if (read_line(c, line, sizeof(line)))
			return -1;
		int rc = server_step(c, line);

		if (rc)
			return rc > 0 ? 0 : -1;
	}
}

/* ---------------- main ---------------- */

static int mtu_enum(int bytes, enum ibv_mtu *mtu)
{
	for (enum ibv_mtu m = IBV_MTU_256; m <= IBV_MTU_4096; m++) {
		if (bytes == 128 << m) {
			*mtu = m;
			return 0;
		}
	}
	return -1;
}

static int parse(int argc, char **argv, struct opts *o)
{
	int opt;

	*o = (struct opts){.gid_index = 0, .port = 18800, .mtu = IBV_MTU_1024, .timeout = 18};
	while ((opt = getopt(argc, argv, "d:g:m:p:u:")) != -1) {
		switch (opt) {
		case 'd':
			o->dev = optarg;
			break;
		case 'g':
			o->gid_index = atoi(optarg);
			break;
		case 'p':
			o->port = atoi(optarg);
			break;
		case 'u':
			o->timeout = atoi(optarg) & 31;
			break;
		case 'm':
			if (mtu_enum(atoi(optarg), &o->mtu))
				return -1;
			break;
		default:
			return -1;
		}
	}
	if (optind < argc)
		o->host = argv[optind++];
	return optind == argc ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct ctx c = {0};

	if (parse(argc, argv, &o)) {
		fprintf(
		    stderr,
		    "usage: %s [-d DEV] [-g GID_INDEX] [-m MTU] [-p PORT] [-u TIMEOUT] [HOST]\n",
		    argv[0]);
		return 2;
	}
	c.role = o.host ? "client" : "server";
	if (create_resources(&c, &o))
		return 1;
	memset(c.buf, o.host ? BG_CLIENT : BG_SERVER, REGION_LEN);
	if (!o.host) {
		fill_pattern(c.buf + OFF_READ, MIB + GUARD, READ_SEED);
		uint64_t init = ATOMIC_INIT;

		memcpy(c.buf + OFF_ATOMIC, &init, 8);
	}
	int fd = o.host ? tcp_connect(&o) : tcp_accept(&o);

	if (fd < 0 || !(c.ctl_in = fdopen(fd, "r")) || !(c.ctl_out = fdopen(dup(fd), "w")))
		return fail(&c, "no control connection on port %d", o.port), 1;
	if (exchange_info(&c) || connect_qp(&c, &o))
		return 1;
	/* the client sends only once the server's QP is in RTR: a stack drops what reaches a QP in
	 * INIT */
	char line[16];

	if (!o.host)
		send_line(&c, "ready");
	else if (read_line(&c, line, sizeof(line)) || strcmp(line, "ready") != 0)
		return fail(&c, "the server did not get ready"), 1;
	int rc = o.host ? run_client(&c) : run_server(&c);

	if (rc == 0)
		printf("ix_verbs %s: every check passed (path MTU %d)\n", c.role, 128 << o.mtu);
	fclose(c.ctl_in);
	fclose(c.ctl_out);
	ibv_destroy_qp(c.qp);
	ibv_dereg_mr(c.mr);
	ibv_destroy_cq(c.cq);
	ibv_dealloc_pd(c.pd);
	ibv_close_device(c.verbs);
	free(c.buf);
	return rc ? 1 : 0;
}
