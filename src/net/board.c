/* board.c - a device's board (board.h): an open-addressing table of MR slots by key, and a table
 * of QP slots by QPN, in shared memory that ring peers map read-write.
 *
 * An MR slot is published by its key, stored last with release; its other fields never change
 * while it holds the key. A peer holds it by raising busy and reading the key again: if the key is
 * still there, the owner's removal (BOARD_GONE in the key, then a wait while busy is not 0) has
 * not passed its wait, and will not until the peer lowers busy (both sides sequentially
 * consistent: one of them sees the other). A QP slot changes under a sequence count (odd while it
 * changes), so a peer reads it whole or not at all; a peer holds it the same way, by its busy
 * count, raised before it reads the slot, and an owner that takes the QP out of the states a copy
 * may reach it in reads busy after its new state is out, and waits for 0. */
#include <sched.h>
#include <time.h>

#include "common/clock.h"
#include "net/board.h"

#define BOARD_WAIT_NS 1000000000ull

static unsigned mr_home(uint32_t key)
{
	return (key ^ (key >> 11) ^ (key >> 22)) & (BOARD_MRS - 1);
}

static bool slot_free(const struct board_mr *s)
{
	uint32_t key = atomic_load_explicit(&s->key, memory_order_relaxed);

	return (key == 0 || key == BOARD_GONE) && atomic_load(&s->busy) == 0;
}

int urnic_board_mr_add(struct shm_board *b, uint32_t key, const struct urnic_board_mr *m)
{
	unsigned used = 0, home = mr_home(key);

	for (unsigned i = 0; i < BOARD_MRS; i++) {
		uint32_t k = atomic_load_explicit(&b->mrs[i].key, memory_order_relaxed);

		used += k != 0 && k != BOARD_GONE;
	}
	if (used >= BOARD_MRS / 2) /* chains stay short */
		return 0;
	for (unsigned n = 0; n < BOARD_MRS; n++) {
		unsigned i = (home + n) & (BOARD_MRS - 1);
		struct board_mr *s = &b->mrs[i];

		if (!slot_free(s))
			continue;
		atomic_store_explicit(&s->pd, m->pd, memory_order_relaxed);
		atomic_store_explicit(&s->access, m->access, memory_order_relaxed);
		atomic_store_explicit(&s->iova, m->iova, memory_order_relaxed);
		atomic_store_explicit(&s->length, m->length, memory_order_relaxed);
		atomic_store_explicit(&s->off, m->off, memory_order_relaxed);
		atomic_store_explicit(&s->serial, m->serial, memory_order_relaxed);
		atomic_store_explicit(&s->fd, m->fd, memory_order_relaxed);
		atomic_store_explicit(&s->key, key, memory_order_release);
		return (int)i + 1;
	}
	return 0;
}

/* Waits while a peer is busy with a slot, BOARD_WAIT_NS at most: a copy of URNIC_SHARE_MAX_BYTES
 * takes tens of ms; a peer stopped in its copy is not waited for without end. */
static void drain(_Atomic uint32_t *busy)
{
	uint64_t until = urnic_mono_ns() + BOARD_WAIT_NS;

	while (atomic_load(busy) != 0 && urnic_mono_ns() < until)
		sched_yield();
}

void urnic_board_mr_remove(struct shm_board *b, int slot1)
{
	if (slot1 <= 0)
		return;
	struct board_mr *s = &b->mrs[slot1 - 1];

	atomic_store(&s->key, BOARD_GONE); /* seq_cst: see the top */
	drain(&s->busy);
}

static void mr_facts(const struct board_mr *s, struct urnic_board_mr *out)
{
	*out = (struct urnic_board_mr){
		.pd = atomic_load_explicit(&s->pd, memory_order_relaxed),
		.access = atomic_load_explicit(&s->access, memory_order_relaxed),
		.iova = atomic_load_explicit(&s->iova, memory_order_relaxed),
		.length = atomic_load_explicit(&s->length, memory_order_relaxed),
		.off = atomic_load_explicit(&s->off, memory_order_relaxed),
		.serial = atomic_load_explicit(&s->serial, memory_order_relaxed),
		.fd = atomic_load_explicit(&s->fd, memory_order_relaxed),
	};
}

struct board_mr *urnic_board_mr_peek(struct shm_board *b, uint32_t key,
				     struct urnic_board_mr *out)
{
	unsigned home = mr_home(key);

	if (key == 0 || key == BOARD_GONE)
		return NULL;
	for (unsigned n = 0; n < BOARD_MRS; n++) {
		struct board_mr *s = &b->mrs[(home + n) & (BOARD_MRS - 1)];
		uint32_t k = atomic_load_explicit(&s->key, memory_order_acquire);

		if (k == 0)
			return NULL; /* the end of key's chain */
		if (k == key) {
			mr_facts(s, out);
			return s;
		}
	}
	return NULL;
}

bool urnic_board_mr_hold(struct board_mr *slot, uint32_t key, struct urnic_board_mr *out)
{
	atomic_fetch_add(&slot->busy, 1);
	if (atomic_load(&slot->key) != key) { /* taken back meanwhile */
		atomic_fetch_sub(&slot->busy, 1);
		return false;
	}
	mr_facts(slot, out);
	return true;
}

void urnic_board_mr_release(struct board_mr *slot)
{
	atomic_fetch_sub_explicit(&slot->busy, 1, memory_order_release);
}

void urnic_board_qp_publish(struct shm_board *b, const struct urnic_board_qp *q, bool wait)
{
	struct board_qp *s = &b->qps[q->qpn % URNIC_MAX_QP];
	uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);

	atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&s->qpn, q->qpn, memory_order_relaxed);
	atomic_store_explicit(&s->state, q->state, memory_order_relaxed);
	atomic_store_explicit(&s->pd, q->pd, memory_order_relaxed);
	atomic_store_explicit(&s->access, q->access, memory_order_relaxed);
	atomic_store_explicit(&s->dest_qpn, q->dest_qpn, memory_order_relaxed);
	atomic_store_explicit(&s->peer_addr, q->peer_addr, memory_order_relaxed);
	atomic_store(&s->seq, seq + 2); /* seq_cst, before busy is read: see the top */
	if (wait)
		drain(&s->busy);
}

/* The slot's facts as of one moment, or false (it changes now, or changed meanwhile). */
static bool qp_facts(const struct board_qp *s, struct urnic_board_qp *out)
{
	uint32_t seq = atomic_load(&s->seq);

	if (seq & 1)
		return false;
	*out = (struct urnic_board_qp){
		.qpn = atomic_load_explicit(&s->qpn, memory_order_relaxed),
		.state = atomic_load_explicit(&s->state, memory_order_relaxed),
		.pd = atomic_load_explicit(&s->pd, memory_order_relaxed),
		.access = atomic_load_explicit(&s->access, memory_order_relaxed),
		.dest_qpn = atomic_load_explicit(&s->dest_qpn, memory_order_relaxed),
		.peer_addr = atomic_load_explicit(&s->peer_addr, memory_order_relaxed),
	};
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&s->seq, memory_order_relaxed) == seq;
}

bool urnic_board_qp_read(const struct shm_board *b, uint32_t qpn, struct urnic_board_qp *out)
{
	return qp_facts(&b->qps[qpn % URNIC_MAX_QP], out) && out->qpn == qpn;
}

struct board_qp *urnic_board_qp_hold(struct shm_board *b, uint32_t qpn,
				     struct urnic_board_qp *out)
{
	struct board_qp *s = &b->qps[qpn % URNIC_MAX_QP];

	atomic_fetch_add(&s->busy, 1);
	if (!qp_facts(s, out) || out->qpn != qpn) {
		atomic_fetch_sub(&s->busy, 1);
		return NULL;
	}
	return s;
}

void urnic_board_qp_release(struct board_qp *slot)
{
	atomic_fetch_sub_explicit(&slot->busy, 1, memory_order_release);
}
