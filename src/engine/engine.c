/* engine.c - the progress thread of a device: receives batches, sends the ACKs they owe, sends
 * READ responses, fires timers, and sleeps in ppoll when there is nothing to do. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "engine/engine.h"
#include "net/shm.h"

/* A drain's turn that sent more than this reads its clock again (urnic_progress): about
 * 12 us of copying, chosen when ring packets were 64 KiB and kept when they grew. */
#define DRAIN_RESTAMP_BYTES (64u << 10)

uint64_t urnic_now_ns(void)
{
	return urnic_mono_ns();
}

/* The packets of one receive batch arrived together, and their handlers read one clock: the one
 * taken as the batch began. A clock_gettime costs 25 ns on this machine, and a stream of READ
 * responses read it four times a packet (9% of the requester's CPU). A post reads it when first
 * needed and keeps it (urnic_post_run). Elsewhere urnic_clock_ns() reads the clock. */
static _Thread_local uint64_t batch_clock_ns;
static _Thread_local bool posting; /* in urnic_post_run */

uint64_t urnic_clock_ns(void)
{
	if (batch_clock_ns)
		return batch_clock_ns;
	if (posting)
		return batch_clock_ns = urnic_now_ns();
	return urnic_now_ns();
}

/* A post's run of the requester reads the clock at most twice: for the stamps taken as it builds
 * (the RTT sample, the send stamp), and for the timers it arms after its flush (read again:
 * urnic_clock_renew). It read it four or five times, 27 ns each here, in every ib_send_lat hop.
 * The timers must not start from the post's start: a slow flush (60 us to copy 1 MiB into a
 * ring, any post under TSan) then had its probe fire early, and rc_ack_hold_udp under TSan
 * failed 10 of 42 runs (01db10b, taken back). */
void urnic_post_run(struct urnic_qp *qp, struct urnic_txbatch *b)
{
	posting = true;
	urnic_req_run(qp, b);
	posting = false;
	batch_clock_ns = 0;
}

/* Only a post's clock: a receive batch keeps its one. Renewed there too, after each run of the
 * requester that sent, rc_ack_hold_udp under TSan failed 6 of 45 runs (0 of 70 without; the
 * cause was not found). */
void urnic_clock_renew(void)
{
	if (posting)
		batch_clock_ns = 0; /* the next urnic_clock_ns() reads it */
}

void urnic_engine_wake(struct urnic_dev *dev)
{
	uint64_t one = 1;

	if (write(dev->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;
}

uint64_t urnic_engine_held_retry(struct urnic_dev *dev)
{
	uint64_t now = urnic_now_ns(), at = atomic_load(&dev->held_retry_ns);

	if (at <= now) {
		at = now + URNIC_TX_HELD_RETRY_NS;
		atomic_store(&dev->held_retry_ns, at); /* a racing thread's is as good */
	}
	urnic_engine_deadline(dev, at);
	return at;
}

void urnic_engine_deadline(struct urnic_dev *dev, uint64_t deadline)
{
	uint64_t cur = atomic_load(&dev->timer_next);

	while (deadline < cur && !atomic_compare_exchange_weak(&dev->timer_next, &cur, deadline))
		;
	/* One wake-up per sleep: the first thread to need the sleeper earlier takes its deadline
	 * down to 0, so the next posts do not write the eventfd again while the woken thread waits
	 * for a CPU (on the poster's own CPU it may wait milliseconds: in ib_send_lat over rings,
	 * 1,500-3,900 writes per 100,000 round trips, 3-35 after). Awake, it reads timer_next. */
	uint64_t sleeping = atomic_load(&dev->sleep_until_ns);

	if (deadline < sleeping && atomic_compare_exchange_strong(&dev->sleep_until_ns, &sleeping, 0))
		urnic_engine_wake(dev);
}

/* An ACK a QP owes, to a peer it has itself been sending requests to (a ping-pong of WRITEs,
 * where the application waits on memory and this engine thread placed the peer's WRITE), waits
 * up to URNIC_ACK_HOLD_NS for the application's next request on the QP to take it along
 * (urnic_req_run): the peer then finds ACK and WRITE in one batch, in the poll that waits for
 * the ACK, instead of the ACK first and the WRITE later, which its engine thread must be woken
 * for. A NAK, an ACK of a QP that sends no requests, and one of a QP whose requester is busy
 * go at once. QP lock held. */
static bool hold_ack(struct urnic_qp *qp, uint64_t now)
{
	if (!qp->ack_pending || qp->nak_pending || qp->ibv.qp_type != IBV_QPT_RC)
		return false;
	if (qp->ack_hold_until) /* held already: not longer than first set */
		return now < qp->ack_hold_until;
	if (!qp->req_sent_ns || now - qp->req_sent_ns > URNIC_ACK_HOLD_WINDOW_NS)
		return false;
	/* a requester with WRs queued or packets unacknowledged may itself wait for the peer's
	 * ACK (its window), and the peer's for this one: only the application's next post, on an
	 * idle QP, is worth waiting for */
	if (qp->sq_next != qp->sq_prod || qp->snd_una != qp->snd_nxt)
		return false;
	qp->ack_hold_until = now + URNIC_ACK_HOLD_NS;
	urnic_engine_deadline(qp->dev, qp->ack_hold_until);
	return true;
}

static void send_owed_acks(struct urnic_dev *dev, struct urnic_txbatch *b, bool may_hold)
{
	uint64_t now = may_hold ? urnic_clock_ns() : 0;

	while (dev->ack_list) {
		struct urnic_qp *qp = dev->ack_list;

		dev->ack_list = qp->ack_next;
		pthread_mutex_lock(&qp->lock);
		qp->on_ack_list = false;
		if (!may_hold || !hold_ack(qp, now))
			urnic_resp_send_ack(qp, b);
		pthread_mutex_unlock(&qp->lock);
	}
}

static uint64_t qp_next_deadline(const struct urnic_qp *qp)
{
	uint64_t d = UINT64_MAX;

	if (qp->ack_deadline)
		d = qp->ack_deadline;
	if (qp->ack_hold_until && qp->ack_hold_until < d)
		d = qp->ack_hold_until;
	if (qp->rnr_deadline && qp->rnr_deadline < d)
		d = qp->rnr_deadline;
	if (qp->rtx.deadline && qp->rtx.deadline < d)
		d = qp->rtx.deadline;
	if (qp->held_until && qp->held_until < d)
		d = qp->held_until;
	if (qp->rtx.nak_held_at && qp->rtx.nak_held_at < d)
		d = qp->rtx.nak_held_at;
	if (qp->rtx.probe_at && qp->rtx.probe_at < d)
		d = qp->rtx.probe_at;
	return d;
}

/* Timers and READ responses of every QP; returns the next deadline. dev->qp_lock held. Each
 * scan starts one QP further on, so that where the QPs compete for room (a full ring holds
 * their packets back), none is always last. */
static uint64_t scan_qps(struct urnic_dev *dev, struct urnic_txbatch *b)
{
	uint64_t now = urnic_now_ns(), next = UINT64_MAX;
	bool more = false;
	int from = dev->nqp ? dev->scan_from % dev->nqp : 0;

	dev->scan_from = from + 1;
	atomic_store(&dev->timer_next, UINT64_MAX);
	dev->tx_pending = false;
	for (int k = 0; k < dev->nqp; k++) {
		struct urnic_qp *qp = dev->qps[(from + k) % dev->nqp];

		pthread_mutex_lock(&qp->lock);
		urnic_comp_timers(qp, now, b);
		if (qp->ack_hold_until && now >= qp->ack_hold_until) {
			/* no request came to carry it (behind READ responses still due, their
			 * burst sends it: urnic_resp_tx) */
			qp->ack_hold_until = 0;
			urnic_resp_send_ack(qp, b);
		}
		if (qp->rd_count && !qp->held_until) /* not while its packets wait for room */
			more |= urnic_resp_tx(qp, b);
		uint64_t d = qp_next_deadline(qp);

		pthread_mutex_unlock(&qp->lock);
		if (d < next)
			next = d;
	}
	urnic_tx_flush(b);
	dev->tx_pending |= more;
	urnic_engine_deadline(dev, next);
	return next;
}

/* What a turn does with the ACKs its receive batch owes: send them after the batch; the same,
 * but hold those a request may soon carry (hold_ack); or leave them to the start of the next
 * turn (acks_may_wait). A hold's timer needs a thread that scans: the engine thread, or the
 * application's own polls. So the engine thread's turns may hold, and so may the turns of an
 * application that is not a busy poller (its drain gives the engine thread the socket back,
 * with the timer); a busy poller's turns leave their ACKs to the next turn instead. */
enum ack_policy { ACKS_NOW, ACKS_MAY_HOLD, ACKS_NEXT_TURN };

/* Runs a receive batch, and sends the ACKs and NAKs it owes as acks says. clock: the batch's
 * (an application's poll read it just before it received), or 0 to read it now. */
static void process_rx(struct urnic_dev *dev, struct urnic_rxpkt *pkts, int n,
		       struct urnic_txbatch *b, enum ack_policy acks, uint64_t clock)
{
	pthread_mutex_lock(&dev->qp_lock);
	batch_clock_ns = clock ? clock : urnic_now_ns();
	for (int i = 0; i < n; i++)
		urnic_recv_packet(dev, &pkts[i], b);
	batch_clock_ns = 0;
	if (acks != ACKS_NEXT_TURN)
		send_owed_acks(dev, b, acks == ACKS_MAY_HOLD);
	atomic_store_explicit(&dev->acks_owed, dev->ack_list != NULL, memory_order_relaxed);
	urnic_tx_flush(b);
	pthread_mutex_unlock(&dev->qp_lock);
}

/* The ACKs an earlier turn left owed. */
static void flush_owed_acks(struct urnic_dev *dev, struct urnic_txbatch *b, bool may_hold)
{
	pthread_mutex_lock(&dev->qp_lock);
	send_owed_acks(dev, b, may_hold);
	atomic_store_explicit(&dev->acks_owed, false, memory_order_relaxed);
	urnic_tx_flush(b);
	pthread_mutex_unlock(&dev->qp_lock);
}

void urnic_engine_flush_acks(struct urnic_dev *dev)
{
	static _Thread_local struct urnic_txbatch b;

	urnic_tx_init(&b, dev);
	flush_owed_acks(dev, &b, false);
	pthread_mutex_lock(&dev->qp_lock);
	for (int i = 0; i < dev->nqp; i++) { /* and those held for a request to carry */
		struct urnic_qp *qp = dev->qps[i];

		pthread_mutex_lock(&qp->lock);
		if (qp->ack_hold_until)
			urnic_resp_ack_now(qp);
		pthread_mutex_unlock(&qp->lock);
	}
	pthread_mutex_unlock(&dev->qp_lock);
}

/* A turn of an application that keeps coming back to poll at once (perftest's send latency and
 * bandwidth loops) leaves the ACKs it owes to the start of the next turn: sent at the end of the
 * batch, each costs the completions it brings a system call (or a ring record) before the poll
 * returns them, and the answer the application then sends waits for it. A request the
 * application posts on the QP meanwhile takes the QP's ACK along (urnic_req_run). The next turn
 * is its next poll, or the engine thread's once the polls stop (its stand-back deadline,
 * URNIC_APP_POLL_NS to 8 or 32 times that after the last poll). Destroying or moving the QP,
 * closing the device and exiting the process send what is owed at once. */
static bool acks_may_wait(const struct urnic_dev *dev)
{
	return atomic_load_explicit(&dev->quick_returns, memory_order_relaxed) >= URNIC_APP_RETURNS;
}

/* The engine thread's scheduling class, with URNIC_ENGINE_RT=1. SCHED_FIFO while it listens
 * for an application that does not poll: such an application may spin on memory on this very
 * CPU (perftest's write latency loop, pinned), and the kernel's fair class lets a task that has
 * just been picked run out its slice, so a woken engine thread could wait for the next tick
 * (4 ms here; ib_write_lat's p99 read 1.8 ms) while the peer's packets waited with it. Not while
 * it stands back for a polling application, which would pay a preemption for every wake-up of
 * it, nor through a long time awake. Changed under rt_lock; thread is the engine thread. */
static void engine_rt_locked(struct urnic_dev *dev, pthread_t thread, bool on)
{
	struct sched_param sp = {.sched_priority = on ? URNIC_ENGINE_RT_PRIO : 0};

	if (atomic_load(&dev->rt_now) != on &&
	    pthread_setschedparam(thread, on ? SCHED_FIFO : SCHED_OTHER, &sp) == 0)
		atomic_store(&dev->rt_now, on);
}

/* An application poll stamped at app (0: none) came less than window before now, or since now
 * was read (another thread's stamp may be later). */
static bool polled_within(uint64_t app, uint64_t now, uint64_t window)
{
	return app && (app >= now || now - app < window);
}

/* From the engine thread itself. Looked at again under rt_lock, so that it neither raises itself
 * for an application that has just started polling (and lowered it) nor, with unless_polling,
 * lowers itself for one that has just left (and raised it). */
static void engine_rt(struct urnic_dev *dev, bool on, bool unless_polling)
{
	if (!dev->rt_ok || atomic_load_explicit(&dev->rt_now, memory_order_relaxed) == on)
		return;
	pthread_mutex_lock(&dev->rt_lock);
	uint64_t app = atomic_load(&dev->app_poll_ns);
	bool polling = polled_within(app, urnic_now_ns(), URNIC_APP_POLL_NS);

	if (on ? !polling : !(unless_polling && !app))
		engine_rt_locked(dev, pthread_self(), on);
	pthread_mutex_unlock(&dev->rt_lock);
}

/* From an application thread, which raises the class as it leaves and lowers it as it starts
 * polling (before it wakes the engine thread to stand back: a real-time one would preempt the
 * poll at once). No unlocked look: the engine thread may be changing it. */
static void engine_rt_set(struct urnic_dev *dev, bool on)
{
	if (!dev->rt_ok)
		return;
	pthread_mutex_lock(&dev->rt_lock);
	engine_rt_locked(dev, dev->thread, on);
	pthread_mutex_unlock(&dev->rt_lock);
}

/* Starts the engine thread: real-time from the start with URNIC_ENGINE_RT=1, where it may be
 * (engine_rt). Not by default: in some runs a real-time engine thread halved the 8 B WRITE
 * rate and doubled 4 KiB send_lat (docs/PERFORMANCE.md, "write_lat's tail"). */
static int engine_create(struct urnic_dev *dev, void *(*fn)(void *))
{
	const char *env = getenv("URNIC_ENGINE_RT");
	struct sched_param sp = {.sched_priority = URNIC_ENGINE_RT_PRIO};
	pthread_attr_t attr;
	int err = EPERM;

	pthread_mutex_init(&dev->rt_lock, NULL);
	dev->rt_ok = env && strcmp(env, "1") == 0;
	if (dev->rt_ok && pthread_attr_init(&attr) == 0) {
		pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
		pthread_attr_setschedparam(&attr, &sp);
		atomic_store(&dev->rt_now, true);
		err = pthread_create(&dev->thread, &attr, fn, dev);
		pthread_attr_destroy(&attr);
	}
	if (err == EPERM || err == EINVAL) { /* not allowed here: the default class */
		dev->rt_ok = false;
		atomic_store(&dev->rt_now, false);
		err = pthread_create(&dev->thread, NULL, fn, dev);
	}
	if (err)
		pthread_mutex_destroy(&dev->rt_lock);
	else
		pthread_setname_np(dev->thread, "urnic-engine"); /* for top -H, perf, tests */
	return err;
}

/* The longest stand-back (1.6 ms), which is also how long a landed WRITE or a packet by the
 * socket is remembered. */
#define STAND_BACK_LONGEST (URNIC_APP_POLL_NS << URNIC_APP_POLL_BACKOFF)

void urnic_engine_landed(struct urnic_dev *dev)
{
	atomic_store_explicit(&dev->landed_ns, urnic_clock_ns(), memory_order_relaxed);
}

/* How far the stand-backs may back off (URNIC_APP_POLL_BACKOFF): less where a peer's WRITE or
 * atomic landed lately, since the application may wait on memory for the next one, and the
 * stand-back's end is when the engine thread would place it (ib_write_lat's slow samples
 * followed the ceiling). An application told of what arrives by its completions polls for
 * them, and there the long ceiling saves wake-ups. */
static unsigned stand_back_max(struct urnic_dev *dev, uint64_t now)
{
	uint64_t landed = atomic_load_explicit(&dev->landed_ns, memory_order_relaxed);

	return polled_within(landed, now, STAND_BACK_LONGEST) ? URNIC_APP_POLL_BACKOFF_LANDED
							      : URNIC_APP_POLL_BACKOFF;
}

/* Whether a stand-back listens to the socket: on rings alone, a peer that sends a packet again
 * rings (net/shm.c, sent_again), and the application may have stopped polling to wait on
 * memory. Not while packets come by the socket (each would wake this thread), nor right after
 * the socket ended a stand-back (the datagram waits for the polls: sock_due). */
static bool stand_back_listens(struct urnic_dev *dev, uint64_t now)
{
	uint64_t sock = atomic_load_explicit(&dev->sock_rx_ns, memory_order_relaxed);

	return !dev->sock_woke && urnic_shm_rings_in(&dev->net) &&
	       !polled_within(sock, now, STAND_BACK_LONGEST);
}

/* Standing back: the application's polls run the timers too, so only its silence is watched
 * for, after the last poll, and for longer each time in a row (stand_back_max). */
static uint64_t stand_back_until(struct urnic_dev *dev, uint64_t app, unsigned max)
{
	unsigned shift = dev->standbacks < max ? dev->standbacks : max;

	if (dev->standbacks) /* the last sleep stood back too, and the polls go on */
		urnic_count(dev, URNIC_C_engine_rechecks, 1);
	dev->standbacks = shift < max ? shift + 1 : max;
	atomic_store(&dev->on_socket, false);
	atomic_store(&dev->sleep_until_ns, 0); /* no QP timer wakes it */
	return app + (URNIC_APP_POLL_NS << shift);
}

/* While an application thread polls (and so drives progress, timers included), the engine
 * thread leaves the socket to it (stand_back_until), or until the application drains its CQ
 * and may go elsewhere (urnic_progress_leave). standing_back and on_socket are stored before
 * app_poll_ns is read, and the application stores app_poll_ns before it reads them, so one of
 * the two always sees the other. */
static void sleep_until(struct urnic_dev *dev, uint64_t deadline)
{
	struct pollfd fds[2] = {{.fd = dev->wake_fd, .events = POLLIN},
				{.fd = dev->net.rx_fd, .events = POLLIN}};
	struct timespec ts, *tsp = NULL;
	uint64_t now = urnic_now_ns();
	nfds_t nfds = 2;
	bool stood = false; /* stood back: sleeps on the eventfd, and on the socket if it listens */

	atomic_store(&dev->standing_back, true);
	atomic_store(&dev->on_socket, true);
	uint64_t app = atomic_load(&dev->app_poll_ns);

	if (polled_within(app, now, URNIC_APP_POLL_NS)) {
		unsigned max = stand_back_max(dev, now);

		stood = true;
		nfds = stand_back_listens(dev, now) ? 2 : 1;
		if (dev->sock_woke) /* the polls may have stopped: look again soon */
			dev->standbacks = 0;
		deadline = stand_back_until(dev, app, max);
		engine_rt(dev, false, true);
	} else {
		engine_rt(dev, true, false);
		dev->standbacks = 0;
		atomic_store(&dev->standing_back, false);
		if (urnic_shm_sleep(&dev->net)) { /* a ring has packets: no sleep */
			atomic_store(&dev->on_socket, false);
			return;
		}
		atomic_store(&dev->sleep_until_ns, deadline);
		/* a deadline set between our scan and the store above must not be slept through */
		if (atomic_load(&dev->timer_next) < deadline)
			deadline = atomic_load(&dev->timer_next);
	}
	if (deadline != UINT64_MAX) {
		uint64_t wait = deadline > now ? deadline - now : 0;

		ts = (struct timespec){.tv_sec = (time_t)(wait / 1000000000ull),
				       .tv_nsec = (long)(wait % 1000000000ull)};
		tsp = &ts;
	}
	int ready = ppoll(fds, nfds, tsp, NULL);

	if (ready > 0 && (fds[0].revents & POLLIN)) {
		uint64_t v;

		if (read(dev->wake_fd, &v, sizeof(v)) < 0)
			v = 0;
	}
	dev->sock_woke = stood && ready > 0 && nfds == 2 && fds[1].revents;
	atomic_store(&dev->standing_back, false);
	atomic_store(&dev->on_socket, false);
	atomic_store(&dev->sleep_until_ns, 0);
	if (nfds == 2) /* woken by the socket, perhaps: the next turn reads it */
		atomic_store_explicit(&dev->net.sock_due, true, memory_order_relaxed);
	urnic_shm_awake(&dev->net);
}

/* One turn of the engine: a receive batch and what it owes, then timers and READ responses.
 * poll_ns: 0 for the engine thread's turn, the clock of an application's empty poll for its own
 * (read once: the clock costs 25 ns here, and an empty poll read it three times). Caller holds
 * progress_lock. Returns true if there may be more to do right away. */
static bool progress_turn(struct urnic_dev *dev, struct urnic_txbatch *b, uint64_t poll_ns)
{
	struct urnic_net_tally t = {0};
	bool polling = poll_ns != 0;
	/* one clock for the socket's gap and the timers: a timer a batch late is no matter (a turn
	 * that received runs again at once, with a new clock) */
	uint64_t now = polling ? poll_ns : urnic_now_ns();

	if (atomic_load_explicit(&dev->acks_owed, memory_order_relaxed)) {
		/* the engine thread's turn: the application left ACKs owed and went quiet, so it is
		 * not the busy poller acks_may_wait took it for (its next ACKs go at once) */
		if (!polling)
			atomic_store_explicit(&dev->quick_returns, 0, memory_order_relaxed);
		flush_owed_acks(dev, b, !polling);
	}
	int n = urnic_net_recv(&dev->net, dev->net.rx_pkts, &t, now);

	if (n > 0) {
		if (t.sock_packets)
			atomic_store_explicit(&dev->sock_rx_ns, now, memory_order_relaxed);
		if (t.syscalls)
			urnic_count(dev, URNIC_C_rx_syscalls, t.syscalls);
		if (t.gro_receives)
			urnic_count(dev, URNIC_C_gro_receives, t.gro_receives);
		if (t.gro_excess)
			urnic_count(dev, URNIC_C_drop_gro_excess, t.gro_excess);
		if (t.shm_packets)
			urnic_count(dev, URNIC_C_shm_rx_packets, t.shm_packets);
		process_rx(dev, dev->net.rx_pkts, n, b,
			   polling && acks_may_wait(dev) ? ACKS_NEXT_TURN : ACKS_MAY_HOLD, poll_ns);
	}
	urnic_net_recv_done(&dev->net); /* the rings' slots go back once processed */

	if (dev->tx_pending || now >= atomic_load(&dev->timer_next)) {
		pthread_mutex_lock(&dev->qp_lock);
		scan_qps(dev, b);
		pthread_mutex_unlock(&dev->qp_lock);
	}
	return n > 0 || dev->tx_pending;
}

/* The application polls again after a drain: was it back at once? */
static void note_return(struct urnic_dev *dev, uint64_t now)
{
	if (!atomic_load_explicit(&dev->drained_ns, memory_order_relaxed))
		return; /* the common case, without a locked instruction */
	uint64_t drained = atomic_exchange(&dev->drained_ns, 0);
	unsigned quick = atomic_load_explicit(&dev->quick_returns, memory_order_relaxed);

	if (!drained)
		return;
	if (now > drained && now - drained >= URNIC_APP_RETURN_NS)
		quick -= quick > 0;
	else if (quick < URNIC_APP_RETURNS_MAX)
		quick++;
	atomic_store_explicit(&dev->quick_returns, quick, memory_order_relaxed);
}

/* An application thread polling an empty CQ drives the engine itself: on a busy-polling
 * application this avoids waking the engine thread (and, on few cores, waiting for it to be
 * scheduled) for every packet. One non-blocking recvmmsg per empty poll.
 * An engine thread still asleep on the socket is sent to stand back: left there, the next
 * packet would wake it, and on a virtual machine the sender pays for that cross-CPU wake-up
 * (tens of microseconds in its system call here) and this CPU runs the engine rather than the
 * application. A wake-up from this thread costs far less, and falls while the application
 * waits anyway. Its ring peers are told at once (the inbox flag goes down here, not when the
 * woken engine thread gets a CPU): these polls read the rings, and a doorbell would cost each
 * peer that same cross-CPU wake-up. In ib_send_lat over rings, where the woken engine thread
 * waited behind the polling application, 40-60% of packets rang one. */
uint64_t urnic_progress(struct urnic_dev *dev)
{
	static _Thread_local struct urnic_txbatch b;

	uint64_t now = urnic_now_ns();

	atomic_store(&dev->app_poll_ns, now);
	atomic_store_explicit(&dev->app_polled_ns, now, memory_order_relaxed);
	note_return(dev, now);
	if (atomic_load(&dev->on_socket) && atomic_exchange(&dev->on_socket, false)) {
		urnic_shm_awake(&dev->net);
		engine_rt_set(dev, false);
		urnic_engine_wake(dev);
		urnic_count(dev, URNIC_C_engine_wakes_poll, 1);
	}
	if (pthread_mutex_trylock(&dev->progress_lock) != 0) {
		/* The holder may be waiting for this very CPU (an engine thread pinned beside a
		 * busy-polling application): spinning on would keep it off for a whole time slice. */
		sched_yield();
		return 0; /* the yield may have taken a while */
	}
	const uint64_t *sent = urnic_stats_mine(dev->stats, URNIC_C_tx_bytes);
	uint64_t before = __atomic_load_n(sent, __ATOMIC_RELAXED);

	urnic_tx_init(&b, dev);
	progress_turn(dev, &b, now);
	pthread_mutex_unlock(&dev->progress_lock);
	/* a turn may have sent megabytes on the ACKs it found (60 us of copying for 1 MiB into a
	 * ring): a drain stamped with its start would time the application's next return from
	 * then and call it slow, and give the engine thread the socket at each drain (two eventfd
	 * writes and two context switches per drain: 12,000 a second in ib_write_bw over rings) */
	return __atomic_load_n(sent, __ATOMIC_RELAXED) - before > DRAIN_RESTAMP_BYTES ? 0 : now;
}

/* A drain by an application not taken for a busy poller gives the engine thread the socket
 * back. Returns the clock its return is to be timed from: now, or, when it woke the engine
 * thread, the clock after the wake-up. An engine thread that shares this CPU preempts us in it
 * and runs its turn (20 us and more here), which timed as the application's made its next
 * return slow, the next drain gave the socket back again, and so on: in ib_send_lat over the
 * rings a server that once lost its count stayed in that loop, two wake-ups a round trip, for
 * 100-500 of 20,000 round trips. */
static uint64_t give_back_socket(struct urnic_dev *dev, uint64_t now)
{
	atomic_store(&dev->app_poll_ns, 0);
	/* standing back, or woken to and not yet run: real-time, to run at once, ahead of what
	 * this thread does next (it may spin on memory on this CPU) */
	if (!atomic_load(&dev->on_socket))
		engine_rt_set(dev, true);
	if (!atomic_load(&dev->standing_back))
		return now;
	urnic_engine_wake(dev);
	urnic_count(dev, URNIC_C_engine_wakes_drain, 1);
	return urnic_now_ns();
}

void urnic_progress_leave(struct urnic_dev *dev, uint64_t now)
{
	if (!atomic_load_explicit(&dev->app_poll_ns, memory_order_relaxed))
		return;
	/* one that comes back at once keeps the socket: the stand-back deadline covers the rest */
	if (atomic_load_explicit(&dev->quick_returns, memory_order_relaxed) < URNIC_APP_RETURNS)
		now = give_back_socket(dev, now);
	atomic_store(&dev->drained_ns, now ? now : urnic_now_ns());
}

void urnic_progress_idle(struct urnic_dev *dev)
{
	atomic_store_explicit(&dev->app_poll_ns, 0, memory_order_relaxed);
	urnic_engine_wake(dev);
}

void urnic_engine_inject(struct urnic_dev *dev, struct urnic_rxpkt *pkts, int n)
{
	static _Thread_local struct urnic_txbatch b;

	pthread_mutex_lock(&dev->progress_lock);
	urnic_tx_init(&b, dev);
	process_rx(dev, pkts, n, &b, ACKS_NOW, 0);
	for (int turn = 0; dev->tx_pending && turn < 4; turn++) {
		pthread_mutex_lock(&dev->qp_lock);
		scan_qps(dev, &b);
		pthread_mutex_unlock(&dev->qp_lock);
	}
	pthread_mutex_unlock(&dev->progress_lock);
}

/* An application thread polled an empty CQ less than URNIC_APP_POLL_NS ago. */
static bool app_driving(struct urnic_dev *dev)
{
	return polled_within(atomic_load(&dev->app_poll_ns), urnic_now_ns(), URNIC_APP_POLL_NS);
}

/* The socket has a datagram waiting (a poll without timeout: one system call). */
static bool socket_ready(struct urnic_dev *dev)
{
	struct pollfd p = {.fd = dev->net.rx_fd, .events = POLLIN};

	return poll(&p, 1, 0) > 0;
}

/* Before sleeping, an idle engine thread watches its rings and its socket for
 * URNIC_WATCH_NS: a peer's next packet is usually that close, and a sleeper costs the peer's
 * system call a cross-CPU wake-up (20 us here) and then waits to be scheduled (30 us). The
 * rings cost a load per look, the socket a system call. True if a packet came or a timer came
 * due meanwhile. Not while the application is active (it polled a CQ in the last
 * URNIC_WATCH_QUIET_NS): then it may be spinning on memory on this very CPU (perftest's
 * write latency loop, pinned), and a sleeper woken by a packet gets the CPU ahead of the
 * spinner, a watcher only after its time slice. */
static bool watch(struct urnic_dev *dev)
{
	uint64_t start = urnic_now_ns(), now = start, sock_at = start;
	bool rings = urnic_shm_rings_in(&dev->net) > 0;

	if (polled_within(atomic_load(&dev->app_polled_ns), start, URNIC_WATCH_QUIET_NS))
		return false;
	for (; now - start < URNIC_WATCH_NS; now = urnic_now_ns()) {
		if (atomic_load(&dev->stop) || app_driving(dev))
			return false;
		if ((rings && urnic_shm_pending(&dev->net)) || now >= atomic_load(&dev->timer_next))
			return true;
		/* with rings, where the busy peers are, the socket's system call only now and then */
		if (now >= sock_at) {
			if (socket_ready(dev)) {
				atomic_store_explicit(&dev->net.sock_due, true,
						      memory_order_relaxed);
				return true;
			}
			sock_at = rings ? now + URNIC_SOCK_POLL_NS : now;
		}
		for (int i = 0; i < 16; i++)
			__builtin_ia32_pause();
	}
	return false;
}

static void *engine_main(void *arg)
{
	struct urnic_dev *dev = arg;
	static _Thread_local struct urnic_txbatch b;
	uint64_t woke = urnic_now_ns(); /* when it last came out of a sleep */

	urnic_tx_init(&b, dev);
	urnic_shm_live(&dev->net, true); /* peers take the device for alive (net/shm.h) */
	while (!atomic_load(&dev->stop)) {
		bool busy = false;

		/* while an application thread drives progress, its turns do the work: taking the
		 * lock here too would only risk being preempted while holding it */
		if (!app_driving(dev)) {
			pthread_mutex_lock(&dev->progress_lock);
			busy = progress_turn(dev, &b, 0);
			pthread_mutex_unlock(&dev->progress_lock);
		}
		if (atomic_load_explicit(&dev->rt_now, memory_order_relaxed) &&
		    urnic_now_ns() - woke > URNIC_ENGINE_RT_NS)
			engine_rt(dev, false, false); /* long awake: share the CPU */
		if (!busy && !watch(dev)) {
			uint64_t next = atomic_load(&dev->timer_next);
			uint64_t fault = urnic_net_fault_due(&dev->net);

			sleep_until(dev, fault < next ? fault : next);
			woke = urnic_now_ns();
		}
	}
	urnic_shm_live(&dev->net, false);
	return NULL;
}

/* A duration in microseconds from the environment, in ns: dflt if unset or not a plain
 * decimal number, at most max. */
static uint64_t env_us(const char *name, uint64_t dflt, uint64_t max)
{
	const char *v = getenv(name);
	unsigned long long us;

	if (!v || !*v || strspn(v, "0123456789") != strlen(v))
		return dflt;
	errno = 0;
	us = strtoull(v, NULL, 10);
	if (errno == ERANGE || us >= max / 1000)
		return max;
	return us * 1000;
}

static uint64_t probe_min_ns = URNIC_PROBE_MIN_NS;

static void read_probe_min(void)
{
	probe_min_ns = env_us("URNIC_PROBE_MIN_US", URNIC_PROBE_MIN_NS, URNIC_RTO_MIN_NS);
}

uint64_t urnic_probe_min_ns(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, read_probe_min);
	return probe_min_ns;
}

int urnic_engine_start(struct urnic_dev *dev)
{
	const char *trace = getenv("URNIC_TRACE");

	urnic_trace = trace && *trace && *trace != '0';
	dev->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (dev->wake_fd < 0)
		return -errno;
	atomic_store(&dev->timer_next, UINT64_MAX);
	atomic_store(&dev->sleep_until_ns, 0);
	atomic_store(&dev->stop, false);
	pthread_mutex_init(&dev->progress_lock, NULL);
	int err = engine_create(dev, engine_main);

	if (err) {
		close(dev->wake_fd);
		return -err;
	}
	return 0;
}

void urnic_engine_stop(struct urnic_dev *dev)
{
	urnic_engine_flush_acks(dev);
	atomic_store(&dev->stop, true);
	urnic_engine_wake(dev);
	pthread_join(dev->thread, NULL);
	close(dev->wake_fd);
	pthread_mutex_destroy(&dev->progress_lock);
	pthread_mutex_destroy(&dev->rt_lock);
}
