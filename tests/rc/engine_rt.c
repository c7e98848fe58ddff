/* engine_rt: with URNIC_ENGINE_RT=1, where the process may use SCHED_FIFO, the engine thread is
 * real-time exactly while it listens for an application that does not poll: real-time while the
 * application is idle, the default class while the application polls a CQ (so its polls are not
 * preempted), real-time again once the polls stop, and when a poll drains the CQ and the
 * application leaves (it may go and spin on memory on this CPU, where a woken fair-class engine
 * thread waited for the next scheduler tick: ib_write_lat's p99 read 1.8 ms). With --off
 * (URNIC_ENGINE_RT unset, the default) it stays in the default class throughout. Skips (77)
 * where SCHED_FIFO is not allowed. One process, a QP connected to itself. */
#include <dirent.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop_qp.h"

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "engine_rt: " __VA_ARGS__);                                        \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* May this process run a thread SCHED_FIFO? (tried on this thread, then undone) */
static int fifo_allowed(void)
{
	struct sched_param rt = {.sched_priority = 1}, other = {.sched_priority = 0};

	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt) != 0)
		return 0;
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &other);
	return 1;
}

/* The device's engine thread: the one thread of this process named urnic-engine. */
static pid_t engine_tid(void)
{
	DIR *d = opendir("/proc/self/task");
	pid_t tid = 0;
	int n = 0;

	for (struct dirent *e; d && (e = readdir(d));) {
		char path[64], comm[32] = "";
		pid_t t = (pid_t)atoi(e->d_name);
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)t);
		if (t <= 0 || !(f = fopen(path, "r")))
			continue;
		if (fgets(comm, sizeof(comm), f) && strcmp(comm, "urnic-engine\n") == 0) {
			tid = t;
			n++;
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	if (n != 1)
		FAIL("%d threads named urnic-engine, expected one", n);
	return tid;
}

/* Waits up to ms for the engine thread's class to become want (polling cq meanwhile if given). */
static void expect_class(pid_t tid, int want, unsigned ms, struct ibv_cq *poll_cq,
			 const char *when)
{
	double end = now_ms() + ms;
	int got;
	struct ibv_wc wc;

	do {
		if (poll_cq && ibv_poll_cq(poll_cq, 1, &wc) != 0)
			FAIL("%s: a completion on an idle CQ", when);
		got = sched_getscheduler(tid);
	} while (got != want && now_ms() < end);
	if (got != want)
		FAIL("%s: engine thread class %d after %u ms, expected %d", when, got, ms, want);
}

/* Polls the idle cq for ms. In the second half, the class must be want right after each poll
 * that took less than 45 us with the look at the class: the engine thread goes back on the
 * socket (and is raised) only after 50 us without a poll, which a descheduled test thread can
 * give it. Skips (77) if no poll was that quick (a machine too slow to tell). */
static void poll_for(struct ibv_cq *cq, pid_t tid, unsigned ms, int want)
{
	double start = now_ms();
	int checked = 0;
	struct ibv_wc wc;

	for (double t = start; t - start < ms; t = now_ms()) {
		if (ibv_poll_cq(cq, 1, &wc) != 0)
			FAIL("a completion on an idle CQ");
		int got = sched_getscheduler(tid);

		if (t - start < ms / 2.0 || now_ms() - t >= 0.045)
			continue;
		checked++;
		if (got != want)
			FAIL("engine thread class %d while the application polls, expected %d", got,
			     want);
	}
	if (!checked) {
		printf("engine_rt: SKIP: no poll took less than 45 us here\n");
		exit(77);
	}
}

int main(int argc, char **argv)
{
	int off = argc > 1 && strcmp(argv[1], "--off") == 0;
	int rt = off ? SCHED_OTHER : SCHED_FIFO;

	alarm(30);
	if (off)
		unsetenv("URNIC_ENGINE_RT");
	else if (setenv("URNIC_ENGINE_RT", "1", 1) != 0 || !fifo_allowed()) {
		printf("engine_rt: SKIP: SCHED_FIFO not allowed here (no root, RLIMIT_RTPRIO 0)\n");
		return 77;
	}
	static char buf[4096];
	struct loop_self l;
	const char *step = loop_self_open(&l, 16, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE);

	if (step)
		FAIL("%s", step);
	struct ibv_cq *cq = l.cq;
	pid_t tid = engine_tid();

	expect_class(tid, rt, 2000, NULL, "idle");
	poll_for(cq, tid, 40, SCHED_OTHER);
	expect_class(tid, rt, 2000, NULL, "after the polls stopped");

	/* polls until a WRITE's completion drains the CQ, and the application leaves */
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 8, .lkey = l.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {.remote_addr = (uintptr_t)buf + 64, .rkey = l.mr->rkey}},
			   *bad;
	struct ibv_wc wc;

	poll_for(cq, tid, 20, SCHED_OTHER);
	if (ibv_post_send(l.qp, &wr, &bad))
		FAIL("post");
	if (loop_qp_poll(cq, 1, &wc, 5000) != 1 || wc.status != IBV_WC_SUCCESS)
		FAIL("the WRITE did not complete");
	/* raised by the leaving poll itself, or (if the engine thread was between two stand-backs)
	 * by the engine thread as it goes back on the socket, microseconds later */
	expect_class(tid, rt, 100, NULL, "after the CQ drained");
	printf("engine_rt: engine thread %s idle and after a drain, default class while polled\n",
	       off ? "default class" : "SCHED_FIFO");
	loop_self_close(&l);
	return 0;
}
