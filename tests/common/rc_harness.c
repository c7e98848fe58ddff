/* rc_harness.c - the two-process RC harness behind tests/rc: setup, side channel, post/poll, data.
 */
#include "rc_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/stats.h"

/* What the SIGALRM handler may read: plain strings and a pid. */
static const char *g_name = "rc";
static const char *g_role = "?";
static char g_step[160] = "setup";
static pid_t g_child;

static void put_str(const char *s)
{
	ssize_t r = write(STDERR_FILENO, s, strlen(s));
	(void)r;
}

static void on_alarm(int sig)
{
	(void)sig;
	put_str(g_name);
	put_str("[");
	put_str(g_role);
	put_str("]: timed out (alarm) in step: ");
	put_str(g_step);
	put_str("\n");
	if (g_child > 0)
		kill(g_child, SIGKILL);
	_exit(RC_FAIL);
}

double rc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void rc_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

struct rc_opts rc_defaults(const char *name)
{
	return (struct rc_opts){
	    .name = name,
	    .alarm_s = 60,
	    .nqp = 1,
	    .buf_size = 64 * RC_MIB + 64 * 1024,
	    .mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			 IBV_ACCESS_REMOTE_ATOMIC,
	    .qp_access =
		IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	    .timeout = 14,
	    .retry_cnt = 7,
	    .rnr_retry = 7,
	    .min_rnr_timer = 12,
	    .max_rd_atomic = 16,
	    .sq_depth = 128,
	    .rq_depth = 128,
	    .max_sge = 1,
	};
}

/* ---- messages and exit ---- */

static void vreport(struct rc *rc, const char *what, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s[%s] %s in step '%s': ", g_name, rc ? rc->role : g_role, what, g_step);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* Client side: the server is not left behind, whatever the outcome. */
static void kill_child(struct rc *rc)
{
	if (rc && rc->client && rc->child > 0 && !rc->peer_dead) {
		kill(rc->child, SIGKILL);
		waitpid(rc->child, NULL, 0);
		rc->peer_dead = true;
	}
}

void rc_step(struct rc *rc, const char *fmt, ...)
{
	va_list ap;

	(void)rc;
	va_start(ap, fmt);
	vsnprintf(g_step, sizeof(g_step), fmt, ap);
	va_end(ap);
}

void rc_fail(struct rc *rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(rc, "FAIL", fmt, ap);
	va_end(ap);
	kill_child(rc);
	exit(RC_FAIL);
}

void rc_skip(struct rc *rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(rc, "SKIP", fmt, ap);
	va_end(ap);
	kill_child(rc);
	exit(RC_SKIP);
}

void rc_expect_errno(struct rc *rc, int got, int want, const char *what)
{
	if (got != want)
		rc_fail(rc, "%s: got %d (%s), expected %d (%s)", what, got,
			got ? strerror(got) : "success", want, want ? strerror(want) : "success");
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return RC_FAIL;
}

static void describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "status %#x", status);
}

/* Client: the server went away early. Its skip is ours; anything else fails. */
static _Noreturn void peer_gone(struct rc *rc, int status)
{
	char why[96];

	rc->peer_dead = true;
	if (exit_code_of(status) == RC_SKIP)
		exit(RC_SKIP);
	describe_status(status, why, sizeof(why));
	rc_fail(rc, "server %s", why);
}

/* Client: fail fast when the server already failed instead of waiting out a deadline. */
static void check_peer(struct rc *rc)
{
	int status;

	if (!rc->client || rc->child <= 0 || rc->peer_dead)
		return;
	if (waitpid(rc->child, &status, WNOHANG) == rc->child)
		peer_gone(rc, status);
}

/* ---- side channel ---- */

static void sock_io(struct rc *rc, void *p, size_t len, bool out)
{
	uint8_t *b = p;

	RC_CHECK(rc, rc->sock >= 0, "no peer in a single-process test");
	while (len) {
		ssize_t r = out ? send(rc->sock, b, len, MSG_NOSIGNAL) : recv(rc->sock, b, len, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (rc->client && rc->child > 0 && !rc->peer_dead) {
				int status;

				waitpid(rc->child, &status, 0);
				peer_gone(rc, status);
			}
			/* Server: the client ended; its exit code is the verdict. */
			rc_fail(rc, "peer closed the side channel");
		}
		b += r;
		len -= (size_t)r;
	}
}

void rc_sync(struct rc *rc)
{
	uint8_t b = 0x5a;

	sock_io(rc, &b, 1, true);
	sock_io(rc, &b, 1, false);
	RC_CHECK(rc, b == 0x5a, "side channel out of step (got %#x)", b);
}

void rc_put(struct rc *rc, uint64_t v)
{
	sock_io(rc, &v, sizeof(v), true);
}

uint64_t rc_get(struct rc *rc)
{
	uint64_t v;

	sock_io(rc, &v, sizeof(v), false);
	return v;
}

void rc_exchange(struct rc *rc)
{
	sock_io(rc, &rc->me, sizeof(rc->me), true);
	sock_io(rc, &rc->peer, sizeof(rc->peer), false);
}

/* ---- setup ---- */

/* The one place the suite picks its transport, before the device is opened. URNIC_TEST_PATH=udp:
 * packets go over UDP sockets (URNIC_SHM=0); shm: between processes of this host through the
 * shared-memory rings (net/shm.c); unset (auto): what the library picks, as for an application
 * (the two-namespace runs of tests/net). ctest runs the suite both ways; check_path then proves
 * that the run took the path it was asked to. */
static void select_path(struct rc *rc)
{
	const char *p = getenv("URNIC_TEST_PATH");

	rc->path = (p && *p) ? p : "auto";
	if (strcmp(rc->path, "udp") == 0)
		setenv("URNIC_SHM", "0", 1);
	else if (strcmp(rc->path, "shm") == 0)
		setenv("URNIC_SHM", "1", 1);
	else if (strcmp(rc->path, "auto") != 0)
		rc_skip(rc, "URNIC_TEST_PATH=%s: not a path (udp, shm)", rc->path);
}

static void check_path(struct rc *rc)
{
	uint64_t c[URNIC_C_COUNT];

	if (strcmp(rc->path, "auto") == 0)
		return;
	rc_read_counters(rc, c);
	uint64_t shm = c[URNIC_C_shm_tx_packets] + c[URNIC_C_shm_ring_full];

	if (strcmp(rc->path, "udp") == 0)
		RC_CHECK(rc, shm == 0 && c[URNIC_C_shm_rx_packets] == 0,
			 "path udp: %llu packets went through shared memory", (unsigned long long)shm);
	else
		RC_CHECK(rc, shm == c[URNIC_C_tx_packets],
			 "path shm: %llu of %llu packets sent took a ring",
			 (unsigned long long)shm, (unsigned long long)c[URNIC_C_tx_packets]);
}

/* Two-namespace runs (tests/net/): URNIC_TEST_{CLIENT,SERVER}_NETNS names a network namespace
 * (/run/netns/NAME) that side enters before it opens the device, and
 * URNIC_TEST_{CLIENT,SERVER}_ADDR the address there that its urnic0 binds (URNIC_ADDR). */
static void enter_netns(struct rc *rc)
{
	char var[40], path[300];
	const char *ns, *addr;

	snprintf(var, sizeof(var), "URNIC_TEST_%s_NETNS", rc->client ? "CLIENT" : "SERVER");
	ns = getenv(var);
	snprintf(var, sizeof(var), "URNIC_TEST_%s_ADDR", rc->client ? "CLIENT" : "SERVER");
	addr = getenv(var);
	if (!ns || !*ns)
		return;
	rc_step(rc, "enter network namespace %s", ns);
	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
		rc_fail(rc, "setns %s: %s", path, strerror(errno));
	close(fd);
	if (!addr || setenv("URNIC_ADDR", addr, 1) != 0)
		rc_fail(rc, "%s must name this side's address in %s", var, ns);
}

static uint32_t clamp32(uint32_t want, int max)
{
	return max > 0 && want > (uint32_t)max ? (uint32_t)max : want;
}

/* URNIC_TEST_MTU=256..4096 runs a test at that path MTU (ctest registers variants). */
static enum ibv_mtu env_mtu(enum ibv_mtu active)
{
	const char *v = getenv("URNIC_TEST_MTU");

	for (enum ibv_mtu m = IBV_MTU_256; v && m <= IBV_MTU_4096; m++)
		if ((unsigned)atoi(v) == 128u << m)
			return m <= active ? m : active;
	return active;
}

static void open_device(struct rc *rc)
{
	struct ibv_device **list;
	int n = 0;

	rc_step(rc, "open the default device");
	list = ibv_get_device_list(&n);
	if (!list || n == 0)
		rc_skip(rc, "no RDMA device (ibv_get_device_list: %s)",
			list ? "empty" : strerror(errno));
	rc->ctx = ibv_open_device(list[0]);
	if (!rc->ctx)
		rc_fail(rc, "ibv_open_device(%s): %s", ibv_get_device_name(list[0]),
			strerror(errno));
	ibv_free_device_list(list);

	RC_CHECK(rc, ibv_query_device(rc->ctx, &rc->dev) == 0, "ibv_query_device failed");
	RC_CHECK(rc, ibv_query_port(rc->ctx, 1, &rc->port) == 0, "ibv_query_port(1) failed");
	if (rc->port.state != IBV_PORT_ACTIVE)
		rc_skip(rc, "port 1 is not active (state %d)", rc->port.state);
	if (ibv_query_gid(rc->ctx, 1, 0, &rc->me.gid))
		rc_fail(rc, "ibv_query_gid(port 1, index 0): %s", strerror(errno));
	rc->me.lid = rc->port.lid;

	enum ibv_mtu mtu = rc->o.path_mtu ? rc->o.path_mtu : env_mtu(rc->port.active_mtu);
	rc->o.path_mtu = mtu;
	rc->mtu = 128u << mtu; /* IBV_MTU_256 is 1 */
	rc->rd_atomic = (uint8_t)clamp32(rc->o.max_rd_atomic, rc->dev.max_qp_rd_atom);
	rc->rd_atomic = (uint8_t)clamp32(rc->rd_atomic, rc->dev.max_qp_init_rd_atom);
}

static void create_qps(struct rc *rc)
{
	uint32_t sge = rc->o.max_sge == RC_DEVICE_MAX ? (uint32_t)rc->dev.max_sge : rc->o.max_sge;

	for (int i = 0; i < rc->o.nqp; i++) {
		struct ibv_qp_init_attr a = {
		    .qp_context = rc,
		    .send_cq = rc->scq,
		    .recv_cq = rc->rcq,
		    .cap = {.max_send_wr = rc->o.sq_depth,
			    .max_recv_wr = rc->o.rq_depth,
			    .max_send_sge = sge,
			    .max_recv_sge = sge,
			    .max_inline_data = rc->o.max_inline},
		    .qp_type = rc->o.uc ? IBV_QPT_UC : IBV_QPT_RC,
		    .sq_sig_all = rc->o.sq_sig_all,
		};

		rc->qp[i] = ibv_create_qp(rc->pd, &a);
		if (!rc->qp[i])
			rc_fail(rc, "ibv_create_qp(sq %u, rq %u, sge %u, inline %u): %s",
				rc->o.sq_depth, rc->o.rq_depth, sge, rc->o.max_inline,
				strerror(errno));
		if (i == 0)
			rc->cap = a.cap;
		rc->me.qpn[i] = rc->qp[i]->qp_num;
		/* Start near the 24-bit wrap so that long transfers cross it. */
		rc->me.psn[i] =
		    (0xffffffu - 0x800u * (uint32_t)i - (rc->client ? 0x400u : 0u) - 0x40u) &
		    0xffffffu;
	}
}

static void open_resources(struct rc *rc)
{
	open_device(rc);
	rc_step(rc, "create PD, CQs, MR, QPs");
	rc->pd = ibv_alloc_pd(rc->ctx);
	RC_CHECK(rc, rc->pd, "ibv_alloc_pd: %s", strerror(errno));
	if (rc->o.channel) {
		rc->channel = ibv_create_comp_channel(rc->ctx);
		RC_CHECK(rc, rc->channel, "ibv_create_comp_channel: %s", strerror(errno));
	}
	int scqe = (int)(rc->o.sq_depth * (uint32_t)rc->o.nqp);
	int rcqe = (int)(rc->o.rq_depth * (uint32_t)rc->o.nqp);
	rc->scq = ibv_create_cq(rc->ctx, scqe, rc, rc->channel, 0);
	RC_CHECK(rc, rc->scq, "ibv_create_cq(%d): %s", scqe, strerror(errno));
	rc->rcq = ibv_create_cq(rc->ctx, rcqe, rc, rc->channel, 0);
	RC_CHECK(rc, rc->rcq, "ibv_create_cq(%d): %s", rcqe, strerror(errno));

	/* One unregistered guard area after the MR catches writes past its end. */
	size_t map = rc->o.buf_size + RC_GUARD;
	void *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	RC_CHECK(rc, p != MAP_FAILED, "mmap(%zu): %s", map, strerror(errno));
	rc->buf = p;
	memset(rc->buf + rc->o.buf_size, RC_CANARY, RC_GUARD);
	rc->mr = ibv_reg_mr(rc->pd, rc->buf, rc->o.buf_size, rc->o.mr_access);
	RC_CHECK(rc, rc->mr, "ibv_reg_mr(%zu, access %#x): %s", rc->o.buf_size, rc->o.mr_access,
		 strerror(errno));
	rc->me.addr = (uintptr_t)rc->buf;
	rc->me.rkey = rc->mr->rkey;
	rc->me.size = rc->o.buf_size;
	create_qps(rc);
}

static void close_resources(struct rc *rc)
{
	int r;

	rc_step(rc, "teardown");
	for (int i = 0; i < rc->o.nqp; i++)
		if (rc->qp[i] && (r = ibv_destroy_qp(rc->qp[i])))
			rc_fail(rc, "ibv_destroy_qp: %s", strerror(r));
	if ((r = ibv_destroy_cq(rc->scq)) || (r = ibv_destroy_cq(rc->rcq)))
		rc_fail(rc, "ibv_destroy_cq: %s", strerror(r));
	if (rc->channel && (r = ibv_destroy_comp_channel(rc->channel)))
		rc_fail(rc, "ibv_destroy_comp_channel: %s", strerror(r));
	if ((r = ibv_dereg_mr(rc->mr)))
		rc_fail(rc, "ibv_dereg_mr: %s", strerror(r));
	if ((r = ibv_dealloc_pd(rc->pd)))
		rc_fail(rc, "ibv_dealloc_pd: %s", strerror(r));
	if ((r = ibv_close_device(rc->ctx)))
		rc_fail(rc, "ibv_close_device: %s", strerror(r));
	munmap(rc->buf, rc->o.buf_size + RC_GUARD);
}

/* URNIC_TEST_SLOW=N (the TSan build sets 4): every deadline N times longer. Only deadlines for
 * what must happen stretch; the waits that prove something does not happen stay as they are. */
static unsigned slow_factor(void)
{
	const char *v = getenv("URNIC_TEST_SLOW");
	long f = v ? strtol(v, NULL, 10) : 1;

	return f >= 1 && f <= 100 ? (unsigned)f : 1;
}

static void arm_alarm(struct rc *rc)
{
	struct sigaction sa = {.sa_handler = on_alarm};

	g_name = rc->o.name;
	g_role = rc->role;
	g_child = rc->client ? rc->child : 0;
	sigaction(SIGALRM, &sa, NULL);
	alarm(rc->o.alarm_s * slow_factor());
}

int rc_combine(int a, int b)
{
	if (a == RC_SKIP && b == RC_SKIP)
		return RC_SKIP;
	if ((a != RC_PASS && a != RC_SKIP) || (b != RC_PASS && b != RC_SKIP))
		return RC_FAIL;
	return a == RC_SKIP || b == RC_SKIP ? RC_SKIP : RC_PASS;
}

static int side(const struct rc_opts *o, bool client, int sock, pid_t child, rc_fn fn)
{
	struct rc rc = {.o = *o, .client = client, .sock = sock, .child = child};
	int code;

	rc.role = client ? "client" : "server";
	arm_alarm(&rc);
	select_path(&rc);
	enter_netns(&rc);
	open_resources(&rc);
	rc_step(&rc, "exchange connection data");
	rc_exchange(&rc);
	rc_connect(&rc);
	rc_step(&rc, "test body");
	code = fn(&rc);
	if (code == RC_PASS)
		check_path(&rc);
	if (!rc.peer_dead) {
		rc_step(&rc, "final barrier");
		rc_sync(&rc);
	}
	close_resources(&rc);
	if (client && !rc.peer_dead) {
		int status;

		rc_step(&rc, "reap the server");
		waitpid(rc.child, &status, 0);
		if (exit_code_of(status) != RC_PASS && exit_code_of(status) != RC_SKIP) {
			char why[96];

			describe_status(status, why, sizeof(why));
			fprintf(stderr, "%s[client]: server %s\n", g_name, why);
		}
		code = rc_combine(code, exit_code_of(status));
	}
	return code;
}

int rc_run(const struct rc_opts *o, rc_fn server, rc_fn client)
{
	int sv[2];
	pid_t pid;

	if (o->nqp < 1 || o->nqp > RC_MAX_QP) {
		fprintf(stderr, "%s: nqp %d out of range\n", o->name, o->nqp);
		return RC_FAIL;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		return RC_FAIL;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return RC_FAIL;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sv[0]);
		exit(side(o, false, sv[1], 0, server));
	}
	close(sv[1]);
	int code = side(o, true, sv[0], pid, client);
	close(sv[0]);
	return code;
}

int rc_run_cases(const struct rc_opts *o, int ncases, int *c,
		 void (*adjust)(struct rc_opts *o, int c), rc_fn server, rc_fn client)
{
	int code = RC_PASS;

	for (*c = 0; *c < ncases; (*c)++) {
		struct rc_opts oc = *o;

		if (adjust)
			adjust(&oc, *c);
		int r = rc_run(&oc, server, client);
		if (r != RC_PASS)
			fprintf(stderr, "%s: case %d -> exit %d\n", o->name, *c, r);
		code = rc_combine(code, r);
	}
	return code;
}

int rc_run_local(const struct rc_opts *o, rc_fn fn)
{
	struct rc rc = {.o = *o, .client = true, .sock = -1, .role = "local"};
	int code;

	arm_alarm(&rc);
	select_path(&rc);
	enter_netns(&rc);
	open_resources(&rc);
	rc_step(&rc, "test body");
	code = fn(&rc);
	close_resources(&rc);
	return code;
}

void rc_kill_peer(struct rc *rc)
{
	RC_CHECK(rc, rc->client && rc->child > 0 && !rc->peer_dead, "no live server to kill");
	kill(rc->child, SIGKILL);
	waitpid(rc->child, NULL, 0);
	rc->peer_dead = true;
	g_child = 0;
}

void rc_stop_peer(struct rc *rc)
{
	int status = 0;

	RC_CHECK(rc, rc->client && rc->child > 0 && !rc->peer_dead, "no live server to stop");
	RC_CHECK(rc, kill(rc->child, SIGSTOP) == 0, "SIGSTOP the server: %s", strerror(errno));
	/* kill() returns before the signal stops a thread running on another CPU */
	RC_CHECK(rc, waitpid(rc->child, &status, WUNTRACED) == rc->child && WIFSTOPPED(status),
		 "the server did not stop");
}

int rc_reap_peer(struct rc *rc)
{
	int status = 0;

	RC_CHECK(rc, rc->client && rc->child > 0 && !rc->peer_dead, "no live server to wait for");
	RC_CHECK(rc, waitpid(rc->child, &status, 0) == rc->child, "waitpid: %s", strerror(errno));
	rc->peer_dead = true;
	g_child = 0;
	return status;
}

/* ---- QP state transitions ---- */

void rc_modify(struct rc *rc, struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int r = ibv_modify_qp(qp, attr, mask);

	if (r)
		rc_fail(rc, "ibv_modify_qp(qpn %#x to state %d, mask %#x): %s", qp->qp_num,
			attr->qp_state, mask, strerror(r));
}

void rc_qp_init(struct rc *rc, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT,
	    .pkey_index = 0,
	    .port_num = 1,
	    .qp_access_flags = (unsigned)rc->o.qp_access,
	};

	rc_modify(rc, qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

void rc_fill_ah(struct rc *rc, struct ibv_ah_attr *ah, const struct rc_peer *to)
{
	*ah = (struct ibv_ah_attr){
	    .dlid = rc->port.link_layer == IBV_LINK_LAYER_INFINIBAND ? to->lid : 0,
	    .is_global = 1,
	    .port_num = 1,
	    .grh = {.dgid = to->gid, .sgid_index = 0, .hop_limit = 64},
	};
}

void rc_qp_rtr(struct rc *rc, struct ibv_qp *qp, const struct rc_peer *to, int i)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu = rc->o.path_mtu,
	    .dest_qp_num = to->qpn[i],
	    .rq_psn = to->psn[i],
	    .max_dest_rd_atomic = rc->rd_atomic,
	    .min_rnr_timer = rc->o.min_rnr_timer,
	};

	rc_fill_ah(rc, &a.ah_attr, to);
	rc_modify(rc, qp, &a,
		  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		      (rc->o.uc ? 0 : IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
}

void rc_qp_rts(struct rc *rc, struct ibv_qp *qp, uint32_t sq_psn)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_RTS,
	    .sq_psn = sq_psn,
	    .timeout = rc->o.timeout,
	    .retry_cnt = rc->o.retry_cnt,
	    .rnr_retry = rc->o.rnr_retry,
	    .max_rd_atomic = rc->rd_atomic,
	};

	rc_modify(rc, qp, &a,
		  IBV_QP_STATE | IBV_QP_SQ_PSN |
		      (rc->o.uc ? 0 : IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				      IBV_QP_MAX_QP_RD_ATOMIC));
}

void rc_connect(struct rc *rc)
{
	rc_step(rc, "connect QPs (INIT, RTR, RTS)");
	for (int i = 0; i < rc->o.nqp; i++) {
		rc_qp_init(rc, rc->qp[i]);
		rc_qp_rtr(rc, rc->qp[i], &rc->peer, i);
		rc_qp_rts(rc, rc->qp[i], rc->me.psn[i]);
	}
}

enum ibv_qp_state rc_qp_state(struct rc *rc, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int r = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);

	if (r)
		rc_fail(rc, "ibv_query_qp(qpn %#x): %s", qp->qp_num, strerror(r));
	return a.qp_state;
}

/* ---- work requests and completions ---- */

static bool is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static bool is_rdma(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM ||
	       op == IBV_WR_RDMA_READ;
}

void rc_wr(struct rc *rc, struct rc_wr *w, enum ibv_wr_opcode op, uint64_t wr_id, size_t loff,
	   size_t len, uint64_t roff)
{
	memset(w, 0, sizeof(*w));
	w->sge.addr = (uintptr_t)(rc->buf + loff);
	w->sge.length = (uint32_t)len;
	w->sge.lkey = rc->mr->lkey;
	w->wr.wr_id = wr_id;
	w->wr.sg_list = &w->sge;
	/* A zero-length SGE means 2 GiB on some hardware: a zero-byte message has no SGE. */
	w->wr.num_sge = len ? 1 : 0;
	w->wr.opcode = op;
	w->wr.send_flags = IBV_SEND_SIGNALED;
	if (is_atomic(op)) {
		w->wr.wr.atomic.remote_addr = rc->peer.addr + roff;
		w->wr.wr.atomic.rkey = rc->peer.rkey;
	} else if (is_rdma(op)) {
		w->wr.wr.rdma.remote_addr = rc->peer.addr + roff;
		w->wr.wr.rdma.rkey = rc->peer.rkey;
	}
}

void rc_post_send(struct rc *rc, int q, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int r = ibv_post_send(rc->qp[q], wr, &bad);

	if (r)
		rc_fail(rc, "ibv_post_send(qp %d, wr_id %#llx): %s (bad_wr wr_id %#llx)", q,
			(unsigned long long)wr->wr_id, strerror(r),
			bad ? (unsigned long long)bad->wr_id : 0ull);
}

void rc_post_recv(struct rc *rc, int q, uint64_t wr_id, size_t off, size_t len)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)(rc->buf + off), .length = (uint32_t)len, .lkey = rc->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = len ? 1 : 0};
	struct ibv_recv_wr *bad = NULL;
	int r = ibv_post_recv(rc->qp[q], &wr, &bad);

	if (r)
		rc_fail(rc, "ibv_post_recv(qp %d, wr_id %#llx, %zu bytes): %s", q,
			(unsigned long long)wr_id, len, strerror(r));
}

static const char *cq_name(struct rc *rc, struct ibv_cq *cq)
{
	return cq == rc->scq ? "send" : cq == rc->rcq ? "recv" : "other";
}

void rc_poll(struct rc *rc, struct ibv_cq *cq, struct ibv_wc *wc, int n, unsigned ms)
{
	double start = rc_now_ms(), last_check = start;
	int got = 0, idle = 0;

	ms *= slow_factor();
	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		RC_CHECK(rc, r >= 0, "ibv_poll_cq(%s CQ) returned %d", cq_name(rc, cq), r);
		got += r;
		if (got == n)
			break;
		double now = rc_now_ms();
		if (now - start > ms)
			rc_fail(rc, "waited %u ms for %d completion(s) on the %s CQ, got %d", ms, n,
				cq_name(rc, cq), got);
		if (now - last_check > 100) {
			check_peer(rc);
			last_check = now;
		}
		/* Leave the CPU to a progress thread when nothing comes. */
		if (r == 0 && ++idle > 1000) {
			struct timespec ts = {0, 20000};

			nanosleep(&ts, NULL);
		}
	}
}

const char *rc_wc_opcode_str(int opcode)
{
	switch (opcode) {
	case IBV_WC_SEND:
		return "SEND";
	case IBV_WC_RDMA_WRITE:
		return "RDMA_WRITE";
	case IBV_WC_RDMA_READ:
		return "RDMA_READ";
	case IBV_WC_COMP_SWAP:
		return "COMP_SWAP";
	case IBV_WC_FETCH_ADD:
		return "FETCH_ADD";
	case IBV_WC_BIND_MW:
		return "BIND_MW";
	case IBV_WC_LOCAL_INV:
		return "LOCAL_INV";
	case IBV_WC_RECV:
		return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM:
		return "RECV_RDMA_WITH_IMM";
	default:
		return "?";
	}
}

void rc_expect(struct rc *rc, const struct ibv_wc *wc, uint64_t wr_id, enum ibv_wc_status status,
	       int opcode)
{
	if (wc->wr_id != wr_id)
		rc_fail(rc, "completion for wr_id %#llx (status %s), expected wr_id %#llx (%s)",
			(unsigned long long)wc->wr_id, ibv_wc_status_str(wc->status),
			(unsigned long long)wr_id, ibv_wc_status_str(status));
	if (wc->status != status)
		rc_fail(rc, "wr_id %#llx completed with %s (vendor_err %#x), expected %s",
			(unsigned long long)wr_id, ibv_wc_status_str(wc->status), wc->vendor_err,
			ibv_wc_status_str(status));
	/* ibv_poll_cq(3): only wr_id, status, qp_num and vendor_err are valid on error. */
	bool ours = false;
	for (int i = 0; i < rc->o.nqp; i++)
		ours |= rc->qp[i] && wc->qp_num == rc->qp[i]->qp_num;
	RC_CHECK(rc, ours, "wr_id %#llx: qp_num %#x is none of this side's QPs",
		 (unsigned long long)wr_id, wc->qp_num);
	if (status == IBV_WC_SUCCESS && opcode >= 0 && (int)wc->opcode != opcode)
		rc_fail(rc, "wr_id %#llx: opcode %s (%d), expected %s", (unsigned long long)wr_id,
			rc_wc_opcode_str(wc->opcode), wc->opcode, rc_wc_opcode_str(opcode));
}

void rc_wait(struct rc *rc, struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_opcode opcode,
	     struct ibv_wc *out)
{
	struct ibv_wc wc;

	rc_poll(rc, cq, &wc, 1, RC_WAIT_MS);
	rc_expect(rc, &wc, wr_id, IBV_WC_SUCCESS, (int)opcode);
	if (out)
		*out = wc;
}

void rc_expect_empty(struct rc *rc, struct ibv_cq *cq, unsigned ms)
{
	double end = rc_now_ms() + ms;
	struct ibv_wc wc;

	do {
		int r = ibv_poll_cq(cq, 1, &wc);

		RC_CHECK(rc, r >= 0, "ibv_poll_cq returned %d", r);
		if (r)
			rc_fail(rc,
				"unexpected completion on the %s CQ: wr_id %#llx, %s, opcode %s",
				cq_name(rc, cq), (unsigned long long)wc.wr_id,
				ibv_wc_status_str(wc.status), rc_wc_opcode_str(wc.opcode));
		rc_sleep_ms(1);
	} while (rc_now_ms() < end);
}

/* ---- data ---- */

static inline uint8_t pattern_byte(uint32_t seed, uint64_t off)
{
	uint64_t x =
	    (off + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed + 1) * 0xc2b2ae3d27d4eb4full;

	x ^= x >> 29;
	return (uint8_t)(x >> 21);
}

void rc_fill_from(void *p, size_t len, uint32_t seed, size_t start)
{
	uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		b[i] = pattern_byte(seed, start + i);
}

void rc_fill(void *p, size_t len, uint32_t seed)
{
	rc_fill_from(p, len, seed, 0);
}

void rc_check_from(struct rc *rc, const void *p, size_t len, uint32_t seed, size_t start,
		   const char *what)
{
	const uint8_t *b = p;
	size_t i = 0;

	while (i < len && b[i] == pattern_byte(seed, start + i))
		i++;
	if (i == len)
		return;
	/* the whole damage, for a failure that cannot be replayed: how much, where it ends, and
	 * what arrived where it starts */
	size_t wrong = 0, last = i;
	char got[16 * 3 + 1] = "";

	for (size_t j = i; j < len; j++)
		if (b[j] != pattern_byte(seed, start + j)) {
			wrong++;
			last = j;
		}
	for (size_t j = 0; j < 16 && i + j < len; j++)
		snprintf(got + 3 * j, sizeof(got) - 3 * j, " %02x", b[i + j]);
	rc_fail(rc, "%s: byte %zu of %zu is %#04x, expected %#04x (%zu bytes wrong, the last at "
		"%zu; from byte %zu:%s)", what, i, len, b[i], pattern_byte(seed, start + i), wrong,
		last, i, got);
}

void rc_check(struct rc *rc, const void *p, size_t len, uint32_t seed, const char *what)
{
	rc_check_from(rc, p, len, seed, 0, what);
}

void rc_check_const(struct rc *rc, const void *p, size_t len, uint8_t v, const char *what)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i] != v)
			rc_fail(rc, "%s: byte %zu of %zu is %#04x, expected %#04x (untouched)",
				what, i, len, b[i], v);
}

int rc_sizes(const struct rc *rc, size_t max, size_t out[RC_NSIZES])
{
	const size_t all[RC_NSIZES] = {0,	    1,	    rc->mtu - 1, rc->mtu,
				       rc->mtu + 1, RC_MIB, 64 * RC_MIB};
	int n = 0;

	for (int i = 0; i < RC_NSIZES; i++)
		if (all[i] <= max)
			out[n++] = all[i];
	return n;
}

uint32_t rc_rand(uint32_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 17;
	*state ^= *state << 5;
	return *state;
}

void rc_read_counters(struct rc *rc, uint64_t *out)
{
	char path[128];
	struct urnic_stats_file s;

	snprintf(path, sizeof(path), "/dev/shm/urnic-%d-%s.stats", (int)getpid(),
		 ibv_get_device_name(rc->ctx->device));
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		rc_skip(rc, "no stats file %s: %s", path, strerror(errno));
	void *p = mmap(NULL, sizeof(s), PROT_READ, MAP_SHARED, fd, 0);

	close(fd);
	RC_CHECK(rc, p != MAP_FAILED, "mmap %s: %s", path, strerror(errno));
	memcpy(&s, p, sizeof(s));
	munmap(p, sizeof(s));
	RC_CHECK(rc, s.magic == URNIC_STATS_MAGIC && s.counter_count == URNIC_C_COUNT,
		 "%s is not a stats file of this build", path);
	urnic_stats_fold(&s, out);
}

uint64_t rc_counter(struct rc *rc, unsigned c)
{
	uint64_t v[URNIC_C_COUNT];

	if (c >= URNIC_C_COUNT)
		rc_fail(rc, "no counter %u", c);
	rc_read_counters(rc, v);
	return v[c];
}

long rc_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}
