/* rc_err_idle: a QP that went to the error state with packets outstanding leaves no timer
 * running: once the error completion is polled, the process stays idle.
 *
 * A retransmission timer left armed in ERR (the fast timer, a tail loss probe or a held NAK)
 * never fired, since the timers look only at QPs in RTS, but stayed the engine thread's next
 * deadline, already past: the thread scanned the QPs without pause, one core busy until the QP
 * was destroyed.
 *
 * One process: the responder is scripted on a plain UDP socket (script_peer.c) and never
 * answers. With retry_cnt 0 and timeout 12 (17 ms) the WRITE fails with RETRY_EXC_ERR; then the
 * process's CPU time over 500 ms must stay far below a busy core's. */
#include "script_peer.h"

#include <sys/resource.h>
#include <time.h>

#define SQ_PSN 3000u
#define SEED 53
#define NPKTS 4
#define IDLE_MS 500
#define MAX_CPU_MS 100 /* a spinning engine thread: about IDLE_MS */

static double cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static int test(struct rc *rc)
{
	struct script_peer p = {.first_psn = SQ_PSN, .npkts = NPKTS, .seed = SEED};
	struct rc_wr w;
	struct ibv_wc wc;

	script_peer_open(rc, &p, SQ_PSN);
	rc_fill(rc->buf, NPKTS * rc->mtu, SEED);
	rc_step(rc, "a %d-packet WRITE to a responder that never answers", NPKTS);
	rc_wr(rc, &w, IBV_WR_RDMA_WRITE, 5, 0, NPKTS * rc->mtu, 0);
	rc_post_send(rc, 0, &w.wr);
	rc_poll(rc, rc->scq, &wc, 1, 5000);
	rc_expect(rc, &wc, 5, IBV_WC_RETRY_EXC_ERR, IBV_WC_RDMA_WRITE);
	script_peer_drain(rc, &p, 20); /* what was sent before the error */
	rc_step(rc, "the QP in ERR: %d ms idle", IDLE_MS);
	double cpu0 = cpu_ms();
	struct timespec ts = {.tv_sec = IDLE_MS / 1000, .tv_nsec = (IDLE_MS % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
	double used = cpu_ms() - cpu0;

	rc_step(rc, "%.1f ms of CPU in %d ms idle", used, IDLE_MS);
	RC_CHECK(rc, used < MAX_CPU_MS,
		 "%.1f ms of CPU in %d ms with the only QP in ERR: a timer keeps the engine busy",
		 used, IDLE_MS);
	RC_CHECK(rc, script_peer_drain(rc, &p, 0) == 0, "a packet sent by a QP in ERR");
	script_peer_close(&p);
	return RC_PASS;
}

int main(void)
{
	struct rc_opts o = script_peer_defaults("rc_err_idle");

	o.timeout = 12;
	o.retry_cnt = 0;
	return rc_run_local(&o, test);
}
