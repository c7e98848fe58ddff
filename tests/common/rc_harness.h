/* rc_harness.h - two-process RC test harness: fork, connect QPs, post/poll with deadlines, verify.
 */
#ifndef URNIC_RC_HARNESS_H
#define URNIC_RC_HARNESS_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Exit codes, as ctest and the liburing tests read them. */
enum { RC_PASS = 0, RC_FAIL = 1, RC_SKIP = 77 };

#define RC_MAX_QP 64
#define RC_MIB ((size_t)1 << 20)
#define RC_GUARD 4096u		  /* canary bytes checked around every landing zone */
#define RC_CANARY 0xa5		  /* value of those bytes */
#define RC_WAIT_MS 20000u	  /* default deadline of one rc_poll */
#define RC_DEVICE_MAX 0xffffffffu /* for rc_opts.max_sge: whatever the device allows */
#define RC_NSIZES 7

struct rc_opts {
	const char *name;      /* test name: prefixes every message */
	unsigned alarm_s;      /* wall-clock bound of each process */
	int nqp;	       /* RC QPs per side, QP i connects to the peer's QP i */
	size_t buf_size;       /* bytes registered per side (one MR) */
	int mr_access;	       /* MR access flags (both sides) */
	int qp_access;	       /* qp_access_flags (both sides) */
	enum ibv_mtu path_mtu; /* 0: the port's active MTU */
	uint8_t timeout;       /* local ACK timeout: 4.096 us * 2^timeout */
	uint8_t retry_cnt;
	uint8_t rnr_retry;     /* 7: retry forever */
	uint8_t min_rnr_timer; /* what this side's responder asks the peer to wait */
	uint8_t max_rd_atomic; /* max_rd_atomic and max_dest_rd_atomic, clamped to the device */
	uint32_t sq_depth, rq_depth;
	uint32_t max_sge; /* send and receive; RC_DEVICE_MAX for the device limit */
	uint32_t max_inline;
	bool sq_sig_all;
	bool channel; /* CQs report to a completion channel */
	bool uc;      /* UC QPs instead of RC (the IBTA's UC attribute rules apply) */
};

/* What one side tells the other over the socketpair. */
struct rc_peer {
	uint32_t qpn[RC_MAX_QP];
	uint32_t psn[RC_MAX_QP];
	union ibv_gid gid;
	uint16_t lid;
	uint64_t addr;
	uint32_t rkey;
	uint64_t size;
};

struct rc {
	struct rc_opts o;
	bool client;	  /* parent: the requester in most tests; child: the server */
	const char *role; /* "client" or "server" */
	const char *path; /* URNIC_TEST_PATH: which transport the suite runs over */
	int sock;	  /* socketpair end, -1 in single-process tests */
	pid_t child;	  /* client only: the server's pid */
	bool peer_dead;	  /* client only: the server was killed and reaped on purpose */

	struct ibv_context *ctx;
	struct ibv_device_attr dev;
	struct ibv_port_attr port;
	uint32_t mtu; /* path MTU in bytes */
	uint8_t rd_atomic;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp[RC_MAX_QP];
	struct ibv_qp_cap cap; /* what ibv_create_qp granted (QP 0) */
	uint8_t *buf; /* buf_size bytes registered, followed by RC_GUARD unregistered ones */
	struct ibv_mr *mr;
	struct rc_peer me, peer;
};

typedef int (*rc_fn)(struct rc *rc);

/* Options every test starts from; change fields before rc_run. */
struct rc_opts rc_defaults(const char *name);

/* Forks: the child runs server, the parent client, each with its own device context, PD, CQs,
 * QPs (connected to RTS) and MR. Returns the combined exit code for main(). */
int rc_run(const struct rc_opts *o, rc_fn server, rc_fn client);

/* One fresh pair of processes per case: sets *c to each case in turn, lets adjust (may be
 * NULL) change the options for it, and returns the combined exit code. */
int rc_run_cases(const struct rc_opts *o, int ncases, int *c,
		 void (*adjust)(struct rc_opts *o, int c), rc_fn server, rc_fn client);

/* Worst of two exit codes: fail, then skip, then pass. */
int rc_combine(int a, int b);

/* Single process: resources opened, QPs left in RESET; no peer. */
int rc_run_local(const struct rc_opts *o, rc_fn fn);

/* Names the step in progress; failures and the alarm report it. */
void rc_step(struct rc *rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void rc_fail(struct rc *rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void rc_skip(struct rc *rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define RC_CHECK(rc, cond, ...)                                                                    \
	do {                                                                                       \
		if (!(cond))                                                                       \
			rc_fail(rc, __VA_ARGS__);                                                  \
	} while (0)

/* Fails unless got (an errno value, 0 for success) is want. */
void rc_expect_errno(struct rc *rc, int got, int want, const char *what);

/* Socketpair side channel. */
void rc_sync(struct rc *rc);
void rc_put(struct rc *rc, uint64_t v);
uint64_t rc_get(struct rc *rc);
void rc_exchange(struct rc *rc); /* sends rc->me, fills rc->peer */

/* QP transitions with the options' attributes; each fails the test on error. */
void rc_modify(struct rc *rc, struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
void rc_qp_init(struct rc *rc, struct ibv_qp *qp);
void rc_qp_rtr(struct rc *rc, struct ibv_qp *qp, const struct rc_peer *to, int i);
void rc_qp_rts(struct rc *rc, struct ibv_qp *qp, uint32_t sq_psn);
void rc_connect(struct rc *rc); /* every QP i: INIT, RTR to peer QP i, RTS */
enum ibv_qp_state rc_qp_state(struct rc *rc, struct ibv_qp *qp);
void rc_fill_ah(struct rc *rc, struct ibv_ah_attr *ah, const struct rc_peer *to);

/* A one-SGE send WR over rc->buf + loff; RDMA and atomic ops target peer.addr + roff.
 * Signaled. Tests adjust fields (imm_data, send_flags, atomic operands) before posting. */
struct rc_wr {
	struct ibv_send_wr wr;
	struct ibv_sge sge;
};
void rc_wr(struct rc *rc, struct rc_wr *w, enum ibv_wr_opcode op, uint64_t wr_id, size_t loff,
	   size_t len, uint64_t roff);
void rc_post_send(struct rc *rc, int q, struct ibv_send_wr *wr);
void rc_post_recv(struct rc *rc, int q, uint64_t wr_id, size_t off, size_t len);

/* Polls until n completions arrived or ms passed (then fails). */
void rc_poll(struct rc *rc, struct ibv_cq *cq, struct ibv_wc *wc, int n, unsigned ms);
/* Checks wr_id and status; the opcode too when status is success and opcode >= 0. */
void rc_expect(struct rc *rc, const struct ibv_wc *wc, uint64_t wr_id, enum ibv_wc_status status,
	       int opcode);
/* One successful completion of wr_id with opcode, copied to *out when out is not NULL. */
void rc_wait(struct rc *rc, struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_opcode opcode,
	     struct ibv_wc *out);
/* Fails if cq produces any completion within ms. */
void rc_expect_empty(struct rc *rc, struct ibv_cq *cq, unsigned ms);
const char *rc_wc_opcode_str(int opcode);

/* Deterministic data: byte at stream offset off of pattern seed. */
void rc_fill(void *p, size_t len, uint32_t seed);
void rc_fill_from(void *p, size_t len, uint32_t seed, size_t start);
void rc_check(struct rc *rc, const void *p, size_t len, uint32_t seed, const char *what);
void rc_check_from(struct rc *rc, const void *p, size_t len, uint32_t seed, size_t start,
		   const char *what);
void rc_check_const(struct rc *rc, const void *p, size_t len, uint8_t v, const char *what);

/* 0, 1, MTU-1, MTU, MTU+1, 1 MiB, 64 MiB: those that fit in max bytes. Returns the count. */
int rc_sizes(const struct rc *rc, size_t max, size_t out[RC_NSIZES]);

/* Client only: SIGKILLs the server and reaps it; the harness then expects no peer. */
void rc_kill_peer(struct rc *rc);
/* Client only: SIGSTOP to the server, returning once it is stopped (every thread of it). */
void rc_stop_peer(struct rc *rc);
/* Client: waits for a server that exits on its own, and returns its wait status. */
int rc_reap_peer(struct rc *rc);

/* xorshift32: a seeded, reproducible sequence for tests that pick at random (state never 0). */
uint32_t rc_rand(uint32_t *state);

/* This process's device-wide `urnic stats` counters (URNIC_C_COUNT of them, enum urnic_counter
 * order), read from its stats file; skips the test where there is none. */
void rc_read_counters(struct rc *rc, uint64_t *out);
/* One of them: c is an enum urnic_counter. */
uint64_t rc_counter(struct rc *rc, unsigned c);

double rc_now_ms(void);
void rc_sleep_ms(unsigned ms);

/* The resident memory of a process in KiB (VmRSS), or -1. */
long rc_rss_kib(pid_t pid);

#endif
