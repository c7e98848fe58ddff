/* demo.c - urnic-demo: two processes on one RC QP pair run every RC operation and check the data.
 *
 * The parent is the client: it posts every operation, one in flight at a time, and prints the
 * table. The child is the server: it owns the remote buffer, posts the receives and checks what
 * arrives. A socketpair carries the connection details and, around each phase, the phase's
 * parameters and the server's verdict. Every byte is checked: data comes from a pattern seeded by
 * (operation, size, iteration), so stale or misplaced data cannot pass.
 */
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PORT_NUM 1
#define GID_INDEX 0
#define TIME_LIMIT_S 120
#define DEFAULT_ITERS 100
#define MAX_ITERS 10000000
#define MAX_SIZE (16u << 20)
#define SLOT_BUDGET (32u << 20) /* bytes of remote slots the server keeps per phase */
#define RECV_CREDITS 4		/* receives the server keeps posted */
/* With more slots than twice the credits, a WRITE WITH IMM that arrives while its receive is
 * missing (RNR) cannot overwrite a slot the server has not checked yet. */
#define MIN_SLOTS (2 * RECV_CREDITS)
#define CQ_DEPTH 64
#define SOCK_CHECK_EVERY 4096 /* empty CQ polls between looks at the socket */

enum op { OP_SEND, OP_WRITE, OP_WRITE_IMM, OP_READ, OP_FAA, OP_CAS, OP_COUNT };

struct op_info {
	const char *name;
	bool atomic;
	enum ibv_wr_opcode wr;
	enum ibv_wc_opcode wc;
};

static const struct op_info ops[OP_COUNT] = {
    [OP_SEND] = {"SEND/RECV", false, IBV_WR_SEND, IBV_WC_SEND},
    [OP_WRITE] = {"RDMA_WRITE", false, IBV_WR_RDMA_WRITE, IBV_WC_RDMA_WRITE},
    [OP_WRITE_IMM] = {"RDMA_WRITE_IMM", false, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WC_RDMA_WRITE},
    [OP_READ] = {"RDMA_READ", false, IBV_WR_RDMA_READ, IBV_WC_RDMA_READ},
    [OP_FAA] = {"FETCH_AND_ADD", true, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_FETCH_ADD},
    [OP_CAS] = {"CMP_AND_SWP", true, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_COMP_SWAP},
};

struct params {
	int iters;
	size_t sizes[4];
	int nsizes;
	const char *device;
};

/* What each side tells the other once, before connecting. */
struct peer_info {
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint8_t gid[16];
	uint64_t addr; /* the buffer: slots, then the atomic word */
	uint64_t atomic_addr;
	uint32_t rkey;
};

enum msg_type { MSG_PHASE = 1, MSG_READY, MSG_DONE, MSG_RESULT, MSG_QUIT };

struct msg {
	uint32_t type;
	uint32_t op;
	uint64_t size;
	uint32_t iters;
	int32_t ok;
	char why[160];
};

struct ctx {
	const char *role;
	int sock;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	size_t atomic_off;
	struct ibv_port_attr port;
	union ibv_gid gid;
	uint32_t psn;
	struct peer_info peer;
};

/* The outcome of one phase on one side: the first mismatch is kept for the report. */
struct verdict {
	bool ok;
	char why[160];
};

static pid_t server_pid;

static void fail(const struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(const struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "urnic-demo: %s: ", c->role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void mismatch(struct verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void mismatch(struct verdict *v, const char *fmt, ...)
{
	va_list ap;

	if (!v->ok)
		return;
	v->ok = false;
	va_start(ap, fmt);
	vsnprintf(v->why, sizeof(v->why), fmt, ap);
	va_end(ap);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- data patterns ---- */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t seed_of(enum op op, size_t size, uint64_t iter)
{
	return mix(mix(((uint64_t)op << 40) ^ size) ^ iter);
}

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t off = 0; off < len; off += 8) {
		uint64_t x = mix(seed + off);

		memcpy(buf + off, &x, len - off < 8 ? len - off : 8);
	}
}

/* Returns the offset of the first byte that differs from the pattern, or len. */
static size_t check(const uint8_t *buf, size_t len, uint64_t seed, uint8_t *want)
{
	for (size_t off = 0; off < len; off += 8) {
		uint64_t x = mix(seed + off);
		size_t n = len - off < 8 ? len - off : 8;

		if (memcmp(buf + off, &x, n) == 0)
			continue;
		for (size_t i = 0; i < n; i++) {
			*want = ((const uint8_t *)&x)[i];
			if (buf[off + i] != *want)
				return off + i;
		}
	}
	return len;
}

static void check_slot(struct verdict *v, const uint8_t *buf, size_t size, enum op op,
		       uint64_t iter, uint64_t seed_iter)
{
	uint8_t want = 0;
	size_t at = check(buf, size, seed_of(op, size, seed_iter), &want);

	if (at < size)
		mismatch(v, "iteration %" PRIu64 ": byte %zu is 0x%02x, expected 0x%02x", iter, at,
			 buf[at], want);
}

/* Remote slots used for a phase: one per iteration when they fit in the budget. */
static size_t slots_for(size_t size, int iters)
{
	size_t n = SLOT_BUDGET / size;

	if (n < MIN_SLOTS)
		n = MIN_SLOTS;
	return n < (size_t)iters ? n : (size_t)iters;
}

/* The operands of atomic iteration i given the remote word's value *cur, which it then advances
 * to the value the operation leaves behind. Every fourth CMP_AND_SWP is meant to miss. */
static void atomic_step(enum op op, uint64_t i, uint64_t *cur, uint64_t *compare_add,
			uint64_t *swap)
{
	uint64_t next = seed_of(op, 8, i + 1);

	if (op == OP_FAA) {
		*compare_add = next;
		*swap = 0;
		*cur += next;
		return;
	}
	*swap = next;
	if (i % 4 == 3) {
		*compare_add = ~*cur;
	} else {
		*compare_add = *cur;
		*cur = next;
	}
}

static uint64_t atomic_initial(enum op op)
{
	return seed_of(op, 8, 0);
}

/* ---- the socket ---- */

static int send_msg(struct ctx *c, const void *m, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = send(c->sock, (const char *)m + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fail(c, "peer went away (%s)", n < 0 ? strerror(errno) : "closed");
			return -1;
		}
		off += (size_t)n;
	}
	return 0;
}

static int recv_all(struct ctx *c, void *m, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = recv(c->sock, (char *)m + off, len - off, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fail(c, "peer went away (%s)", n < 0 ? strerror(errno) : "closed");
			return -1;
		}
		off += (size_t)n;
	}
	return 0;
}

static int recv_msg(struct ctx *c, struct msg *m, uint32_t type)
{
	if (recv_all(c, m, sizeof(*m)))
		return -1;
	if (type && m->type != type) {
		fail(c, "protocol error: message %u, expected %u", m->type, type);
		return -1;
	}
	return 0;
}

static int send_type(struct ctx *c, uint32_t type)
{
	struct msg m = {.type = type};

	return send_msg(c, &m, sizeof(m));
}

/* True once the peer has closed its end; a message waiting to be read does not count. */
static bool peer_gone(struct ctx *c)
{
	char byte;

	return recv(c->sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* ---- verbs resources ---- */

static struct ibv_device *pick_device(struct ctx *c, const char *name)
{
	int n = 0;

	c->list = ibv_get_device_list(&n);
	if (!c->list || n == 0) {
		fail(c, "no RDMA device (check `urnic devices`)");
		return NULL;
	}
	for (int i = 0; i < n; i++)
		if (!name || strcmp(ibv_get_device_name(c->list[i]), name) == 0)
			return c->list[i];
	fail(c, "no device named %s", name);
	return NULL;
}

static int open_device(struct ctx *c, const char *name)
{
	struct ibv_device *dev = pick_device(c, name);

	if (!dev)
		return -1;
	c->ctx = ibv_open_device(dev);
	if (!c->ctx) {
		fail(c, "ibv_open_device(%s): %s", ibv_get_device_name(dev), strerror(errno));
		return -1;
	}
	errno = ibv_query_port(c->ctx, PORT_NUM, &c->port);
	if (errno) {
		fail(c, "ibv_query_port: %s", strerror(errno));
		return -1;
	}
	if (c->port.state != IBV_PORT_ACTIVE) {
		fail(c, "port %d of %s is not active", PORT_NUM, ibv_get_device_name(dev));
		return -1;
	}
	if (ibv_query_gid(c->ctx, PORT_NUM, GID_INDEX, &c->gid)) {
		fail(c, "ibv_query_gid: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int create_qp(struct ctx *c)
{
	struct ibv_qp_init_attr attr = {
	    .send_cq = c->cq,
	    .recv_cq = c->cq,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	    .sq_sig_all = 1,
	};

	c->qp = ibv_create_qp(c->pd, &attr);
	if (!c->qp) {
		fail(c, "ibv_create_qp: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* A buffer of slot_len bytes of slots and, 64-byte aligned after them, the 8-byte atomic word. */
static int create_resources(struct ctx *c, size_t slot_len)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	void *buf;

	c->atomic_off = (slot_len + 63) & ~(size_t)63;
	c->len = c->atomic_off + 64;
	if (posix_memalign(&buf, 4096, c->len)) {
		fail(c, "cannot allocate %zu bytes", c->len);
		return -1;
	}
	c->buf = memset(buf, 0, c->len);
	c->pd = ibv_alloc_pd(c->ctx);
	if (!c->pd) {
		fail(c, "ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	c->mr = ibv_reg_mr(c->pd, c->buf, c->len, access);
	if (!c->mr) {
		fail(c, "ibv_reg_mr(%zu bytes): %s", c->len, strerror(errno));
		return -1;
	}
	c->cq = ibv_create_cq(c->ctx, CQ_DEPTH, NULL, NULL, 0);
	if (!c->cq) {
		fail(c, "ibv_create_cq: %s", strerror(errno));
		return -1;
	}
	return create_qp(c);
}

static void destroy_resources(struct ctx *c)
{
	if (c->qp)
		ibv_destroy_qp(c->qp);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->ctx)
		ibv_close_device(c->ctx);
	if (c->list)
		ibv_free_device_list(c->list);
	free(c->buf);
}

/* ---- connecting ---- */

static int exchange(struct ctx *c)
{
	struct peer_info me = {
	    .qpn = c->qp->qp_num,
	    .psn = c->psn,
	    .lid = c->port.lid,
	    .addr = (uintptr_t)c->buf,
	    .atomic_addr = (uintptr_t)(c->buf + c->atomic_off),
	    .rkey = c->mr->rkey,
	};

	memcpy(me.gid, c->gid.raw, sizeof(me.gid));
	if (send_msg(c, &me, sizeof(me)))
		return -1;
	return recv_all(c, &c->peer, sizeof(c->peer));
}

static int modify(struct ctx *c, struct ibv_qp_attr *attr, int mask, const char *state)
{
	errno = ibv_modify_qp(c->qp, attr, mask);
	if (errno) {
		fail(c, "ibv_modify_qp(%s): %s", state, strerror(errno));
		return -1;
	}
	return 0;
}

static int to_init(struct ctx *c)
{
	struct ibv_qp_attr attr = {
	    .qp_state = IBV_QPS_INIT,
	    .pkey_index = 0,
	    .port_num = PORT_NUM,
	    .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};

	return modify(c, &attr,
		      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
}

static int to_rtr(struct ctx *c)
{
	struct ibv_qp_attr attr = {
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = c->port.active_mtu,
	    .dest_qp_num = c->peer.qpn,
	    .rq_psn = c->peer.psn,
	    .max_dest_rd_atomic = 16,
	    .min_rnr_timer = 12,
	    .ah_attr =
		{
		    .is_global = 1,
		    .dlid = c->peer.lid,
		    .port_num = PORT_NUM,
		    .grh = {.sgid_index = GID_INDEX, .hop_limit = 64},
		},
	};

	memcpy(attr.ah_attr.grh.dgid.raw, c->peer.gid, sizeof(c->peer.gid));
	return modify(c, &attr,
		      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
		      "RTR");
}

static int to_rts(struct ctx *c)
{
	struct ibv_qp_attr attr = {
	    .qp_state = IBV_QPS_RTS,
	    .timeout = 14,
	    .retry_cnt = 7,
	    .rnr_retry = 7,
	    .sq_psn = c->psn,
	    .max_rd_atomic = 16,
	};

	return modify(c, &attr,
		      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
		      "RTS");
}

static int connect_qp(struct ctx *c)
{
	c->psn = (uint32_t)mix((uint64_t)getpid() ^ now_ns()) & 0xffffff;
	if (exchange(c) || to_init(c) || to_rtr(c) || to_rts(c))
		return -1;
	return 0;
}

/* ---- completions ---- */

/* Waits for one completion; the server also gives up when the client has closed the socket. */
static int wait_wc(struct ctx *c, struct ibv_wc *wc, bool watch_peer)
{
	unsigned empty = 0;
	int n;

	while ((n = ibv_poll_cq(c->cq, 1, wc)) == 0) {
		if (watch_peer && ++empty % SOCK_CHECK_EVERY == 0 && peer_gone(c)) {
			fail(c, "client stopped while the server waited for a completion");
			return -1;
		}
	}
	if (n < 0) {
		fail(c, "ibv_poll_cq failed");
		return -1;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		fail(c, "completion error: %s (wr_id %" PRIu64 ", vendor_err %u)",
		     ibv_wc_status_str(wc->status), wc->wr_id, wc->vendor_err);
		return -1;
	}
	return 0;
}

/* ---- the server ---- */

/* Receive number i of a phase: SEND data lands in slot i % RECV_CREDITS; the receive that a
 * WRITE WITH IMM consumes carries no data, so it has no scatter list. */
static int post_recv(struct ctx *c, enum op op, size_t size, uint64_t i)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)(c->buf + (i % RECV_CREDITS) * size),
	    .length = (uint32_t)size,
	    .lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = i}, *bad;

	if (op == OP_SEND) {
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	errno = ibv_post_recv(c->qp, &wr, &bad);
	if (errno) {
		fail(c, "ibv_post_recv: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void server_prepare_memory(struct ctx *c, enum op op, size_t size, size_t slots)
{
	uint64_t word;

	memset(c->buf, 0, c->atomic_off);
	if (op == OP_READ)
		for (size_t s = 0; s < slots; s++)
			fill(c->buf + s * size, size, seed_of(op, size, s));
	if (ops[op].atomic) {
		word = atomic_initial(op);
		memcpy(c->buf + c->atomic_off, &word, sizeof(word));
	}
}

static void check_recv_wc(struct ctx *c, const struct ibv_wc *wc, enum op op, size_t size,
			  size_t slots, uint64_t i, struct verdict *v)
{
	bool imm = op == OP_WRITE_IMM;
	size_t slot = imm ? i % slots : i % RECV_CREDITS;

	if (wc->opcode != (imm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV))
		mismatch(v, "iteration %" PRIu64 ": completion opcode %d", i, wc->opcode);
	else if (!!(wc->wc_flags & IBV_WC_WITH_IMM) != imm)
		mismatch(v, "iteration %" PRIu64 ": immediate flag %s", i, imm ? "missing" : "set");
	else if (imm && ntohl(wc->imm_data) != (uint32_t)i)
		mismatch(v, "iteration %" PRIu64 ": immediate %u", i, ntohl(wc->imm_data));
	else if (wc->byte_len != size)
		mismatch(v, "iteration %" PRIu64 ": byte_len %u", i, wc->byte_len);
	else if (wc->wr_id != i)
		mismatch(v, "iteration %" PRIu64 ": completion for receive %" PRIu64, i, wc->wr_id);
	else
		check_slot(v, c->buf + slot * size, size, op, i, i);
}

/* SEND and WRITE WITH IMM: check each arrival, then hand its receive back. */
static int server_receive(struct ctx *c, enum op op, size_t size, int iters, struct verdict *v)
{
	size_t slots = slots_for(size, iters);
	struct ibv_wc wc;

	for (int i = 0; i < iters && i < RECV_CREDITS; i++)
		if (post_recv(c, op, size, (uint64_t)i))
			return -1;
	if (send_type(c, MSG_READY))
		return -1;
	for (int i = 0; i < iters; i++) {
		if (wait_wc(c, &wc, true))
			return -1;
		check_recv_wc(c, &wc, op, size, slots, (uint64_t)i, v);
		if (i + RECV_CREDITS < iters &&
		    post_recv(c, op, size, (uint64_t)(i + RECV_CREDITS)))
			return -1;
	}
	return 0;
}

/* WRITE: each slot must hold the last iteration that wrote it. */
static void server_check_writes(struct ctx *c, size_t size, int iters, struct verdict *v)
{
	size_t slots = slots_for(size, iters);

	for (size_t s = 0; s < slots; s++) {
		uint64_t last = s + (uint64_t)((iters - 1 - s) / slots) * slots;

		check_slot(v, c->buf + s * size, size, OP_WRITE, last, last);
	}
}

static void server_check_atomic(struct ctx *c, enum op op, int iters, struct verdict *v)
{
	uint64_t want = atomic_initial(op), got, a, b;

	for (int i = 0; i < iters; i++)
		atomic_step(op, (uint64_t)i, &want, &a, &b);
	memcpy(&got, c->buf + c->atomic_off, sizeof(got));
	if (got != want)
		mismatch(v, "final value %#" PRIx64 ", expected %#" PRIx64, got, want);
}

static int server_phase(struct ctx *c, const struct msg *m, bool *all_ok)
{
	struct verdict v = {.ok = true};
	struct msg done, result = {.type = MSG_RESULT};
	enum op op = (enum op)m->op;
	size_t size = m->size;
	int iters = (int)m->iters;

	server_prepare_memory(c, op, size, slots_for(size, iters));
	if (op == OP_SEND || op == OP_WRITE_IMM) {
		if (server_receive(c, op, size, iters, &v))
			return -1;
	} else if (send_type(c, MSG_READY)) {
		return -1;
	}
	if (recv_msg(c, &done, MSG_DONE))
		return -1;
	if (op == OP_WRITE)
		server_check_writes(c, size, iters, &v);
	if (ops[op].atomic)
		server_check_atomic(c, op, iters, &v);
	result.ok = v.ok;
	snprintf(result.why, sizeof(result.why), "%s", v.why);
	*all_ok &= v.ok;
	return send_msg(c, &result, sizeof(result));
}

static bool valid_phase(const struct msg *m)
{
	return m->op < OP_COUNT && m->size > 0 && m->size <= MAX_SIZE && m->iters > 0 &&
	       m->iters <= MAX_ITERS;
}

static int serve(struct ctx *c)
{
	bool all_ok = true;
	struct msg m;

	for (;;) {
		if (recv_msg(c, &m, 0))
			return 1;
		if (m.type == MSG_QUIT)
			return all_ok ? 0 : 1;
		if (m.type != MSG_PHASE || !valid_phase(&m)) {
			fail(c, "protocol error: bad phase message");
			return 1;
		}
		if (server_phase(c, &m, &all_ok))
			return 1;
	}
}

/* ---- the client ---- */

struct phase {
	enum op op;
	size_t size;
	int iters;
	size_t slots;
	uint64_t atomic;  /* the remote word's expected value */
	uint64_t busy_ns; /* post to completion, summed */
	struct verdict v;
};

/* Builds iteration i's work request; the local buffer's first `size` bytes are its data. */
static void build_wr(struct ctx *c, struct phase *p, uint64_t i, struct ibv_send_wr *wr,
		     struct ibv_sge *sge)
{
	uint64_t remote = c->peer.addr + (i % p->slots) * p->size;

	*sge = (struct ibv_sge){
	    .addr = (uintptr_t)c->buf, .length = (uint32_t)p->size, .lkey = c->mr->lkey};
	*wr = (struct ibv_send_wr){.wr_id = i,
				   .sg_list = sge,
				   .num_sge = 1,
				   .opcode = ops[p->op].wr,
				   .send_flags = IBV_SEND_SIGNALED};
	if (ops[p->op].atomic) {
		sge->addr = (uintptr_t)(c->buf + c->atomic_off);
		sge->length = 8;
		wr->wr.atomic.remote_addr = c->peer.atomic_addr;
		wr->wr.atomic.rkey = c->peer.rkey;
		atomic_step(p->op, i, &p->atomic, &wr->wr.atomic.compare_add, &wr->wr.atomic.swap);
	} else if (p->op != OP_SEND) {
		wr->wr.rdma.remote_addr = remote;
		wr->wr.rdma.rkey = c->peer.rkey;
	}
	if (p->op == OP_WRITE_IMM)
		wr->imm_data = htonl((uint32_t)i);
}

/* Outgoing data gets iteration i's pattern; where data comes back, the old is wiped first. */
static void before_post(struct ctx *c, const struct phase *p, uint64_t i)
{
	if (p->op == OP_READ)
		memset(c->buf, 0, p->size);
	else if (!ops[p->op].atomic)
		fill(c->buf, p->size, seed_of(p->op, p->size, i));
	memset(c->buf + c->atomic_off, 0, 8);
}

static void after_completion(struct ctx *c, struct phase *p, uint64_t i, uint64_t expected_orig)
{
	uint64_t got;

	if (p->op == OP_READ) {
		check_slot(&p->v, c->buf, p->size, OP_READ, i, i % p->slots);
	} else if (ops[p->op].atomic) {
		memcpy(&got, c->buf + c->atomic_off, sizeof(got));
		if (got != expected_orig)
			mismatch(&p->v,
				 "iteration %" PRIu64 ": returned %#" PRIx64 ", expected %#" PRIx64,
				 i, got, expected_orig);
	}
}

static int client_iteration(struct ctx *c, struct phase *p, uint64_t i)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	uint64_t orig = p->atomic, t0;

	before_post(c, p, i);
	build_wr(c, p, i, &wr, &sge);
	t0 = now_ns();
	errno = ibv_post_send(c->qp, &wr, &bad);
	if (errno) {
		fail(c, "ibv_post_send(%s): %s", ops[p->op].name, strerror(errno));
		return -1;
	}
	if (wait_wc(c, &wc, false)) {
		fail(c, "%s of %zu bytes failed at iteration %" PRIu64, ops[p->op].name, p->size,
		     i);
		return -1;
	}
	p->busy_ns += now_ns() - t0;
	if (wc.opcode != ops[p->op].wc)
		mismatch(&p->v, "iteration %" PRIu64 ": completion opcode %d", i, wc.opcode);
	after_completion(c, p, i, orig);
	return 0;
}

static const char *size_text(size_t size, char *buf, size_t len)
{
	if (size >= (1u << 20) && size % (1u << 20) == 0)
		snprintf(buf, len, "%zu MiB", size >> 20);
	else if (size >= 1024 && size % 1024 == 0)
		snprintf(buf, len, "%zu KiB", size >> 10);
	else
		snprintf(buf, len, "%zu B", size);
	return buf;
}

static void print_header(const struct ctx *c, const struct params *prm)
{
	printf("urnic-demo: %s, %d iterations per row, one operation in flight\n\n",
	       ibv_get_device_name(c->ctx->device), prm->iters);
	printf("%-15s %8s %7s %14s %14s  %s\n", "operation", "size", "iters", "throughput",
	       "avg lat (us)", "data");
}

static void print_row(const struct phase *p, const struct verdict *server)
{
	double s = (double)p->busy_ns / 1e9;
	char size[32], rate[32];

	if (ops[p->op].atomic)
		snprintf(rate, sizeof(rate), "%.3f Mops", s > 0 ? p->iters / s / 1e6 : 0.0);
	else
		snprintf(rate, sizeof(rate), "%.1f MB/s",
			 s > 0 ? (double)p->size * p->iters / s / 1e6 : 0.0);
	printf("%-15s %8s %7d %14s %14.2f  %s\n", ops[p->op].name,
	       size_text(p->size, size, sizeof(size)), p->iters, rate,
	       (double)p->busy_ns / 1e3 / p->iters, p->v.ok && server->ok ? "ok" : "FAILED");
	if (!p->v.ok)
		fprintf(stderr, "urnic-demo: %s %s: client: %s\n", ops[p->op].name, size, p->v.why);
	if (!server->ok)
		fprintf(stderr, "urnic-demo: %s %s: server: %s\n", ops[p->op].name, size,
			server->why);
}

/* One row of the table. Returns 1 if the data was wrong, 0 if right, -1 if the run must stop. */
static int client_phase(struct ctx *c, enum op op, size_t size, int iters)
{
	struct phase p = {.op = op,
			  .size = size,
			  .iters = iters,
			  .slots = slots_for(size, iters),
			  .atomic = atomic_initial(op),
			  .v = {.ok = true}};
	struct msg m = {.type = MSG_PHASE, .op = op, .size = size, .iters = (uint32_t)iters};
	struct verdict server = {.ok = true};

	if (send_msg(c, &m, sizeof(m)) || recv_msg(c, &m, MSG_READY))
		return -1;
	for (int i = 0; i < iters; i++)
		if (client_iteration(c, &p, (uint64_t)i))
			return -1;
	if (send_type(c, MSG_DONE) || recv_msg(c, &m, MSG_RESULT))
		return -1;
	server.ok = m.ok;
	snprintf(server.why, sizeof(server.why), "%.*s", (int)sizeof(m.why) - 1, m.why);
	print_row(&p, &server);
	fflush(stdout);
	return p.v.ok && server.ok ? 0 : 1;
}

static int run_client(struct ctx *c, const struct params *prm)
{
	bool ok = true;
	int rc;

	print_header(c, prm);
	for (enum op op = 0; op < OP_COUNT; op++) {
		int nsizes = ops[op].atomic ? 1 : prm->nsizes;

		for (int s = 0; s < nsizes; s++) {
			rc = client_phase(c, op, ops[op].atomic ? 8 : prm->sizes[s], prm->iters);
			if (rc < 0)
				return 1;
			ok &= rc == 0;
		}
	}
	if (send_type(c, MSG_QUIT))
		return 1;
	return ok ? 0 : 1;
}

/* ---- the two processes ---- */

static size_t max_size(const struct params *prm)
{
	size_t m = 8;

	for (int i = 0; i < prm->nsizes; i++)
		if (prm->sizes[i] > m)
			m = prm->sizes[i];
	return m;
}

static size_t server_slot_len(const struct params *prm)
{
	size_t m = 8;

	for (int i = 0; i < prm->nsizes; i++) {
		size_t len = slots_for(prm->sizes[i], prm->iters) * prm->sizes[i];

		if (len > m)
			m = len;
	}
	return m;
}

static int run_role(const char *role, int sock, const struct params *prm)
{
	struct ctx c = {.role = role, .sock = sock};
	bool server = strcmp(role, "server") == 0;
	size_t slot_len = server ? server_slot_len(prm) : max_size(prm);
	int rc = 1;

	if (open_device(&c, prm->device) == 0 && create_resources(&c, slot_len) == 0 &&
	    connect_qp(&c) == 0)
		rc = server ? serve(&c) : run_client(&c, prm);
	destroy_resources(&c);
	return rc;
}

static void on_alarm(int sig)
{
	static const char msg[] = "urnic-demo: timed out\n";

	(void)sig;
	if (server_pid > 0)
		kill(server_pid, SIGKILL);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void start_timer(void)
{
	signal(SIGALRM, on_alarm);
	alarm(TIME_LIMIT_S);
}

static int reap_server(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		fprintf(stderr, "urnic-demo: server killed by signal %d\n", WTERMSIG(status));
	else
		fprintf(stderr, "urnic-demo: server failed (exit %d)\n", WEXITSTATUS(status));
	return 1;
}

/* ---- options ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: urnic-demo [-n ITERS] [-s SIZE] [-d DEVICE]\n"
		"  -n ITERS   iterations per operation and size (default %d)\n"
		"  -s SIZE    one message size instead of 8, 4K, 64K and 1M (suffix K or M)\n"
		"  -d DEVICE  device name (default: the first device)\n",
		DEFAULT_ITERS);
}

static bool parse_size(const char *s, size_t *size)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return false;
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (*end || v == 0 || v > MAX_SIZE)
		return false;
	*size = (size_t)v;
	return true;
}

static int parse_args(int argc, char **argv, struct params *prm)
{
	char *end;
	long n;
	int opt;

	while ((opt = getopt(argc, argv, "n:s:d:h")) != -1) {
		switch (opt) {
		case 'n':
			n = strtol(optarg, &end, 10);
			if (*end || end == optarg || n < 1 || n > MAX_ITERS) {
				fprintf(stderr, "urnic-demo: bad -n '%s' (1..%d)\n", optarg,
					MAX_ITERS);
				return 2;
			}
			prm->iters = (int)n;
			break;
		case 's':
			if (!parse_size(optarg, &prm->sizes[0])) {
				fprintf(stderr, "urnic-demo: bad -s '%s' (1..%u bytes)\n", optarg,
					MAX_SIZE);
				return 2;
			}
			prm->nsizes = 1;
			break;
		case 'd':
			prm->device = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "urnic-demo: unexpected '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct params prm = {
	    .iters = DEFAULT_ITERS, .sizes = {8, 4096, 65536, 1 << 20}, .nsizes = 4};
	int sv[2], rc = parse_args(argc, argv, &prm);

	if (rc >= 0)
		return rc;
	/* Fork before any verbs call: each process opens the device on its own. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		perror("urnic-demo: socketpair");
		return 1;
	}
	fflush(stdout);
	server_pid = fork();
	if (server_pid < 0) {
		perror("urnic-demo: fork");
		return 1;
	}
	if (server_pid == 0) {
		close(sv[0]);
		alarm(TIME_LIMIT_S); /* SIGALRM's default action ends the server */
		_exit(run_role("server", sv[1], &prm));
	}
	close(sv[1]);
	start_timer();
	rc = run_role("client", sv[0], &prm);
	close(sv[0]);
	rc |= reap_server(server_pid);
	if (rc == 0)
		printf("\nall data checked out\n");
	return rc ? 1 : 0;
}
