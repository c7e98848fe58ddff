/* wakeup.c - what waking a thread costs on this machine: the prices behind the engine thread's
 * sleeping rules (docs/ARCHITECTURE.md "Who sleeps on the socket", docs/PERFORMANCE.md).
 *   - a thread asleep in read() on an eventfd, on CPU 0, woken from CPU 1: how long the waker's
 *     write() takes, and how long until the sleeper runs; with CPU 0 idle, and with CPU 0 busy
 *     (a spinning thread there, as a busy-polling application);
 *   - the same from CPU 0 itself (the waker's cost only);
 *   - how long a ppoll() of 2 and 10 us really sleeps;
 *   - an empty system call;
 *   - moving a timerfd later, when it is its CPU's next timer (400 us out) and when it is not
 *     (100 s out): what a polling application would pay to keep a sleeper's deadline ahead;
 *   - the first touch of a page of fresh anonymous memory (a page fault);
 *   - a thread that re-checks every 400 us or 1.6 ms (a ppoll() timeout, as the engine thread
 *     standing back for a polling application) beside a spinning thread on its CPU: the share
 *     of the spinner's time taken from it, against the same spinner alone.
 * Needs two CPUs. Built as build/bin/wakeup (or gcc -O2 -pthread -o /tmp/wakeup bench/wakeup.c). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 2000
#define GAP_US 300 /* between wake-ups: the sleeper is asleep again well before the next */

static int efd;
static atomic_uint_fast64_t sent_ns;
static atomic_bool stop_spin, stop_sleep;
static uint64_t woke_ns[ROUNDS], write_ns[ROUNDS];

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void print_us(const char *what, uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	printf("  %-44s p10 %6.1f  p50 %6.1f  p90 %6.1f us\n", what, (double)v[n / 10] / 1e3,
	       (double)v[n / 2] / 1e3, (double)v[n * 9 / 10] / 1e3);
}

static void *spinner(void *arg)
{
	(void)arg;
	pin(0);
	while (!atomic_load_explicit(&stop_spin, memory_order_relaxed))
		;
	return NULL;
}

static void *sleeper(void *arg)
{
	uint64_t v;
	int n = 0;

	(void)arg;
	pin(0);
	while (!atomic_load(&stop_sleep))
		if (read(efd, &v, sizeof(v)) == sizeof(v) && n < ROUNDS)
			woke_ns[n++] = now_ns() - atomic_load(&sent_ns);
	return NULL;
}

/* Wakes a sleeper on CPU 0 ROUNDS times from CPU waker_cpu. */
static void wake_rounds(int waker_cpu, bool busy, const char *label)
{
	pthread_t spin, sleep_thread;
	uint64_t one = 1;

	atomic_store(&stop_spin, false);
	atomic_store(&stop_sleep, false);
	if (busy)
		pthread_create(&spin, NULL, spinner, NULL);
	pthread_create(&sleep_thread, NULL, sleeper, NULL);
	pin(waker_cpu);
	for (int i = 0; i < ROUNDS; i++) {
		usleep(GAP_US);
		uint64_t t0 = now_ns();

		atomic_store(&sent_ns, t0);
		if (write(efd, &one, sizeof(one)) != sizeof(one))
			perror("write");
		write_ns[i] = now_ns() - t0;
	}
	usleep(20000);
	atomic_store(&stop_sleep, true);
	if (write(efd, &one, sizeof(one)) != sizeof(one))
		perror("write");
	pthread_join(sleep_thread, NULL);
	atomic_store(&stop_spin, true);
	if (busy)
		pthread_join(spin, NULL);
	printf("%s\n", label);
	print_us("the waker's write()", write_ns, ROUNDS);
	if (waker_cpu != 0)
		print_us("until the sleeper runs", woke_ns, ROUNDS);
}

static void timer_rounds(long ns)
{
	struct timespec ts = {0, ns};
	char label[64];

	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t0 = now_ns();

		ppoll(NULL, 0, &ts, NULL);
		write_ns[i] = now_ns() - t0;
	}
	snprintf(label, sizeof(label), "ppoll(%ld us) sleeps", ns / 1000);
	print_us(label, write_ns, ROUNDS);
}

/* Re-arms a timerfd ahead_ns from now, ROUNDS times, 20 us apart (a polling loop's pace). */
static void rearm_rounds(uint64_t ahead_ns, const char *label)
{
	int tfd = timerfd_create(CLOCK_MONOTONIC, 0);

	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t0 = now_ns(), at = t0 + ahead_ns;
		struct itimerspec its = {.it_value = {(time_t)(at / 1000000000ull),
						      (long)(at % 1000000000ull)}};

		timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
		write_ns[i] = now_ns() - t0;
		while (now_ns() - t0 < 20000)
			;
	}
	close(tfd);
	print_us(label, write_ns, ROUNDS);
}

static atomic_bool stop_recheck;

static void *rechecker(void *arg)
{
	struct timespec ts = {0, (long)(uintptr_t)arg};

	pin(1);
	while (!atomic_load(&stop_recheck))
		ppoll(NULL, 0, &ts, NULL);
	return NULL;
}

/* Spins on CPU 1 for a second beside a thread that wakes every period_ns there (none: 0), and
 * prints how much of the second went elsewhere (gaps of over 1 us between clock reads). */
static void recheck_rounds(uint64_t period_ns, const char *label)
{
	pthread_t t;
	uint64_t start, last, lost = 0, gaps = 0;

	atomic_store(&stop_recheck, false);
	if (period_ns && pthread_create(&t, NULL, rechecker, (void *)(uintptr_t)period_ns) != 0) {
		perror("pthread_create");
		return;
	}
	pin(1);
	usleep(10000);
	start = last = now_ns();
	for (uint64_t n = start; n - start < 1000000000ull; n = now_ns()) {
		if (n - last > 1000) {
			lost += n - last;
			gaps++;
		}
		last = n;
	}
	atomic_store(&stop_recheck, true);
	if (period_ns)
		pthread_join(t, NULL);
	printf("  %-44s %5.2f%% of its time lost, %lu gaps\n", label, (double)lost / 1e7,
	       (unsigned long)gaps);
}

static void fault_rounds(void)
{
	const size_t page = 4096;
	uint8_t *m = mmap(NULL, ROUNDS * page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return;
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t0 = now_ns();

		((volatile uint8_t *)m)[(size_t)i * page] = 1;
		write_ns[i] = now_ns() - t0;
	}
	munmap(m, ROUNDS * page);
	print_us("first write to a fresh anonymous page", write_ns, ROUNDS);
}

int main(void)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		fprintf(stderr, "wakeup: needs two CPUs\n");
		return 2;
	}
	efd = eventfd(0, 0);
	wake_rounds(1, false, "sleeper on CPU 0 (idle), woken from CPU 1:");
	wake_rounds(1, true, "sleeper on CPU 0 (a thread spins there), woken from CPU 1:");
	wake_rounds(0, true, "sleeper on CPU 0 (a thread spins there), woken from CPU 0:");
	pin(1);
	prctl(PR_SET_TIMERSLACK, 1UL);
	printf("timers (CPU 1, timer slack 1 ns):\n");
	timer_rounds(2000);
	timer_rounds(10000);
	uint64_t t0 = now_ns();

	for (int i = 0; i < 100000; i++)
		syscall(SYS_getppid);
	printf("an empty system call (getppid): %.2f us\n", (double)(now_ns() - t0) / 1e8);
	printf("timerfd_settime, moving the timer on (CPU 1):\n");
	rearm_rounds(400000, "its CPU's next timer, 400 us out");
	rearm_rounds(100000000000ull, "100 s out, behind the tick");
	fault_rounds();
	printf("a spinner on CPU 1 and a thread that re-checks there (timer slack 50 us):\n");
	prctl(PR_SET_TIMERSLACK, 50000UL);
	recheck_rounds(0, "alone");
	recheck_rounds(400000, "re-checks every 400 us");
	recheck_rounds(1600000, "re-checks every 1.6 ms");
	return 0;
}
